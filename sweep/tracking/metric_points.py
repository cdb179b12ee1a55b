"""Which numbers of a run's record become MLflow metric points, and under what names.

The measured quantities (record keys without a '/': F, grad_F_sq, ...) are curves with a point at every
evaluation, named 'Metrics/F', ...; where a run ended up (time, calls/total, samples/total and the ground-truth
flags gt/*) is one point at its last record; zero counters and flags are not logged; the rest stays in the
records. A trial encodes a report's points as compact text (`points_text`), so that the driver's MLflow writer
queues a few hundred bytes a run rather than its records (at 10⁵ tiny runs it lags tens of thousands behind).
"""
from __future__ import annotations

import json
import re
from collections.abc import Iterable
from typing import Any

#: (MLflow name, value) pairs of one record.
Points = list[tuple[str, float]]

#: The section of a run's charts holding the measured quantities (record keys without a '/').
MAIN_SECTION = "Metrics"
#: Record keys that stay as they are: progress (the step is the iteration) and prefixed groups.
PLAIN = ("iteration", "time", "cpu_time", "eval_time")
#: Counters and flags: a zero means "not yet", so zeros are not logged (a never-called oracle has no series).
SPARSE = re.compile(r"^(calls|samples)/|_hits$|^gt/not_strongly_convex$")
#: Record keys logged once, at a run's last record (where it ended up); other keys with a '/' (per-oracle
#: counters, diagnostics) and the bookkeeping keys are not logged; the rest (the measured quantities) are curves.
FINAL = re.compile(r"^(time|calls/total|samples/total)$|^gt/")
NOT_CURVES = ("iteration", "cpu_time", "eval_time")


def mlflow_name(key: str) -> str:
    """The MLflow metric name of a record key: 'F' -> 'Metrics/F'; prefixed and progress keys unchanged."""
    return key if "/" in key or key in PLAIN else f"{MAIN_SECTION}/{key}"


#: How a record key is logged: a curve point at every record, a point at the last record only, or not at all.
CURVE, LAST, SKIP = 0, 1, 2


def logged_as(key: str) -> int:
    """CURVE, LAST or SKIP for a record key (see FINAL)."""
    if FINAL.search(key):
        return LAST
    return SKIP if "/" in key or key in NOT_CURVES else CURVE


#: Record key -> (its MLflow name, whether it is sparse, how it is logged): a record's keys are the same run
#: after run.
_NAMES: dict[str, tuple[str, bool, int]] = {}
MAX_NAMES = 10_000


def _name(key: str) -> tuple[str, bool, int]:
    got = _NAMES.get(key)
    if got is None:
        got = (mlflow_name(key), SPARSE.search(key) is not None, logged_as(key))
        if len(_NAMES) < MAX_NAMES:
            _NAMES[key] = got
    return got


#: A record's keys, in order -> those that may be logged, with (MLflow name, sparse, how): a run's records have the
#: same keys, so a record looks at its handful of loggable values rather than at its every field.
_PLANS: dict[tuple[str, ...], list[tuple[str, str, bool, int]]] = {}


def _plan(keys: tuple[str, ...]) -> list[tuple[str, str, bool, int]]:
    got = _PLANS.get(keys)
    if got is None:
        got = [(k, *named) for k in keys if (named := _name(k))[2] != SKIP]
        if len(_PLANS) < MAX_NAMES:
            _PLANS[keys] = got
    return got


def mlflow_metrics(record: dict[str, Any]) -> list[tuple[str, float]]:
    """(MLflow name, value) of every number of a record worth a chart point: the curves, and at the run's last
    record (its status no longer 'running') the final values too."""
    last = record.get("status", "running") != "running"
    out = []
    for k, name, sparse, how in _plan(tuple(record)):
        v = record[k]
        if isinstance(v, (int, float)) and not isinstance(v, bool) and (how == CURVE or last) \
                and not (sparse and v == 0):
            out.append((name, float(v)))
    return out


def points_text(records: Iterable[dict[str, Any]]) -> str:
    """The metric points of a run's records as one JSON text: [[iteration, status, [[name, value], ...]], ...]."""
    return json.dumps([[int(r["iteration"]), r.get("status", "running"), mlflow_metrics(r)] for r in records])


def points_of(text: str) -> list[tuple[int, str, Points]]:
    """[iteration, status, points] of each record `points_text` encoded (lists, as JSON reads them)."""
    return json.loads(text)
