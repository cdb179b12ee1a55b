"""What one driver session works with, and when its phases happened (kept in sessions.jsonl)."""
from __future__ import annotations

import dataclasses
import os
import time
from typing import Any, TextIO

from sweep.results.store import ResultStore
from sweep.study.model import Point, Study
from sweep.tracking.mlflow_store import Answers


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
