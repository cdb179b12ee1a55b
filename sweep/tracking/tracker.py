"""MLflow tracking: one parent run per study, one nested child run per (configuration, seed).

What a person browses, and no more (a tiny run costs MLflow ~5 KB, not ~16): child runs are named by what
varies ('soba · step ×2 · quadratic · seed 2'; the run key is a tag). A child's parameters are those that vary
across the study's runs (algorithm, label, problem, seed, the axis value, alg.*, problem.*, ...); those every
run shares are parameters of the parent, and `None`s are left out. The measured quantities (record keys
without a '/': F, grad_F_sq, ...) are curves with a point at every evaluation, named 'Metrics/F', ... so that
they come first in a run's charts (MLflow sorts chart sections by name, capitals first); where the run ended
up (time, calls/total, samples/total, and the ground-truth flags gt/*) is one point at its last record; zero
counters and flags are not logged. The per-oracle counters, diagnostics (diag/*), CPU and evaluation times
stay in the records on disk and in the report, under their own names. A child carries `node`/`host` tags only
when it ran on another host than the driver's (the parent's `host`).

Child runs are written in batches across runs (sweep/tracking/mlflow_sinks.py: in bulk into MLflow's database, or
`log_batch` calls of at most 1,000 metrics to a server), by a writer thread of the driver
(sweep/execution/mlflow_writer.py). Everything is idempotent: the parent is found by the study's spec hash, a child
by its run-key tag, and a metric step (= iteration) is logged once, so a resumed or re-run study neither
duplicates runs nor metric points. A study of more runs than its `mlflow_children` gets children only for
what a reader browses, once its runs have ended, and a table of every run (sweep/tracking/browse.py).
"""
from __future__ import annotations

import socket
import time
from pathlib import Path
from typing import Any

from sweep.results import environment
from sweep.results.runs import run_name
from sweep.results.safe_files import folder, open_file
from sweep.results.store import DONE_STATUSES, ResultStore
from sweep.study.model import Point, Study
from sweep.tracking import mlflow_store
from sweep.tracking.child_params import child_params, shared_params
from sweep.tracking.metric_points import Points, mlflow_metrics
from sweep.tracking.mlflow_sinks import MAX_PARAMS_PER_BATCH, PARENT, ApiSink, Batch, NewRun, SqlSink, sink_for

ROLE = "bisweep.role"
RUN_KEY = "bisweep.run_key"
SPEC_HASH = "bisweep.spec_hash"
FLUSH_METRICS = 1000
FLUSH_SECONDS = 2.0
#: Metric points per write of runs that have ended already (children written from the store): fewer, larger
#: transactions (each commit syncs the database file). 10⁴ browsed children of a 10⁵-run study: 4.25-4.34 s against
#: 4.95-5.31 s wall at FLUSH_METRICS (3 runs each, in turn); 2×10⁵ points a write took 5.6-6.0 s (SQLite's cache spills).
BULK_METRICS = 20_000
#: Experiment tags: its description (shown on the experiment page) and its kind (a training experiment).
DESCRIPTION = "mlflow.note.content"
EXPERIMENT_KIND = ("mlflow.experimentKind", "custom_model_development")
def default_tracking_uri(results_dir: str | Path) -> str:
    """sqlite:////absolute/path/mlflow.db under the study's results directory."""
    return "sqlite:///" + str((Path(results_dir) / "mlflow.db").resolve())


#: Database stores MLflow's SQLAlchemy store accepts (besides sqlite), e.g. postgresql+psycopg://.
DATABASE_SCHEMES = ("postgresql", "mysql", "mssql")


def local_artifact_location(tracking_uri: str, results_dir: str | Path | None = None) -> str | None:
    """Where a study's artifacts go when the driver writes to a database itself: beside a SQLite store, or
    under the results directory for another database (MLflow's own default, ./mlruns, is the current
    directory, wherever the command was started). None for a server, which chooses its own location."""
    if tracking_uri.startswith("sqlite:///"):
        db = Path(tracking_uri[len("sqlite:///"):])
        return (db.parent / "mlartifacts").resolve().as_uri()
    if results_dir is not None and tracking_uri.split("://", 1)[0].split("+", 1)[0] in DATABASE_SCHEMES:
        return (Path(results_dir) / "mlartifacts").resolve().as_uri()
    return None


def _now_ms() -> int:
    return int(time.time() * 1000)


class Tracker:
    """The MLflow side of one study: a client, the parent run, and the child runs written in batches."""

    def __init__(self, tracking_uri: str, experiment: str, artifact_location: str | None = None,
                 answers: mlflow_store.Answers | None = None) -> None:
        from mlflow import MlflowClient

        self.answers = answers or mlflow_store.Answers()  # marked after each call the store answered
        mlflow_store.prepare(tracking_uri, artifact_location)  # a new SQLite store: a copy, not migrations
        self.tracking_uri = tracking_uri
        self.client = MlflowClient(tracking_uri)
        self.experiment_id = self._experiment(experiment, artifact_location)
        self.parent_id: str | None = None
        self.axis_name: str | None = None
        self._sink: ApiSink | SqlSink | None = None
        self._ids: dict[str, str] | None = None  # run key -> child run id
        self._before: set[str] = set()  # run keys whose child run existed before this session
        self._steps: dict[str, set[int]] = {}  # run key -> steps logged or buffered
        self._batch = Batch()
        self._last_flush = time.monotonic()
        self._shared: dict[str, str] = {}  # parameters on the parent, not repeated on each child
        self._host = socket.gethostname()  # a child that ran elsewhere says where
        self.answers.mark()

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
        self._shared = shared_params(study)
        self.describe(study.description or study.name)
        if self.find_parent(study.spec_hash):
            # A later session (a resume, a tuning round with more points): a child leaves out only what the
            # parent already holds with the same value; its own value of a parameter overrides the parent's.
            held = self.client.get_run(self.parent_id).data.params
            self._shared = {k: v for k, v in self._shared.items() if held.get(k) == v}
            self.client.update_run(self.parent_id, status="RUNNING")
            self.answers.mark()
            return self.parent_id
        tags = {ROLE: "study", SPEC_HASH: study.spec_hash, "study": study.name, "kind": study.kind,
                "mlflow.note.content": study.description or study.name, "host": self._host,
                **environment.flat(environment.describe())}  # where it ran: versions, commit, CPU, BLAS
        run = self.client.create_run(self.experiment_id, tags=tags, run_name=study.name)
        self.parent_id = run.info.run_id
        params = {"kind": study.kind, "axis": study.axis, "seeds": study.seeds, "n_evals": study.n_evals,
                  "configurations": len(study.points), "runs": len(study.run_keys),
                  **{f"budget.{k}": v for k, v in study.budget.items()}}
        self._log_params(self.parent_id, {**self._shared, **params})
        self.answers.mark()
        return self.parent_id

    def describe(self, description: str) -> None:
        """Set the experiment's description (its page shows it) and mark it a training experiment.

        MLflow 3.17's UI reads the kind from its GenAI / Model training switch (or `?workflowType=
        machine_learning` in the URL, which `bisweep ui` opens), not from the tag; other UIs read the tag.
        """
        self.client.set_experiment_tag(self.experiment_id, DESCRIPTION, description)
        self.client.set_experiment_tag(self.experiment_id, *EXPERIMENT_KIND)

    def end_study(self, status: str, counts: dict[str, int], active_seconds: float | None = None) -> None:
        """Close the parent run with counts of finished, diverged and failed runs. `active_seconds`: the time the
        study's sessions ran, which its duration shows (a re-run's end minus the first start counts the pause)."""
        from mlflow.entities import RunTag

        self.flush(force=True)
        self.client.log_batch(self.parent_id, tags=[RunTag(f"runs.{k}", str(v)) for k, v in counts.items()])
        end_time = None
        if active_seconds is not None:
            start = self.client.get_run(self.parent_id).info.start_time
            end_time = start + int(active_seconds * 1000) if start else None
        self.client.set_terminated(self.parent_id, status, end_time=end_time)
        self.answers.mark()

    def log_report(self, report_dir: Path, name: str = "report") -> None:
        """Upload the report's tables and plots as artifacts of the parent run (under `name`/)."""
        self.client.log_artifacts(self.parent_id, str(report_dir), name)
        self.answers.mark()

    # ---- child runs ----
    @property
    def sink(self) -> ApiSink | SqlSink:
        """Where child runs are written (MLflow's database in bulk when it has one, else its API)."""
        if self._sink is None:
            self._sink = sink_for(self.client, self.experiment_id, self.parent_id)
        return self._sink

    def children(self) -> dict[str, str]:
        """Run key -> MLflow run id of the parent's children (created or queued)."""
        if self._ids is None:
            self._ids = dict(self.sink.children())
            self._before = set(self._ids)
            self.answers.mark()
        return self._ids

    def child(self, run_key: str, point: Point, seed: int | None, where: dict[str, str] | None = None,
              parent: str | None = None, tags: dict[str, str] | None = None) -> None:
        """Make sure the child run of (configuration, seed) exists: found by its key tag, else queued for creation
        (nested under `parent` when given, else the study's run; `seed` None: the configuration's summary)."""
        children = self.children()
        if run_key in self._steps:
            return
        if run_key in children:
            self._steps[run_key] = self.sink.steps(children[run_key])
            return
        tags = {PARENT: parent or self.parent_id, ROLE: "run" if seed is not None else "configuration",
                RUN_KEY: run_key, "configuration": point.key, "status": "running", **(tags or {})}
        if where and where.get("host") != self._host:
            tags.update({k: v for k, v in where.items() if v})
        name = run_name(point.to_dict(), seed, self.axis_name) if seed is not None else \
            run_name(point.to_dict(), 0, self.axis_name).rsplit(" · seed", 1)[0] + " · seeds"
        params = {k: str(v)[:6000] for k, v in child_params(point, seed, self.axis_name).items()}
        params = {k: v for k, v in params.items() if self._shared.get(k) != v}
        self._batch.new[run_key] = NewRun(name, {k: str(v)[:8000] for k, v in tags.items()}, params, _now_ms())
        self._steps[run_key] = set()

    def has_step(self, run_key: str, step: int) -> bool:
        """Whether this session has logged (or buffered) the run's record at `step`."""
        return step in self._steps.get(run_key, ())

    def existed_before(self, run_key: str) -> bool:
        """Whether the run's child was created by an earlier session (which may have missed records)."""
        self.children()
        return run_key in self._before

    def _log_params(self, run_id: str, params: dict[str, Any]) -> None:
        from mlflow.entities import Param

        items = [Param(k, str(v)[:6000]) for k, v in params.items()]
        for i in range(0, len(items), MAX_PARAMS_PER_BATCH):
            self.client.log_batch(run_id, params=items[i:i + MAX_PARAMS_PER_BATCH])

    def add(self, run_key: str, point: Point, seed: int, record: dict[str, Any],
            where: dict[str, str] | None = None) -> None:
        """Buffer a record's numeric values as metrics at step = iteration (once per step)."""
        self.add_points(run_key, point, seed, int(record["iteration"]), mlflow_metrics(record), where)

    def add_points(self, run_key: str, point: Point, seed: int, step: int, points: Points,
                   where: dict[str, str] | None = None) -> None:
        """Buffer a record's metric points (`metric_points.mlflow_metrics`) at `step` (once per step)."""
        self.child(run_key, point, seed, where)
        steps = self._steps[run_key]
        if step in steps:
            return
        steps.add(step)
        ts = _now_ms()
        self._batch.add(run_key, [(k, v, ts, step) for k, v in points])

    def finish(self, run_key: str, status: str, error: str | None = None, span: list[float] | None = None) -> None:
        """Close a run at the next flush: FINISHED for finished/diverged (the status tag says which), else FAILED.
        `span`: when the run started and ended (epoch seconds), its MLflow times when it is created in the same
        write (a run that began and ended between two writes would otherwise last 0 ms)."""
        self._batch.ended[run_key] = (status, error[:5000] if error else None)
        new = self._batch.new.get(run_key)
        if span and new is not None:
            new.start_ms, new.end_ms = int(span[0] * 1000), int(span[1] * 1000)

    @property
    def buffered(self) -> int:
        """Metric points waiting for the next flush."""
        return self._batch.size

    def flush(self, force: bool = False, metrics: int = FLUSH_METRICS) -> None:
        """Write what is buffered (every run at once) when `metrics` points have gathered or enough time has passed."""
        if not self._batch or (not force and self._batch.size < metrics
                               and time.monotonic() - self._last_flush < FLUSH_SECONDS):
            return
        batch, self._batch = self._batch, Batch()
        try:
            self.sink.write(batch, self.children())
        except Exception:
            for key in {*batch.new, *batch.metrics, *batch.ended}:  # asked of the store again when sent again
                self._steps.pop(key, None)
            raise
        self.answers.mark()
        for key in batch.ended:  # an ended run is logged completely: forget its steps (memory stays flat)
            self._steps.pop(key, None)
        self._last_flush = time.monotonic()

    # ---- backfill from disk ----
    def sync(self, store: ResultStore, index: dict[str, tuple[Point, int]], synced: set[str]) -> set[str]:
        """Log every ended run of `index` not yet in `synced` from the on-disk store; the runs done."""
        done = set()
        for key, status in store.ended().items():
            if key in synced or key not in index:
                continue
            point, seed = index[key]
            summary = store.summary(key) or {}
            for rec in store.records(key):
                self.add(key, point, seed, rec, summary.get("where"))
            self.child(key, point, seed, summary.get("where"))
            self.finish(key, status, summary.get("error"), summary.get("span"))
            self.flush(metrics=BULK_METRICS)
            if status in DONE_STATUSES:
                done.add(key)
        self.flush(force=True)
        return done


class SyncLog:
    """Run keys whose MLflow child run is complete, per parent run (a text file, one key a line)."""

    def __init__(self, store: ResultStore, parent_id: str) -> None:
        self.path = folder(store.root, store.root / "mlflow_synced") / f"{parent_id}.txt"
        self.keys = set(self.path.read_text().split()) if self.path.exists() else set()

    def add(self, run_key: str) -> None:
        """Record a completely logged run."""
        self.add_many([run_key])

    def add_many(self, run_keys: list[str]) -> None:
        """Record completely logged runs (one write)."""
        new = [k for k in dict.fromkeys(run_keys) if k not in self.keys]
        if new:
            self.keys.update(new)
            with open_file(self.path, "a") as fh:
                fh.write("".join(k + "\n" for k in new))
