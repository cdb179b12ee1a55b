"""Batched runs: K runs of one algorithm on one problem instance for one budget, advanced as one.

    import problems, algorithms
    p = problems.make("quadratic", seed=0)
    configs = [{"rho": r, "gamma": 0.1} for r in (0.05, 0.1, 0.2)]
    for k, record in algorithms.run_batched("soba", p, configs, seeds=[0, 0, 0], budget={"iterations": 100}):
        print(k, record["iteration"], record["grad_F_sq"])

Each run keeps its own `Run` (counter, evaluation points, divergence rule, checkpoint state); between
evaluation points the runs still going step together as one stacked algorithm (algorithms.stacked), so
run k's records are the ones `algorithms.run` gives it alone (to rounding: a stacked product sums as the
single one does, up to BLAS blocking), in the same order. A run that diverges or whose budget ends
leaves the stack at that step; the others go on. When every run of a stack reaches its point together,
the point's records are made at once from stacked metric columns, and the stack steps on in the next
round (its rows are what the runs hold) instead of being built again. When the runs still going are all
one such stack (a cohort: the common case, from the start), their state stays in the stack between rounds
and a round's only per-run work is its records; it is written back into each `Run` when a run's state is
asked for (`state_dict`, `load_state_dict`, `advance`: `Run.holder` is `sync`), a run leaves, or the batch
ends. A run's compute seconds (`time`, `cpu_time`) are the batch's seconds divided among the runs stepping
with it, and its records say `time_mode: batched`.

Divergence acts per run, with one difference in kind: a sequential step raises on the first overflow,
a stacked one computes on (its other rows must go on) and a run whose iterates or state became
non-finite counts as failed at that step, as the raise would have it; an overflow inside a step that
leaves every stored value finite is not seen.
"""
from __future__ import annotations

import itertools
import math
import time
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import numpy as np

from algorithms.base import Algorithm, AlgorithmConfig, get
from algorithms.run import _NUMERIC_FAILURES, DIVERGENCE_NORM, Budget, Divergence, Run
from algorithms.stacked import (StackedView, group_key, restack, stack, stacked_arrays, take, unstack,
                                unstack_all, varying_fields)
from problems.base import NOT_STRONGLY_CONVEX, BilevelProblem
from problems.counting import BudgetSpent, OracleCounter
from problems.shared.errors import ParameterError

Config = Mapping[str, Any] | AlgorithmConfig | None


def batchable(algorithm: str, problem: Any) -> bool:
    """Whether runs of `algorithm` on `problem` can be batched (else they run one after another)."""
    cls = get(algorithm)
    return bool(cls.__dict__.get("batchable", False)) and isinstance(problem, BilevelProblem)


class BatchedRuns:
    """K resumable runs advanced together; `records()` yields (run index, record) pairs.

    Runs whose configs differ in a field that may not vary (`algorithms.stacked.varying_fields`) form
    separate stacks; an algorithm that is not batchable runs its runs one after another.
    """

    def __init__(self, algorithm: str, problem: Any, configs: Sequence[Config], seeds: Sequence[int],
                 budget: Budget | Mapping[str, Any] | None = None, n_evals: int = 30,
                 divergence: Divergence | Mapping[str, Any] | None = None) -> None:
        if len(configs) != len(seeds):
            raise ParameterError(f"batched runs: {len(configs)} configs but {len(seeds)} seeds; one seed per config")
        self.cls = get(algorithm)
        # Parsed once for all runs (a Run takes them as they are).
        budget = budget if isinstance(budget, Budget) else Budget.from_dict({"iterations": 100} if budget is None
                                                                           else budget)
        divergence = divergence if isinstance(divergence, Divergence) else Divergence.from_dict(divergence)
        self.runs = [Run(algorithm, problem, c, s, budget, n_evals, divergence) for c, s in zip(configs, seeds)]
        self.batched = batchable(algorithm, problem) and all(self.cls.can_batch(r.algorithm.config) for r in self.runs) \
            and not (budget.oracle_calls is not None and getattr(self.cls, "own_calls", False))
        self.varying = varying_fields(self.cls)
        if self.batched:
            for run in self.runs:
                run.time_mode = "batched"
        self._keys = [group_key(self.cls, r.algorithm.config) for r in self.runs]  # configs do not change
        # The last stack whose rows all reached their point together: (its runs, it, the row views they hold).
        self._kept: tuple[tuple[int, ...], Algorithm, dict[str, list[np.ndarray]]] | None = None
        self._limits: dict[str, np.ndarray] = {}  # per watched metric, every run's divergence limit
        self._norm_limits: dict[str, np.ndarray] = {}
        # Every running run, when all step as one stack from point to point: their state stays in it between rounds.
        self._cohort: _Cohort | None = None

    @property
    def done(self) -> bool:
        """True once every run has finished or diverged."""
        return self._cohort is None and all(r.done for r in self.runs)

    def records(self) -> Iterator[tuple[int, dict[str, Any]]]:
        """Every run's records, each run's in its own order, until all have ended."""
        while not self.done:
            yield from self.advance()

    def advance(self) -> list[tuple[int, dict[str, Any]]]:
        """One round: every running run to its next evaluation point (or its end); the records it made.

        Between rounds every run's own `Run` holds its whole state (`state_dict`), or its `holder` writes it
        there when asked (a cohort: see `sync`)."""
        if not self.batched:
            return self._one_at_a_time()
        if self._cohort is not None:
            return self._cohort_round(self._cohort)
        out: list[tuple[int, dict[str, Any]]] = []
        ready: list[int] = []
        starting = [k for k, r in enumerate(self.runs) if not r.done and r.algorithm.iteration == 0
                    and r.last_record is None]
        first = self._first_stack(starting)
        if first is not None:  # its start records take x, y and the diagnostics from it
            self._kept = (tuple(starting), first, {})
        started = self._records_together(starting, dict.fromkeys(starting, True)) if starting else {}
        if first is not None:
            self._kept = None
        self._evaluate_together([k for k in starting if k not in started])
        for k, r in enumerate(self.runs):
            if r.done:
                continue
            if k in started:
                out.append((k, started[k]))
            elif (rec := r.start()) is not None:  # as Run.advance: the start is a record
                out.append((k, rec))
            if r.budget_left():
                ready.append(k)
            else:
                out.append((k, r.finish()))
        groups = self._groups(ready)
        if starting and len(groups) == 1 and self._can_hold(groups[0]):  # every run from its start: a cohort now
            self._hold(groups[0], first if first is not None and groups[0] == starting
                       else stack([self.runs[k].algorithm for k in groups[0]], self.varying))
            return out + self._cohort_round(self._cohort)
        for group in groups:
            self._finish_group(group, self._stretch(group), out)
        self._form_cohort()
        return out

    def _first_stack(self, starting: list[int]) -> Algorithm | None:
        """The stack of every run at its start, when they are all starting and can step as one cohort (one
        structural config, records made at once, no seconds budget): built before their start records, which
        then read it rather than each run (the stacked runs' state is theirs: nothing steps in between)."""
        runs = [self.runs[k] for k in starting]
        if (not runs or self._kept is not None or len(runs) != len(self.runs)
                or len({self._keys[k] for k in starting}) != 1 or runs[0].budget.seconds is not None
                or runs[0].horizon is not None or not self._stack_evaluable(runs)):
            return None
        return stack([r.algorithm for r in runs], self.varying)

    def _finish_group(self, group: list[int], ok: dict[int, bool], out: list[tuple[int, dict[str, Any]]]) -> None:
        """The records of `group`'s runs after a stretch (`ok`: not diverged), by run, into `out`."""
        made = self._records_together(group, ok)
        self._evaluate_together([k for k in group if ok[k] and k not in made])
        for k in group:
            rec = made[k] if k in made else self.runs[k].after_steps(ok[k])
            if rec is not None:
                out.append((k, rec))

    def _one_at_a_time(self) -> list[tuple[int, dict[str, Any]]]:
        """The next record of the first unfinished run (a run that cannot be batched)."""
        for k, r in enumerate(self.runs):
            rec = r.advance()
            if rec is not None:
                return [(k, rec)]
        return []

    def _groups(self, ready: list[int]) -> list[list[int]]:
        """Runs that can step as one stack: same iteration, same next point, same structural config."""
        groups: dict[tuple, list[int]] = {}
        for k in ready:
            r = self.runs[k]
            key = (r.algorithm.iteration, r.target(), self._keys[k])
            groups.setdefault(key, []).append(k)
        return list(groups.values())

    # ---- one stretch of stacked steps ----
    def _stretch(self, group: list[int]) -> dict[int, bool]:
        """Step `group` as one stack to its next evaluation point; per run, False on divergence."""
        stacked = self._stack(group)
        rows = _Rows(self.runs, group, self.runs[group[0]].budget, self._iterate_limits())
        ok: dict[int, bool] = {}
        self._steps(stacked, rows, _SharedClock([self.runs[k] for k in group]), ok)
        return ok

    def _steps(self, stacked: Any, rows: _Rows, clock: _SharedClock, ok: dict[int, bool]) -> None:
        """Step the stack until every row has left it (its point reached, its budget spent, or diverged).

        The per-step checks (budget, finiteness, norm limits) are vectorised over the rows; only rows that
        leave are visited one by one."""
        first = self.runs[rows.index[0]]
        target, budget = first.target(), first.budget
        rows.allow_calls(stacked.problem)
        with np.errstate(all="ignore"):  # a row's overflow must not stop the others (see the module docstring)
            while rows.index:
                try:
                    stacked.step()
                except BudgetSpent:  # cut, as Run's step is (`Run._allow_calls`): every row ends where it got
                    ended = np.ones(len(rows.index), dtype=bool)
                    self._leave_timed(stacked, rows, clock, np.zeros(len(ended), dtype=bool), [], ended, ok)
                    return
                stacked.iteration += 1
                if budget.seconds is not None:
                    clock.lap()
                failed, metric = rows.diverged(stacked)
                if stacked.iteration >= target or (budget.iterations is not None
                                                   and stacked.iteration >= budget.iterations):
                    ended = np.ones(len(rows.index), dtype=bool)
                else:
                    calls = stacked.problem.counter.total_calls + stacked.problem.row_total_calls()
                    ended = rows.budget_spent(budget, calls, clock.pending())
                if failed.any() or ended.any():
                    self._leave_timed(stacked, rows, clock, failed, metric, ended, ok)

    def _leave_timed(self, stacked: Any, rows: _Rows, clock: _SharedClock, failed: np.ndarray, metric: list[str],
                     ended: np.ndarray, ok: dict[int, bool]) -> None:
        """`_leave` with the stack's seconds shared up to now among the rows that stepped."""
        clock.share()
        self._leave(stacked, rows, failed, metric, ended, ok)
        clock.runs = [self.runs[k] for k in rows.index]
        if rows.seconds is not None:
            rows.seconds = np.array([r.compute_time for r in clock.runs])

    def _iterate_limits(self) -> dict[str, np.ndarray]:
        """Every run's norm limits of x and y (`Run.iterate_limits`, fixed with the run's start values)."""
        if not self._norm_limits:
            self._norm_limits = {name: np.array([r.iterate_limits.get(name, np.inf) for r in self.runs])
                                 for name in ("x", "y")}
        return self._norm_limits

    def _stack(self, group: list[int]) -> Algorithm:
        """The stack of `group`: the one kept from the last round when its runs are still in it as they were
        (no copy of the state, no config columns again), else a new one."""
        kept, self._kept = self._kept, None
        members = [self.runs[k].algorithm for k in group]
        if kept is not None and kept[0] == tuple(group) and restack(kept[1], kept[2], members):
            return kept[1]
        return stack(members, self.varying)

    def _leave(self, stacked: Any, rows: _Rows, failed: np.ndarray, metric: list[str], ended: np.ndarray,
               ok: dict[int, bool]) -> None:
        """Write the leaving rows back into their runs (iterates, state, calls) and drop them from the stack."""
        view = stacked.problem
        calls, samples = list(view.counter.calls.items()), list(view.counter.samples.items())
        leaving = failed | ended
        if not view.row_calls and leaving.all() and not failed.any():  # the common case: all reach the point
            members = [self.runs[k] for k in rows.index]
            views = unstack_all(stacked, [r.algorithm for r in members])
            if views is not None:
                self._kept = (tuple(rows.index), stacked, views)
            for counts, added in ((([r.view.counter.calls for r in members]), calls),
                                  ([r.view.counter.samples for r in members], samples)):
                _add_each(counts, added)
            ok.update(dict.fromkeys(rows.index, True))
            rows.keep(np.array([], dtype=np.int64))
            return
        for i in np.flatnonzero(leaving):
            k = rows.index[i]
            run = self.runs[k]
            unstack(stacked, int(i), run.algorithm)
            counter = run.view.counter
            _add(counter.calls, calls)
            _add(counter.samples, samples)
            if view.row_calls:  # calls some runs made and others not (TTSA's HIA factors)
                _add(counter.calls, [(kind, int(n[i])) for kind, n in view.row_calls.items()])
                _add(counter.samples, [(kind, int(n[i])) for kind, n in view.row_samples.items()])
            ok[k] = not failed[i]
            if failed[i]:
                if metric[i]:
                    run.diverged_metric = metric[i]
                else:  # a non-finite value: the step that would have raised, not counted as done
                    run.fail(stacked.iteration)
                    run.algorithm.iteration = stacked.iteration - 1
        keep = np.flatnonzero(~leaving)
        if 0 < len(keep) < len(leaving):
            take(stacked, keep)
        rows.keep(keep)

    # ---- evaluation of a stack's runs at once ----
    def _stack_evaluable(self, runs: list[Run]) -> bool:
        """Whether `_stacked_metrics` gives these runs' whole metrics (else each evaluates alone)."""
        return bool(runs) and self.batched and runs[0].problem.constraints is None \
            and type(runs[0].algorithm).extra_points is Algorithm.extra_points and runs[0].algorithm.y is not None

    def _records_together(self, group: list[int], ok: dict[int, bool]) -> dict[int, dict[str, Any]]:
        """`Run.after_steps` of the runs of `group` that reached their evaluation point together, with the
        records made from stacked arrays in one go, by run; runs it leaves out (diverged, budget ended early,
        a metric non-finite or past its limit, diagnostics or counts of their own) take the per-run path."""
        ks = [k for k in group if ok[k]]
        runs = [self.runs[k] for k in ks]
        if not runs or not self._stack_evaluable(runs):
            return {}
        it = runs[0].algorithm.iteration  # the group shares its next point (`_groups`)
        if it < runs[0].target() or any(r.algorithm.iteration != it for r in runs):
            return {}
        start = time.perf_counter()
        f_opt = runs[0].f_opt()
        kept = self._kept
        if kept is not None and kept[0] == tuple(ks):  # the stack is these runs' iterates as they are
            X, Y = kept[1].x, kept[1].y
        else:
            X, Y = np.stack([r.algorithm.x for r in runs]), np.stack([r.algorithm.y for r in runs])
        try:
            columns = _metric_columns(runs[0].problem, X, Y, f_opt)
        except _NUMERIC_FAILURES:
            return {}
        if columns is None:
            return {}
        share = (time.perf_counter() - start) / len(runs)
        passing = np.isfinite(np.array(list(columns.values()))).all(axis=0)
        within, started = self._within_limits(ks, columns, it)
        keep = np.flatnonzero(passing & within)
        ks_all = tuple(ks)
        if len(keep) < len(runs):
            runs, ks = [runs[i] for i in keep.tolist()], [ks[i] for i in keep.tolist()]
        if not runs:
            return {}
        diags = _diagnostic_columns(runs, kept[1] if kept is not None and kept[0] == ks_all else None, keep)
        if diags is None:
            return {}  # nothing noted yet: every run takes the per-run path
        _skip_passed_points(runs)
        for r in runs:
            r.set_f_opt(f_opt)
            r.eval_time += share
        metric_cols = {name: (col if len(keep) == len(col) else col[keep]).tolist() for name, col in columns.items()}
        metric_cols.update({f"diag/{key}": col for key, col in diags.items()})
        records = _records(runs, it, metric_cols)
        if not started:  # Run._metrics_ok: a start value once, where missing
            for key in _watched(runs[0].divergence, columns):
                for r, v in zip(runs, np.abs(columns[key][keep]).tolist()):
                    r.start_values.setdefault(key, v)
        for r, rec in zip(runs, records):
            r.last_record = rec
        left = _budgets_left(runs)
        if left is not None:  # the same for all: no run's budget is spent, or every run's is
            if not left:
                for r in runs:
                    r.status = "finished"
                records = _finished(records)
            return dict(zip(ks, records))
        made = {}
        for k, r, rec in zip(ks, runs, records):
            if r.budget_left():
                made[k] = rec
            else:
                r.status = "finished"
                made[k] = {**rec, "status": "finished"}
        return made

    def _within_limits(self, ks: list[int], columns: dict[str, np.ndarray], iteration: int) -> tuple[np.ndarray, bool]:
        """Per run of `ks`, `Run._metrics_ok` of its record (without noting anything): every watched metric
        within its limit; and whether every run has every start value already. At iteration 0, or where a start
        value is missing, the record sets it and passes."""
        rule = self.runs[ks[0]].divergence
        passing = np.ones(len(ks), dtype=bool)
        if iteration == 0:
            return passing, False
        started = True
        for key in _watched(rule, columns):
            limit = self._limits.get(key)  # every run's, once every run has its start value (it stays)
            if limit is None:
                start = np.array([r.start_values.get(key, np.inf) for r in self.runs])
                limit = rule.factor * np.maximum(start, 1.0)
                if np.isfinite(start).all():
                    self._limits[key] = limit
            limit = limit[ks]
            started = started and bool(np.isfinite(limit).all())
            with np.errstate(invalid="ignore"):
                passing &= ~(np.abs(columns[key]) > limit)
        return passing, started

    def _evaluate_together(self, group: list[int]) -> None:
        """The metrics of `group`'s runs at their current points, computed as one stack with the problem's
        stacked ground truth and left in each run's `ready_metrics` (its next `_evaluate` uses them); the
        stack's evaluation seconds are divided among the runs. Runs whose records need more than
        `_point_metrics` gives (constraints, extra points) evaluate alone."""
        runs = [self.runs[k] for k in group]
        if not self._stack_evaluable(runs):
            return
        start = time.perf_counter()
        f_opt = runs[0].f_opt()
        for r in runs:
            r.set_f_opt(f_opt)  # one instance: its optimum is every run's
        try:
            metrics = _stacked_metrics(runs[0].problem, np.stack([r.algorithm.x for r in runs]),
                                       np.stack([r.algorithm.y for r in runs]), f_opt)
        except _NUMERIC_FAILURES:
            return  # each run evaluates alone and reports its own failure
        share = (time.perf_counter() - start) / len(runs)
        for r, m in zip(runs, metrics):
            r.ready_metrics = m
            r.eval_time += share

    # ---- a cohort: every running run in one stack, its state kept there from point to point ----
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
        self._cohort = _Cohort(ks, runs, stacked, _Rows(self.runs, ks, runs[0].budget, self._iterate_limits()))
        sync = self.sync  # one bound method for all (each is an object the garbage collector tracks)
        for r in runs:
            r.holder = sync

    def sync(self) -> None:
        """Write the state a cohort's stack holds for its runs into their `Run`s (a run's `state_dict`,
        `load_state_dict` and `advance` call it first, through `Run.holder`)."""
        cohort, self._cohort = self._cohort, None
        if cohort is not None:
            self._release(cohort)

    def _release(self, c: _Cohort) -> None:
        """The cohort's state into its runs: iterates and state (row views), counts, seconds, evaluation point."""
        stacked = c.stacked
        views = unstack_all(stacked, [r.algorithm for r in c.runs])
        view = stacked.problem
        _add_each([r.view.counter.calls for r in c.runs], list(view.counter.calls.items()))
        _add_each([r.view.counter.samples for r in c.runs], list(view.counter.samples.items()))
        if view.row_calls:  # calls some runs made and others not (TTSA's HIA factors)
            for i, r in enumerate(c.runs):
                _add(r.view.counter.calls, [(kind, int(n[i])) for kind, n in view.row_calls.items()])
                _add(r.view.counter.samples, [(kind, int(n[i])) for kind, n in view.row_samples.items()])
        last = c.last_records or [r.last_record for r in c.runs]
        for r, compute, cpu, evals, rec in zip(c.runs, c.compute.tolist(), c.cpu.tolist(), c.evals.tolist(), last):
            r.compute_time, r.cpu_time, r.eval_time, r.last_record = compute, cpu, evals, rec
            r.next_point = c.next_point
            r.holder = None
        stacked.problem = StackedView(view._problem, len(c.runs))  # the counts are the runs' now
        self._kept = (tuple(c.ks), stacked, views) if views is not None else None

    def _cohort_round(self, c: _Cohort) -> list[tuple[int, dict[str, Any]]]:
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

    def _break_cohort(self, c: _Cohort, failed: np.ndarray, metric: list[str],
                      at_point: bool) -> list[tuple[int, dict[str, Any]]]:
        """The cohort's runs back in their `Run`s at this step, the step's leaving rows out, the rest stepped on
        as a plain stack (`_steps`); the round's records."""
        self._cohort = None
        self._release(c)
        self._kept = None
        group = list(c.ks)
        rows = _Rows(self.runs, group, c.budget, self._iterate_limits())
        ended = np.ones(len(group), dtype=bool) if at_point else rows.budget_spent(c.budget, 0, 0.0)
        clock = _SharedClock(c.runs)
        ok: dict[int, bool] = {}
        self._leave_timed(c.stacked, rows, clock, failed, metric, ended, ok)
        if rows.index:
            self._steps(c.stacked, rows, clock, ok)
        out: list[tuple[int, dict[str, Any]]] = []
        self._finish_group(group, ok, out)
        self._form_cohort()
        return out

    def _cohort_records(self, c: _Cohort) -> list[tuple[int, dict[str, Any]]]:
        """The records of the cohort's point, made at once (`_records_together` without per-run state); a point
        whose records need a run's own path (a metric non-finite or past its limit, diagnostics that do not
        stack) ends the cohort and takes that path."""
        stacked, runs = c.stacked, c.runs
        it, n = stacked.iteration, len(runs)
        start = time.perf_counter()
        f_opt = runs[0].f_opt()
        try:
            columns = _metric_columns(runs[0].problem, stacked.x, stacked.y, f_opt)
        except _NUMERIC_FAILURES:
            columns = None
        diags = None if columns is None or stacked.problem.row_calls else _stacked_diagnostics(stacked, n)
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
            _add(into, list(base.items()))
            _add(into, list(added.items()))
        snapshot = counter.snapshot()
        metrics = {name: col.tolist() for name, col in columns.items()}
        metrics.update({f"diag/{key}": col for key, col in diags.items()})
        mode = {} if runs[0].time_mode is None else {"time_mode": runs[0].time_mode}
        records = _shared_records(snapshot, mode, it, [c.compute.tolist(), c.cpu.tolist(), c.evals.tolist()], metrics)
        c.last_records = records  # each run's last record, written into it with the rest of its state
        b = c.budget
        if (b.iterations is not None and it >= b.iterations) or (b.oracle_calls is not None
                                                                 and snapshot["calls/total"] >= b.oracle_calls):
            for r in runs:
                r.status = "finished"
            records = _finished(records)
            self.sync()
        return list(zip(c.ks, records))

    def _cohort_passes(self, c: _Cohort, columns: dict[str, np.ndarray]) -> bool:
        """Every metric of every run finite and within its divergence limit (`Run.evaluate`, `_metrics_ok`)."""
        if not np.isfinite(np.array(list(columns.values()))).all():
            return False
        rule = c.runs[0].divergence
        for key in _watched(rule, columns):
            limit = c.limits.get(key)
            if limit is None:
                limit = c.limits[key] = rule.factor * np.maximum([r.start_values.get(key, np.inf) for r in c.runs], 1.0)
            if not np.isfinite(limit).all():  # a start value not yet set: the per-run path sets it
                return False
            with np.errstate(invalid="ignore"):
                if (np.abs(columns[key]) > limit).any():
                    return False
        return True

    # ---- checkpoints: every run's own state ----
    def state_dict(self) -> dict[str, Any]:
        """Every run's `Run.state_dict()` (between rounds): a run resumes from it batched or alone."""
        self.sync()
        return {"runs": [r.state_dict() for r in self.runs]}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Resume from `state_dict()` output: finished runs stay finished, the others go on from their state."""
        if len(state["runs"]) != len(self.runs):
            raise ParameterError(f"batched runs: the state holds {len(state['runs'])} runs, not {len(self.runs)}")
        self.sync()
        self._kept, self._limits, self._norm_limits = None, {}, {}
        for run, s in zip(self.runs, state["runs"]):
            run.load_state_dict(s)


class _Cohort:
    """Every running run of a batch in one stack (row i: run ks[i]); between rounds their iterates, state and
    counts since it formed stay in the stack, their seconds and next evaluation point here."""

    def __init__(self, ks: list[int], runs: list[Run], stacked: Any, rows: _Rows) -> None:
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


def _diagnostic_columns(runs: list[Run], stacked: Any, keep: np.ndarray) -> dict[str, list[float]] | None:
    """The diagnostics of `runs` (rows `keep` of `stacked`, when given, holds them all) as one list per key;
    None when the runs' keys differ."""
    if stacked is not None:
        columns = _stacked_diagnostics(stacked, stacked.problem.count)
        if columns is not None:
            return {key: col if len(keep) == len(col) else [col[i] for i in keep.tolist()]
                    for key, col in columns.items()}
    diags = [r.algorithm.diagnostics() for r in runs]
    keys = list(diags[0])
    if any(list(d) != keys for d in diags):
        return None
    return {key: [float(d[key]) for d in diags] for key in keys}


def _stacked_diagnostics(stacked: Any, n: int) -> dict[str, list[float]] | None:
    """`diagnostics()` of the stack's n runs as one list per key (a number shared by all, or one per row, as
    the step's arithmetic leaves it); None when a value has another shape (then each run gives its own)."""
    try:
        diags = stacked.diagnostics()
    except (TypeError, ValueError):
        return None
    out = {}
    for key, value in diags.items():
        a = np.asarray(value, dtype=float)
        if a.size == 1:
            out[key] = [float(a.reshape(()))] * n
        elif a.shape in ((n,), (n, 1)):
            out[key] = a.reshape(n).tolist()
        else:
            return None
    return out


class _Rows:
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
        self.screens, self.floors = _screens(self.limits)

    def keep(self, rows: np.ndarray) -> None:
        self.index = [self.index[i] for i in rows]
        self.calls = None if self.calls is None else self.calls[rows]
        self.seconds = None if self.seconds is None else self.seconds[rows]
        self.limits = {name: v[rows] for name, v in self.limits.items()}
        self.screens, self.floors = _screens(self.limits)

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
        if others_finite and all(_sum_of_squares(v) < self.floors[name] for name, v in iterates.items()):
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


def _screens(limits: dict[str, np.ndarray]) -> tuple[dict[str, np.ndarray], dict[str, float]]:
    """Per iterate, squared norms below which a row is surely finite, below DIVERGENCE_NORM and within its limit
    (a margin of 1e-12 over the rounding of the square root): one comparison per step in the common case; and
    the smallest of them, less a margin of 1e-6 over the rounding of a sum of squares, against which the sum
    over all rows is compared (a sum below it leaves every row's below its screen)."""
    screens = {name: (np.minimum(limit, DIVERGENCE_NORM) * (1 - 1e-12)) ** 2 for name, limit in limits.items()}
    return screens, {name: float(s.min()) * (1 - 1e-6) if len(s) else 0.0 for name, s in screens.items()}


def _sum_of_squares(v: np.ndarray) -> float:
    """Σ v² over every entry (inf or NaN when one is not finite or the sum overflows)."""
    flat = v.reshape(-1)
    return float(flat @ flat)


def _finished(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Copies of `records` with status "finished" ({**rec, "status": ...} of each, by a dict copy: faster)."""
    out = [rec.copy() for rec in records]
    for rec in out:
        rec["status"] = "finished"
    return out


def _add(into: dict[str, int], counts: list[tuple[str, int]]) -> None:
    """into += counts, kind by kind (Counter.update's generality costs ~10 µs a call)."""
    for kind, n in counts:
        into[kind] = into.get(kind, 0) + n


def _add_each(counts: list[dict[str, int]], added: list[tuple[str, int]]) -> None:
    """`_add(c, added)` for every c: where all are equal (runs that stepped together from one start), the
    sum is made once and written into each."""
    first = counts[0]
    if all(map(dict.__eq__, counts, itertools.repeat(first))):
        total = dict(first)
        _add(total, added)
        for c in counts:
            dict.update(c, total)  # a Counter's own update adds (and costs ~10 µs)
    else:
        for c in counts:
            _add(c, added)


def _matrix(v: np.ndarray | None, rows: int) -> np.ndarray | None:
    return None if v is None else v.reshape(rows, -1)


class _SharedClock:
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


def _stacked_metrics(p: BilevelProblem, X: np.ndarray, Y: np.ndarray, f_opt: float) -> list[dict[str, float]]:
    """`Run._metrics` of each row (algorithms.run._point_metrics and F_gap), from stacked ground truth."""
    with np.errstate(all="ignore"):
        Ys, G = _ground_truth(p, X)
        F = p.f_rows(X, Ys)
        gsq = np.einsum("ij,ij->i", G, G)
        D = Y - Ys
        esq = np.einsum("ij,ij->i", D, D)
        extra = p.metrics_rows(X, Y)
    out = []
    for i in range(len(X)):
        m = {"F": float(F[i]), "grad_F_sq": float(gsq[i]), "y_err_sq": float(esq[i])}
        m.update({k: float(v) for k, v in extra[i].items()})
        if math.isfinite(f_opt):
            m["F_gap"] = m["F"] - f_opt
        out.append(m)
    return out


def _ground_truth(p: BilevelProblem, X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """y*(x) and ∇F(x) of each row: stacked where the family has a stacked ∇F, else row by row, y* then ∇F
    (a problem that keeps y* of its last x, as the logistic ones do, then solves once per row, as alone)."""
    if type(p).grad_F_rows is not BilevelProblem.grad_F_rows:
        Ys = p.y_star_rows(X)
        return Ys, p.grad_F_rows(X, Ys)
    pairs = [(p.y_star(x), p.grad_F(x)) for x in X]
    return np.array([ys for ys, _ in pairs]), np.array([g for _, g in pairs])


def _metric_columns(p: BilevelProblem, X: np.ndarray, Y: np.ndarray, f_opt: float) -> dict[str, np.ndarray] | None:
    """`_stacked_metrics` as one array per metric, in record order; None when the problem flags points where
    g is not strongly convex (those records take the per-run path)."""
    with np.errstate(all="ignore"):
        Ys, G = _ground_truth(p, X)
        F = np.asarray(p.f_rows(X, Ys), dtype=float)
        D = Y - Ys
        columns = {"F": F, "grad_F_sq": np.einsum("ij,ij->i", G, G), "y_err_sq": np.einsum("ij,ij->i", D, D)}
        extra = p.metrics_rows(X, Y) if type(p).metrics is not BilevelProblem.metrics else [{}]
        for key in extra[0]:
            if key == NOT_STRONGLY_CONVEX:
                return None
            columns[key] = np.array([float(e[key]) for e in extra])
        if math.isfinite(f_opt):
            columns["F_gap"] = F - f_opt
    return columns




def _skip_passed_points(runs: list[Run]) -> None:
    """`Run.skip_passed_points` of each run; done once for runs sharing the first's points and place."""
    first = runs[0]
    points, before = first.points, first.next_point
    first.skip_passed_points()
    it = first.algorithm.iteration
    for r in runs:
        if r.points is points and r.next_point == before and r.algorithm.iteration == it:
            r.next_point = first.next_point
        else:
            r.skip_passed_points()


def _budgets_left(runs: list[Run]) -> bool | None:
    """`Run.budget_left`, the same for every run, when their budget (one object) counts iterations only and
    they are at one iteration; else None (ask each run)."""
    first = runs[0]
    b, it = first.budget, first.algorithm.iteration
    if b.oracle_calls is not None or b.seconds is not None or first.horizon is not None:
        return None
    if any(r.budget is not b or r.algorithm.iteration != it for r in runs):
        return None
    return first.budget_left()


def _watched(rule: Divergence, columns: Mapping[str, Any]) -> list[str]:
    """The keys `Divergence.watched` picks from a record with these keys, in its order."""
    names = set(rule.metrics)
    if "objective" in names:
        names.add("F_gap" if "F_gap" in columns else "F")
    return [k for k in sorted(names) if k in columns]


def _records(runs: list[Run], iteration: int, metrics: dict[str, list[float]]) -> list[dict[str, Any]]:
    """The records `Run.evaluate` makes for `runs` from metric (and diagnostic) columns in record order, each
    dict built from one row of columns."""
    n = len(runs)
    first = runs[0].view.counter
    same = dict.__eq__  # strict (a kind counted 0 differs from one never counted): Counter's == is ~10x slower
    mode = {} if runs[0].time_mode is None else {"time_mode": runs[0].time_mode}
    times = [[r.compute_time for r in runs], [r.cpu_time for r in runs], [r.eval_time for r in runs]]
    if all(map(same, [r.view.counter.calls for r in runs], itertools.repeat(first.calls))) \
            and all(map(same, [r.view.counter.samples for r in runs], itertools.repeat(first.samples))):
        return _shared_records(first.snapshot(), mode, iteration, times, metrics)
    snaps = [r.view.counter.snapshot() for r in runs]
    keys = ("iteration", "time", "cpu_time", "eval_time", "status", *snaps[0], *metrics, *mode)
    columns = [[iteration] * n, *times, ["running"] * n, *([s[key] for s in snaps] for key in snaps[0]),
               *metrics.values(), *([v] * n for v in mode.values())]
    return [dict(zip(keys, row)) for row in zip(*columns)]


def _shared_records(snapshot: dict[str, int], mode: dict[str, str], iteration: int, times: list[list[float]],
                    metrics: dict[str, list[float]]) -> list[dict[str, Any]]:
    """Records of runs with the same counts: what all share, in record order, filled in per run from the time
    columns (compute, CPU, evaluation) and metric columns (a dict's copy keeps its key order; filled column by
    column, ~3x faster than row by row)."""
    template = {"iteration": iteration, "time": 0.0, "cpu_time": 0.0, "eval_time": 0.0, "status": "running",
                **snapshot, **dict.fromkeys(metrics, 0.0), **mode}
    out = [template.copy() for _ in range(len(times[0]))]
    for key, column in zip(("time", "cpu_time", "eval_time", *metrics), (*times, *metrics.values())):
        for rec, value in zip(out, column):
            rec[key] = value
    return out


def run_batched(algorithm: str, problem: Any, configs: Sequence[Config], seeds: Sequence[int],
                budget: Budget | Mapping[str, Any] | None = None, n_evals: int = 30,
                divergence: Divergence | Mapping[str, Any] | None = None) -> Iterator[tuple[int, dict[str, Any]]]:
    """Yield (k, record) for K runs of `algorithm` on one `problem` instance: run k's records are those of
    `algorithms.run(algorithm, problem, configs[k], seeds[k], budget, n_evals, divergence)`."""
    return BatchedRuns(algorithm, problem, configs, seeds, budget, n_evals, divergence).records()
