"""pairwise_tests' effects and test on a small fixture with censored runs, against a computation made here with
numpy and scipy only (no project code in the reference)."""
import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from sweep.compare import statistics as sx

INF = math.inf
# 8 instances, one replicate each: cost to the target (+inf: censored) and what the run spent in all.
A = [100.0, 120.0, INF, 90.0, INF, 300.0, 80.0, INF]
B = [150.0, 110.0, INF, 200.0, 250.0, INF, 95.0, 400.0]
SPENT_A = [500.0, 500.0, 500.0, 480.0, 500.0, 500.0, 500.0, 420.0]
SPENT_B = [500.0] * 8


def frame():
    rows = []
    for i in range(8):
        rows.append({"problem": "p", "tau": 0.1, "instance": i, "seed": 1, "algorithm": "A", "calls": A[i],
                     "spent": SPENT_A[i]})
        rows.append({"problem": "p", "tau": 0.1, "instance": i, "seed": 1, "algorithm": "B", "calls": B[i],
                     "spent": SPENT_B[i]})
    return pd.DataFrame(rows)


def reference(seed=0, n_resamples=9999):
    """The same quantities from their definitions, with numpy and scipy."""
    a, b = np.array(A), np.array(B)
    outcome = np.where(a == b, 0.5, np.where(a < b, 1.0, 0.0))  # ties (both censored) half
    wins, losses = int((outcome == 1).sum()), int((outcome == 0).sum())
    p = stats.binomtest(wins, wins + losses, 0.5).pvalue
    ci = stats.bootstrap((outcome,), np.mean, method="percentile", n_resamples=n_resamples,
                         rng=np.random.default_rng(seed), vectorized=True, paired=True).confidence_interval
    charged_a = np.where(np.isfinite(a), a, SPENT_A)
    charged_b = np.where(np.isfinite(b), b, SPENT_B)
    hits_a, hits_b = np.isfinite(a).astype(float), np.isfinite(b).astype(float)

    def ratio(ca, ha, cb, hb, axis=-1):
        return np.log((ca.sum(axis=axis) / (ha.sum(axis=axis) + 0.5)) / (cb.sum(axis=axis) / (hb.sum(axis=axis) + 0.5)))

    r = ratio(charged_a, hits_a, charged_b, hits_b)
    rci = stats.bootstrap((charged_a, hits_a, charged_b, hits_b), ratio, method="percentile", paired=True,
                          vectorized=True, n_resamples=n_resamples, rng=np.random.default_rng(seed)).confidence_interval
    return {"wins": wins, "losses": losses, "p": p, "p_beats": outcome.mean(), "ci": (ci.low, ci.high),
            "ratio": r, "ratio_ci": (rci.low, rci.high)}


def test_effects_interval_and_p_match_an_independent_computation():
    t = sx.pairwise_tests(frame()).iloc[0]
    want = reference()
    # A wins on 0, 3, 5, 6 (5: B censored), 4 (A censored, B hits) is a loss, 1 a loss, 2 a tie, 7 a loss.
    assert (t["wins"], t["losses"], t["ties"]) == (want["wins"], want["losses"], 1) == (4, 3, 1)
    assert t["p_value"] == pytest.approx(want["p"], rel=1e-12)
    assert t["p_beats"] == pytest.approx(want["p_beats"]) == 4.5 / 8
    assert (t["p_beats_low"], t["p_beats_high"]) == pytest.approx(want["ci"], rel=1e-12)
    # By hand: A charged 100+120+500+90+500+300+80+420 = 2110 over 5 hits; B 150+110+500+200+250+500+95+400 = 2205
    # over 6 hits; with ½ added to the hits on both sides.
    assert t["log_ert_ratio"] == pytest.approx(math.log((2110 / 5.5) / (2205 / 6.5)), rel=1e-12)
    assert t["log_ert_ratio"] == pytest.approx(want["ratio"], rel=1e-12)
    assert (t["log_ert_low"], t["log_ert_high"]) == pytest.approx(want["ratio_ci"], rel=1e-12)
    assert np.isfinite([t["p_beats_low"], t["p_beats_high"], t["log_ert_low"], t["log_ert_high"]]).all()


def test_a_side_that_never_hits_still_has_a_finite_ratio():
    f = frame()
    f.loc[f["algorithm"] == "A", "calls"] = INF
    t = sx.pairwise_tests(f, n_resamples=499).iloc[0]
    assert t["wins"] == 0 and np.isfinite([t["log_ert_ratio"], t["log_ert_low"], t["log_ert_high"]]).all()
    assert t["log_ert_ratio"] == pytest.approx(math.log((sum(SPENT_A) / 0.5) / (2205 / 6.5)), rel=1e-12)
