"""Statistics against independent references: the exact signed-rank p against a full enumeration of sign
flips, the instance-clustered test against the naive one on study-duplicated data, the hierarchical
bootstrap's coverage on a simulated two-level case, Holm by hand, and the ranking."""
import itertools
import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from sweep.compare import statistics as sx


def enumerated_p(d):
    """Two-sided p of the signed-rank sum by listing all 2^n sign flips of the tie-averaged ranks."""
    d = np.asarray(d, float)
    d = d[d != 0]
    ranks = stats.rankdata(np.abs(d))  # +inf ranks last
    observed = abs(float(np.sum(ranks * np.sign(d))))
    flips = np.array(list(itertools.product((-1.0, 1.0), repeat=d.size)))
    return float(np.mean(np.abs(flips @ ranks) >= observed - 1e-9))


@pytest.mark.parametrize("d", [
    [1.0, 1.0, 1.0, 2.0, 2.0, -3.0, 4.0, 4.0, 5.0],  # ties (scipy's "exact" ignores them: 0.0547)
    [math.inf] * 5,  # every difference tied at +inf: exactly 2/2^5
    [math.inf, math.inf, -math.inf, 1.0, 2.0, 2.0, 3.0, 0.0, 0.0],  # ±inf and zeros (dropped)
    [-0.5, 0.25, -1.0, -2.0, 3.0, -4.0, -4.0, -6.0, -8.0, 0.0, -9.0, -10.0],
])
def test_exact_p_is_the_full_enumeration_of_sign_flips(d):
    r = sx.signed_rank_test(d)
    assert r["p_value"] == pytest.approx(enumerated_p(d), rel=1e-12, abs=1e-15)
    assert r["n"] == sum(x != 0 for x in d)
    assert r["r_plus"] + r["r_minus"] == r["n"] * (r["n"] + 1) / 2


def test_exact_p_where_the_normal_approximation_is_anti_conservative():
    # 5 differences tied at +inf among 14 non-zero ones, as in the issue: scipy's default switches to the
    # normal approximation (p ≈ 0.025); the exact p of 5 ties at the top with the rest split is larger.
    d = np.array([math.inf] * 5 + [1.0, -2.0, 3.0, -4.0, 5.0, 6.0, -7.0, 8.0, 9.0])
    p = sx.signed_rank_test(d)["p_value"]
    assert p == pytest.approx(enumerated_p(d), rel=1e-12)
    assert sx.signed_rank_test([math.inf] * 5)["p_value"] == 2 / 2**5
    assert sx.signed_rank_test([0.0, 0.0])["p_value"] == 1.0 and sx.signed_rank_test([])["n"] == 0
    with pytest.raises(ValueError, match="NaN"):
        sx.signed_rank_test([1.0, math.nan])


def test_paired_differences_tie_equal_infinities():
    r = sx.paired_wilcoxon([1.0, 2.0, math.inf, math.inf], [3.0, 5.0, math.inf, 4.0])
    # differences −2, −3, tie (dropped), +inf: ranks 1, 2, 3
    assert (r["n"], r["r_plus"], r["r_minus"]) == (3, 3.0, 3.0)
    assert r["p_value"] == enumerated_p([-2.0, -3.0, math.inf]) == 1.0


def study_duplicated(n_instances, n_studies, shift, seed=0):
    """Costs of A and B on instances × studies: the instance sets both (shared noise), the study adds a
    little; A is `shift` cheaper on average."""
    rng = np.random.default_rng(seed)
    rows = []
    for i in range(n_instances):
        base, effect = 100 + 20 * rng.normal(), shift + 10 * rng.normal()
        for s in range(1, n_studies + 1):
            rows += [{"problem": "p", "tau": 0.1, "instance": i, "seed": s, "algorithm": "A",
                      "calls": base - effect + rng.normal() * 0.1},
                     {"problem": "p", "tau": 0.1, "instance": i, "seed": s, "algorithm": "B",
                      "calls": base + rng.normal() * 0.1}]
    return pd.DataFrame(rows)


def test_clustered_test_counts_instances_not_studies():
    # 3 instances × 3 studies, A cheaper on each instance: the naive test on 9 units gives 2/2^9 ≈ 0.004;
    # on instances the exact p is 2/2^3 = 0.25, the AID-CG vs SOBA case.
    frame = study_duplicated(3, 3, shift=30.0, seed=1)
    t = sx.pairwise_tests(frame).iloc[0]
    assert (t["units"], t["n"], t["p_value"]) == (3, 3, 0.25)
    table = frame.pivot_table(index=["instance", "seed"], columns="algorithm", values="calls")
    naive = sx.paired_wilcoxon(table["A"], table["B"])
    assert naive["n"] == 9 and naive["p_value"] == pytest.approx(2 / 2**9)
    # The per-instance value is the median over studies: the test runs on those three differences.
    med = table.groupby(level="instance").median()
    assert t["median_difference"] == pytest.approx(float(np.median(med["A"] - med["B"])), rel=1e-12)
    assert (t["wins"], t["losses"], t["p_beats"]) == (3, 0, 1.0)  # A cheaper on each instance


def test_hierarchical_bootstrap_covers_where_the_naive_one_does_not():
    # Two levels: instance medians u_i ~ N(0, 1), 4 studies per instance with noise 0.1 (nearly duplicates).
    # The median over instances is 0 in the population. The naive bootstrap (every run independent) is
    # too narrow; the hierarchical one covers near its nominal 95%.
    rng = np.random.default_rng(11)
    hits_h = hits_naive = 0
    reps = 100
    for r in range(reps):
        u = rng.normal(size=12)
        groups = [ui + 0.1 * rng.normal(size=4) for ui in u]
        _, lo, hi = sx.bootstrap_median(groups, seed=r, n_resamples=399)
        hits_h += lo <= 0.0 <= hi
        flat = [[x] for g in groups for x in g]
        _, lo, hi = sx.bootstrap_median(flat, seed=r, n_resamples=399)
        hits_naive += lo <= 0.0 <= hi
    assert 0.88 <= hits_h / reps <= 0.99, hits_h
    assert hits_naive / reps < hits_h / reps - 0.15, (hits_naive, hits_h)


def test_bootstrap_median_is_the_median_of_instance_medians():
    groups = [[1.0, 2.0, 3.0], [4.0, 5.0, 6.0], [7.0, 8.0, math.inf], [10.0]]
    m, lo, hi = sx.bootstrap_median(groups, seed=3, n_resamples=999)
    assert m == np.median([2.0, 5.0, 8.0, 10.0]) == 6.5
    assert 1.0 <= lo <= m <= hi <= 10.0
    assert sx.bootstrap_median([[math.inf]] * 4) == (math.inf, math.inf, math.inf)
    m, lo, hi = sx.bootstrap_median([[3.0, 5.0]])
    assert m == 4.0 and math.isnan(lo) and math.isnan(hi)
    with pytest.raises(ValueError, match="NaN is not allowed"):
        sx.bootstrap_median([1.0, math.nan])


def test_time_to_target_counts_instances():
    frame = study_duplicated(4, 3, shift=0.0, seed=2).query("algorithm == 'A'").assign(seconds=1.0)
    frame.loc[frame.index[0], "calls"] = math.inf
    row = sx.time_to_target(frame, n_resamples=499).iloc[0]
    assert (row["n"], row["instances"], row["reached"]) == (12, 4, 11)
    med = frame.groupby("instance")["calls"].median()
    assert row["calls_median"] == pytest.approx(float(np.median(med)), rel=1e-12)
    assert row["calls_low"] <= row["calls_median"] <= row["calls_high"]


def test_holm_against_a_hand_computation():
    # sorted: 0.005·4 = 0.02, 0.01·3 = 0.03, 0.03·2 = 0.06, 0.04·1 = 0.04 → running max 0.06
    np.testing.assert_allclose(sx.holm([0.01, 0.04, 0.03, 0.005]), [0.03, 0.06, 0.06, 0.02], rtol=1e-15)
    np.testing.assert_allclose(sx.holm([0.5, 0.6]), [1.0, 1.0])  # capped at 1
    assert sx.holm([0.02]).tolist() == [0.02] and sx.holm([]).size == 0


def test_power_line():
    assert sx.smallest_holm_p(231, 12) == pytest.approx(231 * 2 / 2**12) and sx.smallest_holm_p(231, 8) == 1.0
    assert sx.instances_needed(231) == 14  # 231 · 2/2^14 = 0.028 < 0.05, 2/2^13 · 231 = 0.056
    assert sx.smallest_holm_p(231, 14) < 0.05 <= sx.smallest_holm_p(231, 13)
    assert sx.instances_needed(1) == 6 and sx.smallest_holm_p(1, 5) == 0.0625


def matched_frame():
    """12 instances: A costs 10 less than B everywhere; B and C differ by ±1 alternately (no effect); C never
    reaches the target on instance 0."""
    rows = []
    for i in range(12):
        b = 100.0 + 5 * i
        for name, v in (("A", b - 10.0), ("B", b), ("C", math.inf if i == 0 else b + (1.0 if i % 2 else -1.0))):
            rows.append({"problem": "p", "tau": 0.1, "instance": i, "seed": 1, "algorithm": name, "calls": v})
    return pd.DataFrame(rows)


def test_pairwise_tests_and_ranking_by_hand():
    tests = sx.pairwise_tests(matched_frame(), n_resamples=499).set_index(["algorithm_a", "algorithm_b"])
    assert tests.loc[("A", "B"), "p_value"] == 2 / 2**12 and tests.loc[("A", "B"), "median_difference"] == -10.0
    assert tests.loc[("A", "B"), ["p_beats", "p_beats_low", "p_beats_high"]].tolist() == [1.0] * 3  # A always
    raw = [tests.loc[k, "p_value"] for k in (("A", "B"), ("A", "C"), ("B", "C"))]
    np.testing.assert_allclose(tests["p_holm"].to_numpy(), sx.holm(raw), rtol=1e-15)
    assert tests.loc[("A", "B"), "verdict"] == "better" and tests.loc[("A", "C"), "verdict"] == "better"
    assert tests.loc[("B", "C"), "verdict"] == "no significant difference"
    assert tests.loc[("B", "C"), "p_holm"] > 0.05
    rank = sx.ranking(tests.reset_index()).set_index("algorithm")
    assert rank["rank"].to_dict() == {"A": 1, "B": 2, "C": 2}
    assert rank.loc["A", "significantly_better"] == "B, C" and rank.loc["B", "no_difference"] == 1
    assert rank.loc["C", "worse_than"] == 1


def test_max_goal_flips_the_verdict_and_five_instances_are_never_significant():
    frame = matched_frame()
    tests = sx.pairwise_tests(frame, goal="max", n_resamples=99).set_index(["algorithm_a", "algorithm_b"])
    assert tests.loc[("A", "B"), "verdict"] == "worse"
    few = frame[frame["instance"].between(1, 5)]
    tests = sx.pairwise_tests(few, n_resamples=99)
    assert tests["p_value"].min() >= 2 / 2**5 and (tests["verdict"] == "no significant difference").all()
    assert (sx.ranking(tests)["rank"] == 1).all()  # no rank from differences the instances do not support
    assert sx.nonzero_units(few, "calls") == 5
