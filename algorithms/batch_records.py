"""Records of a stack's runs made at once (algorithms.batched): metric columns from stacked ground truth, the
diagnostics as columns, counts added per run, and `StackRecords`, the part of `BatchedRuns` that evaluates
the runs of a stack that reached their point together and makes their records (the same records each `Run`
makes alone, in its order: `Run.after_steps`, `Run.evaluate`)."""
from __future__ import annotations

import itertools
import math
import time
from collections.abc import Mapping
from typing import Any

import numpy as np

from algorithms.base import Algorithm
from algorithms.run import _NUMERIC_FAILURES, Divergence, Run
from problems.base import NOT_STRONGLY_CONVEX, BilevelProblem


class StackRecords:
    """Evaluation of a stack's runs at once; a mixin of `algorithms.batched.BatchedRuns` (its runs, whether
    it batches, the stack kept from the last round and every run's divergence limits)."""

    runs: list[Run]
    batched: bool
    _kept: Any
    _limits: dict[str, np.ndarray]

    def _stack_evaluable(self, runs: list[Run]) -> bool:
        """Whether `stacked_metrics` gives these runs' whole metrics (else each evaluates alone)."""
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
            columns = metric_columns(runs[0].problem, X, Y, f_opt)
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
        diags = diagnostic_columns(runs, kept[1] if kept is not None and kept[0] == ks_all else None, keep)
        if diags is None:
            return {}  # nothing noted yet: every run takes the per-run path
        skip_passed_points(runs)
        for r in runs:
            r.set_f_opt(f_opt)
            r.eval_time += share
        metric_cols = {name: (col if len(keep) == len(col) else col[keep]).tolist() for name, col in columns.items()}
        metric_cols.update({f"diag/{key}": col for key, col in diags.items()})
        records = make_records(runs, it, metric_cols)
        if not started:  # Run._metrics_ok: a start value once, where missing
            for key in watched_keys(runs[0].divergence, columns):
                for r, v in zip(runs, np.abs(columns[key][keep]).tolist()):
                    r.start_values.setdefault(key, v)
        for r, rec in zip(runs, records):
            r.last_record = rec
        left = budgets_left(runs)
        if left is not None:  # the same for all: no run's budget is spent, or every run's is
            if not left:
                for r in runs:
                    r.status = "finished"
                records = finished_copies(records)
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
        for key in watched_keys(rule, columns):
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
            metrics = stacked_metrics(runs[0].problem, np.stack([r.algorithm.x for r in runs]),
                                       np.stack([r.algorithm.y for r in runs]), f_opt)
        except _NUMERIC_FAILURES:
            return  # each run evaluates alone and reports its own failure
        share = (time.perf_counter() - start) / len(runs)
        for r, m in zip(runs, metrics):
            r.ready_metrics = m
            r.eval_time += share


def diagnostic_columns(runs: list[Run], stacked: Any, keep: np.ndarray) -> dict[str, list[float]] | None:
    """The diagnostics of `runs` (rows `keep` of `stacked`, when given, holds them all) as one list per key;
    None when the runs' keys differ."""
    if stacked is not None:
        columns = stacked_diagnostics(stacked, stacked.problem.count)
        if columns is not None:
            return {key: col if len(keep) == len(col) else [col[i] for i in keep.tolist()]
                    for key, col in columns.items()}
    diags = [r.algorithm.diagnostics() for r in runs]
    keys = list(diags[0])
    if any(list(d) != keys for d in diags):
        return None
    return {key: [float(d[key]) for d in diags] for key in keys}


def stacked_diagnostics(stacked: Any, n: int) -> dict[str, list[float]] | None:
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


def finished_copies(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Copies of `records` with status "finished" ({**rec, "status": ...} of each, by a dict copy: faster)."""
    out = [rec.copy() for rec in records]
    for rec in out:
        rec["status"] = "finished"
    return out


def add_counts(into: dict[str, int], counts: list[tuple[str, int]]) -> None:
    """into += counts, kind by kind (Counter.update's generality costs ~10 µs a call)."""
    for kind, n in counts:
        into[kind] = into.get(kind, 0) + n


def add_each(counts: list[dict[str, int]], added: list[tuple[str, int]]) -> None:
    """`add_counts(c, added)` for every c: where all are equal (runs that stepped together from one start), the
    sum is made once and written into each."""
    first = counts[0]
    if all(map(dict.__eq__, counts, itertools.repeat(first))):
        total = dict(first)
        add_counts(total, added)
        for c in counts:
            dict.update(c, total)  # a Counter's own update adds (and costs ~10 µs)
    else:
        for c in counts:
            add_counts(c, added)


def stacked_metrics(p: BilevelProblem, X: np.ndarray, Y: np.ndarray, f_opt: float) -> list[dict[str, float]]:
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


def metric_columns(p: BilevelProblem, X: np.ndarray, Y: np.ndarray, f_opt: float) -> dict[str, np.ndarray] | None:
    """`stacked_metrics` as one array per metric, in record order; None when the problem flags points where
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




def skip_passed_points(runs: list[Run]) -> None:
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


def budgets_left(runs: list[Run]) -> bool | None:
    """`Run.budget_left`, the same for every run, when their budget (one object) counts iterations only and
    they are at one iteration; else None (ask each run)."""
    first = runs[0]
    b, it = first.budget, first.algorithm.iteration
    if b.oracle_calls is not None or b.seconds is not None or first.horizon is not None:
        return None
    if any(r.budget is not b or r.algorithm.iteration != it for r in runs):
        return None
    return first.budget_left()


def watched_keys(rule: Divergence, columns: Mapping[str, Any]) -> list[str]:
    """The keys `Divergence.watched` picks from a record with these keys, in its order."""
    names = set(rule.metrics)
    if "objective" in names:
        names.add("F_gap" if "F_gap" in columns else "F")
    return [k for k in sorted(names) if k in columns]


def make_records(runs: list[Run], iteration: int, metrics: dict[str, list[float]]) -> list[dict[str, Any]]:
    """The records `Run.evaluate` makes for `runs` from metric (and diagnostic) columns in record order, each
    dict built from one row of columns."""
    n = len(runs)
    first = runs[0].view.counter
    same = dict.__eq__  # strict (a kind counted 0 differs from one never counted): Counter's == is ~10x slower
    mode = {} if runs[0].time_mode is None else {"time_mode": runs[0].time_mode}
    times = [[r.compute_time for r in runs], [r.cpu_time for r in runs], [r.eval_time for r in runs]]
    if all(map(same, [r.view.counter.calls for r in runs], itertools.repeat(first.calls))) \
            and all(map(same, [r.view.counter.samples for r in runs], itertools.repeat(first.samples))):
        return shared_records(first.snapshot(), mode, iteration, times, metrics)
    snaps = [r.view.counter.snapshot() for r in runs]
    keys = ("iteration", "time", "cpu_time", "eval_time", "status", *snaps[0], *metrics, *mode)
    columns = [[iteration] * n, *times, ["running"] * n, *([s[key] for s in snaps] for key in snaps[0]),
               *metrics.values(), *([v] * n for v in mode.values())]
    return [dict(zip(keys, row)) for row in zip(*columns)]


def shared_records(snapshot: dict[str, int], mode: dict[str, str], iteration: int, times: list[list[float]],
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

