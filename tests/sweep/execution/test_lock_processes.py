"""The results-directory lock and the process guard (no Ray needed: plain subprocesses stand in)."""
import json
import os
import signal
import subprocess
import sys
import time

import pytest

from sweep.execution.lock import StudyLock, StudyLocked
from sweep.execution.processes import PIDS_FILE, ProcessGuard, _stat, descendants, kill_recorded

HOLD = "import sys; from sweep.execution.lock import StudyLock; l = StudyLock(sys.argv[1]); l.acquire(); print('held', flush=True); input()"


def holder(path):
    proc = subprocess.Popen([sys.executable, "-c", HOLD, str(path)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            text=True, cwd=os.getcwd())
    assert proc.stdout.readline().strip() == "held"
    return proc


def test_a_second_driver_is_refused_with_the_holders_pid(tmp_path):
    proc = holder(tmp_path)
    try:
        with pytest.raises(StudyLocked) as err:
            StudyLock(str(tmp_path)).acquire()
        msg = str(err.value)
        assert f"PID {proc.pid}" in msg and msg.startswith("results-dir: ") and "\n" not in msg
    finally:
        proc.kill()
        proc.wait()


def test_a_lock_left_by_a_killed_driver_is_taken_over(tmp_path):
    proc = holder(tmp_path)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    with StudyLock(str(tmp_path)):
        assert f"PID {os.getpid()}" in (tmp_path / ".lock").read_text()
    with StudyLock(str(tmp_path)):  # released on exit, free again
        pass


def sleeper():
    return subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])


def test_descendants_and_kill_recorded_only_touch_the_same_process(tmp_path):
    child = sleeper()
    try:
        found = descendants(os.getpid())
        assert child.pid in found and found[child.pid] == _stat(child.pid)[1]
        path = tmp_path / PIDS_FILE
        path.write_text(json.dumps({str(child.pid): found[child.pid] + 1}))  # a reused PID: other start time
        assert kill_recorded(str(path)) == 0 and child.poll() is None
        path.write_text(json.dumps({str(child.pid): found[child.pid]}))
        assert kill_recorded(str(path)) == 1
        assert child.wait(timeout=10) == -signal.SIGKILL
    finally:
        child.kill()


GUARDED = """
import subprocess, sys, time
from sweep.execution.processes import ProcessGuard
g = ProcessGuard(sys.argv[1], period=0.2); g.start()
c = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(120)'], start_new_session=True)
time.sleep(0.6)
print(c.pid, flush=True)
time.sleep(120)
"""


def test_the_watchdog_kills_what_a_sigkilled_driver_left_behind(tmp_path):
    driver = subprocess.Popen([sys.executable, "-c", GUARDED, str(tmp_path)], stdout=subprocess.PIPE, text=True)
    orphan = int(driver.stdout.readline())
    assert _stat(orphan) is not None
    os.kill(driver.pid, signal.SIGKILL)
    driver.wait()
    deadline = time.monotonic() + 30
    while alive(orphan) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not alive(orphan)


def alive(pid):
    """Running (a killed orphan may linger as a zombie until its new parent reaps it)."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def test_the_next_driver_reaps_what_a_killed_watchdog_left(tmp_path):
    child = sleeper()
    try:
        (tmp_path / PIDS_FILE).write_text(json.dumps({str(child.pid): _stat(child.pid)[1]}))
        guard = ProcessGuard(str(tmp_path))
        assert guard.start() == 1
        assert child.wait(timeout=10) == -signal.SIGKILL
        guard.stop()
    finally:
        child.kill()


def test_children_the_driver_had_before_are_never_recorded(tmp_path):
    child = sleeper()
    guard = ProcessGuard(str(tmp_path), period=0.1)
    try:
        guard.start()
        recorded = json.loads((tmp_path / PIDS_FILE).read_text())
        assert str(child.pid) not in recorded
        guard.stop()
        assert child.poll() is None  # the clean stop's watchdog left it alone
    finally:
        child.kill()
