"""The driver's MLflow writer: a Tune callback that hands results to one background thread, which writes
whatever has gathered since its last write in one batch across runs.

The thread never waits for a timer while results are queued: each write takes everything that arrived
during the previous one, so batches grow with the rate and the lag stays about one write long (it is
measured: `max_lag`, and `drain_seconds` for the end). Tune's event loop only enqueues.

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
from sweep.tracking.mlflow_store import Answers, wait_answering
from sweep.tracking.tracker import FLUSH_SECONDS, SyncLog, Tracker

#: Most queued results one write takes (a bound on its memory; the next write takes the rest).
MAX_RESULTS_PER_WRITE = 5000


class MlflowCallback(Callback):
    """Driver-side Tune callback mirroring every result into the study's MLflow runs, off Tune's thread."""

    def __init__(self, connect: Callable[[], tuple[Tracker, SyncLog]], index: dict[str, tuple[Point, int]],
                 store: ResultStore, answers: Answers | None = None) -> None:
        self._connect = connect  # -> the tracker and its sync log, called on the writer thread
        self.tracker: Tracker | None = None
        self.synced: SyncLog | None = None
        self.store = store
        self.index = index
        self.error: Exception | None = None
        self.connect_error: Exception | None = None
        self.max_lag = 0.0  # longest time a result waited before its write ended (seconds)
        self.drain_seconds = 0.0  # how long `close` waited for the queue to empty
        self.answers = answers or Answers()  # when the store last answered (the tracker marks it)
        self.stalled = False  # `close` gave up: the store stopped answering with results still queued
        self._queue: queue.Queue = queue.Queue()
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
            while len(items) < MAX_RESULTS_PER_WRITE:
                try:
                    items.append(self._queue.get_nowait())
                except queue.Empty:
                    break
            stop = any(item is None for item in items)
            self._write([item for item in items if item is not None])
            for _ in items:
                self._queue.task_done()
            if stop:
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
            print(f"bisweep: MLflow logging paused ({type(exc).__name__}: {mask_text(str(exc))}); "
                  "results are kept on disk and synced at the end", file=sys.stderr)

    def close(self, stall: float | None = None) -> bool:
        """Log everything queued, then stop the writer thread; False (and `stalled`) when the store went `stall`
        seconds (default mlflow_store.STALL_SECONDS) without answering: the thread is left behind, the results
        stay on disk for the next run to send."""
        start = time.monotonic()
        if self._thread.is_alive():
            self._queue.put(None)
            self.stalled = not wait_answering(self._thread, self.answers, stall)
        self.drain_seconds = time.monotonic() - start
        return not self.stalled

    # ---- Tune events ----
    def on_step_begin(self, iteration: int, trials: list, **info: Any) -> None:
        if self.connect_error is not None:
            raise self.connect_error  # Tune stops the experiment and fit() raises it

    def on_trial_result(self, iteration: int, trials: list, trial: Any, result: dict[str, Any], **info: Any) -> None:
        meta = result.get(META)
        if meta is not None:
            where = {"node": meta.get("node", ""), "host": meta.get("host", "")}
            self._queue.put(("result", time.monotonic(), chunks(result), where))

    def _result(self, run_chunks: list[dict[str, Any]], where: dict[str, str]) -> list[str]:
        """Buffer a result's records; the runs it ends."""
        ended = []
        for chunk in run_chunks:
            key = chunk["run_key"]
            point, seed = self.index[key]
            for record in chunk["records"]:
                self.tracker.add(key, point, seed, record, where)
            if chunk["done"]:
                if self.tracker.existed_before(key) or not self.tracker.has_step(key, 0):
                    # A run an earlier driver started (its child in MLflow already, or a run continued from a
                    # midway checkpoint whose start this session never saw) may have records stored but never
                    # sent: log them from disk (steps already logged are skipped).
                    for record in self.store.records(key):
                        self.tracker.add(key, point, seed, record, where)
                self.tracker.finish(key, chunk["records"][-1]["status"], span=chunk.get("span"))
                ended.append(key)
        return ended

    def on_trial_error(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        # The store's callback ran first: the runs it marked failed (others went back to the queue).
        failed = [k for k in trial.config["trial"].run_keys if self.store.status(k) == "failed"]
        self._queue.put(("failed", time.monotonic(), failed))

    def _failed(self, run_keys: list[str]) -> None:
        for key in run_keys:
            if key in self.synced.keys or key not in self.tracker.children():
                continue  # a run that never reported gets its child from the sync at the end
            self.tracker.finish(key, "failed", (self.store.summary(key) or {}).get("error"))

    @property
    def backlog(self) -> int:
        """Results and run endings waiting to be logged."""
        return self._queue.qsize()
