"""Which runs of a large study get MLflow child runs: what a reader browses, not every run.

A study of at most `mlflow_children` runs (study field, `--mlflow-children`; default 10⁴) gets a child per run,
written as the runs end. A larger one gets its children once its runs have ended (at the end of each session):

- one child per configuration, its *summary* (role `configuration`): the seeds' final values of the study's
  metric (median, best, worst) and how many runs finished, diverged or failed — only when there are several seeds;
- nested under it, the configuration's best and worst seed (by the study's metric and goal; a diverged run ranks
  after every finished one, a failed run last), with their curves, as every child has;
- when that is still more than `mlflow_children` children, only some configurations get them: in each group of
  configurations (algorithm label, problem) the best and the worst ones by their median seed, in equal numbers.

Every run, browsed or not, is a row of the table artifact `runs/runs.parquet` on the parent run (run key,
configuration, label, algorithm, problem, seed, status, error, its parameters and final values); its records stay
in the results directory. Why 10⁴: a child costs MLflow's database ~4.6 KB (its tags, parameters, metric rows
and their indexes), so 10⁴ children are ~46 MB; past that nobody pages through runs one by one in the UI,
and 10⁵ children made the database 470 MB and the MLflow writer the driver's largest CPU cost.
"""
from __future__ import annotations

import math
import statistics
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from sweep.results import run_columns
from sweep.results.store import DONE_STATUSES, ResultStore
from sweep.study.model import Point, Study
from sweep.tracking.tracker import Tracker, child_params

#: The tag that says why a seed was browsed (best or worst of its configuration).
SEED_TAG = "bisweep.seed_rank"
#: Ends the run key of a configuration's summary child (a run key ends in `.s<seed>`).
SUMMARY_SUFFIX = ".seeds"
STATUS_RANK = {"finished": 0, "diverged": 1}  # anything else (failed) after


def browsing(study: Study) -> bool:
    """Whether the study is larger than the runs that each get a child (its children are then chosen)."""
    return study.mlflow_children is not None and len(study.run_keys) > study.mlflow_children


def rank(summary: Mapping[str, Any], metric: str, goal: str) -> tuple[int, float]:
    """A run's place, smaller is better: finished before diverged before failed, then the metric by the goal
    (a missing or NaN value last within its status)."""
    value = (summary.get("final") or {}).get(metric)
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and not math.isnan(value)
    signed = (value if goal == "min" else -value) if ok else math.inf
    return STATUS_RANK.get(summary.get("status"), 2), signed


def seed_order(point: Point, seeds: list[int], summaries: Mapping[str, Mapping[str, Any]], metric: str,
               goal: str) -> list[str]:
    """The run keys of a configuration's ended runs, best first."""
    keys = [point.run_key(s) for s in seeds if point.run_key(s) in summaries]
    return sorted(keys, key=lambda k: rank(summaries[k], metric, goal))


def select(study: Study, summaries: Mapping[str, Mapping[str, Any]]) -> dict[str, list[str]]:
    """Point key -> the run keys that get children (best seed first, then the worst), for the configurations
    chosen; `summaries`: run key -> summary of the ended runs."""
    metric, goal = study.report.metric, study.report.goal
    ordered = {p.key: seed_order(p, study.seeds, summaries, metric, goal) for p in study.points}
    browsed = {k: (keys[:1] + keys[-1:]) if len(keys) > 1 else keys for k, keys in ordered.items() if keys}
    per = 1 if len(study.seeds) == 1 else 3  # the summary and two seeds
    most = study.mlflow_children or math.inf
    if len(browsed) * per <= most:
        return browsed
    groups: dict[tuple[str, str], list[str]] = {}
    for p in study.points:
        if p.key in browsed:
            groups.setdefault((p.label, p.problem), []).append(p.key)
    quota = max(2, int(most // per) // len(groups))
    chosen: dict[str, list[str]] = {}
    for keys in groups.values():
        keys.sort(key=lambda k: rank(summaries[ordered[k][len(ordered[k]) // 2]], metric, goal))  # the median seed
        best, worst = (quota + 1) // 2, quota // 2
        for k in keys[:best] + keys[max(best, len(keys) - worst):]:
            chosen[k] = browsed[k]
    return chosen


def summary_metrics(runs: list[Mapping[str, Any]], metric: str, goal: str) -> dict[str, float]:
    """A configuration summary child's metrics: its seeds' final metric (median, best, worst among the finished
    ones) and how many runs ended each way."""
    out: dict[str, float] = {f"Seeds/{s}": float(sum(r.get("status") == s for r in runs))
                             for s in ("finished", "diverged", "failed")}
    values = sorted(v for r in runs if r.get("status") == "finished"
                    and isinstance(v := (r.get("final") or {}).get(metric), (int, float)) and not math.isnan(v))
    if values:
        best, worst = (values[0], values[-1]) if goal == "min" else (values[-1], values[0])
        out.update({f"Seeds/{metric}/median": statistics.median(values), f"Seeds/{metric}/best": best,
                    f"Seeds/{metric}/worst": worst})
    return out


class Table:
    """The table of every ended run, column by column (10⁵ rows as dicts took ~5x the memory): its identity,
    parameters, status, error and final values (numbers and flags; the rest stays in the results directory)."""

    def __init__(self) -> None:
        self.columns: dict[str, list[Any]] = {}
        self.rows = 0
        self._fields: tuple[str, ...] = ()  # the columns' names in order, when the last row had them all

    def add(self, point: Point, seed: int, axis_name: str | None, summary: Mapping[str, Any]) -> None:
        """A run's row."""
        params = {k: str(v) for k, v in child_params(point, seed, axis_name).items() if k != "seed"}
        final = {f"final.{k}": float(v) for k, v in (summary.get("final") or {}).items() if isinstance(v, (int, float))}
        row = {"run_key": point.run_key(seed), "configuration": point.key, "label": point.label, "seed": seed,
               **params, "status": summary.get("status"), "error": (summary.get("error") or "")[:500], **final}
        if tuple(row) == self._fields:  # the usual row: every column, in order (no column to find or pad)
            for column, v in zip(self.columns.values(), row.values()):
                column.append(v)
            self.rows += 1
            return
        for k, v in row.items():
            column = self.columns.get(k)
            if column is None:
                column = self.columns[k] = [None] * self.rows
            column.append(v)
        self.rows += 1
        for column in self.columns.values():
            if len(column) < self.rows:
                column.append(None)
        self._fields = tuple(row) if len(row) == len(self.columns) and tuple(row) == tuple(self.columns) else ()


def sync_browsed(tracker: Tracker, store: ResultStore, study: Study, synced: set[str]) -> set[str]:
    """Write the children a reader browses (`select`) of a study larger than its `mlflow_children`, then the
    table of every run on the parent; the done runs (each now reachable from the parent). `synced`: runs an
    earlier session sent already: their children are not written again, a configuration's summary is rewritten
    (as a new step) only when one of its runs ended since."""
    index = {p.run_key(s): (p, s) for p in study.points for s in study.seeds}
    ended = store.ended()
    metric, goal = study.report.metric, study.report.goal
    summaries, table = {}, Table()  # run key -> what ranks it (a whole summary holds its point: 10⁵ of them, GBs)
    stored = run_columns.load(store)  # the store's columns: a run's final record made a dict only while it is read
    tracker.answers.mark()  # work here is not the store's silence (at 10⁵ runs on a busy machine: over a minute)
    for i, key in enumerate(ended):
        if key in index and (whole := stored.summary(key)) is not None:
            summaries[key] = {"status": whole.get("status"), "final": {metric: (whole.get("final") or {}).get(metric)}}
            table.add(*index[key], study.axis_name, whole)
        if i % 10_000 == 9_999:
            tracker.answers.mark()
    chosen = select(study, summaries)
    tracker.answers.mark()
    points = {p.key: p for p in study.points}
    several = len(study.seeds) > 1
    step = int(len(synced))  # a later session's summary is a later point of the same curves
    if several:
        for pkey in chosen:
            mine = [k for k in (points[pkey].run_key(s) for s in study.seeds) if k in summaries]
            if all(k in synced for k in mine):
                continue
            point, key = points[pkey], pkey + SUMMARY_SUFFIX
            tracker.add_points(key, point, None, step, list(summary_metrics([summaries[k] for k in mine],
                                                                           metric, goal).items()))
            tracker.finish(key, "finished")
        tracker.flush(force=True)
    ids = tracker.children()
    for pkey, keys in chosen.items():
        for seed_rank, key in zip(("best", "worst"), keys):
            if key in synced and key in ids:
                continue
            point, seed = index[key]
            summary = stored.summary(key) or {}
            where = summary.get("where")
            tracker.child(key, point, seed, where, ids.get(pkey + SUMMARY_SUFFIX),
                          {SEED_TAG: seed_rank} if several else None)
            for record in stored.records(key):
                tracker.add(key, point, seed, record, where)
            tracker.finish(key, summary["status"], summary.get("error"), summary.get("span"))
            tracker.flush()
    tracker.flush(force=True)
    log_table(tracker, table)
    return {k for k, status in ended.items() if k in index and status in DONE_STATUSES}


def log_table(tracker: Tracker, table: Table) -> None:
    """The table of every ended run as the parent's artifact runs/runs.parquet (replacing an earlier session's)."""
    import pyarrow as pa  # already loaded by Tune's storage layer: pandas would add ~100 MB to the driver
    import pyarrow.parquet as pq

    with tempfile.TemporaryDirectory(prefix="bisweep-runs-") as tmp:
        path = Path(tmp) / "runs.parquet"
        pq.write_table(pa.table(table.columns), path)
        tracker.client.log_artifact(tracker.parent_id, str(path), "runs")
    tracker.answers.mark()
