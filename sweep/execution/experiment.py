"""One Ray Tune experiment over a session's pending runs: the Tuner, the searcher handing out trials, and the
callbacks that record results (to disk and MLflow), show progress and mark the session's timeline.

Ray Tune and what it pulls in take ~0.8 s to import: the runner loads this module on a thread while Ray starts.
"""
from __future__ import annotations

import shutil
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import ray
from ray import tune
from ray.tune import Callback, CheckpointConfig, FailureConfig, RunConfig, Stopper, TuneConfig
from ray.tune.stopper import CombinedStopper

from sweep.execution import batching, options
from sweep.execution.actor_reuse import keep_starting_actors
from sweep.execution.background import Background
from sweep.execution.ctrl_c import CtrlC
from sweep.execution.dispatch import RunQueue, StudySearcher
from sweep.execution.mlflow_writer import MlflowCallback
from sweep.execution.node_watch import NodeLost, NodeWatch, local_raylet
from sweep.execution.progress import Progress, trial_error
from sweep.execution.ray_cluster import started_here, trials_on_idle_workers, tune_env
from sweep.execution.recording import DoneRegistry, Slim, StoreCallback, config_of
from sweep.execution.session import Session, Timeline, long_lived
from sweep.execution.trainable import META, chunks, study_trainable
from sweep.report import figures
from sweep.results.store import ResultStore
from sweep.study.model import Point, RunSpec, Study, TrialConfig
from sweep.tracking import browse


def run(session: Session, pending: list[tuple[Point, int]], progress: Progress, connecting: Any, on_cluster: bool,
        report: bool) -> MlflowCallback:
    """The pending runs through one fresh Tune experiment (Ray is up); the MLflow writer, stopping (`session.writer`
    too: the runner closes it, whether this returns or raises)."""
    study, store = session.study, session.store
    if report:  # the report's plotting library loads while the driver waits for the first trial (~0.3 s)
        Background(figures.pyplot, "bisweep-preload-matplotlib", yielding=True)
    have = ray.cluster_resources()
    cpus = have.get("CPU", 0.0)
    if on_cluster and (warning := options.cluster_warning(study.resources, have)):
        progress.message(warning)
    # Named for this session alone: a Ray that outlives the study (a user's head, a cluster) must not hand a later
    # study of the same name this one's finished runs (its trials would skip them: not run, silently).
    registry_name = f"bisweep-done-{study.name}-{uuid.uuid4().hex}"
    registry = DoneRegistry(registry_name)
    slots = max(1, int(cpus // study.resources["cpu"]))
    if gpu := study.resources.get("gpu", 0.0):
        slots = min(slots, max(1, int(have.get("GPU", 0.0) // gpu)))
    if study.max_concurrent:
        slots = min(slots, study.max_concurrent)
    mode = batching.resolve(study)
    if mode.on:  # the runs of one batch next to each other, so that a trial takes them together
        pending = batching.grouped(pending)
    queue = RunQueue(pending, _config_maker(study, registry_name, store.checkpoints(), mode.on), study.runs_per_trial,
                     slots, batching.batch_key if mode.on else None)
    writer = MlflowCallback(_marked(connecting.result, session.timeline, "mlflow_ready"), session.index, store,
                            session.answers, stream=not browse.browsing(study))
    recorder = StoreCallback(store, session.index, registry, queue)
    callbacks = [recorder, writer, ProgressCallback(progress, lambda t: recorder.failed.get(t.trial_id, [])),
                 TimelineCallback(session.timeline), Slim()]
    if "://" not in session.exp_path and Path(session.exp_path).exists():
        _drop_old_trials(session.exp_path, store)
    progress.message(f"bisweep: running {len(pending)} runs ({mode.why})")
    session.timeline.mark("tune_started")
    ctrl_c = CtrlC(progress.message)
    watch = NodeWatch(local_raylet())
    try:
        with tune_env(max_pending=slots + 1), trials_on_idle_workers(enabled=started_here()), keep_starting_actors(), \
                ctrl_c.catching(), watch:
            tuner = _tuner(study, StudySearcher(queue), session.exp_path, callbacks, CombinedStopper(ctrl_c, watch))
            with long_lived():
                _fit(tuner, watch)
    finally:
        session.stopped = ctrl_c.pressed.is_set()
        session.timeline.mark("fit_done")
        if writer.backlog:
            progress.message(f"bisweep: finishing MLflow logging ({writer.backlog} results queued)")
        session.writer = writer
        writer.stop()  # it logs what is queued while Ray stops; the runner closes it once Ray is down
        session.timeline.marks["trials"] = queue.trials_made
        registry.end()
    if watch.lost is not None:
        done = len(store.done(session.index))
        raise NodeLost(f"bisweep: Ray node lost: {watch.lost}; {done} of {len(session.index)} runs are done and kept "
                       f"in {store.root}: run the same command again to resume")
    return writer


def _fit(tuner: Any, watch: NodeWatch) -> None:
    """`tuner.fit()`; the interruption the watch makes when Tune cannot stop after a lost node ends it quietly."""
    try:
        tuner.fit()
    except KeyboardInterrupt:
        if not watch.interrupted:
            raise


def _marked(work: Callable[[], Any], timeline: Timeline, name: str) -> Callable[[], Any]:
    """work, marking `name` on the timeline once it has returned."""
    def marked() -> Any:
        value = work()
        timeline.mark(name)
        return value

    return marked


def _config_maker(study: Study, registry: str, checkpoints: dict[str, str], batched: bool = False) -> Any:
    """make(key, runs) -> the TrialConfig of a trial (with the midway checkpoints of its runs, if any)."""
    def make(key: str, runs: tuple[RunSpec, ...]) -> TrialConfig:
        resume = {r.run_key: checkpoints[r.run_key] for r in runs if r.run_key in checkpoints}
        return TrialConfig(key, runs, study.checkpoint_seconds, study.report_seconds, tuple(study.imports), registry,
                           resume, batched, study.backend, mlflow_points=not browse.browsing(study))

    return make


def _drop_old_trials(exp_path: str, store: ResultStore) -> None:
    """Delete the trial directories of earlier sessions, except those holding a checkpoint a run resumes from."""
    keep = {Path(c).resolve() for c in store.checkpoints().values()}
    for d in Path(exp_path).iterdir():
        if d.is_dir() and not any(d.resolve() in k.parents for k in keep):
            shutil.rmtree(d, ignore_errors=True)


def _tuner(study: Study, searcher: StudySearcher, exp_path: str, callbacks: list[Callback], stop: Stopper) -> Any:
    """A fresh Tune experiment over what the searcher hands out (experiments are never restored)."""
    trainable = tune.with_resources(study_trainable, {k: v for k, v in study.resources.items() if v})
    storage, name = exp_path.rsplit("/", 1)
    return tune.Tuner(
        trainable,
        tune_config=TuneConfig(search_alg=searcher, num_samples=-1, reuse_actors=True,
                               max_concurrent_trials=study.max_concurrent,
                               trial_name_creator=_trial_name, trial_dirname_creator=_trial_dirname),
        run_config=RunConfig(name=name, storage_path=storage, verbose=0, callbacks=callbacks, stop=stop,
                             failure_config=FailureConfig(max_failures=study.max_failures),
                             checkpoint_config=CheckpointConfig(num_to_keep=2)),
    )


def _trial_name(trial: Any) -> str:
    return config_of(trial).key


def _trial_dirname(trial: Any) -> str:
    return trial.trial_id


class ProgressCallback(Callback):
    """Tune callback feeding a `Progress` and refreshing the display (O(1) per event)."""

    def __init__(self, progress: Progress, failed_runs: Callable[[Any], list[str]] | None = None) -> None:
        self.progress = progress
        self.failed_runs = failed_runs  # trial -> the runs its failure failed (default: all of its runs)

    def __getstate__(self) -> dict[str, Any]:
        return {}  # not needed in Tune's pickled run config

    def on_step_begin(self, iteration: int, trials: list, **info: Any) -> None:
        self.progress.show()

    def on_trial_start(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        self.progress.trial_started(trial.trial_id)

    def on_trial_result(self, iteration: int, trials: list, trial: Any, result: dict[str, Any], **info: Any) -> None:
        if result.get(META) is not None:
            self.progress.result(trial.trial_id, chunks(result))

    def on_trial_complete(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        self.progress.trial_ended(trial.trial_id)

    def on_trial_error(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        cfg = trial.config["trial"]
        self.progress.trial_ended(trial.trial_id)
        self.progress.runs_failed(self.failed_runs(trial) if self.failed_runs else cfg.run_keys)
        where = getattr(trial, "error_file", None)
        self.progress.message(f"bisweep: trial {cfg.key} failed: {trial_error(trial)}"
                              + (f" (traceback: {where})" if where else ""))

    def on_experiment_end(self, trials: list, **info: Any) -> None:
        self.progress.close()


class TimelineCallback(Callback):
    """Marks the first trial's start and the first result on the session's timeline."""

    def __init__(self, timeline: Timeline) -> None:
        self.timeline = timeline

    def __getstate__(self) -> dict[str, Any]:
        return {}  # not needed in Tune's pickled run config

    def on_trial_start(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        self.timeline.mark("first_trial_started")

    def on_trial_result(self, iteration: int, trials: list, trial: Any, result: dict[str, Any], **info: Any) -> None:
        self.timeline.mark("first_result")
