"""How every ended run of a study ended, column by column: what ranks it (`Outcomes`) and the parent's table of
every run (`runs/runs.parquet`), made from the store's columns without a dict per run (at 10⁵ runs the per-run
summaries and rows were ~5 s of the end step's 7.7).

A run whose summary is a shard's end row (every run a Parquet shard ended) is read from the columns: its status
from the end row, its final values from its last record. Any other run (a failed run's file, a JSON shard, a run
whose records repeat an iteration) is read whole, as `RunColumns.summary` gives it.
"""
from __future__ import annotations

import dataclasses
import itertools
import math
import operator
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from sweep.results.run_columns import RunColumns
from sweep.study.model import Study

#: How long an error may be in the table (the whole one is in the run's summary).
ERROR_CHARS = 500


@dataclasses.dataclass
class Outcomes:
    """The ended runs of a study, aligned: run key, its configuration (index in `study.points`), its seed's index
    in `study.seeds`, its status and the final value of the study's metric (NaN: none, or not a number)."""

    keys: list[str]
    point: np.ndarray
    seed: np.ndarray
    status: list[str]
    value: np.ndarray


@dataclasses.dataclass
class Ended:
    """What `gather` reads: the runs' outcomes and each one's final values and error (for the table)."""

    outcomes: Outcomes
    finals: dict[str, np.ndarray]  # "final.<field>" -> float values, NaN where the run has none
    has_final: dict[str, np.ndarray]  # "final.<field>" -> whether the run has it
    errors: list[str]


def number(value: Any) -> bool:
    """Whether a final value is a number the table keeps (ints, floats and flags, as floats)."""
    return isinstance(value, (int, float))


def metric_value(value: Any) -> float:
    """A final value as what ranks a run: a number (not a flag), else NaN."""
    return float(value) if number(value) and not isinstance(value, bool) else math.nan


def gather(study: Study, stored: RunColumns, ended: Mapping[str, Any]) -> Ended:
    """The study's ended runs (`ended`'s keys that are runs of the study, in its order) as read from `stored`."""
    # run key -> its place in the study's runs (configuration by configuration, seed by seed); the study's own key
    # strings and one int each (10⁵ runs: ~14 MB less than new keys and (configuration, seed) pairs)
    where = dict(zip(study.run_keys, range(len(study.run_keys))))
    keys = [k for k in ended if k in where]
    points, seeds = divmod(np.fromiter(map(where.__getitem__, keys), np.int64, len(keys)), len(study.seeds))
    del where
    statuses, rows = stored.ends(keys)
    metric = study.report.metric
    n = len(keys)
    value = np.where(rows >= 0, stored.numbers(metric, rows), np.nan) if n else np.zeros(0)
    finals, has = {}, {}
    for name, (values, present) in stored.flag_and_number_columns(rows).items():
        finals[f"final.{name}"], has[f"final.{name}"] = values, present
    errors = [""] * n
    unread = []  # listed as ended, but no summary to read (a torn file): left out, as from the ranking
    for i in (i for i, s in enumerate(statuses) if s is None):  # read whole (files, JSON shards, repeats): its
        # row of `finals` is NaN and absent, as `ends` gave no record for it
        whole = stored.summary(keys[i])
        if whole is None:
            unread.append(i)
            continue
        statuses[i] = whole.get("status")
        errors[i] = (whole.get("error") or "")[:ERROR_CHARS]
        final = whole.get("final") or {}
        value[i] = metric_value(final.get(metric))
        for name, v in final.items():
            if number(v):
                column = f"final.{name}"
                if column not in finals:
                    finals[column], has[column] = np.full(n, np.nan), np.zeros(n, bool)
                finals[column][i], has[column][i] = float(v), True
    outcomes = Outcomes(keys, points, seeds, statuses, value)
    return _without(Ended(outcomes, finals, has, errors), unread) if unread else Ended(outcomes, finals, has, errors)


def _without(ended: Ended, drop: list[int]) -> Ended:
    """`ended` without the runs at positions `drop`."""
    keep = np.ones(len(ended.outcomes.keys), bool)
    keep[drop] = False
    at = np.flatnonzero(keep).tolist()
    runs = ended.outcomes
    outcomes = Outcomes([runs.keys[i] for i in at], runs.point[keep], runs.seed[keep], [runs.status[i] for i in at],
                        runs.value[keep])
    return Ended(outcomes, {k: v[keep] for k, v in ended.finals.items()},
                 {k: v[keep] for k, v in ended.has_final.items()}, [ended.errors[i] for i in at])


def table(study: Study, ended: Ended) -> Any:
    """The pyarrow table of every ended run: run key, configuration, label, seed, the configuration's parameters
    (as text), status, error and final values (numbers and flags as floats; null where a run has none)."""
    import pyarrow as pa

    runs = ended.outcomes
    used = np.unique(runs.point)
    at = np.searchsorted(used, runs.point)  # each run's row in the parameters of the configurations it uses
    params = _param_columns([study.points[i] for i in used.tolist()], study.axis_name)
    texts = {}
    for name in list(params):  # as text one column at a time (10⁵ runs × 15 parameters as str objects: ~90 MB)
        texts[name] = _texts(params.pop(name)).take(at)
    columns: dict[str, Any] = {
        "run_key": pa.array(runs.keys, pa.string()),
        "configuration": pa.array([study.points[i].key for i in used.tolist()], pa.string()).take(at),
        "label": pa.array([study.points[i].label for i in used.tolist()], pa.string()).take(at),
        "seed": pa.array(np.asarray(study.seeds, dtype=np.int64)[runs.seed] if len(runs.keys) else [], pa.int64()),
        **texts,
        "status": pa.array(runs.status, pa.string()),
        "error": pa.array(ended.errors, pa.string()),
    }
    for name, values in ended.finals.items():
        present = ended.has_final[name]
        if present.any():
            columns[name] = pa.array(values, pa.float64(), mask=~present)
    return pa.table(columns)


def _texts(values: list[Any]) -> Any:
    """A parameter column as Arrow text (None as null); a column holding one object throughout (a parameter every
    configuration shares) made text once."""
    import pyarrow as pa

    first = values[0] if values else None
    if values and all(map(operator.is_, values, itertools.repeat(first))):
        one = pa.array([None if first is None else str(first)], pa.string())
        return one.take(pa.array(np.zeros(len(values), np.int64)))
    return pa.array([None if v is None else str(v) for v in values], pa.string())


def _param_columns(points: Sequence[Any], axis_name: str | None) -> dict[str, list[Any]]:
    """Each configuration's parameters (`child_params` without a seed), column by column (None where a configuration
    has no such one), the columns in the order their names first appear configuration by configuration. The mappings
    a grid's configurations share (problem parameters, budget) are read once per mapping, not once per configuration
    (10⁵ configurations: 0.44-0.49 s when each one's parameters were a dict)."""
    n = len(points)
    columns: dict[str, list[Any]] = {}
    first: dict[str, tuple[int, int, int]] = {}  # name -> (first configuration with it, its place in that one's)

    def column(name: str, at: tuple[int, int, int]) -> list[Any]:  # each name is first met where it first appears:
        if name not in columns:  # configurations in order, the shared mappings in the order of their first one
            columns[name], first[name] = [None] * n, at
        return columns[name]

    for place, name in enumerate(("algorithm", "label", "problem", "instance_seed", "n_evals")):  # as child_params
        values = [getattr(p, name) for p in points]
        at = next((i for i, v in enumerate(values) if v is not None), None)
        if at is not None:
            column(name, (at, 0, place))[:] = values
    if axis_name:
        name = f"axis.{axis_name}"
        for i, p in enumerate(points):
            if "axis" in p.coords or p.coords.get("reference"):
                value = p.coords.get("axis")
                column(name, (i, 0, 5))[i] = "reference" if value is None else value
    names: dict[str, str] = {}
    for i, p in enumerate(points):
        for j, (k, v) in enumerate(p.algorithm_params.items()):
            if v is not None:
                column(names.get(k) or names.setdefault(k, f"alg.{k}"), (i, 1, j))[i] = v
    for kind, (prefix, attr) in enumerate((("problem.", "problem_params"), ("budget.", "budget")), 2):
        shared: dict[int, tuple[Mapping[str, Any], list[int]]] = {}  # one entry per mapping object
        for i, p in enumerate(points):
            mapping = getattr(p, attr)
            shared.setdefault(id(mapping), (mapping, []))[1].append(i)
        for mapping, rows in shared.values():
            for j, (k, v) in enumerate(mapping.items()):
                if v is not None:
                    col = column(prefix + k, (rows[0], kind, j))
                    for i in rows:
                        col[i] = v
    return {name: columns[name] for name in sorted(columns, key=first.__getitem__)}
