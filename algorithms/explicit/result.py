"""What an engine returns: every run's metrics and diagnostics at the evaluation points, as arrays, and the
records the run loop would give (`Result.records`), made from those arrays at the end."""
from __future__ import annotations

import collections
import dataclasses
import functools
import itertools
import operator
from collections.abc import Callable, Iterable, Iterator
from typing import Any, NamedTuple

import numpy as np

from algorithms.base import AlgorithmConfig
from algorithms.explicit.counts import Counts
from algorithms.explicit.definition import definition
from algorithms.explicit.divergence import DEFAULT, ITERATE_REASONS, NEVER, first_bad_point, watched
from algorithms.run import Budget, Divergence, eval_points

#: Metrics every engine records at an evaluation point (problems/pure.py computes them).
METRICS = ("F", "F_gap", "grad_F_sq", "y_err_sq")
#: The run loop's seconds in a record: the steps' wall and CPU seconds and the evaluations' wall seconds, each
#: cumulative from the start (algorithms/run.py).
CLOCKS = ("time", "cpu_time", "eval_time")
#: The engines' value of each run's own call units so far at a point (`Definition.counted`), taken out of the values.
UNITS = "count/units"


@functools.lru_cache(maxsize=64)
def points(iterations: int, n_evals: int = 30) -> tuple[int, ...]:
    """The run loop's evaluation points for an iteration budget (algorithms.run.eval_points)."""
    return tuple(eval_points(Budget.from_dict({"iterations": iterations}), n_evals))


@dataclasses.dataclass
class Result:
    """K runs of one algorithm: `values[name]` is (len(points), K) for each metric and `diag/<name>`;
    `state` the final state with a leading K axis (a per-run number as a (K, 1) column);
    `seconds` the engine's time to run (compile excluded), `compile_seconds` the JAX engine's compile time."""

    algorithm: str
    configs: list[AlgorithmConfig]
    points: tuple[int, ...]
    values: dict[str, np.ndarray]
    state: Any
    engine: str
    seconds: float = 0.0
    compile_seconds: float = 0.0

    #: Per run, the iteration at which its x or y went out of bounds (divergence.NEVER: never).
    failed: np.ndarray | None = None
    #: The runs' oracle counts (algorithms.explicit.counts; one for all, as a stack's runs share their loop counts):
    #: the records' `calls/*` and `samples/*`, as the run loop counts them. None: records without them.
    counts: Counts | None = None
    #: The records' `time`, `cpu_time` and `eval_time` at each point, (len(points), K) each (CLOCKS), and their
    #: `time_mode` (None: a run's own seconds, as `algorithms.run` measures them). None: records without seconds.
    clock: dict[str, np.ndarray] | None = None
    time_mode: str | None = None
    #: The divergence rule the records end runs by (the run loop's default unless a study sets its own).
    divergence: Divergence = DEFAULT
    #: Per run, why its iterates failed (`divergence.ITERATE_REASONS`' codes; 0: they did not).
    failed_reason: np.ndarray | None = None
    #: One unit's calls a step, in `counts.names`' order, for runs that make calls of their own (`Definition.counted`):
    #: each run's records add its units so far times these. None: every run counts alike.
    unit_counts: np.ndarray | None = None
    #: Per run, the records that replace its record at the last point (an oracle-call budget's cut step,
    #: call_budget.py). None: the last point's records end the runs.
    ends: dict[int, list[dict[str, Any]]] | None = None

    def __post_init__(self) -> None:
        self.units = self.values.pop(UNITS, None)  # (len(points), K): each run's own units so far
        gap, start = self.values.get("F_gap"), self.values["F"][0]
        if gap is not None and np.all(np.isnan(gap[0]) | ~np.isfinite(start)):  # no known optimum: no gap
            del self.values["F_gap"]

    def _grown(self, k: int, rec: dict[str, Any]) -> str:
        """The first watched metric of run k past its limit in `rec`."""
        factor = self.divergence.factor
        return next(n for n in watched(self.values, self.divergence)
                    if abs(rec[n]) > factor * max(abs(self.values[n][0, k]), 1.0))

    def _iterates_reason(self, k: int) -> str:
        """Why run k's iterates failed, as the run loop says it ("x non-finite", "‖x‖", ...)."""
        code = 0.0 if self.failed_reason is None else float(self.failed_reason[k])
        return ITERATE_REASONS.get(code, "iterates")

    def _nonfinite(self, k: int, i: int) -> str:
        """"<metric> non-finite" for the first of run k's metrics not finite at point i, as the run loop says it."""
        bad = next(n for n in self.values if not n.startswith("diag/") and not np.isfinite(self.values[n][i, k]))
        return f"{bad} non-finite"

    def _ends(self) -> tuple[list[float], list[int], list[int]]:
        failed = [NEVER] * len(self.configs) if self.failed is None else np.ravel(self.failed).tolist()
        nonfinite, grown = first_bad_point(self.values, self.divergence)
        return failed, nonfinite.tolist(), grown.tolist()

    @property
    def diverged_at(self) -> list[int | None]:
        """Per run, the iteration its divergence was seen at (None: it did not diverge)."""
        out: list[int | None] = [None] * len(self.configs)
        for k, rec in self.records():
            if rec["status"] == "diverged":
                out[k] = rec["diverged_at"]
        return out

    def _extras(self) -> tuple[list[str], Callable[[int, int], tuple[list[Any], list[bool]]]]:
        """The record fields beside the metrics (oracle counts, seconds, time_mode) and, for point i at iteration
        it, their values (each one value for every run, or a list of every run's) and which are one value."""
        clocks = [_Column(c) for c in self.clock.values()] if self.clock else []
        mode = [self.time_mode] if clocks and self.time_mode else []
        names = [*(self.counts.names if self.counts else ()), *(self.clock or ()), *(["time_mode"] if mode else [])]

        def values(i: int, it: int) -> tuple[list[Any], list[bool]]:
            counted: list[Any] = list(self.counts.at(it)) if self.counts else []
            same = [True] * len(counted)
            if counted and self.unit_counts is not None and self.units is not None:  # each run's own calls added
                units = np.rint(self.units[i]).astype(np.int64).tolist()
                per_unit = self.unit_counts.tolist()
                counted = [[v + per * u for u in units] for v, per in zip(counted, per_unit)]
                same = [False] * len(counted)
            return counted + [c.at(i) for c in clocks] + mode, same + [c.same[i] for c in clocks] + [True] * len(mode)

        return names, values

    @property
    def evaluated(self) -> int:
        """The points with values: all of them, or the first ones of a stack computed so far (jax_engine.py)."""
        return len(self.values["F"])

    def records(self, since: int = 0) -> Iterator[tuple[int, dict[str, Any]]]:
        """(run index, record) pairs point by point (`_points`), a run's last one replaced by its `ends`. Each
        record is the caller's to keep or change: no later record is made from it."""
        pairs = itertools.chain.from_iterable(self._points(since))  # flat in C: no generator step per record
        return self._with_ends(pairs) if self.ends else pairs

    def _with_ends(self, pairs: Iterator[tuple[int, dict[str, Any]]]) -> Iterator[tuple[int, dict[str, Any]]]:
        for k, rec in pairs:
            if rec["status"] == "finished" and k in self.ends:
                yield from ((k, dict(end)) for end in self.ends[k])  # kept for the next call: a copy each
            else:
                yield k, rec

    def _points(self, since: int = 0) -> Iterator[Iterable[tuple[int, dict[str, Any]]]]:
        """Per point, its (run index, record) pairs, as the run loop makes them: status "running", "finished" at
        the last point, or "diverged" where the run loop's rule ends a run (algorithms.explicit.divergence;
        `diverged_metric` as the run loop names it: "x non-finite", "‖x‖" (y's alike), "<metric> non-finite" or the
        grown metric); then its records stop. Those of the points evaluated (`evaluated`), from point `since` on
        (the earlier ones were sent when a stack had computed only them)."""
        extra, extra_values = self._extras()
        every = ["iteration", "status", *self.values, *extra]
        columns = [_Column(self.values[n]) for n in self.values]
        diagnostics_from = definition(self.algorithm).diagnostics_from
        metrics = [j for j, n in enumerate(self.values) if not n.startswith("diag/")]
        failed, nonfinite, grown = self._ends()
        k_runs, last = len(self.configs), len(self.points) - 1
        failed_at = [len(self.points) if f == NEVER else int(np.searchsorted(self.points, f)) for f in failed]
        # A run's records stop at the point it ends at (a run that ended before `since` is done). Before the first
        # point any run ends at, every run's record is its row: made without per-run checks.
        ends = list(map(min, failed_at, nonfinite, grown))
        done, first_end = [e < since for e in ends], min(ends, default=0)
        before: _Point | None = None  # the point before: a run that ends repeats its record there
        for i, it in enumerate(self.points[:self.evaluated]):
            if i < since - 1:
                continue
            status = "finished" if i == last else "running"
            names, shown = every, columns
            if it < diagnostics_from:  # no diagnostics yet (an algorithm whose numbers exist only after a step)
                names = every[:2] + [every[2 + j] for j in metrics] + extra
                shown = [columns[j] for j in metrics]
            more, more_same = extra_values(i, it)
            point = _Point(tuple(names), [it, status, *(c.at(i) for c in shown), *more],
                           (True, True, *(c.same[i] for c in shown), *more_same))
            if i >= since:
                yield enumerate(_rows(*point, k_runs)) if i < first_end else \
                    self._ending(i, it, point, before, done, (failed, nonfinite, grown))
            before = point

    def _ending(self, i: int, it: int, point: _Point, before: _Point | None, done: list[bool],
                bad: tuple[list[float], list[int], list[int]]) -> list[tuple[int, dict[str, Any]]]:
        """Point i's pairs once runs may end there: each going run's record, or, where the run loop's rule ends a
        run, its record at the point `before` again as "diverged" (or its row here, when a watched metric grew);
        `done` marks the runs ended. `bad`: `_ends()`."""
        failed, nonfinite, grown = bad
        out = []
        for k, row in enumerate(zip(*([v] * len(done) if s else v for v, s in zip(point.values, point.same)))):
            if done[k]:
                continue
            why, at = None, it
            if failed[k] != NEVER and failed[k] <= it:
                why, at = self._iterates_reason(k), int(failed[k])
            elif nonfinite[k] == i:
                why = self._nonfinite(k, i)
            if why is not None:
                done[k] = True
                again = {"iteration": 0} if before is None else before.record(k)
                out.append((k, {**again, "status": "diverged", "diverged_at": at, "diverged_metric": why}))
                continue
            rec = dict(zip(point.names, row))
            if grown[k] == i:
                done[k] = True
                rec = {**rec, "status": "diverged", "diverged_at": it, "diverged_metric": self._grown(k, rec)}
            out.append((k, rec))
        return out


class _Point(NamedTuple):
    """A point's record fields: their names, values (one for every run where `same`, else a list of every run's)."""

    names: tuple[str, ...]
    values: list[Any]
    same: tuple[bool, ...]

    def record(self, k: int) -> dict[str, Any]:
        """Run k's record at this point."""
        return dict(zip(self.names, (v if one else v[k] for v, one in zip(self.values, self.same))))


class _Column:
    """A (points, K) array read a point at a time: one Python value where every run has the same (`same[i]`: equal
    and of one sign, so that a run's −0.0 stays its own), else every run's, a list of Python numbers."""

    def __init__(self, values: np.ndarray) -> None:
        self.values = values
        first = values[:, :1]
        self.same = ((values == first) & (np.signbit(values) == np.signbit(first))).all(axis=1).tolist()

    def at(self, i: int) -> Any:
        return self.values[i, 0].item() if self.same[i] else self.values[i].tolist()


def _rows(names: tuple[str, ...], values: list[Any], same: tuple[bool, ...], k: int) -> list[dict[str, Any]]:
    """Every run's record at one point: {names[j]: values[j]} where same[j] (one value for every run), else
    {names[j]: values[j][run]}; a copy of the values every run shares (oracle counts, status, seconds: ~2/3 of a
    record's fields) with each run's own set in it, a field at a time over the k copies by C-level maps (26k records
    of 28 fields: ~7x faster than a dict display each, ~10% faster than a Python function setting a record's own)."""
    shared = _record_maker(names)(*(v if one else v[0] for v, one in zip(values, same)))  # own fields' places too
    records = list(map(dict.copy, itertools.repeat(shared, k)))
    for name, value, one in zip(names, values, same):
        if not one:
            collections.deque(map(operator.setitem, records, itertools.repeat(name, k), value), maxlen=0)
    return records


@functools.lru_cache(maxsize=64)
def _record_maker(names: tuple[str, ...]) -> Callable[..., dict[str, Any]]:
    """A function of len(names) values returning the record {names[0]: value 0, ...}, a plain dict whose copies
    (`_rows`: one per run and point) share its table of keys.

    CPython keeps the keys of an instance's `__dict__` in one table shared by the instances of its class (a
    "split" dict, up to 30 keys), and a copy of such a dict shares that table too: it allocates only its values.
    So the record a point's copies are made from is the `__dict__` of an instance of a class of its own (one per
    set of names). A record of 28 fields is then 296 bytes instead of 832, and 26k of them are made and freed in
    ~6.4 ms instead of ~8.2 (Python 3.11). They are dicts as any other: equal, ordered, JSON- and pickle-able;
    where CPython does not share the keys, they are ordinary dicts."""
    layout = type("Record", (), {})

    def make(*values: Any) -> dict[str, Any]:
        record = layout().__dict__
        record.update(zip(names, values))
        return record

    return make


def shared_clock(step: list[float], cpu: list[float], evaluation: list[float], k: int) -> dict[str, np.ndarray]:
    """A stack's cumulative seconds at each point divided among its k runs: (len(points), k) arrays named as
    CLOCKS."""
    return {n: np.repeat(np.asarray(v, dtype=float).reshape(-1, 1) / k, k, axis=1)
            for n, v in zip(CLOCKS, (step, cpu, evaluation))}


def collect(per_point: list[dict[str, Any]], k: int) -> dict[str, np.ndarray]:
    """Values per point (each a number, (K,) or (K, 1)) as (len(points), K) arrays."""
    return {n: np.stack([np.broadcast_to(np.asarray(p[n], dtype=float).reshape(-1), (k,)) for p in per_point])
            for n in per_point[0]}
