"""The body of a study trial: its runs, one after another or batched, reported and checkpointed (no Ray here).

A trial runs several runs (configurations and seeds), reporting their records and checkpoints as
sweep.trial_runs describes: a retried trial continues where it stopped; a run an earlier driver left midway
continues from the checkpoint named in the config's `resume`; a divergence ends that run with status
`diverged` and the trial goes on. With `batched`, consecutive runs sharing a problem instance and a budget
step together (sweep.trial_batch); the problem instance is built once for the runs that share it.
"""
from __future__ import annotations

import contextlib
import itertools
import json
from collections.abc import Mapping, Sequence
from typing import Any

from algorithms.threads import blas_threads
from problems.shared.registries import import_modules
from sweep.execution.trial_batch import run_batch
from sweep.execution.trial_runs import META, Body, Report, Resume, Skip, as_trial_config, chunks, make_run
from sweep.results import gc_pause
from sweep.study.model import RunSpec, TrialConfig

__all__ = ["META", "Report", "Resume", "Skip", "chunks", "execute_trial", "make_run"]


def execute_trial(config: TrialConfig | Mapping[str, Any], report: Report, state: dict[str, Any] | None = None,
                  skip: Skip | None = None, resume: Resume | None = None) -> None:
    """Run every run of a trial not done yet, calling `report(result, checkpoint_state_or_None)`.

    `state` is the trial's last checkpointed state (None for a fresh trial); `skip` names the runs already
    finished elsewhere, which must not run again; `resume` gives the midway state of a run an earlier
    driver left (see the module docstring for what a report carries).
    """
    config = as_trial_config(config)
    import_modules(config.imports)
    body = Body(config, report, state, skip, resume)
    with gc_pause.sparse():
        _run_all(config, body)


def _run_all(config: TrialConfig, body: Body) -> None:
    """Every pending run of the trial, batched where it can be; what was measured is sent also on a failure."""
    batch_of = _batch_keys(config.runs, config.batched)
    try:
        # The limit is set once per stretch of runs sharing it (a study sets one value for all its runs):
        # threadpoolctl takes ~0.3 ms each time, as much as a tiny run's whole overhead.
        for threads, stretch in itertools.groupby(enumerate(config.runs), key=lambda ir: ir[1].blas_threads):
            with _study_blas_limit(threads):
                for _, group in itertools.groupby(stretch, key=lambda ir: batch_of[ir[0]]):
                    todo = body.pending(list(group))
                    # A lone run of a batched study runs as a batch of one: its mode (and `time_mode: batched`) is the
                    # one its companions had, when a resumed session re-runs it alone.
                    if (len(todo) < 2 and not config.batched) or not todo or not run_batch(body, todo):
                        for index, spec in todo:
                            body.run_one(index, spec)
    finally:
        body.out.send()  # what was measured, also before a failure, reaches the driver


def _batch_keys(runs: Sequence[RunSpec], batched: bool) -> list[str]:
    """Each run's batch: runs with the same value may step as one batch (a unique value, the run key when not
    `batched`: the run goes alone). Encoded once for the runs sharing their mappings (a trial's runs of one grid hold
    the same problem parameters, budget and divergence objects: at 7,000 tiny runs the encoding was 7 % of the
    trial's CPU)."""
    if not batched:
        return [spec.run_key for spec in runs]
    memo: dict[tuple[Any, ...], str] = {}
    out = []
    for spec in runs:  # the objects live in `runs` meanwhile: an id is not another object's
        ident = (spec.algorithm, spec.problem, id(spec.problem_params), spec.seed, spec.instance_seed,
                 id(spec.budget), spec.n_evals, id(spec.divergence))
        key = memo.get(ident)
        if key is None:
            key = memo[ident] = _batch_of(spec)
        out.append(key)
    return out


def _batch_of(spec: RunSpec) -> str:
    """What the runs of one batch share: algorithm, problem instance, budget, evaluation points, divergence rule."""
    seed = spec.seed if spec.instance_seed is None else spec.instance_seed
    return json.dumps([spec.algorithm, spec.problem, spec.problem_params, seed, spec.budget, spec.n_evals,
                       spec.divergence], sort_keys=True, default=repr)


def _study_blas_limit(threads: int | None) -> contextlib.AbstractContextManager[Any]:
    """The study's own BLAS-thread setting for a run (timing studies set 1, so that trials running side by
    side do not compete for cores through multithreaded linear algebra); without it, the trial's limit."""
    return contextlib.nullcontext() if threads is None else blas_threads(threads)
