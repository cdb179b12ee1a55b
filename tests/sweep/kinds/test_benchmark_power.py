"""The benchmark report's declared Holm family (per-problem pairs at one budget and τ; the pooled pairs apart) and
its power line (instances needed by resampling the observed instance outcomes)."""
import numpy as np
import pandas as pd
import pytest
from scipy import stats

from sweep.kinds.benchmark import power


def pair_rows():
    rows = [("quadratic", 0.1, "A", "B", 0.01, 5, 0), ("quadratic", 0.1, "A", "C", 0.04, 4, 1),
            ("simulated", 0.1, "A", "B", 0.02, 5, 0), ("all", 0.1, "A", "B", 0.001, 10, 0),
            ("quadratic", 0.001, "A", "B", 0.03, 4, 0)]
    return pd.DataFrame([{"problem": p, "tau": t, "algorithm_a": a, "algorithm_b": b, "p_value": pv, "wins": w,
                          "losses": l, "p_holm": np.nan, "verdict": ""} for p, t, a, b, pv, w, l in rows])


def holm_by_hand(p):
    order = np.argsort(p)
    m, out, running = len(p), np.empty(len(p)), 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * p[i]))
        out[i] = running
    return out


def test_per_problem_pairs_share_one_family_and_pooled_pairs_are_their_own():
    out = power.adjust(pair_rows(), "large")
    fam = out[(out["problem"] != "all") & (out["tau"] == 0.1)]
    np.testing.assert_allclose(fam["p_holm"], holm_by_hand(np.array([0.01, 0.04, 0.02])))
    assert set(fam["family"]) == {"per-problem pairs at budget large, τ 0.1"}
    pooled = out[out["problem"] == "all"].iloc[0]
    assert pooled["p_holm"] == 0.001 and pooled["family"] == "pooled pairs (all) at budget large, τ 0.1"
    other = out[out["tau"] == 0.001].iloc[0]
    assert other["p_holm"] == 0.03  # another τ: another family
    assert list(out["verdict"]) == ["better"] * 5  # Holm: 0.03, 0.04, 0.04 over the three per-problem pairs


def test_instances_needed_is_beyond_what_a_non_significant_group_has():
    outcomes = np.array([1, 1, 1, 0, 1, 0.5, 1, 0, 1, 1.0])  # 7 wins, 2 losses, 1 tie over 10 instances
    need, now = power.instances_needed(outcomes, 10, family=6, significant=False, seed=0)
    n = int(need)
    assert n > 10 and 0 <= now < power.POWER
    # Independent check: resampling n instances from the outcomes, the sign test × 6 < 0.05 in >= 80 % of draws,
    # and at n − 1 in fewer (up to the simulation's noise).
    rng = np.random.default_rng(1)

    def simulated(k, sims=800):
        draws = outcomes[rng.integers(0, 10, size=(sims, k))]
        w, l = (draws == 1).sum(axis=1), (draws == 0).sum(axis=1)
        p = np.array([stats.binomtest(int(a), int(a + b)).pvalue if a + b else 1.0 for a, b in zip(w, l)])
        return float((np.minimum(1, 6 * p) < 0.05).mean())

    assert simulated(n) >= power.POWER - 0.05
    assert simulated(max(n - 8, 11)) < power.POWER + 0.02
    assert power.instances_needed(np.array([1, 0, 0.5, 1, 0]), 5, 1, False) == ("no effect observed",
                                                                                  pytest.approx(np.nan, nan_ok=True))
