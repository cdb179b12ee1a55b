"""No leftovers: the processes a driver's local Ray starts never outlive it, and no other process is touched.

Ray's raylet and GCS share the driver's fate, but the agents they start (dashboard agent, runtime-env
agent) and idle workers can survive a SIGKILLed driver. The driver records its descendants (PID and
kernel start time, so a reused PID is never touched) in `<results>/.processes.json`; a watchdog
process, in a session of its own, waits for the driver to die and then kills what is recorded; and
the next driver on the same results directory reaps whatever a killed watchdog left. Linux /proc only;
elsewhere these are no-ops.

A results directory is data: the record is signed (HMAC-SHA256) with a key of this user's kept outside it
(`$XDG_STATE_HOME/bisweep/process-guard.key`, mode 0600) over the results directory's real path, the boot
and the user, so a record written by hand, copied from another study or from before a reboot kills nothing;
and only processes of this user are signalled. (A secret in the processes' environment cannot prove it:
Ray's agents overwrite theirs with their process title, so /proc/<pid>/environ no longer holds it.)
"""
from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
import os
import secrets
import signal
import subprocess
import sys
import threading
import time

PIDS_FILE = ".processes.json"
#: The watchdog's copy of the signing key (hex), passed in its environment, never on its command line.
KEY_ENV = "BISWEEP_GUARD_KEY"
KEY_BYTES = 32


def key_path() -> str:
    """Where this user's signing key is kept (outside every results directory)."""
    base = os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
    return os.path.join(base, "bisweep", "process-guard.key")


def user_key(create: bool = True) -> bytes | None:
    """This user's signing key, made on first use; None when it cannot be kept (then nothing is reaped later)."""
    path = key_path()
    try:
        if create and not os.path.exists(path):
            os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
            try:
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
                with os.fdopen(fd, "wb") as fh:
                    fh.write(secrets.token_bytes(KEY_BYTES))
            except FileExistsError:
                pass  # a concurrent driver made it first
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
        with os.fdopen(fd, "rb") as fh:
            st = os.fstat(fh.fileno())
            key = fh.read(KEY_BYTES + 1)
    except OSError:
        return None
    if st.st_uid != os.getuid() or st.st_mode & 0o077 or len(key) != KEY_BYTES:
        return None  # another user's or readable by others: not a secret
    return key


def _boot_id() -> str:
    try:
        with open("/proc/sys/kernel/random/boot_id", encoding="ascii") as fh:
            return fh.read().strip()
    except OSError:
        return ""


def _signature(key: bytes, results_dir: str, pids: dict[str, int]) -> str:
    what = json.dumps({"dir": os.path.realpath(results_dir), "boot": _boot_id(), "uid": os.getuid(), "pids": pids},
                      sort_keys=True)
    return hmac.new(key, what.encode(), hashlib.sha256).hexdigest()


def signed_record(key: bytes, results_dir: str, found: dict[int, int]) -> dict:
    """The PID file's content: PID → start time, signed."""
    pids = {str(k): int(v) for k, v in found.items()}
    return {"pids": pids, "mac": _signature(key, results_dir, pids)}


def read_recorded(path: str, key: bytes | None) -> dict[int, int] | None:
    """PID → start time from a PID file; {} when there is none, None when it is not one this user's driver of
    this results directory signed on this boot (so it names processes nobody may kill on its word)."""
    try:
        with open(path, encoding="utf-8") as fh:
            data = json.load(fh)
    except FileNotFoundError:
        return {}
    except (OSError, ValueError):
        return None
    try:
        pids, mac = data["pids"], data["mac"]
        recorded = {int(k): int(v) for k, v in pids.items()}
    except (TypeError, KeyError, ValueError, AttributeError):
        return None
    if key is None or not isinstance(mac, str) or \
            not hmac.compare_digest(mac, _signature(key, os.path.dirname(path), pids)):
        return None
    return recorded


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


def _ours(pid: int) -> bool:
    """Whether a process runs as this user."""
    try:
        return os.stat(f"/proc/{pid}").st_uid == os.getuid()
    except OSError:
        return False


def kill_recorded(path: str, key: bytes | None, exclude: int | None = None) -> int | None:
    """SIGKILL every process recorded in `path` that is still the same process of this user; how many were
    killed, or None when the record is not authentic (nothing is killed)."""
    recorded = read_recorded(path, key)
    if recorded is None:
        return None
    killed = 0
    for pid, start in recorded.items():
        st = _stat(pid)
        if pid != exclude and pid > 1 and st is not None and st[1] == start and _ours(pid):
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
        self._key = user_key() or secrets.token_bytes(KEY_BYTES)  # unkept: the watchdog still works, no later reaping

    def start(self) -> int | None:
        """Reap what a previous driver left, then start recording and the watchdog; the number reaped (None:
        the PID file there was not written by a driver of this study, so nothing was killed).

        Call it just before starting local Ray: children the driver already had (a test's servers) are
        never recorded.
        """
        reaped = kill_recorded(self.path, self._key, exclude=os.getpid())
        self._before = set(descendants(os.getpid()))
        self.record()
        self._watchdog = subprocess.Popen(
            # This file alone, isolated and without site-packages: the watchdog imports only the standard library
            # (`-m sweep.execution.processes` imported the sweep package, 0.7 s of CPU beside Ray's start).
            [sys.executable, "-I", "-S", os.path.abspath(__file__), self.path, str(os.getpid())],
            stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            env={**os.environ, KEY_ENV: self._key.hex()},
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
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)  # a link planted there goes, not what it points at
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(signed_record(self._key, os.path.dirname(self.path), found), fh)
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
    kill_recorded(path, bytes.fromhex(os.environ.pop(KEY_ENV, "")) or None, exclude=driver)


if __name__ == "__main__":
    _watch(sys.argv[1], int(sys.argv[2]))
