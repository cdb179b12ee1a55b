"""Tune's reuse of trial actors, kept from stopping a trial actor that is starting on a free slot.

With `reuse_actors`, Tune stages the next trial as soon as a slot is free and asks Ray for a new actor for it; when
a running trial ends first, Tune hands the staged trial the actor that just finished and stops the new one, then
stages the next trial with yet another new actor. A trial actor takes 1-4 s to start on 2 busy cores (a process
importing Ray, NumPy, SciPy and the trial's modules), so whenever the trials are shorter than that, the new actor
lost the race every time: the study ran on one slot while the other core started and stopped actors (at 10⁵ tiny
runs, one actor ran every trial and six to seven were started and stopped; Tune's part of the study took 12-13 s
instead of 7.5 s). Here a staged trial whose own actor already holds its resources keeps it; a finished actor is
reused only by a trial whose actor is still waiting for resources (no process started for it), as before.
"""
from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any


@contextlib.contextmanager
def keep_starting_actors() -> Iterator[None]:
    """Inside the block, Tune's controller does not replace a trial's own actor that holds its resources with a
    cached one. Through Tune's private controller: when its names change, Tune runs as it would by itself."""
    try:
        from ray.tune.execution.tune_controller import TuneController
    except ImportError:
        TuneController = None  # noqa: N806  (a class, as Tune names it)
    tune_reuse = getattr(TuneController, "_maybe_reuse_cached_actor", None)
    if tune_reuse is None:
        yield
        return

    def reuse(self: Any, trial: Any) -> bool:
        if _own_actor_has_resources(self, trial):
            return False  # the staged trial waits for its own actor; the cached one serves the next trial
        return tune_reuse(self, trial)

    TuneController._maybe_reuse_cached_actor = reuse
    try:
        yield
    finally:
        TuneController._maybe_reuse_cached_actor = tune_reuse


def _own_actor_has_resources(controller: Any, trial: Any) -> bool:
    """Whether Tune scheduled an actor for `trial` that already got its resources (its process is being started);
    False when the controller does not hold what this reads."""
    own = getattr(controller, "_trial_to_actor", {}).get(trial)
    live = getattr(getattr(controller, "_actor_manager", None), "_live_actors_to_ray_actors_resources", None)
    return own is not None and isinstance(live, dict) and own in live
