"""Which runs of a study step together as one batch (`batched: auto | off`), decided on the driver.

Runs batch when they share an algorithm that can be batched (`algorithms.batched`), a problem instance (the
same problem, parameters and instance seed: a run's own seed when `instance_seed` is null), a budget, the
evaluation points and the divergence rule; they may differ in hyperparameters and seeds. A batched run's
compute seconds are the batch's seconds divided among the runs stepping in it, so `auto` is `off` for
studies that time their runs: `dimension_scaling`, a seconds budget, a report `target` (time to reach it)
and a claim whose verdicts read compute seconds.
"""
from __future__ import annotations

import operator
from collections.abc import Sequence
from typing import NamedTuple

from algorithms import explicit
from sweep.study.encoding import encoded_list
from sweep.study.model import Point, Study
from sweep.study.timing import timed_by

#: The values of the study field `batched`.
MODES = ("auto", "off")


class Batching(NamedTuple):
    """Whether a study's trials batch runs, and why (the running line says it)."""

    on: bool
    why: str


def resolve(study: Study) -> Batching:
    """`study.batched` resolved: `auto` is on unless the study times its runs."""
    if study.batched == "off":
        return Batching(False, "batched: off")
    reason = timed_by(study)
    if reason:
        return Batching(False, f"unbatched, timed alone: {reason}")
    return Batching(True, "batched: runs of one algorithm, problem instance and budget step together")


def algorithm_batchable(name: str) -> bool:
    """Whether the algorithm's runs can be batched: it has an explicit definition (`algorithms.batched.batchable`,
    its problem aside)."""
    return name in explicit.defined()


def trial_sizes(study: Study) -> str:
    """How the study's runs are cut into trials, in words (sweep.execution.dispatch, which imports Ray Tune)."""
    if study.runs_per_trial:
        return f"{study.runs_per_trial} runs per trial"
    if resolve(study).on and any(algorithm_batchable(a) for a in {p.algorithm for p in study.points}):
        return ("trials sized to about 2 s of runs each, of batched runs about 10 s (a large batch in equal parts, "
                "at least one per slot)")
    return "trials sized to about 2 s of runs each"


def instance_seed(point: Point, seed: int) -> int:
    """The seed that builds the run's problem instance."""
    return seed if point.instance_seed is None else point.instance_seed


def batch_key(point: Point, seed: int) -> str | None:
    """What runs of one batch share (None: the algorithm cannot be batched, the run goes alone)."""
    part = _part(point)
    return f"{part}|{instance_seed(point, seed)}" if part else None


def _part(point: Point) -> str:
    """The point's part of its batch key ("" when its algorithm cannot be batched), made once for the points that
    share their problem parameters, budget and divergence rule (a grid's points share those objects)."""
    shared = (point.problem_params, point.budget, point.divergence)
    key = (point.algorithm, point.problem, point.n_evals, point.blas_threads, *map(id, shared))
    hit = _PARTS.get(key)
    if hit is not None and all(map(operator.is_, hit[0], shared)):  # the cache holds them: their ids are theirs
        return hit[1]
    if len(_PARTS) >= _PARTS_MAX:
        _PARTS.clear()
    part = "" if not algorithm_batchable(point.algorithm) else encoded_list(
        [point.algorithm, point.problem, point.problem_params, point.budget, point.n_evals, point.divergence,
         point.blas_threads])
    _PARTS[key] = (shared, part)
    return part


#: (algorithm, problem, n_evals, BLAS threads, ids of the problem parameters, budget and divergence rule) -> (those
#: objects, the part of the batch key they give): at 10⁵ points one entry per grid instead of one per point.
_PARTS: dict[tuple, tuple[tuple, str]] = {}
_PARTS_MAX = 4096


def grouped(runs: Sequence[tuple[Point, int]]) -> list[tuple[Point, int]]:
    """`runs` with the runs of one batch next to each other (in the order their batches first appear)."""
    groups: dict[object, list[tuple[Point, int]]] = {}
    for i, (point, seed) in enumerate(runs):
        key = batch_key(point, seed)
        groups.setdefault(i if key is None else key, []).append((point, seed))
    return [run for group in groups.values() for run in group]
