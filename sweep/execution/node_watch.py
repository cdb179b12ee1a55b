"""A lost Ray node ends the study in bounded time instead of a driver waiting for ever.

When the local raylet dies (kill -9, the kernel's OOM killer), Tune keeps waiting for resources that never come
back. `NodeWatch` notices within seconds, from the raylet process of a Ray this driver started, or from a
cluster's resources reading no CPU for `LOST_SECONDS` after they had some (its nodes may come back), and stops
the experiment as a Tune stopper. If Tune cannot stop it (its calls to the lost node can block), the main thread
is interrupted after `GRACE_SECONDS`. The runs already recorded stay on disk; running the command again resumes.
"""
from __future__ import annotations

import _thread
import threading
import time
from typing import Any

import ray
from ray import tune

from sweep.execution.ray_cluster import NodeLost, _node, started_here

__all__ = ["NodeLost", "NodeWatch", "local_raylet"]

#: How long a connected cluster may show no CPU before its nodes count as lost (seconds).
LOST_SECONDS = 30.0
#: How long Tune gets to stop the experiment after a loss before the driver stops waiting (seconds).
GRACE_SECONDS = 10.0


class NodeWatch(tune.Stopper):
    """Watches the Ray the experiment runs on; stops the experiment (`stop_all`) once it is lost."""

    def __init__(self, raylet: Any = None, period: float = 0.5, lost_seconds: float = LOST_SECONDS,
                 grace_seconds: float = GRACE_SECONDS) -> None:
        self.raylet = raylet  # the local raylet's process (a Popen), when this driver started Ray
        self.period, self.lost_seconds, self.grace_seconds = period, lost_seconds, grace_seconds
        self.lost: str | None = None  # why the node counts as lost
        self.interrupted = False  # the main thread was interrupted (Tune did not stop in time)
        self._done = threading.Event()
        self._thread: threading.Thread | None = None

    def __getstate__(self) -> dict[str, Any]:
        return {}  # Tune pickles its run config; the watch stays in this process

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__()

    def __call__(self, trial_id: str, result: dict[str, Any]) -> bool:
        return False

    def stop_all(self) -> bool:
        return self.lost is not None

    # ---- the watching thread ----
    def __enter__(self) -> NodeWatch:
        self._thread = threading.Thread(target=self._watch, name="bisweep-node-watch", daemon=True)
        self._thread.start()
        self._printer = _quiet_raylet_death()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._done.set()
        _restore_printer(self._printer)

    def _watch(self) -> None:
        cpu_seen: float | None = None  # when the cluster last showed a CPU (an autoscaling one may start without)
        while not self._done.wait(self.period):
            reason = self._raylet_ended()
            if reason is None:
                if _cluster_cpus() > 0:
                    cpu_seen = time.monotonic()
                elif cpu_seen is not None and time.monotonic() - cpu_seen > self.lost_seconds:
                    reason = f"the Ray cluster's nodes have shown no CPU for {self.lost_seconds:g} s"
            if reason is not None:
                self.lost = reason
                if not self._done.wait(self.grace_seconds):  # Tune did not end the experiment in time
                    self.interrupted = True
                    _thread.interrupt_main()
                return

    def _raylet_ended(self) -> str | None:
        code = self.raylet.poll() if self.raylet is not None else None
        return None if code is None else f"the local Ray node's raylet ended (exit code {code}: killed, or out of memory?)"


def _quiet_raylet_death() -> Any:
    """Drop Ray's message of a raylet's death (its last 20 log lines, once per agent that noticed) from the
    driver's output: the watch says it in one line. Through Ray's private printer of error messages: when that
    changes, the message shows. Returns what to restore."""
    worker = getattr(getattr(ray, "_private", None), "worker", None)
    printer = getattr(worker, "print_to_stdstream", None)
    if printer is None:
        return None

    def printed(data: dict[str, Any], *args: Any, **kwargs: Any) -> None:
        if data.get("pid") == "raylet" and any("Raylet is terminated" in str(line) for line in data.get("lines", [])):
            return
        printer(data, *args, **kwargs)

    worker.print_to_stdstream = printed
    return printer


def _restore_printer(printer: Any) -> None:
    if printer is not None:
        ray._private.worker.print_to_stdstream = printer


def _cluster_cpus() -> float:
    """The cluster's CPUs as Ray's control store sees them (0 when none, or when it cannot be asked)."""
    try:
        return float(ray.cluster_resources().get("CPU", 0.0))
    except Exception:  # noqa: BLE001  an unreachable control store shows no CPU
        return 0.0


def local_raylet() -> Any:
    """The raylet process of the Ray this driver started (from Ray's private node record), or None."""
    if not started_here():
        return None
    infos = (getattr(_node(), "all_processes", None) or {}).get("raylet") or []
    return getattr(infos[0], "process", None) if infos else None
