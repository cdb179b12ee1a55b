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
from pathlib import Path
from typing import Any

import numpy as np

from sweep.results import run_columns
from sweep.results.store import DONE_STATUSES, ResultStore
from sweep.study.model import Study
from sweep.tracking import run_table
from sweep.tracking.run_table import Outcomes
from sweep.tracking.tracker import BULK_METRICS, Tracker

#: The tag that says why a seed was browsed (best or worst of its configuration).
SEED_TAG = "bisweep.seed_rank"
#: Ends the run key of a configuration's summary child (a run key ends in `.s<seed>`).
SUMMARY_SUFFIX = ".seeds"
STATUS_RANK = {"finished": 0, "diverged": 1}  # anything else (failed) after


def browsing(study: Study) -> bool:
    """Whether the study is larger than the runs that each get a child (its children are then chosen)."""
    return study.mlflow_children is not None and len(study.run_keys) > study.mlflow_children


def signed_values(outcomes: Outcomes, goal: str) -> tuple[np.ndarray, np.ndarray]:
    """Each run's place, smaller is better: (finished 0, diverged 1, anything else 2; then the metric by the goal,
    a missing or NaN value last within its status)."""
    status = np.array([STATUS_RANK.get(s, 2) for s in outcomes.status], dtype=np.int64)
    signed = outcomes.value if goal == "min" else -outcomes.value
    return status, np.where(np.isnan(signed), np.inf, signed)


def select(study: Study, outcomes: Outcomes) -> dict[str, list[str]]:
    """Point key -> the run keys that get children (best seed first, then the worst), for the configurations
    chosen among the ended runs `outcomes`."""
    if not outcomes.keys:
        return {}
    status, signed = signed_values(outcomes, study.report.goal)
    order = np.lexsort((outcomes.seed, signed, status, outcomes.point))  # by configuration, best seed first
    point = outcomes.point[order]
    starts = np.flatnonzero(np.r_[True, point[1:] != point[:-1]])
    stops = np.r_[starts[1:], len(order)]
    keys = outcomes.keys

    def browsed(c: int) -> list[str]:  # configuration c's best seed, then its worst
        first, last = keys[order[starts[c]]], keys[order[stops[c] - 1]]
        return [first, last] if stops[c] - starts[c] > 1 else [first]

    points = study.points
    per = 1 if len(study.seeds) == 1 else 3  # the summary and two seeds
    most = study.mlflow_children or math.inf
    if len(starts) * per <= most:
        return {points[point[a]].key: browsed(c) for c, a in enumerate(starts.tolist())}
    groups: dict[tuple[str, str], int] = {}  # (label, problem) -> its index, in the order first met
    group = np.array([groups.setdefault((points[i].label, points[i].problem), len(groups))
                      for i in point[starts].tolist()], dtype=np.int64)
    median = order[starts + (stops - starts) // 2]  # each configuration's median seed ranks it
    ranked = np.lexsort((signed[median], status[median], group))  # by group, then best first (stable)
    quota = max(2, int(most // per) // len(groups))
    best, worst = (quota + 1) // 2, quota // 2
    chosen: dict[str, list[str]] = {}
    bounds = np.flatnonzero(np.r_[True, group[ranked][1:] != group[ranked][:-1], True])
    for a, b in zip(bounds[:-1].tolist(), bounds[1:].tolist()):
        mine = ranked[a:b].tolist()
        for c in mine[:best] + mine[max(best, len(mine) - worst):]:
            chosen[points[point[starts[c]]].key] = browsed(c)
    return chosen


def summary_metrics(runs: list[tuple[str, float]], metric: str, goal: str) -> dict[str, float]:
    """A configuration summary child's metrics from its ended runs' (status, final metric): its seeds' final
    metric (median, best, worst among the finished ones) and how many runs ended each way."""
    out: dict[str, float] = {f"Seeds/{s}": float(sum(status == s for status, _ in runs))
                             for s in ("finished", "diverged", "failed")}
    values = sorted(v for status, v in runs if status == "finished" and not math.isnan(v))
    if values:
        best, worst = (values[0], values[-1]) if goal == "min" else (values[-1], values[0])
        out.update({f"Seeds/{metric}/median": statistics.median(values), f"Seeds/{metric}/best": best,
                    f"Seeds/{metric}/worst": worst})
    return out


def sync_browsed(tracker: Tracker, store: ResultStore, study: Study, synced: set[str]) -> set[str]:
    """Write the table of every run on the parent, then the children a reader browses (`select`) of a study
    larger than its `mlflow_children`; the done runs (each now reachable from the parent). `synced`: runs an
    earlier session sent already: their children are not written again, a configuration's summary is rewritten
    (as a new step) only when one of its runs ended since."""
    ended = store.ended()
    metric, goal = study.report.metric, study.report.goal
    finals = run_columns.load(store, last_only=True)  # each run's final record: what ranks it and its table row
    tracker.answers.mark()  # work here is not the store's silence (at 10⁵ runs on a busy machine: over a minute)
    runs = run_table.gather(study, finals, ended)
    outcomes = runs.outcomes
    chosen = select(study, outcomes)
    del finals
    log_table(tracker, run_table.table(study, runs))  # logged and freed before the chosen runs' records are read
    tracker.answers.mark()
    points = {p.key: p for p in study.points}
    at = {k: i for i, k in enumerate(outcomes.keys)}
    step = int(len(synced))  # a later session's summary is a later point of the same curves
    if len(study.seeds) > 1:
        for pkey in chosen:
            mine = [at[k] for k in (points[pkey].run_key(s) for s in study.seeds) if k in at]
            if all(outcomes.keys[i] in synced for i in mine):
                continue
            ends = [(outcomes.status[i], float(outcomes.value[i])) for i in mine]
            tracker.add_points(pkey + SUMMARY_SUFFIX, points[pkey], None, step,
                               list(summary_metrics(ends, metric, goal).items()))
            tracker.finish(pkey + SUMMARY_SUFFIX, "finished")
        tracker.flush(force=True)
    seeds = {k: study.seeds[j] for k, j in zip(outcomes.keys, outcomes.seed.tolist())}
    done = {k for k, status in ended.items() if k in at and status in DONE_STATUSES}
    del runs, outcomes, at
    browsed = {k for keys in chosen.values() for k in keys}  # the runs whose records children show
    write_children(tracker, run_columns.load(store, runs=browsed), study, chosen, seeds, synced)
    return done


def write_children(tracker: Tracker, stored: run_columns.RunColumns, study: Study, chosen: dict[str, list[str]],
                   seeds: dict[str, int], synced: set[str]) -> None:
    """A child per chosen seed (its records as its curves), nested under its configuration's summary when the
    study has several seeds; none again for a run an earlier session wrote."""
    several = len(study.seeds) > 1
    points = {p.key: p for p in study.points}
    ids = tracker.children()
    for pkey, keys in chosen.items():
        point = points[pkey]
        for seed_rank, key in zip(("best", "worst"), keys):
            if key in synced and key in ids:
                continue
            seed = seeds[key]
            summary = stored.summary(key) or {}
            where = summary.get("where")
            tracker.child(key, point, seed, where, ids.get(pkey + SUMMARY_SUFFIX),
                          {SEED_TAG: seed_rank} if several else None)
            for record in stored.records(key):
                tracker.add(key, point, seed, record, where)
            tracker.finish(key, summary["status"], summary.get("error"), summary.get("span"))
            tracker.flush(metrics=BULK_METRICS)
    tracker.flush(force=True)


def log_table(tracker: Tracker, table: Any) -> None:
    """The table of every ended run as the parent's artifact runs/runs.parquet (replacing an earlier session's)."""
    import pyarrow.parquet as pq  # pyarrow is loaded by Tune's storage layer: pandas would add ~100 MB to the driver

    with tempfile.TemporaryDirectory(prefix="bisweep-runs-") as tmp:
        path = Path(tmp) / "runs.parquet"
        pq.write_table(table, path)
        tracker.client.log_artifact(tracker.parent_id, str(path), "runs")
    tracker.answers.mark()
