"""A report's per-run numbers read from the store's columns for every run at once: final values, first values,
convergence and stability as NumPy arrays, and the runs table's final-value columns, with no dict made per run.

A run read from the store's columns (`ColumnRun`, its final record its last record) is read by row index; any other
run (a run given as dicts, a JSON-lines shard's run with its own final record) as `analysis` and `tables` read it, so
both give the same numbers.
"""
from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from sweep.report import analysis as an
from sweep.results.runs import RunData, field, problem_label
from sweep.study.model import ReportOptions


class RunIndex:
    """Where each run's first and last records are in the one `RunColumns` most runs are read from (`fast`), and
    the others (read run by run)."""

    def __init__(self, runs: Sequence[RunData]) -> None:
        n = len(runs)
        self.runs = runs
        self.source: Any = None
        self.first, self.last = np.zeros(n, dtype=np.int64), np.zeros(n, dtype=np.int64)
        self.fast = np.zeros(n, dtype=bool)
        for i, r in enumerate(runs):
            bounds = getattr(r.records, "bounds", None)
            is_last = getattr(r, "final_is_last", None)
            if bounds is None or is_last is None or not is_last():
                continue
            src, start, stop = bounds()
            if stop <= start or (self.source is not None and src is not self.source):
                continue
            self.source = src
            self.first[i], self.last[i], self.fast[i] = start, stop - 1, True
        self.slow = np.flatnonzero(~self.fast).tolist()
        self.status = np.array([r.status for r in runs], dtype=object)

    @classmethod
    def of(cls, runs: Sequence[RunData]) -> RunIndex:
        """The index of `runs`, made once for the same list of runs (the tables and figures of one report)."""
        global _LAST
        if _LAST is None or _LAST.runs is not runs or len(_LAST.runs) != len(runs):
            _LAST = cls(runs)
        return _LAST

    def numbers(self, name: str, which: str) -> np.ndarray:
        """Each fast run's value of `name` in its first or last record as floats (NaN where none; others NaN)."""
        out = np.full(len(self.runs), np.nan)
        if self.source is not None and self.fast.any():
            rows = (self.first if which == "first" else self.last)[self.fast]
            out[self.fast] = self.source.numbers(name, rows)
        return out


    def every_number(self, name: str) -> np.ndarray:
        """Every record's value of `name` of every run, as floats (NaN where none, or not a number)."""
        parts = []
        if self.source is not None and self.fast.any():
            first, last = self.first[self.fast], self.last[self.fast]
            lengths = last - first + 1
            rows = np.repeat(first - np.cumsum(np.r_[0, lengths[:-1]]), lengths) + np.arange(lengths.sum())
            parts.append(self.source.numbers(name, rows))
        for i in self.slow:
            parts.append(np.array([_number(v) for v in field(self.runs[i].records, name)], dtype=float))
        return np.concatenate(parts) if parts else np.array([])


_LAST: RunIndex | None = None  # the last index made by `RunIndex.of` (it holds its runs: their ids stay theirs)


def forget_groups() -> None:
    """Let go of the last configuration groups once the tables that share them are made."""
    global _LAST_GROUPS
    _LAST_GROUPS = None


def forget() -> None:
    """Let go of the last index and configuration groups (and the runs they hold) once a report is built."""
    global _LAST, _LAST_GROUPS
    _LAST = _LAST_GROUPS = None


def _number(v: Any) -> float:
    return float(v) if isinstance(v, (int, float)) else math.nan


def final_values(index: RunIndex, metric: str, goal: str) -> np.ndarray:
    """`analysis.final_value` of every run: its final `metric`, ±inf when diverged, NaN when failed or missing."""
    runs = index.runs
    out = index.numbers(metric, "last")
    for i in index.slow:
        out[i] = _number((runs[i].final or {}).get(metric))
    out[index.status != "finished"] = np.nan
    out[index.status == "diverged"] = math.inf if goal == "min" else -math.inf
    return out


def converged(index: RunIndex, opts: ReportOptions) -> np.ndarray:
    """`analysis.converged` of every run (the report options' converged_metric, converged_below, converged_relative)."""
    name, below = opts.converged_metric, opts.converged_below
    first, last = index.numbers(name, "first"), index.numbers(name, "last")
    with np.errstate(invalid="ignore"):
        if opts.converged_relative:
            out = np.isfinite(first) & np.isfinite(last) & (np.abs(last) <= below * np.abs(first))
        else:
            out = np.isfinite(last) & (last <= below)
    out &= index.fast & (index.status == "finished")
    for i in index.slow:
        r = index.runs[i]
        out[i] = an.converged(r.records, r.status, name, below, opts.converged_relative)
    return out


def stable(index: RunIndex, metric: str, goal: str, finals: np.ndarray) -> np.ndarray:
    """`tables.stable` of every run: finished with its final `metric` (`finals`) no worse than its first."""
    start = index.numbers(metric, "first")
    for i in index.slow:
        recs = index.runs[i].records
        start[i] = _number(field(recs, metric)[0]) if len(recs) else math.nan
    with np.errstate(invalid="ignore"):
        ok = finals <= start if goal == "min" else finals >= start
    return ok & (index.status == "finished")


def final_columns(index: RunIndex, first: Sequence[str]) -> dict[str, Sequence[Any]]:
    """Every number of the runs' final records as columns (None where a run has none): `first` names first, then
    the others in stored order; a column no run has a value in is left out (as `tables.final_columns` per run).
    When every run's final record is in the store's columns, a column is read as it is sliced (`TakenColumn`)."""
    n = len(index.runs)
    cols: dict[str, np.ndarray] = {}
    if index.source is not None and index.fast.any():
        rows = index.last[index.fast]
        every = bool(index.fast.all())
        for name in index.source.number_names():
            taken = index.source.taken(name, rows)  # Python values only as the table is written
            if taken is None:
                continue
            if every:
                cols[name] = taken  # type: ignore[assignment]
            else:
                col = np.full(n, None, dtype=object)
                col[index.fast] = taken[:]
                cols[name] = col
    for i in index.slow:  # (with slow runs no column is a list: those are made only when every run is fast)
        for k, v in (index.runs[i].final or {}).items():
            if isinstance(v, (int, float)) and not isinstance(v, bool):
                if k not in cols:
                    cols[k] = np.full(n, None, dtype=object)
                cols[k][i] = v
    order = [k for k in dict.fromkeys(first) if k in cols] + [k for k in cols if k not in first]
    return {k: cols[k].tolist() if isinstance(cols[k], np.ndarray) else cols[k] for k in order}


def group_medians(ids: np.ndarray, values: np.ndarray, n: int) -> np.ndarray:
    """`analysis.median` of each group's values (groups 0..n-1 by `ids`): NaN ignored, ±inf taking part; NaN for a
    group with no value. Sorted once for every group instead of a NumPy call per group."""
    keep = ~np.isnan(values)
    ids, values = ids[keep], values[keep]
    order = np.lexsort((values, ids))
    ids, values = ids[order], values[order]
    counts = np.bincount(ids, minlength=n)
    starts = np.cumsum(counts) - counts
    out = np.full(n, np.nan)
    has = counts > 0
    lo = starts[has] + (counts[has] - 1) // 2
    hi = starts[has] + counts[has] // 2
    with np.errstate(invalid="ignore"):  # inf and -inf in the middle: NaN, as np.median gives
        out[has] = np.where(lo == hi, values[lo], (values[lo] + values[hi]) / 2)
    return out


def problem_labels(runs: Sequence[RunData]) -> dict[str, str]:
    """Configuration key -> its problem label, made once per configuration (not once per run)."""
    out: dict[str, str] = {}
    for r in runs:
        if r.point["key"] not in out:
            out[r.point["key"]] = problem_label(r.point)
    return out


def varied_parameters(runs: Sequence[RunData], problems: dict[str, str]) -> dict[tuple[str, str], list[str]]:
    """Per (problem, algorithm label): the algorithm parameters whose values differ between its configurations
    (a grid's, or the step sizes a sensitivity axis scales); `problems`: `problem_labels`."""
    first: dict[tuple[str, str], dict[str, Any]] = {}  # per group, each parameter's value key where first seen
    varied: dict[tuple[str, str], set[str]] = {}
    done: set[str] = set()
    for r in runs:
        key = r.point["key"]
        if key in done:  # a configuration's seeds share its parameters
            continue
        done.add(key)
        group = (problems[key], r.point["label"])
        seen, differ = first.setdefault(group, {}), varied.setdefault(group, set())
        for k, v in r.point.get("algorithm_params", {}).items():
            if k in differ:
                continue
            vk = _value_key(v)
            if seen.setdefault(k, vk) != vk:
                differ.add(k)
    return {g: sorted(differ) for g, differ in varied.items()}


def _value_key(v: Any) -> Any:
    """A parameter value as a set member telling apart what its repr does (1, 1.0 and True; NaN equal to NaN)."""
    if v is None or (isinstance(v, (int, float, str)) and v == v):
        return (type(v), v)
    return repr(v)


class ConfigGroups:
    """The runs' configurations numbered in order of first appearance, grouped by (problem label, algorithm label,
    axis value), with each configuration's median final `metric` over its seeds (`medians`) and whether every seed
    of it is stable (`ok`, `tables.stable`), for every configuration at once."""

    def __init__(self, runs: Sequence[RunData], metric: str, goal: str) -> None:
        index = RunIndex.of(runs)
        vals = final_values(index, metric, goal)
        ok_run = stable(index, metric, goal, vals)
        self.runs, self.problems, self.by = runs, problem_labels(runs), (metric, goal)
        config_of = np.empty(len(runs), dtype=np.int64)
        first: dict[str, int] = {}  # configuration key -> its number
        self.groups: dict[tuple[str, str, str], list[int]] = {}
        for i, r in enumerate(runs):
            p = r.point
            c = first.get(p["key"])
            if c is None:
                c = first[p["key"]] = len(first)
                self.groups.setdefault((self.problems[p["key"]], p["label"], repr(p["coords"].get("axis"))), []).append(c)
            config_of[i] = c
        n = len(first)
        self.medians = group_medians(config_of, vals, n)
        self.ok = np.bincount(config_of, weights=~ok_run, minlength=n) == 0
        self._order = np.argsort(config_of, kind="stable")
        self._starts = np.r_[0, np.cumsum(np.bincount(config_of, minlength=n))]

    @classmethod
    def of(cls, runs: Sequence[RunData], metric: str, goal: str) -> ConfigGroups:
        """The groups of `runs` by `metric` and `goal`, made once for the tables that each need them (the best
        table and the spread table of one report: ~1 s each at 10⁵ configurations)."""
        global _LAST_GROUPS
        last = _LAST_GROUPS
        if last is None or last.runs is not runs or len(last.runs) != len(runs) or last.by != (metric, goal):
            last = _LAST_GROUPS = cls(runs, metric, goal)
        return last

    @functools.cached_property
    def varied(self) -> dict[tuple[str, str], list[str]]:
        """`varied_parameters` of the groups' runs, made once (the best and the spread tables both ask)."""
        return varied_parameters(self.runs, self.problems)

    def runs_of(self, config: int) -> list[RunData]:
        """The runs of configuration number `config`, in order."""
        return [self.runs[i] for i in self._order[self._starts[config]:self._starts[config + 1]].tolist()]


_LAST_GROUPS: ConfigGroups | None = None  # the last groups `ConfigGroups.of` made (they hold their runs)
