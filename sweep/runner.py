"""Run a study: one Ray Tune experiment per session, driver-side recording to disk and MLflow, then the report.

Re-running a study (or `--resume`) finishes only what is missing, from the study's own records: the
runs finished on disk are never handed to Tune again; the others go to a fresh Tune experiment, through
a searcher that makes each trial's config when Tune asks for it (sweep/dispatch.py), so the first trial
starts at once at any number of runs. A run an earlier driver left midway continues from its last
checkpoint, MLflow child runs are found by key instead of created again, and MLflow is connected on a
thread while Ray starts.
"""
from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import shutil
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TextIO

from ray.tune import Callback

from problems.validation import ParameterError
from sweep import figures, kinds, mlflow_store, options, rounds
from sweep.dispatch import RunQueue, StudySearcher
from sweep.lock import StudyLock
from sweep.mlflow_writer import MlflowCallback
from sweep.model import Point, RunSpec, Study, TrialConfig
from sweep.processes import ProcessGuard
from sweep.progress import Progress, ProgressCallback
from sweep.ray_session import ClusterError, quiet_logs, start_ray, stop_ray, tune_env
from sweep.recording import Slim, StoreCallback, config_of, done_registry
from sweep.report import build_report
from sweep.store import ResultStore
from sweep.tracking import SyncLog, Tracker, default_tracking_uri, local_artifact_location
from sweep.trainable import study_trainable

__all__ = ["ClusterError", "Outcome", "run_study", "start_ray"]


@dataclasses.dataclass
class Outcome:
    """What a study run produced."""

    study: Study
    results_dir: Path
    tracking_uri: str
    parent_run_id: str
    counts: dict[str, int]
    report_dir: Path | None
    interrupted: bool = False

    @property
    def complete(self) -> bool:
        """True when every run finished or diverged."""
        return self.counts["failed"] == 0 and self.counts["missing"] == 0


def _trial_name(trial: Any) -> str:
    return config_of(trial).key


def _trial_dirname(trial: Any) -> str:
    return trial.trial_id


class Timeline(Callback):
    """When this session's phases happened (seconds after the driver started), kept in sessions.jsonl."""

    def __init__(self, start: float) -> None:
        self.start = start
        self.marks: dict[str, float] = {}

    def __getstate__(self) -> dict[str, Any]:
        return {}

    def mark(self, name: str) -> None:
        """Wall seconds since the driver started, and the driver's CPU seconds (all its threads) then."""
        if name not in self.marks:
            self.marks[name] = round(time.time() - self.start, 3)
            self.marks[f"{name}_cpu"] = round(time.process_time(), 3)

    def on_trial_start(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        self.mark("first_trial_started")

    def on_trial_result(self, iteration: int, trials: list, trial: Any, result: dict[str, Any], **info: Any) -> None:
        self.mark("first_result")


# ---------------------------------------------------------------- Tune
def _tuner(study: Study, searcher: StudySearcher, exp_path: str, callbacks: list[Callback]) -> Any:
    """A fresh Tune experiment over what the searcher hands out (experiments are never restored)."""
    from ray import tune
    from ray.tune import CheckpointConfig, FailureConfig, RunConfig, TuneConfig

    trainable = tune.with_resources(study_trainable, {"cpu": study.resources["cpu"]})
    storage, name = exp_path.rsplit("/", 1)
    return tune.Tuner(
        trainable,
        tune_config=TuneConfig(search_alg=searcher, num_samples=-1, reuse_actors=True,
                               max_concurrent_trials=study.max_concurrent,
                               trial_name_creator=_trial_name, trial_dirname_creator=_trial_dirname),
        run_config=RunConfig(name=name, storage_path=storage, verbose=0, callbacks=callbacks,
                             failure_config=FailureConfig(max_failures=study.max_failures),
                             checkpoint_config=CheckpointConfig(num_to_keep=2)),
    )


# ---------------------------------------------------------------- the study
def run_study(study: Study, results_dir: str | Path | None = None, *, address: str | None = None,
              tracking_uri: str | None = None, storage_path: str | None = None, resume: bool = False,
              num_cpus: int | None = None, report: bool = True, out: TextIO | None = None) -> Outcome:
    """Run (or finish) a validated study and write its report; see the module docstring."""
    out = out or sys.stdout
    root = Path(results_dir or Path("results") / study.name).resolve()
    options.check_results_dir(root)
    options.check_tracking_uri(tracking_uri)
    options.check_num_cpus(num_cpus)
    options.check_resources(study.resources["cpu"], address, num_cpus)
    options.check_address(address)
    if resume and not (root / "study.json").exists():
        raise FileNotFoundError(f"nothing to resume: no results of study '{study.name}' in {root}")
    quiet_logs()
    root.mkdir(parents=True, exist_ok=True)
    with StudyLock(str(root)):  # one driver per results directory
        if kinds.get(study.kind).growth(study) is None:
            return _run_locked(study, root, address, tracking_uri, storage_path, num_cpus, report, out)

        def session(st: Study, with_report: bool) -> Outcome:
            return _run_locked(st, root, address, tracking_uri, storage_path, num_cpus, with_report, out,
                               ray_held=True)

        say = Progress(study, 0, out).message
        with _ray_up(root, address, num_cpus, say, " for every tuning round"):  # one Ray for all the rounds
            return rounds.run_rounds(study, ResultStore(root), session, report, out)


@contextlib.contextmanager
def _ray_up(root: Path, address: str | None, num_cpus: int | None, say: Any, purpose: str = "") -> Iterator[None]:
    """Ray started (or connected to) for the block, and for a local Ray the process guard; both stopped after.

    Ray stops on this thread, not on one overlapping later work: the garbage collector of this thread could
    then reach Ray's core worker after its shutdown, which ends the process at once (exit code 1, nothing printed).
    """
    where = f"the Ray cluster at {address}" if address else f"a local Ray ({num_cpus or os.cpu_count()} CPUs)"
    say(f"bisweep: starting {where}{purpose}")
    guard = None if address else ProcessGuard(str(root))
    if guard is not None and guard.start():
        say("bisweep: stopped processes a killed earlier driver of this study left running")
    started = False
    try:
        started = start_ray(address, num_cpus)
        yield
    finally:
        if started:
            stop_ray()
        if guard is not None:
            guard.stop()


@dataclasses.dataclass
class _Session:
    """What one driver session works with."""

    study: Study
    store: ResultStore
    index: dict[str, tuple[Point, int]]
    exp_path: str
    timeline: Timeline
    out: TextIO
    tracking_uri: str
    ray_held: bool  # Ray started (and guarded) by the caller for several sessions: neither started nor stopped here


def _run_locked(study: Study, root: Path, address: str | None, tracking_uri: str | None, storage_path: str | None,
                num_cpus: int | None, report: bool, out: TextIO, ray_held: bool = False) -> Outcome:
    """`run_study` once the options are checked and the results directory is ours."""
    timeline = Timeline(_process_start())
    timeline.mark("validated")
    store = ResultStore(root)
    storage = storage_path or str(root / "ray")
    written = mlflow_store.Background(lambda: store.write_study(study), "bisweep-study-json")  # while Ray starts
    uri = tracking_uri or default_tracking_uri(root)
    say = Progress(study, 0, out).message
    say(f"bisweep: study '{study.name}' ({study.kind}): {len(study.points)} configurations x {len(study.seeds)} seeds "
        f"= {len(study.run_keys)} runs; results in {root}")
    say(f"bisweep: MLflow tracking at {uri}")
    index = {p.run_key(s): (p, s) for p in study.points for s in study.seeds}
    session = _Session(study, store, index, f"{storage.rstrip('/')}/{study.name}-{study.spec_hash}", timeline, out,
                       uri, ray_held)
    connecting = connect_tracking(uri, study, store, index)  # on a thread, while Ray starts
    done = store.done(index)
    pending = [(p, s) for p in study.points for s in study.seeds if p.run_key(s) not in done]
    if pending:
        if done:
            say(f"bisweep: resuming: {len(done)} of {len(study.run_keys)} runs already done")
        tracker, synced, writer = _run_pending(session, pending, len(done), connecting, address, num_cpus, report)
    else:
        say(f"bisweep: all {len(study.run_keys)} runs already done")
        (tracker, synced), writer = connecting.result(), None
    return _finish(session, tracker, synced, writer, written, report, len(pending))


def _finish(session: _Session, tracker: Tracker, synced: SyncLog, writer: MlflowCallback | None, written: Any,
            report: bool, runs: int) -> Outcome:
    """After the runs: sync MLflow, build the report, end the parent run, record the session."""
    study, store, index, timeline = session.study, session.store, session.index, session.timeline
    root, out = store.root, session.out
    say = Progress(study, 0, out).message
    synced.add_many(tracker.sync(store, index, synced.keys))  # anything MLflow missed while running
    timeline.mark("synced")
    written.result()
    counts = count_runs(store, study)
    interrupted = counts["missing"] > 0
    report_dir = None
    if report:
        say("bisweep: building the report")
        rep = build_report(root, out=out)
        report_dir = rep.directory
        tracker.log_report(report_dir)
        timeline.mark("reported")
    status = "FINISHED" if counts["failed"] == counts["missing"] == 0 else ("KILLED" if interrupted else "FAILED")
    tracker.end_study(status, counts)
    timeline.mark("end")
    _write_session(store, timeline, writer, runs)
    say(f"bisweep: {counts['finished']} finished, {counts['diverged']} diverged, {counts['failed']} failed, "
        f"{counts['missing']} not run | MLflow parent run {tracker.parent_id}")
    if counts["missing"] == 0 and "://" not in session.exp_path:
        shutil.rmtree(session.exp_path, ignore_errors=True)  # Tune's checkpoints serve only an unfinished study
    return Outcome(study, root, session.tracking_uri, tracker.parent_id, counts, report_dir, interrupted)


def _run_pending(session: _Session, pending: list[tuple[Point, int]], done_before: int, connecting: Any,
                 address: str | None, num_cpus: int | None,
                 report: bool) -> tuple[Tracker, SyncLog, MlflowCallback]:
    """Run the pending runs in one fresh Tune experiment; the tracker, its sync log and the MLflow writer."""
    progress = Progress(session.study, done_before, session.out)
    held = contextlib.nullcontext() if session.ray_held else _ray_up(session.store.root, address, num_cpus,
                                                                     progress.message)
    try:
        with held:
            session.timeline.mark("ray_ready")
            return _run_tune(session, pending, progress, connecting, address is not None, report)
    finally:
        session.timeline.mark("ray_down")


def _run_tune(session: _Session, pending: list[tuple[Point, int]], progress: Progress, connecting: Any,
              on_cluster: bool, report: bool) -> tuple[Tracker, SyncLog, MlflowCallback]:
    """`_run_pending` once Ray is up."""
    import ray

    study, store = session.study, session.store
    if report:  # the report's plotting library loads while the driver waits for the first trial (~0.3 s)
        mlflow_store.Background(figures.pyplot, "bisweep-preload-matplotlib")
    cpus = ray.cluster_resources().get("CPU", 0.0)
    if on_cluster and (warning := options.cluster_cpu_warning(study.resources["cpu"], cpus)):
        progress.message(warning)
    tracker, synced = connecting.result()
    session.timeline.mark("mlflow_ready")
    registry_name = f"bisweep-done-{study.name}-{study.spec_hash}"
    registry = done_registry(registry_name)
    slots = max(1, int(cpus // study.resources["cpu"]))
    if study.max_concurrent:
        slots = min(slots, study.max_concurrent)
    queue = RunQueue(pending, _config_maker(study, registry_name, store.checkpoints()), study.runs_per_trial, slots)
    writer = MlflowCallback(tracker, session.index, synced, store)
    recorder = StoreCallback(store, session.index, registry, queue)
    callbacks = [recorder, writer, ProgressCallback(progress, lambda t: recorder.failed.get(t.trial_id, [])),
                 session.timeline, Slim()]
    if "://" not in session.exp_path and Path(session.exp_path).exists():
        _drop_old_trials(session.exp_path, store)
    progress.message(f"bisweep: running {len(pending)} runs")
    session.timeline.mark("tune_started")
    try:
        with tune_env(max_pending=slots + 1):
            _tuner(study, StudySearcher(queue), session.exp_path, callbacks).fit()
    finally:
        session.timeline.mark("fit_done")
        if writer.backlog:
            progress.message(f"bisweep: finishing MLflow logging ({writer.backlog} results queued)")
        writer.close()
        session.timeline.marks["trials"] = queue.trials_made
    return tracker, synced, writer


def _config_maker(study: Study, registry: str, checkpoints: dict[str, str]) -> Any:
    """make(key, runs) -> the TrialConfig of a trial (with the midway checkpoints of its runs, if any)."""
    def make(key: str, runs: tuple[RunSpec, ...]) -> TrialConfig:
        resume = {r.run_key: checkpoints[r.run_key] for r in runs if r.run_key in checkpoints}
        return TrialConfig(key, runs, study.checkpoint_seconds, study.report_seconds, tuple(study.imports), registry,
                           resume)

    return make


def _drop_old_trials(exp_path: str, store: ResultStore) -> None:
    """Delete the trial directories of earlier sessions, except those holding a checkpoint a run resumes from."""
    keep = {Path(c).resolve() for c in store.checkpoints().values()}
    for d in Path(exp_path).iterdir():
        if d.is_dir() and not any(d.resolve() in k.parents for k in keep):
            shutil.rmtree(d, ignore_errors=True)


def _process_start() -> float:
    """When this process started (epoch seconds; on Linux its /proc entry's time, elsewhere now)."""
    try:
        return os.stat(f"/proc/{os.getpid()}").st_ctime
    except OSError:
        return time.time()


def _write_session(store: ResultStore, timeline: Timeline, writer: MlflowCallback | None, runs: int) -> None:
    """One line per session in sessions.jsonl: its phases, runs and how MLflow kept up."""
    line = {"started": timeline.start, "runs": runs, **timeline.marks}
    if writer is not None:
        line.update(mlflow_max_lag=round(writer.max_lag, 3), mlflow_drain=round(writer.drain_seconds, 3))
    with open(store.root / "sessions.jsonl", "a") as fh:
        fh.write(json.dumps(line) + "\n")


def connect_tracking(uri: str, study: Study, store: ResultStore, index: dict[str, tuple[Point, int]]) -> Any:
    """The study's Tracker, parent run and sync log, made on a thread (`.result()`); a one-line error when
    the tracking store cannot be used (a server that does not answer: at once, before Ray starts)."""
    if uri.startswith(("http://", "https://")):
        try:  # the MLflow client would retry for minutes; ask the server once, quickly
            urllib.request.urlopen(uri.rstrip("/") + "/health", timeout=10).close()
        except OSError as exc:
            raise ParameterError(f"tracking-uri: no MLflow server answers at {uri} ({exc})") from exc

    def connect() -> tuple[Tracker, SyncLog]:
        try:
            tracker = Tracker(uri, study.name, local_artifact_location(uri, store.root))
            parent = tracker.start_study(study)
        except Exception as exc:  # noqa: BLE001  any store failure becomes the option's error
            raise ParameterError(f"tracking-uri: cannot use the MLflow store at {uri} "
                                 f"({type(exc).__name__}: {exc})") from exc
        synced = SyncLog(store, parent)
        synced.add_many(tracker.sync(store, index, synced.keys))  # what a killed driver stored but never sent
        return tracker, synced

    return mlflow_store.Background(connect, "bisweep-mlflow-connect")


def count_runs(store: ResultStore, study: Study) -> dict[str, int]:
    """Runs finished, diverged, failed and not run, from the store's index of ended runs."""
    counts = {"finished": 0, "diverged": 0, "failed": 0}
    seen = 0
    for key in study.run_keys:
        status = store.status(key)
        if status is not None:
            counts[status if status in counts else "failed"] += 1
            seen += 1
    counts["missing"] = len(study.run_keys) - seen
    return counts
