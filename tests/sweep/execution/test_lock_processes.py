"""The results-directory lock and the process guard (no Ray needed: plain subprocesses stand in)."""
import json
import os
import signal
import stat
import subprocess
import sys
import time

import pytest

from sweep.execution.lock import StudyLock, StudyLocked
from sweep.execution.processes import (PIDS_FILE, ProcessGuard, _stat, descendants, key_path, kill_recorded,
                                       signed_record, user_key)


@pytest.fixture(autouse=True)
def own_key(tmp_path_factory, monkeypatch):
    """Each test its own signing key (the user's own stays untouched)."""
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path_factory.mktemp("state")))

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
        path, key = tmp_path / PIDS_FILE, user_key()
        path.write_text(json.dumps(signed_record(key, str(tmp_path), {child.pid: found[child.pid] + 1})))
        assert kill_recorded(str(path), key) == 0 and child.poll() is None  # a reused PID: other start time
        path.write_text(json.dumps(signed_record(key, str(tmp_path), {child.pid: found[child.pid]})))
        assert kill_recorded(str(path), key) == 1
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
        (tmp_path / PIDS_FILE).write_text(json.dumps(signed_record(user_key(), str(tmp_path),
                                                                   {child.pid: _stat(child.pid)[1]})))
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


def forged(tmp_path, child):
    """Records of the child the way a results directory could hold them without this user's key."""
    start = _stat(child.pid)[1]
    other = tmp_path / "other-study"
    other.mkdir()
    return {
        "bare": {str(child.pid): start},  # the old unsigned form
        "unsigned": {"pids": {str(child.pid): start}},
        "guessed key": signed_record(b"0" * 32, str(tmp_path), {child.pid: start}),
        "another study's": signed_record(user_key(), str(other), {child.pid: start}),
        "not json": "{",
    }


@pytest.mark.parametrize("case", ["bare", "unsigned", "guessed key", "another study's", "not json"])
def test_a_pid_file_this_users_driver_did_not_sign_kills_nothing(tmp_path, case):
    child = sleeper()
    try:
        record = forged(tmp_path, child)[case]
        (tmp_path / PIDS_FILE).write_text(record if isinstance(record, str) else json.dumps(record))
        guard = ProcessGuard(str(tmp_path))
        assert guard.start() is None
        guard.stop()
        assert alive(child.pid)
    finally:
        child.kill()


def test_the_key_is_this_users_alone(tmp_path):
    key = user_key()
    mode = os.stat(key_path()).st_mode
    assert len(key) == 32 and user_key() == key and stat.S_IMODE(mode) == 0o600
    os.chmod(key_path(), 0o644)  # readable by others: no longer a secret, nothing reaped on its word
    assert user_key() is None
