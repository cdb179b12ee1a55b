"""Ray nodes a test starts and kills on loopback: a worker joining a cluster, killed with SIGKILL as a lost machine
is (its raylet, object store and trial processes at once), and the processes of a node that hold study trials."""
from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from pathlib import Path


def _parent(pid: int) -> int | None:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return None


def descendants(pid: int) -> list[int]:
    """Every process below `pid` (from /proc), children before grandchildren."""
    children: dict[int, list[int]] = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            children.setdefault(_parent(int(d)), []).append(int(d))
    out, todo = [], [pid]
    while todo:
        for c in children.get(todo.pop(0), []):
            out.append(c)
            todo.append(c)
    return out


def alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def free_port() -> int:
    """A port nothing listens on at the moment on any address of this machine."""
    with socket.socket() as s:
        s.bind(("", 0))
        return s.getsockname()[1]


def own_ports(head: bool = False) -> list[str]:
    """`ray start` options giving the ports Ray fixes by default free numbers of the node's own. A node at
    127.0.0.x binds its dashboard agent's HTTP port (52365) and a head its client server's (10001) on 127.0.0.1
    as well, where every other node of the machine binds the same numbers: the node that comes second runs
    without its agent's HTTP server, which on a head is the job agent `ray job submit` needs (status 500 "No
    available agent" for as long as the cluster lives)."""
    return [f"--dashboard-agent-listen-port={free_port()}", *([f"--ray-client-server-port={free_port()}"] * head)]


def start_worker(ray_bin: Path, address: str, ip: str, temp_dir: str, env: dict, cpus: int = 1) -> subprocess.Popen:
    """`ray start --block` of a worker node at `ip` joining `address` (its own temp dir and ports)."""
    return subprocess.Popen(
        [str(ray_bin), "start", f"--address={address}", f"--node-ip-address={ip}", f"--temp-dir={temp_dir}",
         f"--num-cpus={cpus}", "--disable-usage-stats", *own_ports(), "--block"],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)


def trial_processes(node: subprocess.Popen) -> list[int]:
    """The processes of `node` running a Tune trial (Ray titles them `ray::ImplicitFunc...`)."""
    out = []
    for pid in descendants(node.pid):
        try:
            if b"ImplicitFunc" in Path(f"/proc/{pid}/cmdline").read_bytes():
                out.append(pid)
        except OSError:
            pass
    return out


def wait_for_node(address: str, ip: str, env: dict, timeout: float = 120) -> None:
    """Until the cluster at `address` counts a live node at `ip` (asked from a process of its own)."""
    import sys

    code = ("import ray, sys, time\n"
            f"end = time.time() + {timeout}\n"
            "while True:\n"  # a loaded machine: the head's raylet registers some seconds after its GCS listens
            f"    try: ray.init(address='{address}', logging_level='ERROR'); break\n"
            "    except ConnectionError:\n"
            "        if time.time() > end: raise\n"
            "        time.sleep(1)\n"
            f"while time.time() < end and not any(n['Alive'] and n['NodeManagerAddress'] == '{ip}' for n in ray.nodes()):\n"
            "    time.sleep(0.3)\n"
            f"sys.exit(0 if any(n['Alive'] and n['NodeManagerAddress'] == '{ip}' for n in ray.nodes()) else 1)\n")
    found = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=timeout + 60)
    assert found.returncode == 0, found.stderr[-2000:]


def wait_for_trial(node: subprocess.Popen, timeout: float = 120) -> None:
    """Until a trial runs on `node`."""
    end = time.monotonic() + timeout
    while not trial_processes(node):
        if time.monotonic() > end:
            raise TimeoutError("no trial started on the node")
        time.sleep(0.2)


def kill_node(node: subprocess.Popen) -> None:
    """SIGKILL every process of the node at once, as a reclaimed machine."""
    pids = [node.pid, *descendants(node.pid)]
    for pid in pids:
        if alive(pid):
            os.kill(pid, signal.SIGKILL)
    node.wait(timeout=30)
    end = time.monotonic() + 10
    while time.monotonic() < end and any(alive(p) for p in pids):
        time.sleep(0.1)
