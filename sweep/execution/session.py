"""What one driver session works with, and when its phases happened (kept in sessions.jsonl)."""
from __future__ import annotations

import contextlib
import dataclasses
import gc
import os
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, TextIO

from sweep.results.store import ResultStore
from sweep.study.model import Point, Study
from sweep.tracking.mlflow_store import Answers

if TYPE_CHECKING:
    from sweep.execution.background import Background


class Timeline:
    """When this session's phases happened (seconds after the driver started), with the driver's CPU seconds."""

    def __init__(self, start: float) -> None:
        self.start = start
        self.marks: dict[str, Any] = {}

    def mark(self, name: str) -> None:
        """Wall seconds since the driver started, and the driver's CPU seconds (all its threads) then."""
        if name not in self.marks:
            self.marks[name] = round(time.time() - self.start, 3)
            self.marks[f"{name}_cpu"] = round(time.process_time(), 3)


@contextlib.contextmanager
def long_lived() -> Iterator[None]:
    """The objects alive when the block starts (the imports, the study's points and run keys, Ray and Tune) kept
    out of the cyclic garbage collector's full collections during the block, and handed back to it after.

    A full collection walks every tracked object; the driver makes new objects fast (every report's records), so
    at 10⁴ tiny runs 8 full collections walked ~10⁶ long-lived objects each: 3 of the driver's ~20 CPU seconds.
    Objects freed by their last reference go as before; only garbage cycles among the objects alive at the start
    wait for the block's end (a session's points and Tune's own objects live that long anyway).
    """
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()  # before Ray stops: its shutdown collects the garbage holding Ray handles first


def process_start() -> float:
    """When this process started (epoch seconds): on Linux from /proc (its start and the time now, both in seconds
    after boot), elsewhere now. (The ctime of /proc/PID is when that entry was first looked at, not the start.)"""
    try:
        with open("/proc/self/stat") as fh:
            ticks = int(fh.read().rpartition(")")[2].split()[19])  # field 22, after the command name
        with open("/proc/uptime") as fh:
            uptime = float(fh.read().split()[0])
        return time.time() - (uptime - ticks / os.sysconf("SC_CLK_TCK"))
    except (OSError, ValueError, IndexError):
        return time.time()


@dataclasses.dataclass
class Session:
    """What one driver session works with."""

    study: Study
    store: ResultStore
    index: dict[str, tuple[Point, int]]
    exp_path: str
    timeline: Timeline
    out: TextIO
    tracking_uri: str
    ray_held: bool  # Ray started (and guarded) by the caller for several sessions: neither started nor stopped here
    stopped: bool = False  # Ctrl-C stopped the session's experiment
    answers: Answers = dataclasses.field(default_factory=Answers)  # when the MLflow store last answered
    #: A large study's browsed children and table of runs (sweep.tracking.browse), being written from the moment its
    #: experiment ended, while Ray stops and the report builds: `.result()` is the runs they made reachable.
    browsed: Background | None = None
    #: The experiment's MLflow writer (sweep.execution.mlflow_writer), set as it stops: closed once Ray is down.
    writer: Any = None
