"""The MLflow UI server `bisweep ui` runs: announced once it answers, stopped with every process it started.

The store's URI reaches the server in its environment (MLflow's MLFLOW_BACKEND_STORE_URI), never on its command
line, which every user of the machine can read. The server runs in a process group of its own, and a watchdog
(in a session of its own, standard library only) kills that group when `bisweep ui` ends however it ends: its
stdin is a pipe from `bisweep ui`, closed by the kernel when that process dies, SIGKILL included.
"""
from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
import urllib.request

#: The watchdog: wait for end of input, then SIGTERM the group, SIGKILL what is left 10 s later.
WATCHDOG = """
import os, signal, sys, time
group = int(sys.argv[1])
sys.stdin.buffer.read()
def alive():
    try:
        os.killpg(group, 0)
        return True
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
for sig, wait in ((signal.SIGTERM, 10.0), (signal.SIGKILL, 0.0)):
    try:
        os.killpg(group, sig)
    except OSError:
        break
    end = time.monotonic() + wait
    while alive() and time.monotonic() < end:
        time.sleep(0.1)
"""


def start(cmd: list[str], env: dict[str, str], uri: str) -> tuple[subprocess.Popen, subprocess.Popen]:
    """Start the server `cmd` with the store `uri` in its environment, and its watchdog; (server, watchdog)."""
    proc = subprocess.Popen(cmd, env={**env, "MLFLOW_BACKEND_STORE_URI": uri}, start_new_session=True)
    watchdog = subprocess.Popen([sys.executable, "-I", "-S", "-c", WATCHDOG, str(proc.pid)], stdin=subprocess.PIPE,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    return proc, watchdog

#: How long the server may take to answer its first request (seconds; MLflow's imports take a while).
START_SECONDS = 120.0


def wait_answering(proc: subprocess.Popen, host: str, port: int, timeout: float = START_SECONDS) -> bool:
    """Wait until the server answers /health; False when it ended first (or did not answer within `timeout`)."""
    url = f"http://{'[' + host + ']' if ':' in host else host}:{port}/health"
    if host in ("0.0.0.0", "::"):  # listening everywhere: ask it here
        url = f"http://127.0.0.1:{port}/health"
    end = time.monotonic() + timeout
    while time.monotonic() < end and proc.poll() is None:
        with contextlib.suppress(OSError):
            with urllib.request.urlopen(url, timeout=2) as reply:
                if reply.status == 200:
                    return True
        time.sleep(0.2)
    return False


def stop_group(proc: subprocess.Popen, grace: float = 10.0, watchdog: subprocess.Popen | None = None) -> None:
    """SIGTERM to the server's process group (the server and its workers), SIGKILL to what is left after `grace`;
    then the watchdog is let go."""
    _signal_group(proc.pid, signal.SIGTERM)
    end = time.monotonic() + grace
    while time.monotonic() < end and (proc.poll() is None or _group_alive(proc.pid)):
        time.sleep(0.1)
    if _group_alive(proc.pid):
        _signal_group(proc.pid, signal.SIGKILL)
    proc.wait(timeout=grace)
    if watchdog is not None:
        with contextlib.suppress(OSError):
            watchdog.stdin.close()  # type: ignore[union-attr]  # the group is gone: it signals nothing
        watchdog.wait(timeout=grace)


def _signal_group(pgid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def _group_alive(pgid: int) -> bool:
    """Whether a process of group `pgid` still runs."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
