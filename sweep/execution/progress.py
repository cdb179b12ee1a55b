"""Live progress of a study: runs done / running / pending / failed, runs diverged, elapsed and time left.

On a terminal one line is rewritten in place twice a second; otherwise a line is printed every few
seconds, so nothing is silent for long. Failures are printed on their own line when they happen. Every
event costs O(what it carries): counts are kept up to date, never recounted over the study's runs.
"""
from __future__ import annotations

import sys
import time
from collections.abc import Iterable
from typing import Any, TextIO

from sweep.execution.trial_runs import final_record
from sweep.study.model import Study


def print_line(out: TextIO, text: str) -> None:
    """`text` as a line of its own on `out`, at once (a phase of the driver, before or between live lines)."""
    out.write(text + "\n")
    out.flush()


def format_seconds(seconds: float) -> str:
    """H:MM:SS."""
    s = int(round(max(seconds, 0.0)))
    return f"{s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d}"


class Progress:
    """Counts and the time-left estimate, independent of Tune (fed by `sweep.execution.experiment.ProgressCallback`)."""

    def __init__(self, study: Study, done_before: int, out: TextIO | None = None,
                 interval: float | None = None, diverged_before: int = 0) -> None:
        self.out = out or sys.stdout
        self.tty = bool(getattr(self.out, "isatty", lambda: False)())
        self.interval = interval if interval is not None else (0.5 if self.tty else 5.0)
        self.total = len(study.run_keys)
        self.budget = study.budget
        self.done_before = done_before
        self.diverged_before = diverged_before  # of the runs done before: the line counts the whole study's runs
        self.ended: set[str] = set()  # runs that ended this session (a retried trial may report one again)
        self.failed = 0
        self.diverged = 0
        self.running: dict[str, float] = {}  # trial id -> fraction done of the run it is running
        self.start = time.monotonic()
        self.fraction_at_start: float | None = None
        self._last_print = float("-inf")
        self._width = 0

    # ---- feeding ----
    def trial_started(self, trial_id: str) -> None:
        """A trial is running (its first run has not reported yet)."""
        self.running[trial_id] = 0.0

    def trial_ended(self, trial_id: str) -> None:
        """A trial completed or failed."""
        self.running.pop(trial_id, None)

    def result(self, trial_id: str, run_chunks: list[dict[str, Any]]) -> None:
        """Account one report: the runs it ends, and how far the trial's current run is."""
        for chunk in run_chunks:
            if chunk["done"] and chunk["run_key"] not in self.ended:
                self.ended.add(chunk["run_key"])
                self.diverged += final_record(chunk)["status"] == "diverged"
        last = run_chunks[-1]
        if trial_id in self.running:
            self.running[trial_id] = 0.0 if last["done"] else self._run_fraction(final_record(last))

    def runs_failed(self, run_keys: Iterable[str]) -> None:
        """The runs a failed trial leaves unfinished."""
        for key in run_keys:
            if key not in self.ended:
                self.ended.add(key)
                self.failed += 1

    def _run_fraction(self, record: dict[str, Any]) -> float:
        b = self.budget
        parts = []
        if b.get("iterations"):
            parts.append(record["iteration"] / b["iterations"])
        if b.get("oracle_calls"):
            parts.append(record.get("calls/total", 0) / b["oracle_calls"])
        if b.get("seconds"):
            parts.append(record.get("time", 0.0) / b["seconds"])
        return min(max(parts, default=0.0), 1.0)

    # ---- numbers ----
    def counts(self) -> dict[str, int]:
        """Runs done, running, pending, failed and diverged, all of the study's runs (as the closing line counts
        them): `done` includes the diverged runs and the runs an earlier driver ended."""
        done = self.done_before + len(self.ended) - self.failed
        running = min(len(self.running), self.total - done - self.failed)
        return {"done": done, "running": running, "pending": self.total - done - self.failed - running,
                "failed": self.failed, "diverged": self.diverged_before + self.diverged, "total": self.total}

    def fraction(self) -> float:
        """Fraction of the study's runs ended (plus the running runs' progress)."""
        ended = self.done_before + len(self.ended)
        return min((ended + sum(self.running.values())) / max(self.total, 1), 1.0)

    def seconds_left(self) -> float | None:
        """Time left from this session's rate, or None before there is a rate."""
        f = self.fraction()
        if self.fraction_at_start is None:
            self.fraction_at_start = f
        gained = f - self.fraction_at_start
        elapsed = time.monotonic() - self.start
        if gained <= 0 or elapsed < 1.0:
            return None
        return elapsed * (1.0 - f) / gained

    def line(self) -> str:
        """The one-line summary."""
        c = self.counts()
        left = self.seconds_left()
        eta = "estimating" if left is None else f"~{format_seconds(left)} left"
        if c["running"] == c["pending"] == 0:
            eta = "done"
        return (f"runs {c['done']}/{c['total']} done, {c['running']} running, {c['pending']} pending, "
                f"{c['failed']} failed | diverged {c['diverged']} | "
                f"{format_seconds(time.monotonic() - self.start)} elapsed, {eta}")

    # ---- output ----
    def show(self, force: bool = False) -> None:
        """Print the line if the interval has passed (or when forced)."""
        now = time.monotonic()
        if not force and now - self._last_print < self.interval:
            return
        self._last_print = now
        text = self.line()
        if self.tty:
            self.out.write("\r" + text.ljust(self._width))
            self._width = len(text)
        else:
            self.out.write(text + "\n")
        self.out.flush()

    def message(self, text: str) -> None:
        """A line of its own (a failure, a phase), not overwritten by the live line."""
        if self.tty and self._width:
            self.out.write("\r" + " " * self._width + "\r")
            self._width = 0
        print_line(self.out, text)

    def close(self) -> None:
        """Final line."""
        self.show(force=True)
        if self.tty:
            self.out.write("\n")
            self.out.flush()
            self._width = 0


def trial_error(trial: Any) -> str:
    """The last line of a failed trial's error (the exception message)."""
    path = getattr(trial, "error_file", None)
    try:
        lines = [ln for ln in open(path).read().splitlines() if ln.strip()] if path else []
    except OSError:
        lines = []
    return lines[-1].strip() if lines else "unknown error"
