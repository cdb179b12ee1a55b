"""The MLflow UI server `bisweep ui` runs: announced once it answers, stopped with every process it started."""
from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
import urllib.request

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


def stop_group(proc: subprocess.Popen, grace: float = 10.0) -> None:
    """SIGTERM to the server's process group (the server and its workers), SIGKILL to what is left after `grace`."""
    _signal_group(proc.pid, signal.SIGTERM)
    end = time.monotonic() + grace
    while time.monotonic() < end and (proc.poll() is None or _group_alive(proc.pid)):
        time.sleep(0.1)
    if _group_alive(proc.pid):
        _signal_group(proc.pid, signal.SIGKILL)
    proc.wait(timeout=grace)


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
