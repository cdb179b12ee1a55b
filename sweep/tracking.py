"""MLflow tracking: one parent run per study, one nested child run per (configuration, seed).

What a person browses: child runs are named by what varies ('soba · step ×2 · quadratic · seed 2'; the
run key is a tag), the axis value is a parameter, the experiment's description is the study's. Metric
names put the measured quantities first in a run's charts (MLflow sorts chart sections by name, capitals
first): F, grad_F_sq, ... go out as 'Metrics/F', ...; oracle counters are not logged while they are zero
(an oracle an algorithm never calls has no chart). The records on disk keep their own names.

Logging happens on the driver and is batched (`log_batch`, flushed every ~1000 metrics or 2 seconds),
because one request per metric blocks Tune. Everything is idempotent: the parent is found by the
study's spec hash, a child by its run-key tag, and a metric step (= iteration) is logged once, so a
resumed or re-run study neither duplicates runs nor metric points.
"""
from __future__ import annotations

import queue
import re
import sys
import threading
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from ray.tune import Callback

from sweep.model import Point, Study, TrialConfig
from sweep.results import run_name
from sweep.store import DONE_STATUSES, ResultStore
from sweep.trainable import META

ROLE = "bisweep.role"
RUN_KEY = "bisweep.run_key"
SPEC_HASH = "bisweep.spec_hash"
PARENT = "mlflow.parentRunId"
MAX_METRICS_PER_BATCH = 1000
MAX_PARAMS_PER_BATCH = 100
FLUSH_METRICS = 1000
FLUSH_SECONDS = 2.0
#: Experiment tags: its description (shown on the experiment page) and its kind (a training experiment).
DESCRIPTION = "mlflow.note.content"
EXPERIMENT_KIND = ("mlflow.experimentKind", "custom_model_development")
#: The section of a run's charts holding the measured quantities (record keys without a '/').
MAIN_SECTION = "Metrics"
#: Record keys that stay as they are: progress (the step is the iteration) and prefixed groups.
PLAIN = ("iteration", "time", "eval_time")
#: Counters and flags: a zero means "not yet", so zeros are not logged (a never-called oracle has no series).
SPARSE = re.compile(r"^(calls|samples)/|_hits$|^gt/not_strongly_convex$")


def mlflow_name(key: str) -> str:
    """The MLflow metric name of a record key: 'F' -> 'Metrics/F'; prefixed and progress keys unchanged."""
    return key if "/" in key or key in PLAIN else f"{MAIN_SECTION}/{key}"


def mlflow_metrics(record: dict[str, Any]) -> list[tuple[str, float]]:
    """(MLflow name, value) of every number of a record worth a chart point."""
    out = []
    for k, v in record.items():
        if isinstance(v, (int, float)) and not isinstance(v, bool) and not (v == 0 and SPARSE.search(k)):
            out.append((mlflow_name(k), float(v)))
    return out


def default_tracking_uri(results_dir: str | Path) -> str:
    """sqlite:////absolute/path/mlflow.db under the study's results directory."""
    return "sqlite:///" + str((Path(results_dir) / "mlflow.db").resolve())


def local_artifact_location(tracking_uri: str) -> str | None:
    """Artifacts beside a local SQLite store (a server chooses its own location)."""
    if tracking_uri.startswith("sqlite:///"):
        db = Path(tracking_uri[len("sqlite:///"):])
        return (db.parent / "mlartifacts").resolve().as_uri()
    return None


def _now_ms() -> int:
    return int(time.time() * 1000)


def record_of(result: dict[str, Any]) -> dict[str, Any]:
    """The latest run-loop record inside a Tune result (Tune's own bookkeeping keys dropped)."""
    return {k: result[k] for k in result[META]["keys"] if k in result}


def records_in(result: dict[str, Any]) -> list[dict[str, Any]]:
    """Every run-loop record a Tune result carries, oldest first."""
    return [*result[META].get("earlier", []), record_of(result)]


class Tracker:
    """The MLflow side of one study (a client, the parent run, the child runs and a metric buffer)."""

    def __init__(self, tracking_uri: str, experiment: str, artifact_location: str | None = None) -> None:
        from mlflow import MlflowClient

        self.tracking_uri = tracking_uri
        self.client = MlflowClient(tracking_uri)
        self.experiment_id = self._experiment(experiment, artifact_location)
        self.parent_id: str | None = None
        self.axis_name: str | None = None
        self._children: dict[str, str] | None = None
        self._steps: dict[str, set[int]] = {}
        self._buffer: dict[str, list[Any]] = defaultdict(list)
        self._params: dict[str, list[Any]] = {}
        self._buffered = 0
        self._last_flush = time.monotonic()

    def _experiment(self, name: str, artifact_location: str | None) -> str:
        from mlflow.exceptions import MlflowException

        exp = self.client.get_experiment_by_name(name)
        if exp is not None:
            if exp.lifecycle_stage == "deleted":
                self.client.restore_experiment(exp.experiment_id)
            return exp.experiment_id
        try:
            return self.client.create_experiment(name, artifact_location=artifact_location)
        except MlflowException:  # created concurrently by another driver
            return self.client.get_experiment_by_name(name).experiment_id

    def _search(self, filter_string: str) -> list[Any]:
        out, token = [], None
        while True:
            page = self.client.search_runs([self.experiment_id], filter_string=filter_string,
                                           max_results=1000, page_token=token)
            out.extend(page)
            token = page.token
            if not token:
                return out

    # ---- the study's parent run ----
    def find_parent(self, spec_hash: str) -> str | None:
        """The parent run of the study with this spec hash, if it exists (and remember it)."""
        found = self._search(f"tags.`{ROLE}` = 'study' and tags.`{SPEC_HASH}` = '{spec_hash}'")
        if found:
            self.parent_id = found[0].info.run_id
        return self.parent_id if found else None

    def start_study(self, study: Study) -> str:
        """Find (by spec hash) or create the study's parent run and mark it running."""
        self.axis_name = study.axis_name
        self.describe(study.description or study.name)
        if self.find_parent(study.spec_hash):
            self.client.update_run(self.parent_id, status="RUNNING")
            return self.parent_id
        tags = {ROLE: "study", SPEC_HASH: study.spec_hash, "study": study.name, "kind": study.kind,
                "mlflow.note.content": study.description or study.name}
        run = self.client.create_run(self.experiment_id, tags=tags, run_name=study.name)
        self.parent_id = run.info.run_id
        params = {"kind": study.kind, "axis": study.axis, "seeds": study.seeds, "n_evals": study.n_evals,
                  "configurations": len(study.points), "runs": len(study.run_keys),
                  **{f"budget.{k}": v for k, v in study.budget.items()}}
        self._log_params(self.parent_id, params)
        return self.parent_id

    def describe(self, description: str) -> None:
        """Set the experiment's description (its page shows it) and mark it a training experiment.

        MLflow 3.17's UI reads the kind from its GenAI / Model training switch (or `?workflowType=
        machine_learning` in the URL, which `bisweep ui` opens), not from the tag; other UIs read the tag.
        """
        self.client.set_experiment_tag(self.experiment_id, DESCRIPTION, description)
        self.client.set_experiment_tag(self.experiment_id, *EXPERIMENT_KIND)

    def end_study(self, status: str, counts: dict[str, int]) -> None:
        """Close the parent run with counts of finished, diverged and failed runs."""
        from mlflow.entities import RunTag

        self.flush(force=True)
        self.client.log_batch(self.parent_id, tags=[RunTag(f"runs.{k}", str(v)) for k, v in counts.items()])
        self.client.set_terminated(self.parent_id, status)

    def log_report(self, report_dir: Path, name: str = "report") -> None:
        """Upload the report's tables and plots as artifacts of the parent run (under `name`/)."""
        self.client.log_artifacts(self.parent_id, str(report_dir), name)

    # ---- child runs ----
    def children(self) -> dict[str, str]:
        """Run key -> MLflow run id of the parent's existing children."""
        if self._children is None:
            self._children = {}
            for r in self._search(f"tags.`{PARENT}` = '{self.parent_id}'"):
                self._children.setdefault(r.data.tags.get(RUN_KEY, ""), r.info.run_id)
        return self._children

    def child(self, run_key: str, point: Point, seed: int, where: dict[str, str] | None = None) -> str:
        """The child run of (configuration, seed): found by its key tag, created when missing."""
        children = self.children()
        if run_key in children:
            if run_key not in self._steps:
                hist = self.client.get_metric_history(children[run_key], "time")
                self._steps[run_key] = {m.step for m in hist}
            return children[run_key]
        tags = {PARENT: self.parent_id, ROLE: "run", RUN_KEY: run_key, "configuration": point.key,
                "algorithm": point.algorithm, "label": point.label, "problem": point.problem,
                "seed": str(seed), "status": "running", **{k: v for k, v in (where or {}).items() if v}}
        if "axis" in point.coords:
            tags["axis"] = repr(point.coords["axis"])
        name = run_name(point.to_dict(), seed, self.axis_name)
        run_id = self.client.create_run(self.experiment_id, tags=tags, run_name=name).info.run_id
        axis = {}
        if self.axis_name and ("axis" in point.coords or point.coords.get("reference")):
            value = point.coords.get("axis")
            axis = {f"axis.{self.axis_name}": "reference" if value is None else value}
        params = {"algorithm": point.algorithm, "label": point.label, "problem": point.problem, "seed": seed,
                  "instance_seed": point.instance_seed, "n_evals": point.n_evals, **axis,
                  **{f"alg.{k}": v for k, v in point.algorithm_params.items()},
                  **{f"problem.{k}": v for k, v in point.problem_params.items()},
                  **{f"budget.{k}": v for k, v in point.budget.items()}}
        self._params[run_key] = self._param_list(params)  # sent with the run's first metrics
        children[run_key] = run_id
        self._steps[run_key] = set()
        return run_id

    @staticmethod
    def _param_list(params: dict[str, Any]) -> list[Any]:
        from mlflow.entities import Param

        return [Param(k, str(v)[:6000]) for k, v in params.items()]

    def _log_params(self, run_id: str, params: dict[str, Any]) -> None:
        items = self._param_list(params)
        for i in range(0, len(items), MAX_PARAMS_PER_BATCH):
            self.client.log_batch(run_id, params=items[i:i + MAX_PARAMS_PER_BATCH])

    def add(self, run_key: str, point: Point, seed: int, record: dict[str, Any],
            where: dict[str, str] | None = None) -> None:
        """Buffer a record's numeric values as metrics at step = iteration (once per step)."""
        from mlflow.entities import Metric

        self.child(run_key, point, seed, where)
        step = int(record["iteration"])
        if step in self._steps[run_key]:
            return
        self._steps[run_key].add(step)
        ts = _now_ms()
        metrics = [Metric(k, v, ts, step) for k, v in mlflow_metrics(record)]
        self._buffer[run_key].extend(metrics)
        self._buffered += len(metrics)

    def finish(self, run_key: str, status: str, error: str | None = None) -> None:
        """Flush a run and close it: FINISHED for finished/diverged (status tag says which), else FAILED."""
        from mlflow.entities import RunTag

        tags = [RunTag("status", status)] + ([RunTag("error", error[:5000])] if error else [])
        self._flush_run(run_key, tags)
        self.client.set_terminated(self.children()[run_key], "FINISHED" if status in DONE_STATUSES else "FAILED")

    def _flush_run(self, run_key: str, tags: list[Any] | None = None) -> None:
        """One request per ≤1000 metrics; the run's pending params and `tags` ride along with the first."""
        metrics = self._buffer.pop(run_key, [])
        self._buffered -= len(metrics)
        params, tags = self._params.pop(run_key, []), list(tags or [])
        if not (metrics or params or tags):
            return
        run_id = self.children()[run_key]
        first = True
        while first or metrics or params or tags:
            self.client.log_batch(run_id, metrics=metrics[:MAX_METRICS_PER_BATCH],
                                  params=params[:MAX_PARAMS_PER_BATCH], tags=tags[:MAX_PARAMS_PER_BATCH])
            metrics, params = metrics[MAX_METRICS_PER_BATCH:], params[MAX_PARAMS_PER_BATCH:]
            tags, first = tags[MAX_PARAMS_PER_BATCH:], False

    def flush(self, force: bool = False) -> None:
        """Send buffered metrics when enough have gathered or enough time has passed (or when forced)."""
        if not force and self._buffered < FLUSH_METRICS and time.monotonic() - self._last_flush < FLUSH_SECONDS:
            return
        for run_key in list(self._buffer):
            self._flush_run(run_key)
        self._last_flush = time.monotonic()

    # ---- backfill from disk ----
    def sync(self, store: ResultStore, study: Study, synced: set[str]) -> set[str]:
        """Log every ended run of the study not yet in `synced` from the on-disk store; the runs synced."""
        index = {p.run_key(s): (p, s) for p in study.points for s in study.seeds}
        done = set()
        for summary in store.summaries(index):
            key = summary["run_key"]
            if key in synced:
                continue
            point, seed = index[key]
            for rec in store.records(key):
                self.add(key, point, seed, rec, summary.get("where"))
            self.child(key, point, seed, summary.get("where"))
            self.finish(key, summary["status"], summary.get("error"))
            if summary["status"] in DONE_STATUSES:
                done.add(key)
        return done


class SyncLog:
    """Run keys whose MLflow child run is complete, per parent run (a text file, one key a line)."""

    def __init__(self, store: ResultStore, parent_id: str) -> None:
        self.path = store.root / "mlflow_synced" / f"{parent_id}.txt"
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.keys = set(self.path.read_text().split()) if self.path.exists() else set()

    def add(self, run_key: str) -> None:
        """Record a completely logged run."""
        if run_key not in self.keys:
            self.keys.add(run_key)
            with open(self.path, "a") as fh:
                fh.write(run_key + "\n")


class MlflowCallback(Callback):
    """Driver-side Tune callback mirroring every result into the study's MLflow runs.

    MLflow calls run on one background thread, in order, so Tune's event loop never waits for the
    tracking store (a SQLite `log_batch` of a run's metrics takes tens of milliseconds).
    """

    def __init__(self, tracker: Tracker, study: Study, synced: SyncLog, store: ResultStore) -> None:
        self.tracker = tracker
        self.synced = synced
        self.store = store
        self.index = {p.run_key(s): (p, s) for p in study.points for s in study.seeds}
        self.error: Exception | None = None
        self._queue: queue.Queue = queue.Queue()
        self._thread = threading.Thread(target=self._work, name="bisweep-mlflow", daemon=True)
        self._thread.start()

    def __getstate__(self) -> dict[str, Any]:
        return {}  # Tune pickles its run config; the live MLflow client stays in this process

    # ---- the writer thread ----
    def _work(self) -> None:
        while True:
            try:
                item = self._queue.get(timeout=FLUSH_SECONDS)
            except queue.Empty:
                self._run((self.tracker.flush,))  # time-based flush while no results arrive
                continue
            try:
                if item is None:
                    return
                self._run(item)
            finally:
                self._queue.task_done()

    def _run(self, item: tuple) -> None:
        if self.error is not None:
            return
        try:
            item[0](*item[1:])
        except Exception as exc:  # noqa: BLE001  MLflow trouble must not stop the study; results stay on disk
            self.error = exc
            print(f"bisweep: MLflow logging paused ({type(exc).__name__}: {exc}); "
                  "results are kept on disk and synced at the end", file=sys.stderr)

    def close(self) -> None:
        """Log everything queued, then stop the writer thread."""
        if self._thread.is_alive():
            self._queue.put((self.tracker.flush, True))
            self._queue.put(None)
            self._thread.join()

    # ---- Tune events ----
    def on_trial_result(self, iteration: int, trials: list, trial: Any, result: dict[str, Any], **info: Any) -> None:
        meta = result.get(META)
        if meta is not None:
            self._queue.put((self._result, meta, records_in(result)))

    def _result(self, meta: dict[str, Any], records: list[dict[str, Any]]) -> None:
        key = meta["run_key"]
        point, seed = self.index[key]
        where = {"node": meta.get("node", ""), "host": meta.get("host", "")}
        for record in records:
            self.tracker.add(key, point, seed, record, where)
        if records[-1]["status"] != "running":
            # A run resumed after a crash may have records the crashed driver stored but never sent.
            for record in self.store.records(key):
                self.tracker.add(key, point, seed, record, where)
            self.tracker.finish(key, records[-1]["status"])
            self.synced.add(key)
        self.tracker.flush()

    def on_trial_error(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        self._queue.put((self._failed, list(TrialConfig.from_dict(trial.config["trial"]).run_keys)))

    def _failed(self, run_keys: list[str]) -> None:
        for key in run_keys:
            if key in self.synced.keys or key not in self.tracker.children():
                continue
            self.tracker.finish(key, "failed", "the trial failed; see the study's failures")

    @property
    def backlog(self) -> int:
        """Results and run endings waiting to be logged."""
        return self._queue.qsize()
