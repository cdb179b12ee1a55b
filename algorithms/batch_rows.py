"""The per-step checks of a stack's rows (budget, divergence) and the clock its runs share (algorithms.batched).

`Rows` holds, per row of a stack, what the checks after each step compare against as arrays (calls and seconds
spent before, norm limits), so the common case is one comparison per step; `SharedClock` divides the stack's
seconds among the runs stepping in it.
"""
from __future__ import annotations

import time
from typing import Any

import numpy as np

from algorithms.run import DIVERGENCE_NORM, Budget, Run
from algorithms.run_settings import sum_of_squares
from algorithms.stacked import stacked_arrays


class Rows:
    """The runs of a stack, row by row, with what the per-step checks compare against as arrays."""

    def __init__(self, runs: list[Run], group: list[int], budget: Budget, limits: dict[str, np.ndarray]) -> None:
        members = [runs[k] for k in group]
        self.index = list(group)  # run index of each row
        # The calls and seconds spent before, where a budget counts them.
        self.calls = None if budget.oracle_calls is None else \
            np.array([r.view.counter.total_calls for r in members], dtype=float)
        self.budget = budget.oracle_calls
        self.seconds = None if budget.seconds is None else np.array([r.compute_time for r in members])
        self.limits = {name: v[group] for name, v in limits.items()}
        self.screens, self.floors = screens(self.limits)

    def keep(self, rows: np.ndarray) -> None:
        self.index = [self.index[i] for i in rows]
        self.calls = None if self.calls is None else self.calls[rows]
        self.seconds = None if self.seconds is None else self.seconds[rows]
        self.limits = {name: v[rows] for name, v in self.limits.items()}
        self.screens, self.floors = screens(self.limits)

    def allow_calls(self, view: Any) -> None:
        """`Run._allow_calls` for the stack's view: the calls left to the row with the fewest (its rows have
        the same calls but for calls of their own, TTSA's HIA factors, where a row may end a step early)."""
        if self.calls is not None:
            spent = self.calls + view.row_total_calls() + view.counter.total_calls
            view.counter.left = int(self.budget - spent.max())

    def budget_spent(self, budget: Budget, calls: int | np.ndarray, seconds: float) -> np.ndarray:
        """Rows whose oracle-call or seconds budget is spent (Run.budget_left per row)."""
        spent = np.zeros(len(self.index), dtype=bool)
        if budget.oracle_calls is not None:
            spent |= self.calls + calls >= budget.oracle_calls
        if budget.seconds is not None:
            spent |= ~(self.seconds + seconds < budget.seconds)
        return spent

    def diverged(self, stacked: Any) -> tuple[np.ndarray, list[str]]:
        """Rows that diverged at this step, and why: "" for a non-finite stored value (as if the step had
        raised), else x's or y's reason as Run._check_iterates gives it (x first)."""
        n = len(self.index)
        iterates = {name: v for name in ("x", "y") if (v := _matrix(getattr(stacked, name), n)) is not None}
        # The common case in one test per array: every other array's sum finite (so is every entry), and x's and
        # y's squared norms below their screens (so x and y are finite and within their limits) ...
        others_finite = all(np.isfinite(a.sum()) for a in stacked_arrays(stacked)
                            if a is not stacked.x and a is not stacked.y)
        # ... which their sum over all rows, one BLAS dot (a third of the rows' norms), shows when below the
        # smallest screen.
        if others_finite and all(sum_of_squares(v) < self.floors[name] for name, v in iterates.items()):
            return np.zeros(n, dtype=bool), []
        squares = {name: np.einsum("ij,ij->i", v, v) for name, v in iterates.items()}
        if others_finite and all((sq < self.screens[name]).all() for name, sq in squares.items()):
            return np.zeros(n, dtype=bool), []
        norms = {name: np.sqrt(sq) for name, sq in squares.items()}
        bad = np.zeros(n, dtype=bool)
        for a in stacked_arrays(stacked):
            bad |= ~np.isfinite(a.reshape(n, -1)).all(axis=1)
        failed, metric = bad.copy(), [""] * n
        for name, norm in norms.items():
            for i in np.flatnonzero(~failed & ~(norm < DIVERGENCE_NORM)):
                metric[i] = f"{name} non-finite"
            for i in np.flatnonzero(~failed & (norm < DIVERGENCE_NORM) & (norm > self.limits[name])):
                metric[i] = f"‖{name}‖"
            failed |= ~(norm < DIVERGENCE_NORM) | (norm > self.limits[name])
        return failed, metric


def screens(limits: dict[str, np.ndarray]) -> tuple[dict[str, np.ndarray], dict[str, float]]:
    """Per iterate, squared norms below which a row is surely finite, below DIVERGENCE_NORM and within its limit
    (a margin of 1e-12 over the rounding of the square root): one comparison per step in the common case; and
    the smallest of them, less a margin of 1e-6 over the rounding of a sum of squares, against which the sum
    over all rows is compared (a sum below it leaves every row's below its screen)."""
    screens = {name: (np.minimum(limit, DIVERGENCE_NORM) * (1 - 1e-12)) ** 2 for name, limit in limits.items()}
    return screens, {name: float(s.min()) * (1 - 1e-6) if len(s) else 0.0 for name, s in screens.items()}


def _matrix(v: np.ndarray | None, rows: int) -> np.ndarray | None:
    return None if v is None else v.reshape(rows, -1)


class SharedClock:
    """The stack's wall and CPU seconds, read per stretch (and the wall clock per step under a seconds
    budget), divided equally among the runs stepping when they passed."""

    def __init__(self, runs: list[Run]) -> None:
        self.runs = runs
        self.start, self.cpu_start = time.perf_counter(), time.thread_time()
        self.now = self.start

    def lap(self) -> None:
        self.now = time.perf_counter()

    def pending(self) -> float:
        """Each run's share of the seconds since the last `share` (as of the last lap)."""
        return (self.now - self.start) / len(self.runs)

    def share(self) -> None:
        """Add each stepping run's share of the seconds since the last share to its run."""
        now, cpu = time.perf_counter(), time.thread_time()
        n = len(self.runs)
        for r in self.runs:
            r.compute_time += (now - self.start) / n
            r.cpu_time += (cpu - self.cpu_start) / n
        self.start, self.cpu_start, self.now = now, cpu, now

