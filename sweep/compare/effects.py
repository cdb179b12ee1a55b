"""Effects of one algorithm against another on instances, finite whatever the censoring, and the test that matches
them.

Per instance both ran on, the cost of each side is the median over its replicates (tuning studies) of the cost to
reach the target, +inf for a run that did not (censored). On an instance a *wins* when its median is lower (for
goal min), *ties* when both are equal (two censored medians are a tie). Then:

- `p_beats`: the probability that a beats b on an instance, ties counted half: (wins + ties/2) / instances;
  a percentile-bootstrap interval over instances (scipy.stats.bootstrap). Always in [0, 1].
- `log_ert_ratio`: log(ERT_a / ERT_b), ERT over all runs of a side on those instances: (cost of its hits + what
  its censored runs spent) / (hits + ½). The ½ (a continuity correction on both sides) keeps it finite when a side
  never hits; spends below one gradient-equivalent count as one. Its percentile-bootstrap interval resamples
  instances (a resampled instance brings all its runs).
- the test: the exact two-sided sign test on wins against losses, ties dropped (scipy.stats.binomtest, p = ½):
  it asks the question `p_beats` answers, and treats a censored run only as losing to a hit.
"""
from __future__ import annotations

import math
import warnings

import numpy as np
from scipy import stats

CONFIDENCE = 0.95
RESAMPLES = 9999
TEST = "exact sign test on instance wins (ties dropped)"
#: Spends below this (gradient-equivalents) count as this much in an ERT (a target met at the start costs 0).
FLOOR = 1.0


def outcomes(a: np.ndarray, b: np.ndarray, goal: str = "min") -> np.ndarray:
    """Per instance: 1 when a wins, ½ on a tie, 0 when b wins (medians a, b; +inf censored)."""
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    better = a < b if goal == "min" else a > b
    return np.where(a == b, 0.5, np.where(better, 1.0, 0.0))


def sign_test(wins: int, losses: int) -> float:
    """Exact two-sided sign test of wins against losses (p = ½); 1 when there are none."""
    n = wins + losses
    return float(stats.binomtest(wins, n, 0.5).pvalue) if n else 1.0


def _interval(data: tuple[np.ndarray, ...], statistic, seed: int, confidence: float,
              n_resamples: int) -> tuple[float, float]:
    """Percentile-bootstrap interval over instances (the first axis of every array in `data`, resampled together)."""
    if len(data[0]) < 2:
        return math.nan, math.nan
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # degenerate data (every instance alike): the interval is that value
        res = stats.bootstrap(data, statistic, paired=True, vectorized=True, method="percentile",
                              confidence_level=confidence, n_resamples=n_resamples, rng=np.random.default_rng(seed))
    return float(res.confidence_interval.low), float(res.confidence_interval.high)


def p_beats(outcome: np.ndarray, seed: int = 0, confidence: float = CONFIDENCE,
            n_resamples: int = RESAMPLES) -> tuple[float, float, float]:
    """(P(a beats b), low, high) from per-instance outcomes (`outcomes`)."""
    outcome = np.asarray(outcome, dtype=float)
    if outcome.size == 0:
        return math.nan, math.nan, math.nan
    low, high = _interval((outcome,), lambda o, axis=-1: np.mean(o, axis=axis), seed, confidence, n_resamples)
    return float(outcome.mean()), low, high


def log_ert_ratio(charged_a: np.ndarray, hits_a: np.ndarray, charged_b: np.ndarray, hits_b: np.ndarray,
                  seed: int = 0, confidence: float = CONFIDENCE,
                  n_resamples: int = RESAMPLES) -> tuple[float, float, float]:
    """(log ERT_a/ERT_b, low, high) from per-instance sums: cost charged (hits' costs + censored spend) and hits."""
    arrays = [np.asarray(v, dtype=float) for v in (charged_a, hits_a, charged_b, hits_b)]
    if arrays[0].size == 0 or any(np.isnan(v).any() for v in arrays):
        return math.nan, math.nan, math.nan

    def ratio(ca, ha, cb, hb, axis=-1):
        ert_a = np.maximum(np.sum(ca, axis=axis), FLOOR) / (np.sum(ha, axis=axis) + 0.5)
        ert_b = np.maximum(np.sum(cb, axis=axis), FLOOR) / (np.sum(hb, axis=axis) + 0.5)
        return np.log(ert_a / ert_b)

    low, high = _interval(tuple(arrays), ratio, seed, confidence, n_resamples)
    return float(ratio(*arrays)), low, high
