"""What an engine returns: every run's metrics and diagnostics at the evaluation points, as arrays, and the
records the run loop would give (`Result.records`), made from those arrays at the end."""
from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Any

import numpy as np

from algorithms.base import AlgorithmConfig
from algorithms.run import Budget, eval_points

#: Metrics every engine records at an evaluation point (problems/pure.py computes them).
METRICS = ("F", "F_gap", "grad_F_sq", "y_err_sq")


def points(iterations: int, n_evals: int = 30) -> tuple[int, ...]:
    """The run loop's evaluation points for an iteration budget (algorithms.run.eval_points)."""
    return tuple(eval_points(Budget.from_dict({"iterations": iterations}), n_evals))


@dataclasses.dataclass
class Result:
    """K runs of one algorithm: `values[name]` is (len(points), K) for each metric and `diag/<name>`;
    `state` the final state with a leading K axis (a per-run number as a (K, 1) column or (K,));
    `seconds` the engine's time to run (compile excluded), `compile_seconds` the JAX engine's compile time."""

    algorithm: str
    configs: list[AlgorithmConfig]
    points: tuple[int, ...]
    values: dict[str, np.ndarray]
    state: Any
    engine: str
    seconds: float = 0.0
    compile_seconds: float = 0.0

    @property
    def diverged_at(self) -> np.ndarray:
        """Per run, the index of the first evaluation point with a non-finite value (len(points): none)."""
        bad = np.zeros((len(self.points), len(self.configs)), dtype=bool)
        for v in self.values.values():
            bad |= ~np.isfinite(v)
        first = np.argmax(bad, axis=0)
        return np.where(bad.any(axis=0), first, len(self.points))

    def records(self) -> Iterator[tuple[int, dict[str, Any]]]:
        """(run index, record) pairs point by point, as `algorithms.run_batched` yields them: status "running",
        "finished" at the last point, or "diverged" (the last finite record, `diverged_at` its point's
        iteration) where a value became non-finite; then the run's records stop."""
        names = list(self.values)
        columns = [self.values[n].tolist() for n in names]  # Python floats at once, not per element
        end, last = self.diverged_at.tolist(), len(self.points) - 1
        previous: list[dict[str, Any] | None] = [None] * len(self.configs)
        for i, it in enumerate(self.points):
            rows = [col[i] for col in columns]
            for k in range(len(self.configs)):
                if end[k] < i:
                    continue
                if end[k] == i:
                    base = previous[k] or {"iteration": 0}
                    yield k, {**base, "status": "diverged", "diverged_at": it, "diverged_metric": "non-finite"}
                    continue
                rec = {"iteration": it, "status": "finished" if i == last else "running",
                       **{n: row[k] for n, row in zip(names, rows)}}
                previous[k] = rec
                yield k, rec


def collect(per_point: list[dict[str, Any]], k: int) -> dict[str, np.ndarray]:
    """Values per point (each a number, (K,) or (K, 1)) as (len(points), K) arrays."""
    return {n: np.stack([np.broadcast_to(np.asarray(p[n], dtype=float).reshape(-1), (k,)) for p in per_point])
            for n in per_point[0]}
