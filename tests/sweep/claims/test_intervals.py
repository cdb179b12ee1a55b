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
