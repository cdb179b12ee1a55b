"""A run's divergence rule applied (algorithms.run.Divergence): the norm limits of x and y every step checks,
the watched metrics at every point, and the record a divergence ends a run with. A mixin of `Run`: it reads
the run's `divergence`, `start_values`, `algorithm` and `last_record`, and notes `diverged_metric`."""
from __future__ import annotations

from typing import Any

import numpy as np

from algorithms.base import Algorithm
from algorithms.run_settings import Divergence, _checked_norm


class DivergenceWatch:
    """The divergence checks of a `Run` (which sets the fields below in its __init__)."""

    divergence: Divergence
    start_values: dict[str, float]
    algorithm: Algorithm
    last_record: dict[str, Any] | None
    status: str
    diverged_metric: str
    _failed_step: int | None
    _norm_limits: dict[str, float]

    def fail(self, at: int) -> None:
        """Note that the step numbered `at` failed (a numeric error in it): the divergence record names it."""
        self._failed_step = at

    @property
    def iterate_limits(self) -> dict[str, float]:
        """x's and y's norm limits (a divergence past them), fixed with the run's start values."""
        return self._norm_limits

    def _limit(self, name: str) -> float:
        return self.divergence.factor * max(self.start_values.get(name, 0.0), 1.0)

    def _limits_of_iterates(self) -> dict[str, float]:
        """x's and y's norm limits, fixed once their start values are (every step compares against them)."""
        return {name: self._limit(name) for name in ("x", "y") if name in self.start_values}

    def _iterates_ok(self, alg: Algorithm) -> bool:
        """False (and the reason noted) when x or y is non-finite or past its norm limit.

        It runs under the stretch's raising error state, where only a v·v that overflows (an entry past 1e154)
        raises: the check is then made again quietly (an error state set around every check cost ~1.4 µs).
        """
        try:
            return self._check_iterates(alg)
        except FloatingPointError:
            with np.errstate(all="ignore"):
                return self._check_iterates(alg)

    def _check_iterates(self, alg: Algorithm) -> bool:
        for name, v in (("x", alg.x), ("y", alg.y)):
            if v is None:
                continue
            norm = _checked_norm(v)
            if norm is None:
                self.diverged_metric = f"{name} non-finite"
                return False
            limit = self._norm_limits.get(name)
            if limit is not None and norm > limit:
                self.diverged_metric = f"‖{name}‖"
                return False
        return True

    def _metrics_ok(self, rec: dict[str, Any]) -> bool:
        """False (and the reason noted) when a watched metric grew past its limit."""
        for key, value in self.divergence.watched(rec).items():
            if rec["iteration"] == 0 or key not in self.start_values:
                self.start_values.setdefault(key, abs(value))
            elif abs(value) > self._limit(key):
                self.diverged_metric = key
                return False
        return True

    def _diverged(self) -> dict[str, Any]:
        self.status = "diverged"
        base = self.last_record or {"iteration": 0}
        at = self._failed_step if self._failed_step is not None else self.algorithm.iteration
        return {**base, "status": "diverged", "diverged_at": at, "diverged_metric": self.diverged_metric or "non-finite"}
