"""No leftovers: the processes a driver's local Ray starts never outlive it.

Ray's raylet and GCS share the driver's fate, but the agents they start (dashboard agent, runtime-env
agent) and idle workers can survive a SIGKILLed driver. The driver records its descendants (PID and
kernel start time, so a reused PID is never touched) in `<results>/.processes.json`; a watchdog
process, in a session of its own, waits for the driver to die and then kills what is recorded; and
the next driver on the same results directory reaps whatever a killed watchdog left. Linux /proc only;
elsewhere these are no-ops.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time

PIDS_FILE = ".processes.json"


def _stat(pid: int) -> tuple[int, int] | None:
    """(parent PID, start time in clock ticks) of a live process, or None."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as fh:
            fields = fh.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return int(fields[1]), int(fields[19])


def descendants(root: int) -> dict[int, int]:
    """Every live descendant of `root`: PID → start time."""
    if not os.path.isdir("/proc"):
        return {}
    parents: dict[int, list[int]] = {}
    starts: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit() and (st := _stat(int(entry))) is not None:
            parents.setdefault(st[0], []).append(int(entry))
            starts[int(entry)] = st[1]
    found, todo = {}, [root]
    while todo:
        for child in parents.get(todo.pop(), []):
            if child not in found and child in starts:
                found[child] = starts[child]
                todo.append(child)
    return found


def kill_recorded(path: str, exclude: int | None = None) -> int:
    """SIGKILL every process recorded in `path` that is still the same process; how many were killed."""
    try:
        with open(path, encoding="utf-8") as fh:
            recorded = {int(k): int(v) for k, v in json.load(fh).items()}
    except (OSError, ValueError):
        return 0
    killed = 0
    for pid, start in recorded.items():
        st = _stat(pid)
        if pid != exclude and st is not None and st[1] == start:
            try:
                os.kill(pid, signal.SIGKILL)  # gcs_server ignores SIGTERM
                killed += 1
            except OSError:
                pass
    return killed


class ProcessGuard:
    """Record the driver's descendants while it runs; a watchdog kills them if the driver dies."""

    def __init__(self, results_dir: str, period: float = 2.0) -> None:
        self.path = os.path.join(results_dir, PIDS_FILE)
        self.period = period
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._watchdog: subprocess.Popen | None = None
        self._before: set[int] = set()

    def start(self) -> int:
        """Reap what a previous driver left, then start recording and the watchdog; the number reaped.

        Call it just before starting local Ray: children the driver already had (a test's servers) are
        never recorded.
        """
        reaped = kill_recorded(self.path, exclude=os.getpid())
        self._before = set(descendants(os.getpid()))
        self.record()
        self._watchdog = subprocess.Popen(
            # This file alone, isolated and without site-packages: the watchdog imports only the standard library
            # (`-m sweep.execution.processes` imported the sweep package, 0.7 s of CPU beside Ray's start).
            [sys.executable, "-I", "-S", os.path.abspath(__file__), self.path, str(os.getpid())],
            stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            start_new_session=True,  # Ctrl-C in the terminal must not kill the watchdog first
        )
        self._thread = threading.Thread(target=self._loop, name="bisweep-process-guard", daemon=True)
        self._thread.start()
        return reaped

    def record(self) -> None:
        """Write the current descendants (minus the watchdog) to the PID file, atomically."""
        found = {pid: start for pid, start in descendants(os.getpid()).items() if pid not in self._before}
        if self._watchdog is not None:
            found.pop(self._watchdog.pid, None)
        tmp = self.path + ".tmp"
        with open(tmp, "w", encoding="utf-8") as fh:
            json.dump({str(k): v for k, v in found.items()}, fh)
        os.replace(tmp, self.path)

    def _loop(self) -> None:
        while not self._stop.wait(self.period):
            try:
                self.record()
            except OSError:
                pass  # a vanished process or a full disk must not stop the study

    def stop(self) -> None:
        """After a clean shutdown: stop recording; the watchdog kills any straggler and exits."""
        self._stop.set()
        if self._watchdog is not None and self._watchdog.stdin is not None:
            try:
                self._watchdog.stdin.write(b"stop\n")  # a clean end: no need to wait for the driver to exit
                self._watchdog.stdin.close()
            except OSError:
                pass
            try:
                self._watchdog.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._watchdog.kill()


def _watch(path: str, driver: int) -> None:
    """Block until the driver closes our stdin (it ended or died), then kill what it recorded."""
    try:
        clean = sys.stdin.buffer.read().startswith(b"stop")
    except OSError:
        clean = False
    deadline = time.monotonic() + (0.0 if clean else 5.0)
    while _stat(driver) is not None and time.monotonic() < deadline:
        time.sleep(0.1)  # a clean exit is still shutting Ray down: give it a moment
    kill_recorded(path, exclude=driver)


if __name__ == "__main__":
    _watch(sys.argv[1], int(sys.argv[2]))
