"""A cohort (algorithms.batched): every running run of a batch in one stack, its state kept there from point
to point, so a round's only per-run work is its records. `CohortRounds` is that part of `BatchedRuns`; the
state goes back into each run's `Run` when asked for (`sync`, through `Run.holder`), a run leaves, or a
record needs a run's own path."""
from __future__ import annotations

import time
from typing import Any

import numpy as np

from algorithms.base import Algorithm
from algorithms.batch_records import (add_counts, add_each, finished_copies, metric_columns, shared_records,
                                      stacked_diagnostics, watched_keys)
from algorithms.batch_rows import Rows, SharedClock
from algorithms.run import _NUMERIC_FAILURES, Run
from algorithms.stacked import StackedView, restack, unstack_all
from problems.counting import BudgetSpent, OracleCounter


class CohortRounds:
    """The cohort's rounds; a mixin of `algorithms.batched.BatchedRuns`, whose stretches (`_steps`,
    `_leave_timed`, `_finish_group`) a cohort falls back on when a run leaves it."""

    runs: list[Run]
    _kept: Any
    _cohort: Cohort | None

    def _form_cohort(self) -> None:
        """After a round whose runs still going all reached their point together in one stack (`_kept`), keep
        their state in that stack: later rounds step it and make its records with no per-run work but the
        records themselves, until a run leaves, a record needs a run's own path, or the state is asked for."""
        kept = self._kept
        if kept is not None and kept[1].iteration > 0 and self._can_hold(list(kept[0])) \
                and restack(kept[1], kept[2], [self.runs[k].algorithm for k in kept[0]]):
            self._kept = None
            self._hold(list(kept[0]), kept[1])

    def _can_hold(self, ks: list[int]) -> bool:
        """Whether runs `ks`, every run still going, can be a cohort: at one iteration and point with equal
        counts, their budget not spent and counting no seconds (those are checked per run), records made at once."""
        runs = [self.runs[k] for k in ks]
        first = runs[0]
        if (first.budget.seconds is not None or first.horizon is not None or first.done
                or sum(not r.done for r in self.runs) != len(ks) or not self._stack_evaluable(runs)):
            return False
        calls, samples, it = first.view.counter.calls, first.view.counter.samples, first.algorithm.iteration
        return all(r.points is first.points and r.next_point == first.next_point and r.algorithm.iteration == it
                   and dict.__eq__(r.view.counter.calls, calls) and dict.__eq__(r.view.counter.samples, samples)
                   for r in runs) and first.budget_left()  # (equal counts and iterations: every run's budget)

    def _hold(self, ks: list[int], stacked: Algorithm) -> None:
        """Runs `ks` become the cohort of `stacked` (their state as it is, its counts zero)."""
        runs = [self.runs[k] for k in ks]
        self._cohort = Cohort(ks, runs, stacked, Rows(self.runs, ks, runs[0].budget, self._iterate_limits()))
        sync = self.sync  # one bound method for all (each is an object the garbage collector tracks)
        for r in runs:
            r.holder = sync

    def sync(self) -> None:
        """Write the state a cohort's stack holds for its runs into their `Run`s (a run's `state_dict`,
        `load_state_dict` and `advance` call it first, through `Run.holder`)."""
        cohort, self._cohort = self._cohort, None
        if cohort is not None:
            self._release(cohort)

    def _release(self, c: Cohort) -> None:
        """The cohort's state into its runs: iterates and state (row views), counts, seconds, evaluation point."""
        stacked = c.stacked
        views = unstack_all(stacked, [r.algorithm for r in c.runs])
        view = stacked.problem
        add_each([r.view.counter.calls for r in c.runs], list(view.counter.calls.items()))
        add_each([r.view.counter.samples for r in c.runs], list(view.counter.samples.items()))
        if view.row_calls:  # calls some runs made and others not (TTSA's HIA factors)
            for i, r in enumerate(c.runs):
                add_counts(r.view.counter.calls, [(kind, int(n[i])) for kind, n in view.row_calls.items()])
                add_counts(r.view.counter.samples, [(kind, int(n[i])) for kind, n in view.row_samples.items()])
        last = c.last_records or [r.last_record for r in c.runs]
        for r, compute, cpu, evals, rec in zip(c.runs, c.compute.tolist(), c.cpu.tolist(), c.evals.tolist(), last):
            r.compute_time, r.cpu_time, r.eval_time, r.last_record = compute, cpu, evals, rec
            r.next_point = c.next_point
            r.holder = None
        stacked.problem = StackedView(view._problem, len(c.runs))  # the counts are the runs' now
        self._kept = (tuple(c.ks), stacked, views) if views is not None else None

    def _cohort_round(self, c: Cohort) -> list[tuple[int, dict[str, Any]]]:
        """`advance` of a cohort: its stack to the next point, the point's records made at once."""
        stacked, rows, budget = c.stacked, c.rows, c.budget
        target = c.points[min(c.next_point, len(c.points) - 1)]
        start, cpu_start = time.perf_counter(), time.thread_time()
        rows.allow_calls(stacked.problem)
        with np.errstate(all="ignore"):
            while True:
                try:
                    stacked.step()
                except BudgetSpent:  # cut (`Run._allow_calls`): every run's budget is spent, where the step got
                    c.add_seconds(start, cpu_start)
                    return self._break_cohort(c, np.zeros(len(c.ks), dtype=bool), [], True)  # all leave
                stacked.iteration += 1
                failed, metric = rows.diverged(stacked)
                at_point = stacked.iteration >= target or (budget.iterations is not None
                                                           and stacked.iteration >= budget.iterations)
                spent = False
                if not at_point and budget.oracle_calls is not None:
                    calls = stacked.problem.counter.total_calls + stacked.problem.row_total_calls()
                    spent = bool(rows.budget_spent(budget, calls, 0.0).any())
                if spent or failed.any():  # a run leaves between points: on as separate runs from here
                    c.add_seconds(start, cpu_start)
                    return self._break_cohort(c, failed, metric, at_point)
                if at_point:
                    break
        c.add_seconds(start, cpu_start)
        return self._cohort_records(c)

    def _break_cohort(self, c: Cohort, failed: np.ndarray, metric: list[str],
                      at_point: bool) -> list[tuple[int, dict[str, Any]]]:
        """The cohort's runs back in their `Run`s at this step, the step's leaving rows out, the rest stepped on
        as a plain stack (`_steps`); the round's records."""
        self._cohort = None
        self._release(c)
        self._kept = None
        group = list(c.ks)
        rows = Rows(self.runs, group, c.budget, self._iterate_limits())
        ended = np.ones(len(group), dtype=bool) if at_point else rows.budget_spent(c.budget, 0, 0.0)
        clock = SharedClock(c.runs)
        ok: dict[int, bool] = {}
        self._leave_timed(c.stacked, rows, clock, failed, metric, ended, ok)
        if rows.index:
            self._steps(c.stacked, rows, clock, ok)
        out: list[tuple[int, dict[str, Any]]] = []
        self._finish_group(group, ok, out)
        self._form_cohort()
        return out

    def _cohort_records(self, c: Cohort) -> list[tuple[int, dict[str, Any]]]:
        """The records of the cohort's point, made at once (`_records_together` without per-run state); a point
        whose records need a run's own path (a metric non-finite or past its limit, diagnostics that do not
        stack) ends the cohort and takes that path."""
        stacked, runs = c.stacked, c.runs
        it, n = stacked.iteration, len(runs)
        start = time.perf_counter()
        f_opt = runs[0].f_opt()
        try:
            columns = metric_columns(runs[0].problem, stacked.x, stacked.y, f_opt)
        except _NUMERIC_FAILURES:
            columns = None
        diags = None if columns is None or stacked.problem.row_calls else stacked_diagnostics(stacked, n)
        if diags is None or not self._cohort_passes(c, columns):  # (row_calls: counts of their own)
            self._cohort = None
            self._release(c)
            out: list[tuple[int, dict[str, Any]]] = []
            self._finish_group(list(c.ks), dict.fromkeys(c.ks, True), out)
            self._form_cohort()
            return out
        c.evals += (time.perf_counter() - start) / n
        while c.next_point < len(c.points) and c.points[c.next_point] <= it:  # Run.skip_passed_points
            c.next_point += 1
        counter = OracleCounter()
        for into, base, added in ((counter.calls, runs[0].view.counter.calls, stacked.problem.counter.calls),
                                  (counter.samples, runs[0].view.counter.samples, stacked.problem.counter.samples)):
            add_counts(into, list(base.items()))
            add_counts(into, list(added.items()))
        snapshot = counter.snapshot()
        metrics = {name: col.tolist() for name, col in columns.items()}
        metrics.update({f"diag/{key}": col for key, col in diags.items()})
        mode = {} if runs[0].time_mode is None else {"time_mode": runs[0].time_mode}
        records = shared_records(snapshot, mode, it, [c.compute.tolist(), c.cpu.tolist(), c.evals.tolist()], metrics)
        c.last_records = records  # each run's last record, written into it with the rest of its state
        b = c.budget
        if (b.iterations is not None and it >= b.iterations) or (b.oracle_calls is not None
                                                                 and snapshot["calls/total"] >= b.oracle_calls):
            for r in runs:
                r.status = "finished"
            records = finished_copies(records)
            self.sync()
        return list(zip(c.ks, records))

    def _cohort_passes(self, c: Cohort, columns: dict[str, np.ndarray]) -> bool:
        """Every metric of every run finite and within its divergence limit (`Run.evaluate`, `_metrics_ok`)."""
        if not np.isfinite(np.array(list(columns.values()))).all():
            return False
        rule = c.runs[0].divergence
        for key in watched_keys(rule, columns):
            limit = c.limits.get(key)
            if limit is None:
                limit = c.limits[key] = rule.factor * np.maximum([r.start_values.get(key, np.inf) for r in c.runs], 1.0)
            if not np.isfinite(limit).all():  # a start value not yet set: the per-run path sets it
                return False
            with np.errstate(invalid="ignore"):
                if (np.abs(columns[key]) > limit).any():
                    return False
        return True



class Cohort:
    """Every running run of a batch in one stack (row i: run ks[i]); between rounds their iterates, state and
    counts since it formed stay in the stack, their seconds and next evaluation point here."""

    def __init__(self, ks: list[int], runs: list[Run], stacked: Any, rows: Rows) -> None:
        self.ks, self.runs, self.stacked, self.rows = ks, runs, stacked, rows
        first = runs[0]
        self.budget, self.points, self.next_point = first.budget, first.points, first.next_point
        self.compute = np.array([r.compute_time for r in runs])
        self.cpu = np.array([r.cpu_time for r in runs])
        self.evals = np.array([r.eval_time for r in runs])
        self.last_records: list[dict[str, Any]] | None = None
        self.limits: dict[str, np.ndarray] = {}  # per watched metric, each run's divergence limit

    def add_seconds(self, start: float, cpu_start: float) -> None:
        """Each run's share of the stack's seconds since `start` (wall) and `cpu_start` (thread CPU)."""
        n = len(self.runs)
        self.compute += (time.perf_counter() - start) / n
        self.cpu += (time.thread_time() - cpu_start) / n

