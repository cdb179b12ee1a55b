"""What a run is given and checks against: its budget, its divergence rule, its evaluation points, its random
stream, and the iterate test every step makes (algorithms.run drives a run with them)."""
from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Mapping
from typing import Any

import numpy as np
from numpy.random.bit_generator import ISeedSequence

from problems.base import Array
from problems.validation import Params, param

#: Iterates larger than this always count as divergence (before they overflow to inf), whatever the rule.
DIVERGENCE_NORM = 1e100
#: The most a budget may ask for: beyond these a run cannot end in any useful time.
MAX_ITERATIONS = 10**9
MAX_ORACLE_CALLS = 10**12
MAX_SECONDS = 7 * 24 * 3600.0
#: What the divergence rule may watch: "objective" is F_gap where the problem knows its optimum, else F.
WATCHABLE = ("objective", "F", "F_gap", "grad_F_sq", "y_err_sq", "iterates")
_NUMERIC_FAILURES = (FloatingPointError, OverflowError, ZeroDivisionError, np.linalg.LinAlgError)


@dataclasses.dataclass(frozen=True)
class Budget(Params):
    """When a run stops: the first of iterations, oracle calls or seconds of compute reached."""

    owner = "budget"
    iterations: int | None = param(None, "optional_positive_int", "outer iterations (time steps online)")
    oracle_calls: int | None = param(None, "optional_positive_int", "oracle calls of every kind")
    seconds: float | None = param(None, "optional_positive", "compute seconds (evaluation excluded)")

    def validate(self) -> None:
        if self.iterations is None and self.oracle_calls is None and self.seconds is None:
            self.fail("iterations", "set (or oracle_calls, or seconds): a run needs a budget", None)
        for field, most in (("iterations", MAX_ITERATIONS), ("oracle_calls", MAX_ORACLE_CALLS),
                            ("seconds", MAX_SECONDS)):
            value = getattr(self, field)
            if value is not None and not (math.isfinite(value) and value <= most):
                self.fail(field, f"at most {most:g} (a run must end)", value)


@dataclasses.dataclass(frozen=True)
class Divergence(Params):
    """When a run counts as diverged: a watched quantity is non-finite or grows past `factor` × its start.

    The start value is floored at 1 (limit = factor · max(abs(start), 1)) so that quantities starting at
    zero (x0 = 0, y0 = y*(x0)) are not flagged by the first move. Why 1e6: over every algorithm at
    step-size factors 0.5, 1 and 2 on every problem it runs on (200 iterations; 849 metric series of
    runs that end below their start), the largest transient growth was 3.0e5 (BVFSM's ‖y − y*‖² on
    hyper_cleaning) and the next 4.7e3, so a converging run stays below 1e6, while a geometric blow-up
    passes it within a few steps. (benchmarks/divergence_growth.py measures it.)
    """

    owner = "divergence"
    factor: float = param(1e6, "positive", "limit on |value| / max(|initial value|, 1) of a watched quantity")
    metrics: tuple = param(("objective", "grad_F_sq", "y_err_sq", "iterates"), "any",
                           f"watched quantities, any of {', '.join(WATCHABLE)} (iterates: the norms of x and y)")

    def validate(self) -> None:
        if not self.factor > 1:
            self.fail("factor", "a number greater than 1", self.factor)
        if isinstance(self.metrics, str) or not isinstance(self.metrics, (list, tuple)):
            self.fail("metrics", f"a list of names from {', '.join(WATCHABLE)}", self.metrics)
        bad = [m for m in self.metrics if m not in WATCHABLE]
        if bad:
            self.fail("metrics", f"names from {', '.join(WATCHABLE)}", bad[0])
        object.__setattr__(self, "metrics", tuple(self.metrics))

    def watched(self, record: Mapping[str, Any]) -> dict[str, float]:
        """The watched metrics present in `record`, by record key."""
        names = set(self.metrics)
        if "objective" in names:
            names.add("F_gap" if "F_gap" in record else "F")
        return {k: float(record[k]) for k in sorted(names) if k in record}


def eval_points(budget: Budget, n_evals: int, horizon: int | None = None) -> list[int]:
    """Log-spaced iterations at which to evaluate: 0, then ~n_evals points up to the last iteration.

    Without an iteration budget the points continue geometrically (ratio 1.25) until the budget ends.
    """
    last = horizon if horizon is not None else budget.iterations
    if last is None:
        pts, k = {0}, 1.0
        while k < 1e9:
            pts.add(int(k))
            k = max(k * 1.25, k + 1)
        return sorted(pts)
    return sorted({0, last} | {int(round(v)) for v in np.geomspace(1, max(last, 1), max(n_evals, 2))})


@functools.lru_cache(maxsize=64)
def _shared_eval_points(budget: Budget, n_evals: int, horizon: int | None) -> tuple[int, ...]:
    """`eval_points`, made once for the many runs of one budget (a batch, a sweep's trials in one process)."""
    return tuple(eval_points(budget, n_evals, horizon))


class _SeedWords(ISeedSequence):
    """SeedSequence(seed) whose words are computed once: a PCG64 seeded from it starts where
    PCG64(SeedSequence(seed)) does (the words are all PCG64 reads), for a tenth of the cost (the
    sequence's hashing and error-state switches), as the many runs of one seed (a batch, a sweep) ask."""

    def __init__(self, seed: int) -> None:
        self._sequence = np.random.SeedSequence(seed)
        self._words: dict[tuple[int, str], Array] = {}

    def generate_state(self, n_words: int, dtype: Any = np.uint32) -> Array:
        key = (n_words, np.dtype(dtype).str)
        words = self._words.get(key)
        if words is None:
            words = self._words[key] = self._sequence.generate_state(n_words, dtype)
        return words.copy()


@functools.lru_cache(maxsize=4096)
def _seed_words(seed: int) -> _SeedWords:
    return _SeedWords(seed)


def generator(seed: Any) -> np.random.Generator:
    """np.random.default_rng(seed): the same stream (tests/algorithms/test_run_loop.py), made faster for an
    int seed (its generator's seed sequence is shared and cannot spawn; nothing spawns from a run's)."""
    if type(seed) is int and seed >= 0:
        return np.random.Generator(np.random.PCG64(_seed_words(seed)))
    return np.random.default_rng(seed)


def sum_of_squares(v: Array) -> float:
    """Σ v² over every entry, one BLAS dot (inf or NaN when an entry is not finite or the sum overflows): the
    batched engines' screen of a whole stack's iterates."""
    flat = np.ravel(v)
    return float(flat @ flat)


def _finite(*arrays: Array | None) -> bool:
    for a in arrays:
        if a is not None and not (np.all(np.isfinite(a)) and np.max(np.abs(a), initial=0) < DIVERGENCE_NORM):
            return False
    return True


#: float64's dtype: arrays of native float64 carry this very object, so `is` tests it (~0.1 µs less than ==).
_FLOAT64 = np.dtype(np.float64)


def _checked_norm(v: Array) -> float | None:
    """‖v‖ as np.linalg.norm gives it, or None when v is not `_finite`.

    One dot product decides both for a float vector: s = v·v is finite and below DIVERGENCE_NORM²
    exactly when every entry is finite and below DIVERGENCE_NORM in size (a NaN or inf makes s NaN or
    inf, an entry of 1e100 alone makes s ≥ 1e200, and a rounded sum of squares is never below its
    largest term), and np.linalg.norm of a contiguous float vector is sqrt(v.dot(v)), so the norm is √s
    to the bit. Other inputs, and the rare s ≥ 1e200 with every entry in range, take the elementwise test.
    """
    if type(v) is np.ndarray and v.ndim == 1 and v.dtype is _FLOAT64 and v.flags.c_contiguous:
        s = float(v.dot(v))
        if s < DIVERGENCE_NORM * DIVERGENCE_NORM:  # False for NaN and inf
            return math.sqrt(s)
    return float(np.linalg.norm(v)) if _finite(v) else None
