"""Work run on a thread while the driver goes on: `Background(work, name).result()` waits for its value.

The driver writes study.json, connects to MLflow, imports Tune and preloads matplotlib this way while Ray starts.
"""
from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Callable
from typing import Any

from sweep.tracking.mlflow_store import Answers, wait_answering

#: The niceness of a yielding background thread (0 normal, 19 lowest).
YIELDING_NICE = 10


class Background:
    """`work()` run on a thread; `result()` waits for it and returns its value (or raises its error).

    `yielding`: the thread runs at a lower CPU priority (Linux), so that work done while Ray starts takes the CPU
    time Ray's own processes leave idle instead of delaying them.
    """

    def __init__(self, work: Callable[[], Any], name: str, yielding: bool = False) -> None:
        self._value: Any = None
        self._error: BaseException | None = None
        self._yielding = yielding
        self._thread = threading.Thread(target=self._run, args=(work,), name=name, daemon=True)
        self._thread.start()

    def _run(self, work: Callable[[], Any]) -> None:
        if self._yielding and hasattr(os, "setpriority"):
            with contextlib.suppress(OSError):  # this thread only: on Linux a thread id is a process id
                os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), YIELDING_NICE)
        try:
            self._value = work()
        except BaseException as exc:  # noqa: BLE001  handed to the caller of result()
            self._error = exc

    def done(self, answers: Answers, stall: float | None = None) -> bool:
        """Whether the work ended (`result` then returns at once), waiting while the store keeps answering."""
        return wait_answering(self._thread, answers, stall)

    def ready(self) -> bool:
        """Whether the work has ended."""
        return not self._thread.is_alive()

    def result(self) -> Any:
        self._thread.join()
        if self._error is not None:
            raise self._error
        return self._value
