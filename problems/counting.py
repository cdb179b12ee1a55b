"""Oracle accounting: the only view of a problem an algorithm gets.

Every oracle call is recorded by kind together with the number of samples it touched, so runs can be
compared per call and per sample as the papers do. Ground truth is not reachable through the wrapper.
"""
from __future__ import annotations

from collections import Counter
from typing import Any

import numpy as np

from problems.base import GROUND_TRUTH, Array, Batch, BilevelProblem, OnlineProblem

#: Oracle kinds, in reporting order.
ORACLE_KINDS = ("f", "g", "grad_f", "grad_g", "hvp", "cross", "hessian")
_CALL_KEYS = tuple(f"calls/{k}" for k in ORACLE_KINDS)
_SAMPLE_KEYS = tuple(f"samples/{k}" for k in ORACLE_KINDS)


class BudgetSpent(Exception):
    """An oracle call refused: it would pass the run's oracle-call budget (`OracleCounter.left` is 0)."""


class OracleCounter:
    """Calls and samples per oracle kind; `left`, when set, is how many more calls are allowed.

    The run loop sets `left` (its oracle-call budget minus the calls made) before it steps; a call made
    when none is left raises `BudgetSpent` before it reaches the problem, so a run never spends more
    than its budget: the step is cut there and the run ends at the point its calls reached.
    """

    def __init__(self) -> None:
        self.calls: Counter[str] = Counter()
        self.samples: Counter[str] = Counter()
        self.left: int | None = None

    def spend(self) -> None:
        """Take one call from `left` (when set), or raise `BudgetSpent` when none is left."""
        left = self.left
        if left is not None:
            if left <= 0:
                raise BudgetSpent
            self.left = left - 1

    def add(self, kind: str, samples: int) -> None:
        """Record one call of `kind` touching `samples` samples (`BudgetSpent` when no call is left)."""
        if self.left is not None:
            self.spend()
        self.calls[kind] += 1
        self.samples[kind] += samples

    @property
    def total_calls(self) -> int:
        """All calls of every kind."""
        return sum(self.calls.values())

    @property
    def total_samples(self) -> int:
        """All samples touched by every call."""
        return sum(self.samples.values())

    def snapshot(self) -> dict[str, int]:
        """Flat record: calls/<kind>, samples/<kind>, and totals."""
        calls, samples = self.calls, self.samples  # keys made once (_CALL_KEYS): this runs on every record
        out = dict(zip(_CALL_KEYS, [int(calls[k]) for k in ORACLE_KINDS]))
        out.update(zip(_SAMPLE_KEYS, [int(samples[k]) for k in ORACLE_KINDS]))
        out["calls/total"] = self.total_calls
        out["samples/total"] = self.total_samples
        return out


class _CountingView:
    """What both counting wrappers share: the wrapped problem, its counter, ground truth hidden."""

    def __init__(self, problem: BilevelProblem | OnlineProblem, counter: OracleCounter | None = None) -> None:
        self._problem = problem
        self.counter = counter if counter is not None else OracleCounter()
        # Duck-typed problems without `samples_touched` fall back to `batch_size`.
        touched = getattr(problem, "samples_touched", None)
        self._touched = touched if touched is not None else lambda kind, batch: problem.batch_size(batch)

    def __getattr__(self, name: str) -> Any:
        # Dimensions, constraints, projection, sampling and start point pass through; ground truth not.
        if name in GROUND_TRUTH:
            raise AttributeError(f"'{name}' is ground truth and is not available to algorithms")
        return getattr(self._problem, name)


class CountingProblem(_CountingView):
    """Wraps a BilevelProblem, counting every oracle call; ground truth is hidden."""

    def _count(self, kind: str, batch: Batch) -> None:
        counter = self.counter  # OracleCounter.add, inlined: this runs on every oracle call
        if counter.left is not None:
            counter.spend()
        counter.calls[kind] += 1
        counter.samples[kind] += self._touched(kind, batch)

    def f(self, x: Array, y: Array, batch: Batch = None) -> float:
        """Counted f."""
        self._count("f", batch)
        return self._problem.f(x, y, batch)

    def g(self, x: Array, y: Array, batch: Batch = None) -> float:
        """Counted g."""
        self._count("g", batch)
        return self._problem.g(x, y, batch)

    def grad_f(self, x: Array, y: Array, batch: Batch = None) -> tuple[Array, Array]:
        """Counted (∇x f, ∇y f)."""
        self._count("grad_f", batch)
        return self._problem.grad_f(x, y, batch)

    def grad_g(self, x: Array, y: Array, batch: Batch = None) -> tuple[Array, Array]:
        """Counted (∇x g, ∇y g)."""
        self._count("grad_g", batch)
        return self._problem.grad_g(x, y, batch)

    def grad_y_f(self, x: Array, y: Array, batch: Batch = None) -> Array:
        """Counted ∇y f (one grad_f call)."""
        self._count("grad_f", batch)
        return self._problem.grad_y_f(x, y, batch)

    def grad_y_g(self, x: Array, y: Array, batch: Batch = None) -> Array:
        """Counted ∇y g (one grad_g call)."""
        self._count("grad_g", batch)
        return self._problem.grad_y_g(x, y, batch)

    def hvp_yy_g(self, x: Array, y: Array, v: Array, batch: Batch = None) -> Array:
        """Counted ∇²yy g · v."""
        self._count("hvp", batch)
        return self._problem.hvp_yy_g(x, y, v, batch)

    def cross_xy_g(self, x: Array, y: Array, v: Array, batch: Batch = None) -> Array:
        """Counted ∇²xy g · v."""
        self._count("cross", batch)
        return self._problem.cross_xy_g(x, y, v, batch)

    def hessian_yy_g(self, x: Array, y: Array, batch: Batch = None) -> Array:
        """Counted dense ∇²yy g."""
        self._count("hessian", batch)
        return self._problem.hessian_yy_g(x, y, batch)

    def jacobian_xy_g(self, x: Array, y: Array, batch: Batch = None) -> Array:
        """Counted dense ∇²xy g."""
        self._count("hessian", batch)
        return self._problem.jacobian_xy_g(x, y, batch)

    # Per-sample oracles: one call of their kind, touching one sample per index.
    def grad_f_samples(self, x: Array, y: Array, idx: Array) -> tuple[Array, Array]:
        """Counted per-sample (∇x f_j, ∇y f_j)."""
        self.counter.add("grad_f", len(idx))
        return self._problem.grad_f_samples(x, y, idx)

    def grad_y_g_samples(self, x: Array, y: Array, idx: Array) -> Array:
        """Counted per-sample ∇y g_i."""
        self.counter.add("grad_g", len(idx))
        return self._problem.grad_y_g_samples(x, y, idx)

    def hvp_yy_g_samples(self, x: Array, y: Array, v: Array, idx: Array) -> Array:
        """Counted per-sample ∇²yy g_i · v."""
        self.counter.add("hvp", len(idx))
        return self._problem.hvp_yy_g_samples(x, y, v, idx)

    def cross_xy_g_samples(self, x: Array, y: Array, v: Array, idx: Array) -> Array:
        """Counted per-sample ∇²xy g_i · v."""
        self.counter.add("cross", len(idx))
        return self._problem.cross_xy_g_samples(x, y, v, idx)

    def sample_batch(self, rng: np.random.Generator, size: int) -> Batch:
        """Pass-through: drawing indices is not an oracle call."""
        return self._problem.sample_batch(rng, size)

    # Projections run every step: explicit pass-throughs skip __getattr__.
    def project_x(self, x: Array) -> Array:
        """Pass-through: projecting is not an oracle call."""
        return self._problem.project_x(x)

    def project_y(self, y: Array) -> Array:
        """Pass-through: projecting is not an oracle call."""
        return self._problem.project_y(y)


class CountingOnlineProblem(_CountingView):
    """Wraps an OnlineProblem: each per-time instance is counted into one shared counter."""

    def at(self, t: int) -> CountingProblem:
        """The counted instance at time t."""
        return CountingProblem(self._problem.at(t), self.counter)


def counted(problem: BilevelProblem | OnlineProblem, counter: OracleCounter | None = None):
    """The counting view of a problem (offline or online)."""
    if isinstance(problem, OnlineProblem):
        return CountingOnlineProblem(problem, counter)
    return CountingProblem(problem, counter)
