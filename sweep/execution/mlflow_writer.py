"""The driver's MLflow writer: a Tune callback that hands results to one background thread, which writes
whatever has gathered since its last write in one batch across runs.

The thread never waits for a timer while results are queued: each write takes what arrived during the
previous one, up to MAX_RUNS_PER_WRITE runs, so batches grow with the rate (the lag is measured: `max_lag`, and
`drain_seconds` for the end). Tune's event loop only enqueues each run's metric points, as the trial encoded
them; it waits only when MAX_QUEUED_RUNS are queued, which bounds the driver's memory when runs end faster
than MLflow's store takes them (10⁵ tiny runs).

The thread first connects (`connect()`, ~1 s of MLflow imports on a cold driver), so trials start while it
does; if the store cannot be used, Tune's next step raises that error and the experiment stops.
"""
from __future__ import annotations

import queue
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

from ray.tune import Callback

from sweep.execution.trainable import META, chunks
from sweep.results.store import ResultStore
from sweep.study.model import Point
from sweep.tracking.masking import mask_text
from sweep.tracking.metric_points import Points, mlflow_metrics, points_of
from sweep.tracking.mlflow_store import STALL_SECONDS, Answers, wait_answering
from sweep.tracking.tracker import FLUSH_SECONDS, SyncLog, Tracker

#: Most runs one write takes (a bound on its memory; the next write takes the rest).
MAX_RUNS_PER_WRITE = 5000
#: Most runs queued for the writer: beyond, Tune's thread waits for it to catch up (~0.8 KB a queued tiny run).
MAX_QUEUED_RUNS = 100_000
#: A wait for room longer than this says so (seconds).
SAY_WAIT_SECONDS = 10.0

#: A queued run's chunk: run key, its metric points (as the text the trial encoded, else its records), done, span.
Queued = tuple[str, "str | list[dict[str, Any]]", bool, "list[float] | None"]


def queued(chunk: dict[str, Any]) -> Queued:
    """What the writer needs of a reported chunk: its metric points as the trial encoded them (~0.7 KB a tiny
    run, its records ~5 KB): at 10⁵ tiny runs the writer lags tens of thousands of runs behind Tune."""
    return chunk["run_key"], chunk.get("points") or chunk["records"], chunk["done"], chunk.get("span")


def steps_of(points: str | list[dict[str, Any]]) -> list[tuple[int, str, Points]]:
    """A queued chunk's (iteration, status, metric points) by record."""
    if isinstance(points, str):
        return points_of(points)
    return [(int(r["iteration"]), r.get("status", "running"), mlflow_metrics(r)) for r in points]


def runs_in(item: tuple | None) -> int:
    """How many runs a queued item carries (the end marker: none)."""
    return 0 if item is None else len(item[2])


class MlflowCallback(Callback):
    """Driver-side Tune callback mirroring every result into the study's MLflow runs, off Tune's thread."""

    def __init__(self, connect: Callable[[], tuple[Tracker, SyncLog]], index: dict[str, tuple[Point, int]],
                 store: ResultStore, answers: Answers | None = None, stream: bool = True) -> None:
        self.stream = stream  # False: results are not sent as they come (a large study's children: tracking.browse)
        self._connect = connect  # -> the tracker and its sync log, called on the writer thread
        self.tracker: Tracker | None = None
        self.synced: SyncLog | None = None
        self.store = store
        self.index = index
        self.error: Exception | None = None
        self.connect_error: Exception | None = None
        self.max_lag = 0.0  # longest time a result waited before its write ended (seconds)
        self.drain_seconds = 0.0  # from `stop` until the queue was empty (or `close` gave up)
        self._stopping: float | None = None  # when `stop` was asked
        self._stopped: float | None = None  # when the thread had logged everything queued before it
        self.answers = answers or Answers()  # when the store last answered (the tracker marks it)
        self.stalled = False  # `close` gave up: the store stopped answering with results still queued
        self._queue: queue.Queue = queue.Queue()
        self._queued_runs = 0  # runs in the queue (results' chunks, failed runs' keys)
        self._room = threading.Condition()
        self._thread = threading.Thread(target=self._work, name="bisweep-mlflow", daemon=True)
        self._thread.start()

    def __getstate__(self) -> dict[str, Any]:
        return {}  # Tune pickles its run config; the live MLflow client stays in this process

    # ---- the writer thread ----
    def _work(self) -> None:
        try:
            self.tracker, self.synced = self._connect()
        except Exception as exc:  # noqa: BLE001  raised on Tune's thread by on_step_begin; results stay on disk
            self.connect_error = self.error = exc
        while True:
            try:
                items = [self._queue.get(timeout=FLUSH_SECONDS)]
            except queue.Empty:
                continue
            runs = runs_in(items[0])
            while runs < MAX_RUNS_PER_WRITE:
                try:
                    items.append(self._queue.get_nowait())
                except queue.Empty:
                    break
                runs += runs_in(items[-1])
            stop = any(item is None for item in items)
            self._write([item for item in items if item is not None])
            with self._room:
                self._queued_runs -= runs
                self._room.notify_all()
            for _ in items:
                self._queue.task_done()
            if stop:
                self._stopped = time.monotonic()
                return

    def _write(self, items: list[tuple]) -> None:
        if self.error is not None or not items:
            return
        try:
            ended: list[str] = []
            for kind, when, *args in items:
                if kind == "result":
                    ended += self._result(*args)
                else:
                    self._failed(*args)
            self.tracker.flush(force=True)
            self.synced.add_many(ended)  # only once their last records are written
            self.max_lag = max(self.max_lag, time.monotonic() - min(when for _, when, *_ in items))
        except Exception as exc:  # noqa: BLE001  MLflow trouble must not stop the study; results stay on disk
            self.error = exc
            first = (mask_text(str(exc)).strip().splitlines() or [""])[0][:300]  # SQLAlchemy's text spans lines
            print(f"bisweep: MLflow logging paused ({type(exc).__name__}: {first}); "
                  "results are kept on disk and synced at the end", file=sys.stderr)

    def stop(self) -> None:
        """Let the writer thread end once everything queued is logged, without waiting (`close` waits): the
        driver stops Ray meanwhile."""
        if self._stopping is None:
            self._stopping = time.monotonic()
            if self._thread.is_alive():
                self._queue.put(None)

    def close(self, stall: float | None = None) -> bool:
        """Log everything queued, then stop the writer thread; False (and `stalled`) when the store went `stall`
        seconds (default mlflow_store.STALL_SECONDS) without answering: the thread is left behind, the results
        stay on disk for the next run to send."""
        self.stop()
        if self._thread.is_alive():
            self.stalled = not wait_answering(self._thread, self.answers, stall)
        self.drain_seconds = (self._stopped or time.monotonic()) - self._stopping
        return not self.stalled

    # ---- Tune events ----
    def on_step_begin(self, iteration: int, trials: list, **info: Any) -> None:
        if self.connect_error is not None:
            raise self.connect_error  # Tune stops the experiment and fit() raises it

    def on_trial_result(self, iteration: int, trials: list, trial: Any, result: dict[str, Any], **info: Any) -> None:
        meta = result.get(META)
        if meta is not None and self.stream:
            where = {"node": meta.get("node", ""), "host": meta.get("host", "")}
            now, runs = time.monotonic(), [queued(c) for c in chunks(result)]
            for i in range(0, len(runs), MAX_RUNS_PER_WRITE):  # a large report in pieces: no write takes more
                self._put(("result", now, runs[i:i + MAX_RUNS_PER_WRITE], where))

    def _put(self, item: tuple) -> None:
        """Queue an item for the writer, first waiting while MAX_QUEUED_RUNS are queued (the driver's memory
        stays bounded when results come faster than MLflow takes them), unless the writer stopped writing."""
        with self._room:
            since = time.monotonic()
            said = False
            while self._queued_runs >= MAX_QUEUED_RUNS and self.error is None and self._thread.is_alive() \
                    and self.answers.silent_for(since) <= STALL_SECONDS:
                if not said and time.monotonic() - since > SAY_WAIT_SECONDS:
                    print(f"bisweep: waiting for MLflow logging to catch up ({self._queued_runs} runs queued)",
                          file=sys.stderr)
                    said = True
                self._room.wait(timeout=0.5)
            self._queued_runs += runs_in(item)
        self._queue.put(item)

    def _result(self, run_chunks: list[Queued], where: dict[str, str]) -> list[str]:
        """Buffer a result's records; the runs it ends."""
        ended = []
        for key, points, done, span in run_chunks:
            point, seed = self.index[key]
            steps = steps_of(points)
            for step, _, metrics in steps:
                self.tracker.add_points(key, point, seed, step, metrics, where)
            if done:
                if self.tracker.existed_before(key) or not self.tracker.has_step(key, 0):
                    # A run an earlier driver started (its child in MLflow already, or a run continued from a
                    # midway checkpoint whose start this session never saw) may have records stored but never
                    # sent: log them from disk (steps already logged are skipped).
                    for record in self.store.records(key):
                        self.tracker.add(key, point, seed, record, where)
                self.tracker.finish(key, steps[-1][1], span=span)
                ended.append(key)
        return ended

    def on_trial_error(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        # The store's callback ran first: the runs it marked failed (others went back to the queue).
        if not self.stream:
            return
        failed = [k for k in trial.config["trial"].run_keys if self.store.status(k) == "failed"]
        self._put(("failed", time.monotonic(), failed))

    def _failed(self, run_keys: list[str]) -> None:
        for key in run_keys:
            if key in self.synced.keys or key not in self.tracker.children():
                continue  # a run that never reported gets its child from the sync at the end
            self.tracker.finish(key, "failed", (self.store.summary(key) or {}).get("error"))

    @property
    def backlog(self) -> int:
        """Results and run endings waiting to be logged."""
        return self._queue.qsize()
