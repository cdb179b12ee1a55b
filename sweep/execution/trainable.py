"""The Tune side of a study trial: the function trainable, its reports and checkpoints through Tune, the
registry of finished runs, the checkpoints an earlier driver left (the trial body itself: sweep.trial).

On Ray, BLAS gets as many threads as the trial has CPUs (one for a 1-CPU trial). `study_trainable` lives
here so that a worker unpickling it imports only the run loop, not the driver's modules.
"""
from __future__ import annotations

import contextlib
import math
import tempfile
from collections.abc import Mapping, Sequence
from typing import Any

from algorithms.checkpoint import load_state, save_state
from algorithms.threads import blas_threads
from sweep.execution.trial import execute_trial
from sweep.execution.trial_runs import META, Resume, Skip, as_trial_config, chunks, make_run, saved_state
from sweep.study.model import TrialConfig

__all__ = ["META", "chunks", "execute_trial", "make_run", "run_trial", "study_trainable", "trial_cpus"]


def _tune_report(result: dict[str, Any], state: dict[str, Any] | None) -> None:
    from ray import tune
    from ray.tune import Checkpoint

    if state is None:
        tune.report(result)
        return
    with tempfile.TemporaryDirectory() as d:
        save_state(state, d)
        tune.report(result, checkpoint=Checkpoint.from_directory(d))


def _tune_state() -> dict[str, Any] | None:
    from ray import tune

    ckpt = tune.get_checkpoint()
    if ckpt is None:
        return None
    with ckpt.as_directory() as d:
        return load_state(d)


#: How long a trial waits for the registry's answer before going on without it (seconds).
REGISTRY_SECONDS = 30.0


def _registry_skip(name: str | None) -> Skip | None:
    """Ask the study's registry of finished runs (a named actor the driver starts at a trial's first retry), if there
    is one (a first start finds none and has nothing to skip). A registry that cannot be reached (its node lost, the
    driver gone) is no registry: the trial runs its runs, and the driver's store keeps one copy of each record and
    summary."""
    if not name:
        return None
    import ray
    from ray.exceptions import RayError

    try:
        actor = ray.get_actor(name)
    except (ValueError, RayError):
        return None

    def skip(run_keys: Sequence[str]) -> set[str]:
        try:
            return set(ray.get(actor.done_among.remote(list(run_keys)), timeout=REGISTRY_SECONDS))
        except RayError:  # RayActorError, GetTimeoutError
            return set()

    return skip


def _earlier_checkpoints(paths: Mapping[str, str]) -> Resume | None:
    """The midway states of runs an earlier driver left, read from the checkpoints it recorded."""
    if not paths:
        return None
    from ray.tune import Checkpoint

    loaded: dict[str, dict[str, Any] | None] = {}  # a batch's runs share one checkpoint: read once

    def state_of(run_key: str) -> dict[str, Any] | None:
        if run_key not in paths:
            return None
        path = paths[run_key]
        if path not in loaded:
            try:
                with Checkpoint(path).as_directory() as d:
                    loaded[path] = load_state(d)
            except (OSError, ValueError):
                loaded[path] = None  # gone (cleaned up or never synced): its runs start again from the beginning
        return None if loaded[path] is None else saved_state(loaded[path], run_key)

    return state_of


def trial_cpus() -> int | None:
    """The CPUs Ray assigned this trial (at least 1): its BLAS threads, so that trials never oversubscribe
    cores (Ray's OMP_NUM_THREADS default is not enough: a variable set by the user wins over it); None (no
    limit) outside a Ray worker."""
    import ray

    if not ray.is_initialized():
        return None
    cpus = ray.get_runtime_context().get_assigned_resources().get("CPU")
    return None if cpus is None else max(1, math.floor(cpus))


def run_trial(config: TrialConfig | Mapping[str, Any]) -> None:
    """Ray Tune function trainable of one study trial (a `TrialConfig`, or its `to_dict`)."""
    config = as_trial_config(config)  # read once: execute_trial takes it as it is
    cpus = trial_cpus()
    with blas_threads(cpus) if cpus else contextlib.nullcontext():
        execute_trial(config, _tune_report, _tune_state(), _registry_skip(config.done_registry),
                      _earlier_checkpoints(config.resume))


def study_trainable(config: dict[str, Any]) -> None:
    """The Tune trainable of every study trial (its config holds the `TrialConfig` under "trial"); it lives
    here so that a worker unpickling it imports only the run loop, not the driver's modules."""
    run_trial(config["trial"])
