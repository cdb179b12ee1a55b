"""Ray for one driver session: start a local Ray or connect to a cluster, Tune's environment settings, quiet
logs, and a quick stop. Ray is imported only inside these functions (validation never needs it).
"""
from __future__ import annotations

import contextlib
import gc
import logging
import os
import re
import selectors
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any

from problems.shared.errors import ParameterError
from sweep.tracking.masking import mask, mask_text

NAMESPACE = "bisweep"


class ClusterError(ParameterError):
    """The Ray cluster at --address could not be reached (a bad address or token)."""


class NodeLost(RuntimeError):
    """The Ray node(s) a study ran on went away (sweep/execution/node_watch.py); the message is the driver's one line."""


class RayStartTimeout(NodeLost):
    """A local Ray did not start in time (twice); the message is the driver's one line."""


#: How long a local Ray may take to start (seconds; `--ray-start-timeout`): it starts in about 5 s on an idle
#: machine, but Ray's own 30-s wait for its raylet ran out repeatedly on a busy 2-core one.
RAY_START_SECONDS = 120.0
#: What Ray says when its node or GCS did not come up in time.
_START_TIMED_OUT = ("timed out during startup", "failed to connect to gcs", "timed out while waiting",
                    "timed out waiting for")


#: How long a Ray head may take to answer the handshake (seconds).
HANDSHAKE_SECONDS = 5.0
#: Asks the GCS at argv[1] one question, in a process of its own: Ray's client retries a silent address for ~30 s,
#: printing a warning line each time, and cannot be stopped from this thread.
_PROBE = ("import sys\nfrom ray._raylet import GcsClient\nprint('imported', flush=True)\n"
          "GcsClient(address=sys.argv[1]).internal_kv_get(b'bisweep-probe', None, timeout=float(sys.argv[2]))\n")


def check_head(address: str, field: str = "address") -> None:
    """A Ray head answers Ray's handshake at host:port within HANDSHAKE_SECONDS (a port that takes TCP but speaks
    another protocol, or a cluster whose token this driver lacks, is refused before anything is written)."""
    proc = subprocess.Popen([sys.executable, "-c", _PROBE, address, str(HANDSHAKE_SECONDS)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        _wait_line(proc, 60.0)  # importing Ray's core library (seconds on a busy machine) is not the handshake
        _, err = proc.communicate(timeout=HANDSHAKE_SECONDS)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        raise ClusterError(f"{field}: no Ray head answered at {mask(address)} within {HANDSHAKE_SECONDS:g} s (something "
                           "takes TCP there but does not speak Ray's protocol); give the head's GCS port (`ray start "
                           "--head` prints it, 6379 by default)") from None
    if proc.returncode == 0:
        return
    lines = [line for line in err.strip().splitlines() if line.strip()]
    last = lines[-1] if lines else f"exit code {proc.returncode}"
    # A wrong token is an AuthenticationError; with RAY_AUTH_MODE=token and no token Ray's core aborts, saying so.
    if _AUTH.search(err):
        raise ClusterError(f"{field}: the Ray cluster at {mask(address)} wants an auth token this driver does not "
                           "have: export RAY_AUTH_MODE=token and RAY_AUTH_TOKEN (or ~/.ray/auth_token) as the cluster's")
    raise ClusterError(f"{field}: no Ray head answered at {mask(address)} ({mask_text(last)[:300]})")


_AUTH = re.compile(r"AuthenticationError|InvalidAuthToken|auth(entication)?[ _-]?token", re.IGNORECASE)


def _wait_line(proc: subprocess.Popen, timeout: float) -> None:
    """Wait until `proc` prints a line (or ends); TimeoutExpired after `timeout` seconds."""
    with selectors.DefaultSelector() as sel:
        sel.register(proc.stdout, selectors.EVENT_READ)
        if not sel.select(timeout):
            raise subprocess.TimeoutExpired(proc.args, timeout)
    proc.stdout.readline()


#: The raylet connects to its object store as soon as the store listens: Ray retries the connection once a second
#: (10 tries), which made a local start last a second longer one time in two; 20 ms x 500 keeps the same 10 s.
#: A local Ray's workers import Tune and the trial code (~1.8 s of CPU on 2 cores) before they take work: the
#: workers Ray starts with itself then do it while the driver sets up Tune and MLflow, not once a trial actor has
#: arrived (the 1,000-configuration batched study, whole process: 7.82 against 7.95 s, medians of 8 in turn, the
#: ratio of the pairs 0.98). A module that fails to import is logged by the worker and skipped.
WORKER_PRELOAD = ("ray.tune", "sweep.execution.trainable")
_LOCAL_CONFIG = {"raylet_client_connect_timeout_milliseconds": 20, "raylet_client_num_connect_attempts": 500,
                 "preload_python_modules": list(WORKER_PRELOAD)}


def start_ray(address: str | None, num_cpus: int | None, start_timeout: float = RAY_START_SECONDS) -> bool:
    """Connect to `address`, or start a Ray of this process's own (within `start_timeout` seconds, tried twice);
    False when Ray was already initialised."""
    import ray

    if ray.is_initialized():
        return False
    common = {"namespace": NAMESPACE, "log_to_driver": False, "logging_level": logging.WARNING}
    if address:
        try:
            ray.init(address=address, **common)
        except ConnectionError as exc:
            raise ClusterError(f"address: cannot connect to the Ray cluster at {mask(address)} ({mask_text(str(exc))}); is it running, "
                               "and is RAY_AUTH_TOKEN (or ~/.ray/auth_token) the cluster's token?") from exc
    else:
        # Trials import study plugins by name: let local workers see the caller's directory. PL_DISABLE_FORK is
        # what Tune gives each trial actor's runtime environment (see trials_on_idle_workers).
        paths = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
        workers_env = {"PYTHONPATH": os.pathsep.join([os.getcwd()] + [p for p in paths if p != os.getcwd()]),
                       "PL_DISABLE_FORK": os.environ.get("PL_DISABLE_FORK", "1")}
        # Ray's wait for its GCS, stretched to the time allowed (its wait for the raylet is a fixed 30 s: retried).
        workers_env["RAY_gcs_server_port_wait_time_s"] = str(max(int(start_timeout), 1))
        with _environ(workers_env):  # inherited by every process Ray starts here
            # address="local": a Ray of its own, not the cluster a `ray start` left running here (with num_cpus,
            # Ray's default of joining that cluster is an error).
            with _without_head_services():
                _start_local(lambda: ray.init(address="local", num_cpus=num_cpus or os.cpu_count(),
                                              include_dashboard=False, _system_config=_LOCAL_CONFIG, **common),
                             start_timeout)
    return True


#: What a local Ray's head starts that a study on this machine never uses: the autoscaler monitor (one node, nothing
#: to scale), the dashboard's API server (jobs, the state API, the web page) and the log monitor (it sends the workers'
#: output to a driver that asks for it: `log_to_driver` is off; the workers still write their log files). Each is a
#: Python process that imports Ray; on 2 cores the first two made a local start 0.9 s longer (2.78 s against 1.91,
#: medians), the log monitor ~0.5 s more (2.61 against 3.13 s, medians of 4; benchmarks/bench_ray_start.py).
HEAD_SERVICES = ("start_monitor", "start_api_server", "start_log_monitor")


@contextlib.contextmanager
def _without_head_services() -> Iterator[None]:
    """A local Ray's head started without HEAD_SERVICES, through Ray's private `Node` (pinned Ray version): when
    that changes, Ray starts as it would by itself. The GCS, raylet, its agents and workers start as always."""
    try:
        from ray._private.node import Node as node_class
    except ImportError:
        node_class = None
    saved = {name: node_class.__dict__[name] for name in HEAD_SERVICES
             if node_class is not None and callable(node_class.__dict__.get(name))}
    if len(saved) != len(HEAD_SERVICES):
        yield
        return
    for name in HEAD_SERVICES:
        setattr(node_class, name, lambda self, **_: None)
    try:
        yield
    finally:
        for name, method in saved.items():
            setattr(node_class, name, method)


def _start_local(init: Callable[[], Any], timeout: float) -> None:
    """`init()`, once more if Ray's start-up timed out while time is left; RayStartTimeout (one line naming the
    machine's load) when it timed out twice or the time ran out."""
    import ray

    began = time.monotonic()
    for attempt in (1, 2):
        try:
            init()
            return
        except Exception as exc:  # noqa: BLE001  Ray raises a bare Exception for its node's start-up
            if not any(text in str(exc).lower() for text in _START_TIMED_OUT) and not isinstance(exc, TimeoutError):
                raise
            with contextlib.suppress(Exception):
                ray.shutdown()  # the half-started node's processes
            took = time.monotonic() - began
            if attempt == 2 or took >= timeout:
                load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
                raise RayStartTimeout(
                    f"bisweep: error: the local Ray did not start within {took:.0f} s (tried "
                    f"{'twice' if attempt == 2 else 'once'}) — the machine "
                    f"is busy (load {load:.1f} on {os.cpu_count()} CPUs); rerun, or raise --ray-start-timeout "
                    f"(now {timeout:g} s)") from None


def started_here() -> bool:
    """Whether this process started the Ray it is connected to (a local Ray, whose processes inherited this
    process's environment), from Ray's private node record: False when that changes."""
    import ray

    return bool(getattr(_node(), "head", False)) and ray.is_initialized()


def _node() -> Any:
    """Ray's private record of this process's node (its processes, whether it is the head), or None."""
    import ray

    return getattr(getattr(getattr(ray, "_private", None), "worker", None), "_global_node", None)


def stop_ray() -> None:
    """`ray.shutdown()` of a local Ray, without its 1 s wait for the autoscaler monitor to take SIGTERM.

    The monitor has nothing to do on a local Ray and Ray kills it after that second anyway; it is found
    through Ray's private node record, so when that changes this is a plain `ray.shutdown()`. No garbage
    collection runs during the shutdown: one started by another thread of the driver (the process guard's)
    could free a Ray handle midway, and a handle that reaches Ray's core worker after it is gone ends the
    process at once (exit code 1, nothing printed).
    """
    import ray

    processes = getattr(_node(), "all_processes", None) or {}
    for info in processes.get("monitor", []):
        with contextlib.suppress(Exception):
            info.process.kill()
    gc.collect()  # garbage holding Ray handles goes while Ray is up
    enabled = gc.isenabled()
    gc.disable()
    try:
        ray.shutdown()
    finally:
        if enabled:
            gc.enable()


@contextlib.contextmanager
def trials_on_idle_workers(enabled: bool = True) -> Iterator[None]:
    """Tune's trial actors without a runtime environment, for a local Ray: they start on the workers Ray keeps idle.

    Tune gives every trial actor a runtime environment of environment variables (PL_DISABLE_FORK for PyTorch
    Lightning, and a few it forwards from the driver, such as AWS credentials). No pre-started worker has a runtime
    environment, so each trial actor would wait for a new worker process (~0.6 s on 2 cores). On a Ray this process
    started (`enabled=started_here()`), every worker inherits the driver's environment at `ray.init`, which
    `start_ray` gives PL_DISABLE_FORK too. Through Tune's private actor-class cache: when that changes, this does
    nothing.
    """
    import ray

    try:
        from ray.tune.execution.class_cache import _ActorClassCache as cache
    except ImportError:
        cache = None
    tune_get = getattr(cache, "get", None)
    if tune_get is None or not enabled:
        yield
        return

    def get(self: Any, trainable: type) -> Any:
        classes = getattr(self, "_cache", None)
        if not isinstance(classes, dict):
            return tune_get(self, trainable)
        if trainable not in classes:
            classes[trainable] = ray.remote(trainable)
        return classes[trainable]

    cache.get = get
    try:
        yield
    finally:
        cache.get = tune_get


_TUNE_ENV = {
    "TUNE_DISABLE_AUTO_CALLBACK_LOGGERS": "1",  # the platform records results itself
    "RAY_AIR_NEW_OUTPUT": "0",  # the new console output prints a banner even at verbose=0
    "TUNE_WARN_EXCESSIVE_EXPERIMENT_CHECKPOINT_SYNC_THRESHOLD_S": "0",  # many short trials checkpoint often
    "TUNE_DISABLE_SIGINT_HANDLER": "1",  # Ctrl-C stops the experiment through sweep.execution.ctrl_c instead
    # Tune's experiment state (every trial's config pickled) is saved at the end only: a session resumes from
    # its own store and never from Tune's state, whose periodic saves took 16 % of Tune's thread at 3·10⁴ tiny runs.
    "TUNE_GLOBAL_CHECKPOINT_S": "1e9",
}


@contextlib.contextmanager
def tune_env(max_pending: int) -> Iterator[None]:
    """Tune settings read from the environment, set for this experiment only (a value the user set stays)."""
    # A custom searcher gets one pending trial by default: Tune would start trials one step at a time.
    env = {**_TUNE_ENV, "TUNE_MAX_PENDING_TRIALS_PG": str(max_pending)}
    with _environ({k: os.environ.get(k, v) for k, v in env.items()}):
        yield


@contextlib.contextmanager
def _environ(values: dict[str, str]) -> Iterator[None]:
    """`os.environ` with `values` for the block, then as it was."""
    saved = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def quiet_logs() -> None:
    """Keep Ray's, Tune's and MLflow's console chatter to warnings (MLflow is not imported for it)."""
    os.environ.setdefault("MLFLOW_LOGGING_LEVEL", "WARNING")  # read by MLflow when it configures its logger
    # MLflow's usage telemetry asks a server at start and joins its threads at exit (seconds without a network).
    os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
    for name in ("ray", "ray.tune", "ray.train", "mlflow", "alembic"):
        logging.getLogger(name).setLevel(logging.WARNING)
    # Ray announces its default token authentication on every local start.
    logging.getLogger("ray._private.authentication.authentication_token_setup").setLevel(logging.ERROR)
    # Without Tune's file loggers the result grid cannot read per-trial metrics: they are in our store.
    logging.getLogger("ray.tune.analysis.experiment_analysis").setLevel(logging.ERROR)
    # A failed trial is reported on one line by the progress display (with the path of its traceback).
    for name in ("ray.tune.execution.tune_controller", "ray.tune.tune"):
        logging.getLogger(name).setLevel(logging.CRITICAL)


