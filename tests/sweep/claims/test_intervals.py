"""Bootstrap intervals over instances (the unit) for the numbers behind verdicts, checked by hand on tiny samples."""
import itertools
import math

import numpy as np
import pytest
from scipy import stats

from sweep.claims.base import Estimate, bootstrap


def test_two_cases_are_enumerated_exactly():
    """[0, 1]: the four resamples' means are 0, .5, .5, 1; the 2.5 % and 97.5 % order statistics are 0 and 1."""
    e = bootstrap([0.0, 1.0], lambda xs: float(np.mean(xs)))
    assert (e.value, e.low, e.high) == (0.5, 0.0, 1.0)


def test_three_cases_by_hand():
    """[1, 2, 4], the median: of the 27 resamples 7 have median 1 (two or three 1s: 1 + 3·2 = 7), 7 have median 4,
    13 have median 2; the lowest 2.5 % (the first of 27) is 1, the highest is 4."""
    meds = sorted(float(np.median([[1, 2, 4][i] for i in r])) for r in itertools.product(range(3), repeat=3))
    assert (meds.count(1.0), meds.count(2.0), meds.count(4.0)) == (7, 13, 7)
    e = bootstrap([1.0, 2.0, 4.0], lambda xs: float(np.median(xs)))
    assert (e.value, e.low, e.high) == (2.0, 1.0, 4.0)
    # the max: P(max = 1) = 1/27 ≥ 2.5 %: the low end is 1
    assert bootstrap([1.0, 2.0, 4.0], max) == Estimate(4.0, 1.0, 4.0)


def test_sampled_bootstrap_is_seeded_and_matches_scipy():
    """Eight cases: resampled (8^8 is too many to enumerate); the same seed gives the same interval, and it is
    within Monte-Carlo error of scipy.stats.bootstrap's percentile interval for the mean."""
    x = np.array([0.3, 1.2, 0.7, 2.5, 1.1, 0.2, 0.9, 1.8])
    a = bootstrap(list(x), lambda xs: float(np.mean(xs)), seed=3)
    assert a == bootstrap(list(x), lambda xs: float(np.mean(xs)), seed=3)
    ref = stats.bootstrap((x,), np.mean, method="percentile", n_resamples=20000, random_state=1).confidence_interval
    assert a.value == pytest.approx(x.mean())
    assert a.low == pytest.approx(ref.low, abs=0.08) and a.high == pytest.approx(ref.high, abs=0.08)
    assert a.low < x.mean() < a.high


def test_a_censored_statistic_keeps_its_open_end():
    """A statistic that is an interval (a crossover not reached: at least d, open above) keeps the open end."""
    e = bootstrap([1.0, 2.0], lambda xs: Estimate(max(xs), max(xs), math.inf))
    assert (e.value, e.low, e.high) == (2.0, 1.0, math.inf)
    assert bootstrap([5.0], lambda xs: float(xs[0])) == Estimate.point(5.0)


# ---------------------------------------------------------------- time-to-target ratios (F2CSA Fig. 2, TFBO Fig. 3)
def _cases(ratios, censor=None):
    """(a, a reached, b, b reached) with b = 1 s and a = the ratio; `censor`: 'a' or 'b' makes the last case's
    numerator (a ran that long without reaching the target) or denominator censored."""
    out = [(r, True, 1.0, True) for r in ratios]
    if censor:
        r = ratios[-1]
        out[-1] = (r, censor != "a", 1.0, censor != "b")
    return out


def test_ratio_interval_is_the_bootstrap_of_the_geometric_mean_and_narrows_with_more_instances():
    """Uncensored: the value is the geometric mean (checked by hand on 2, 8: 4) and two cases are enumerated exactly
    ([2, 8] from the resamples (2, 2) and (8, 8)); 40 log-normal instances give a narrower interval than 5 from the same
    distribution, and both contain the estimate and the true ratio 3."""
    from sweep.claims.base import ratio_bootstrap

    e = ratio_bootstrap(_cases([2.0, 8.0]))
    assert (e.value, e.low, e.high) == pytest.approx((4.0, 2.0, 8.0))
    draws = 3.0 * np.exp(np.random.default_rng(1).normal(0.0, 0.3, size=40))
    few, many = ratio_bootstrap(_cases(list(draws[:5]))), ratio_bootstrap(_cases(list(draws)))
    assert few.value == pytest.approx(math.exp(np.mean(np.log(draws[:5]))), rel=1e-12)
    for e in (few, many):
        assert e.low < e.value < e.high and e.low < 3.0 < e.high
    # width in log ratio: ~√(5/40) ≈ 0.35 of the few's (0.43 here)
    assert math.log(many.high / many.low) < 0.6 * math.log(few.high / few.low)


def test_a_censored_ratio_is_one_sided_and_mirrored_censoring_gives_mirrored_labels():
    """An instance where the subject did not reach the target (a ≥ 4 s) opens the high end (inf); the mirror image —
    reciprocal ratios, the rival censored — opens the low end (0), with the reciprocal finite end, so a criterion
    and its mirror (ratio ≥ 1.5 / ratio ≤ 1/1.5) give the same label: agrees, and disagrees when the finite end
    falls on the wrong side."""
    from sweep.claims.base import Criterion, ratio_bootstrap

    up = ratio_bootstrap(_cases([2.0, 3.0, 4.0], censor="a"))
    down = ratio_bootstrap(_cases([1 / 2, 1 / 3, 1 / 4], censor="b"))
    assert up.high == math.inf and down.low == 0.0 and up.low > 0 and math.isfinite(down.high)
    assert up.low == pytest.approx(1 / down.high) and up.value == pytest.approx(1 / down.value)
    at_least, at_most = Criterion("x", "q", 1.5, "min"), Criterion("x", "q", 1 / 1.5, "max")
    assert at_least.judge([up]) == at_most.judge([down]) == "agrees"
    assert Criterion("x", "q", 10.0, "min").judge([up]) == Criterion("x", "q", 0.1, "max").judge([down]) == "partly"
    low_up = ratio_bootstrap(_cases([0.2, 0.3, 0.4], censor="b"))  # the subject is faster, the rival censored
    low_down = ratio_bootstrap(_cases([5.0, 1 / 0.3, 2.5], censor="a"))
    assert at_least.judge([low_up]) == at_most.judge([low_down]) == "disagrees"
