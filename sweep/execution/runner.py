"""Run a study: one Ray Tune experiment per session, driver-side recording to disk and MLflow, then the report.

Re-running a study (or `--resume`) finishes only what is missing, from the study's own records: the
runs finished on disk are never handed to Tune again; the others go to a fresh Tune experiment, through
a searcher that makes each trial's config when Tune asks for it (sweep/execution/dispatch.py), so the first trial
starts at once at any number of runs. A run an earlier driver left midway continues from its last
checkpoint, MLflow child runs are found by key instead of created again, and MLflow is connected on a
thread while Ray starts.
"""
from __future__ import annotations

import contextlib
import dataclasses
import functools
import json
import os
import shutil
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any, TextIO

from problems.shared.errors import ParameterError
from sweep import kinds
from sweep.execution import options, rounds
from sweep.execution.background import Background
from sweep.execution.lock import StudyLock
from sweep.execution.processes import PIDS_FILE, ProcessGuard
from sweep.execution.progress import Progress, print_line
from sweep.execution.ray_cluster import (RAY_START_SECONDS, ClusterError, check_head, quiet_logs, start_ray,
                                         stop_ray)
from sweep.execution.session import Session, Timeline, process_start
from sweep.report.build import build_report
from sweep.results import storage_sync
from sweep.results.safe_files import check_tree, open_file
from sweep.results.store import ResultStore
from sweep.study import spec
from sweep.study.model import Point, Study
from sweep.study.sources import checked_dir
from sweep.tracking import browse, mlflow_store
from sweep.tracking.masking import mask, mask_text
from sweep.tracking.tracker import SyncLog, Tracker, default_tracking_uri, local_artifact_location

if TYPE_CHECKING:
    from sweep.execution.mlflow_writer import MlflowCallback

__all__ = ["ClusterError", "Outcome", "run_study", "start_ray"]


@dataclasses.dataclass
class Outcome:
    """What a study run produced."""

    study: Study
    results_dir: Path
    tracking_uri: str
    parent_run_id: str | None  # None when the MLflow store stopped answering
    counts: dict[str, int]
    report_dir: Path | None
    interrupted: bool = False
    stopped: bool = False  # by Ctrl-C
    mlflow_unsent: int = 0  # ended runs on disk whose results MLflow did not get (the next run sends them)

    @property
    def interrupted_by_user(self) -> bool:
        """Ctrl-C stopped the study before every run had run."""
        return self.stopped and self.counts["missing"] > 0

    @property
    def complete(self) -> bool:
        """True when every run finished or diverged, and MLflow has them all."""
        return self.counts["failed"] == 0 and self.counts["missing"] == 0 and self.mlflow_unsent == 0


@dataclasses.dataclass(frozen=True)
class Driver:
    """Where this driver runs a study and writes its results: the checked options, the same for every session."""

    root: Path
    address: str | None
    tracking_uri: str | None
    storage_path: str | None
    num_cpus: int | None
    out: TextIO
    ray_start_timeout: float = RAY_START_SECONDS

    def say(self, text: str) -> None:
        """A line of the driver's own (a phase)."""
        print_line(self.out, text)


# ---------------------------------------------------------------- the study
def run_study(study: Study | str, results_dir: str | Path | None = None, *, address: str | None = None,
              tracking_uri: str | None = None, storage_path: str | None = None, resume: bool = False,
              num_cpus: int | None = None, report: bool = True, out: TextIO | None = None,
              ray_start_timeout: float = RAY_START_SECONDS) -> Outcome:
    """Run (or finish) a study (validated, or a built-in name or YAML file) and write its report; see the module
    docstring."""
    study = study if isinstance(study, Study) else spec.load(study)
    out = out or sys.stdout
    root = checked_dir(results_dir or Path("results") / study.name)
    options.check_results_dir(root)
    check_tree(root)  # no link in it, before anything is written there (sweep/results/safe_files.py)
    options.check_tracking_uri(tracking_uri)
    options.check_storage(storage_path)
    options.check_num_cpus(num_cpus)
    address, address_field = options.ray_address(address)
    options.check_resources(study.resources, address, num_cpus)
    options.check_address(address, address_field)
    if address and address != "auto" and not address.startswith("ray://"):
        check_head(address, address_field)  # Ray's handshake, before anything is written
    if storage_path and not (root / "study.json").exists():
        storage_sync.pull(root, storage_path)  # results another machine left in storage: this driver continues them
    if resume and not (root / "study.json").exists():
        raise FileNotFoundError(f"nothing to resume: no results of study '{study.name}' in {root}")
    quiet_logs()
    root.mkdir(parents=True, exist_ok=True)
    driver = Driver(root, address, tracking_uri, storage_path, num_cpus, out, ray_start_timeout)
    with StudyLock(str(root)), _mirrored(root, storage_path, driver.say):  # one driver per results directory
        if kinds.get(study.kind).growth(study) is None:
            return _run_locked(study, report, driver)
        session = functools.partial(_run_locked, driver=driver, ray_held=True)  # (study, report) of a round
        with _ray_up(root, address, num_cpus, driver.say, " for every tuning round", driver.ray_start_timeout):  # one Ray for all the rounds
            return rounds.run_rounds(study, ResultStore(root), session, report, out)


def _mirrored(root: Path, storage: str | None, say: Any) -> contextlib.AbstractContextManager[Any]:
    """The results directory copied to --storage as it grows (sweep.results.storage_sync), or nothing."""
    return storage_sync.Mirror(root, storage, say=say) if storage else contextlib.nullcontext()


@contextlib.contextmanager
def _ray_up(root: Path, address: str | None, num_cpus: int | None, say: Any, purpose: str = "",
            start_timeout: float = RAY_START_SECONDS) -> Iterator[None]:
    """Ray started (or connected to) for the block, and for a local Ray the process guard; both stopped after.

    Ray stops on this thread, not on one overlapping later work: the garbage collector of this thread could
    then reach Ray's core worker after its shutdown, which ends the process at once (exit code 1, nothing printed).
    """
    where = (f"connecting to the Ray cluster at {mask(address)}" if address
             else f"starting a local Ray ({num_cpus or os.cpu_count()} CPUs)")
    say(f"bisweep: {where}{purpose}")
    guard = None if address else ProcessGuard(str(root))
    reaped = guard.start() if guard is not None else 0
    if reaped:
        say("bisweep: stopped processes a killed earlier driver of this study left running")
    elif reaped is None:  # a record written by hand or copied from elsewhere: data, not an instruction
        say(f"bisweep: ignored {root / PIDS_FILE}: not written by a driver of this study on this machine; "
            "no process stopped")
    started = False
    try:
        started = start_ray(address, num_cpus, start_timeout)
        yield
    finally:
        if started:
            stop_ray()
        if guard is not None:
            guard.stop()


def _run_locked(study: Study, report: bool, driver: Driver, ray_held: bool = False) -> Outcome:
    """`run_study` once the options are checked and the results directory is ours."""
    timeline = Timeline(process_start())
    timeline.mark("validated")
    root, out, say = driver.root, driver.out, driver.say
    store = ResultStore(root)
    storage = driver.storage_path or str(root / "ray")
    written = Background(lambda: store.write_study(study), "bisweep-study-json")  # while Ray starts
    uri = driver.tracking_uri or default_tracking_uri(root)
    say(f"bisweep: study '{study.name}' ({study.kind}): {len(study.points)} configurations x {len(study.seeds)} seeds "
        f"= {len(study.run_keys)} runs")
    say(f"bisweep: results in {shown_path(root)}")
    say(f"bisweep: MLflow tracking at {mask(uri)}")
    index = dict(zip(study.run_keys, ((p, s) for p in study.points for s in study.seeds)))  # the keys made once
    session = Session(study, store, index, f"{storage.rstrip('/')}/{study.name}-{study.spec_hash}", timeline, out,
                       uri, ray_held)
    connecting = connect_tracking(uri, study, store, index, session.answers)  # on a thread, while Ray starts
    done = store.done(index)
    pending = [run for key, run in index.items() if key not in done]  # in the study's order, as `index`
    added, reset = store.repair(p.run_key(s) for p, s in pending)  # what a killed driver left half-written
    if added or reset:
        say(f"bisweep: repaired what a killed driver left: {added} ended runs noted in ended.txt, {reset} runs to "
            "run again from the start (their old records dropped)")
    writer = None
    if pending:
        if done:
            say(f"bisweep: resuming: {len(done)} of {len(study.run_keys)} runs already done")
        diverged = sum(store.status(k) == "diverged" for k in done)
        writer = _run_pending(session, pending, (len(done), diverged), connecting, driver, report)
    else:
        say(f"bisweep: all {len(study.run_keys)} runs already done")
    return _finish(session, connecting, writer, written, report, len(pending))


def shown_path(path: Path) -> str:
    """`path` as a person typed it: relative to the working directory when inside it (lines stay short)."""
    try:
        return os.path.join(".", os.path.relpath(path)) if path.resolve().is_relative_to(Path.cwd()) else str(path)
    except (OSError, ValueError):
        return str(path)


def _finish(session: Session, connecting: Background, writer: MlflowCallback | None, written: Any,
            report: bool, runs: int) -> Outcome:
    """After the runs: build the report, then sync MLflow and end the parent run on a thread that is given up
    when the store stops answering (its results stay on disk for the next run); record the session."""
    study, store, timeline = session.study, session.store, session.timeline
    root, out = store.root, session.out
    say = functools.partial(print_line, out)
    written.result()
    counts = count_runs(store, study)
    interrupted = counts["missing"] > 0
    report_dir, report_name = None, "report"
    if report:
        say("bisweep: building the report")
        built = build_report(root, out=out)
        report_dir, report_name = built.directory, built.artifact_name
        timeline.mark("reported")
    status = "FINISHED" if counts["failed"] == counts["missing"] == 0 else ("KILLED" if interrupted else "FAILED")
    parent_id = None
    if writer is None or not writer.stalled:
        ending = Background(lambda: _end_mlflow(session, connecting, report_dir, report_name, status, counts),
                            "bisweep-mlflow-end")
        if ending.done(session.answers):
            parent_id = ending.result()
    timeline.mark("end")
    _write_session(store, timeline, writer, runs, study.spec_hash)
    unsent = 0 if parent_id is not None else _unsent(session, connecting)
    say(f"bisweep: MLflow parent run {parent_id}" if parent_id is not None else
        f"bisweep: MLflow logging incomplete: {unsent} results not sent; run again to send them")
    say(f"bisweep: {counts['finished']} finished, {counts['diverged']} diverged, {counts['failed']} failed, "
        f"{counts['missing']} not run")  # the last line: what a person and a script read first
    if counts["missing"] == 0 and "://" not in session.exp_path:
        shutil.rmtree(session.exp_path, ignore_errors=True)  # Tune's checkpoints serve only an unfinished study
    return Outcome(study, root, session.tracking_uri, parent_id, counts, report_dir, interrupted,
                   session.stopped, unsent)


def _end_mlflow(session: Session, connecting: Background, report_dir: Path | None, report_name: str,
                status: str, counts: dict[str, int]) -> str:
    """Send what MLflow missed while running, attach the report, end the parent run; its id."""
    tracker, synced = connecting.result()
    if browse.browsing(session.study):  # children for what a reader browses, a table of every run
        synced.add_many(session.browsed.result() if session.browsed else _sync_browsed(session, connecting))
    else:
        synced.add_many(tracker.sync(session.store, session.index, synced.keys))
    session.timeline.mark("synced")
    if report_dir is not None:
        tracker.log_report(report_dir, report_name)  # 'report-partial' while runs are missing
    tracker.end_study(status, counts, active_seconds(session))
    return tracker.parent_id


def _sync_browsed(session: Session, connecting: Background) -> set[str]:
    """A large study's browsed children and table of every run (sweep.tracking.browse); the runs now reachable."""
    tracker, synced = connecting.result()
    return browse.sync_browsed(tracker, session.store, session.study, synced.keys)


def _unsent(session: Session, connecting: Background) -> int:
    """Ended runs of the session's study that MLflow has not got (as far as the sync logs say)."""
    try:
        sent = connecting.result()[1].keys if connecting.ready() else None
    except Exception:  # noqa: BLE001  a store that could not be used got nothing
        sent = None
    if sent is None:  # never connected: what any parent run of this directory got
        logs = (session.store.root / "mlflow_synced").glob("*.txt")
        sent = {k for log in logs for k in log.read_text().split()}
    return len({k for k in session.store.ended() if k in session.index} - sent)


def active_seconds(session: Session) -> float:
    """How long the sessions of this study (this one included) have run: the parent run's duration."""
    total = time.time() - session.timeline.start
    path = session.store.root / "sessions.jsonl"
    if path.exists():
        for line in path.read_text().splitlines():
            with contextlib.suppress(ValueError, TypeError):
                entry = json.loads(line)
                if entry.get("spec_hash") == session.study.spec_hash and isinstance(entry.get("end"), (int, float)):
                    total += float(entry["end"])
    return total


def _run_pending(session: Session, pending: list[tuple[Point, int]], done_before: tuple[int, int], connecting: Any,
                 driver: Driver, report: bool) -> MlflowCallback:
    """Run the pending runs in one fresh Tune experiment (`done_before`: runs an earlier driver ended, and how many
    of them diverged); the MLflow writer."""
    progress = Progress(session.study, done_before[0], session.out, diverged_before=done_before[1])
    loading = Background(_import_experiment, "bisweep-import-tune", yielding=True)  # while Ray starts
    held = contextlib.nullcontext() if session.ray_held else _ray_up(driver.root, driver.address, driver.num_cpus,
                                                                     progress.message, "", driver.ray_start_timeout)
    try:
        with held:
            session.timeline.mark("ray_ready")
            experiment = _loaded(loading)
            writer = experiment.run(session, pending, progress, connecting, driver.address is not None, report)
            if browse.browsing(session.study) and writer.close():  # every run is in the store: its children now
                session.browsed = Background(lambda: _sync_browsed(session, connecting), "bisweep-mlflow-browse")
            return writer
    finally:
        session.timeline.mark("ray_down")
        if session.writer is not None:  # what it had queued was logged while Ray stopped
            session.writer.close()


def _import_experiment() -> ModuleType:
    """sweep.execution.experiment, with Ray Tune (~0.8 s of imports that overlap Ray's start when run on a thread)."""
    from sweep.execution import experiment

    return experiment


def _loaded(loading: Background) -> ModuleType:
    """The module imported on the thread; imported here if that failed (two threads importing the same modules in
    opposite orders can make Python's import locks give up on one of them)."""
    try:
        return loading.result()
    except (ImportError, RuntimeError):  # RuntimeError: importlib's _DeadlockError
        return _import_experiment()


def _write_session(store: ResultStore, timeline: Timeline, writer: MlflowCallback | None, runs: int,
                   spec_hash: str) -> None:
    """One line per session in sessions.jsonl: its phases, runs and how MLflow kept up."""
    line = {"started": timeline.start, "spec_hash": spec_hash, "runs": runs, **timeline.marks}
    if writer is not None:
        line.update(mlflow_max_lag=round(writer.max_lag, 3), mlflow_drain=round(writer.drain_seconds, 3))
    with open_file(store.root / "sessions.jsonl", "a") as fh:
        fh.write(json.dumps(line) + "\n")


def connect_tracking(uri: str, study: Study, store: ResultStore, index: dict[str, tuple[Point, int]],
                     answers: mlflow_store.Answers | None = None) -> Any:
    """The study's Tracker, parent run and sync log, made on a thread (`.result()`); a one-line error when
    the tracking store cannot be used (a server that does not answer was refused by options.check_tracking_uri)."""
    def connect() -> tuple[Tracker, SyncLog]:
        try:
            tracker = Tracker(uri, study.name, local_artifact_location(uri, store.root), answers)
            parent = tracker.start_study(study)
        except Exception as exc:  # noqa: BLE001  any store failure becomes the option's error
            first_line = str(exc).strip().split("\n", 1)[0]  # SQLAlchemy's errors add the SQL and a link
            raise ParameterError(f"tracking-uri: cannot use the MLflow store at {mask(uri)} "
                                 f"({type(exc).__name__}: {mask_text(first_line)})") from exc
        synced = SyncLog(store, parent)
        if not browse.browsing(study):  # a larger study's children are chosen at the end (sweep.tracking.browse)
            synced.add_many(tracker.sync(store, index, synced.keys))  # what a killed driver stored but never sent
        return tracker, synced

    return Background(connect, "bisweep-mlflow-connect", yielding=True)


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
