"""Ray for one driver session: start a local Ray or connect to a cluster, Tune's environment settings, quiet
logs, and a quick stop. Ray is imported only inside these functions (validation never needs it).
"""
from __future__ import annotations

import contextlib
import gc
import logging
import os
from collections.abc import Iterator

from problems.validation import ParameterError

NAMESPACE = "bisweep"


class ClusterError(ParameterError):
    """The Ray cluster at --address could not be reached (a bad address or token)."""


def start_ray(address: str | None, num_cpus: int | None) -> bool:
    """Connect to `address`, or start Ray locally; False when Ray was already initialised."""
    import ray

    if ray.is_initialized():
        return False
    common = {"namespace": NAMESPACE, "log_to_driver": False, "logging_level": logging.WARNING}
    if address:
        try:
            ray.init(address=address, **common)
        except ConnectionError as exc:
            raise ClusterError(f"address: cannot connect to the Ray cluster at {address} ({exc}); is it running, "
                               "and is RAY_AUTH_TOKEN (or ~/.ray/auth_token) the cluster's token?") from exc
    else:
        # Trials import study plugins by name: let local workers see the caller's directory.
        cwd, saved = os.getcwd(), os.environ.get("PYTHONPATH")
        paths = [p for p in (saved or "").split(os.pathsep) if p]
        os.environ["PYTHONPATH"] = os.pathsep.join([cwd] + [p for p in paths if p != cwd])
        try:
            ray.init(num_cpus=num_cpus or os.cpu_count(), include_dashboard=False, **common)
        finally:
            if saved is None:
                os.environ.pop("PYTHONPATH", None)
            else:
                os.environ["PYTHONPATH"] = saved
    return True


def stop_ray() -> None:
    """`ray.shutdown()` of a local Ray, without its 1 s wait for the autoscaler monitor to take SIGTERM.

    The monitor has nothing to do on a local Ray and Ray kills it after that second anyway; it is found
    through Ray's private node record, so when that changes this is a plain `ray.shutdown()`. No garbage
    collection runs during the shutdown: one started by another thread of the driver (the process guard's)
    could free a Ray handle midway, and a handle that reaches Ray's core worker after it is gone ends the
    process at once (exit code 1, nothing printed).
    """
    import ray

    node = getattr(getattr(ray, "_private", None), "worker", None)
    processes = getattr(getattr(node, "_global_node", None), "all_processes", None) or {}
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


_TUNE_ENV = {
    "TUNE_DISABLE_AUTO_CALLBACK_LOGGERS": "1",  # the platform records results itself
    "RAY_AIR_NEW_OUTPUT": "0",  # the new console output prints a banner even at verbose=0
    "TUNE_WARN_EXCESSIVE_EXPERIMENT_CHECKPOINT_SYNC_THRESHOLD_S": "0",  # many short trials checkpoint often
}


@contextlib.contextmanager
def tune_env(max_pending: int) -> Iterator[None]:
    """Tune settings read from the environment, set for this experiment only (then restored)."""
    # A custom searcher gets one pending trial by default: Tune would start trials one step at a time.
    env = {**_TUNE_ENV, "TUNE_MAX_PENDING_TRIALS_PG": str(max_pending)}
    saved = {k: os.environ.get(k) for k in env}
    for k, v in env.items():
        os.environ.setdefault(k, v)
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


