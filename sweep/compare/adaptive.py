"""Model-based tuning in rounds: Optuna's TPE, through Ray Tune's `OptunaSearch`, proposes each round's
configurations from the scores of the rounds before it.

A `benchmark` study with `sampler: optuna` runs its tuning studies in rounds of `batch` trials. Round 0 is
trial 0 (the paper default) and trials 1..batch of the quasi-random protocol (its Sobol draws, the same on
every problem: the searcher's start-up design). Once a round's runs have ended, every (algorithm, problem,
tuning study) gets a fresh searcher, is told each of its trials so far in trial order (the tuned values
and the trial's loss: the mean final metric over the tuning instances, as `tuning.trial_scores` scores
it, +inf for a diverged or failed run) and is asked for its next `batch` trials. Held-out instances are
never told. Every algorithm gets the same number of trials on every problem in every study.

A searcher is seeded from (the protocol's seed, the study, the round, the algorithm and the problem) and
told the same history in the same order, so a round's proposals are a function of the earlier rounds'
results: a study killed between two rounds proposes again exactly what it had proposed (the runner also
keeps the proposals in study.json, so a proposal is never made twice).
"""
from __future__ import annotations

import dataclasses
import json
import logging
import warnings
import zlib
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

import algorithms
from algorithms.search_space import Range
from sweep.compare import tuning
from sweep.report import analysis
from sweep.results.runs import problem_label
from sweep.study.model import Point

#: Samplers whose configurations depend on earlier results (Ray Tune searchers).
SAMPLERS = ("optuna",)

Summary = Callable[[str], "dict[str, Any] | None"]


def distributions(space: Mapping[str, Range]) -> dict[str, Any]:
    """The search space as Optuna distributions (log, integer flags kept)."""
    from optuna.distributions import FloatDistribution, IntDistribution

    return {name: IntDistribution(int(r.low), int(r.high), log=r.log) if r.integer
            else FloatDistribution(r.low, r.high, log=r.log) for name, r in space.items()}


def searcher(space: Mapping[str, Range], seed: int) -> Any:
    """A Ray Tune `OptunaSearch` over `space` minimising "loss", with a seeded TPE sampler.

    TPE models from the first told trial on (`n_startup_trials=1`): round 0 is the start-up design.
    `constant_liar` keeps the trials of one round apart (they are asked before any of them is told).
    """
    import optuna
    from ray.tune.search.optuna import OptunaSearch

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    logging.getLogger("ray.tune.search.optuna.optuna_search").setLevel(logging.ERROR)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)  # constant_liar
        sampler = optuna.samplers.TPESampler(seed=seed, n_startup_trials=1, constant_liar=True)
    return OptunaSearch(distributions(space), metric="loss", mode="min", sampler=sampler)


def propose(space: Mapping[str, Range], history: Sequence[tuple[Mapping[str, Any], float]], n: int,
            seed: int) -> list[dict[str, int | float]]:
    """`n` configurations of `space` from a searcher told `history` ((tuned values, loss), in trial order).

    An empty space has one configuration, proposed `n` times (as the quasi-random protocol draws it).
    """
    if not space:
        return [{} for _ in range(n)]
    search = searcher(space, seed)
    for values, loss in history:
        search.add_evaluated_point({k: values[k] for k in space}, float(loss))
    return [{k: space[k].value(v) for k, v in search.suggest(str(i)).items()} for i in range(n)]


def group_seed(seed: int, study: int, last_trial: int, label: str, problem: str) -> int:
    """The searcher's seed for one (algorithm, problem, study) at the round after `last_trial`."""
    ident = zlib.crc32(f"{label}|{problem}".encode())
    return int(np.random.SeedSequence([int(seed), int(study), int(last_trial), ident]).generate_state(1)[0])


def problem_id(point: Point) -> str:
    """The problem a point tunes on: its label and every parameter (two entries may share a label)."""
    return f"{problem_label(point.to_dict())} {json.dumps(point.problem_params, sort_keys=True, default=repr)}"


def _groups(points: Sequence[Point]) -> dict[tuple[str, str], dict[int, dict[int, Point]]]:
    """(label, problem_id) -> study -> trial -> its point."""
    out: dict[tuple[str, str], dict[int, dict[int, Point]]] = {}
    for p in points:
        group = out.setdefault((p.label, problem_id(p)), {})
        for s, t in p.coords["tuning"]:
            group.setdefault(int(s), {})[int(t)] = p
    return out


def _losses(trials: Mapping[int, Point], label: str, study: int, seeds: Sequence[int], metric: str, goal: str,
            summary: Summary) -> dict[int, float]:
    """trial -> its loss over the tuning instances (the report's scoring: `tuning.trial_scores`)."""
    rows = []
    for t, p in trials.items():
        for seed in seeds:
            s = summary(p.run_key(seed))
            if s is None:
                raise RuntimeError(f"tuning round: run {p.run_key(seed)} has not ended; a round is proposed "
                                   "only once every run before it has")
            rows.append({"algorithm": label, "study": study, "trial": t, "instance": seed,
                         "score": analysis.final_value(s, metric, goal)})
    scores = tuning.trial_scores(pd.DataFrame(rows), goal)
    return dict(zip(scores["trial"].astype(int), scores["loss"].astype(float)))


def with_values(template: Point, algorithm: str, values: Mapping[str, Any], slot: list[int]) -> Point:
    """`template` (the group's paper-default point) with tuned `values`, filling one (study, trial) slot."""
    params = algorithms.get(algorithm).Config.from_dict({**template.algorithm_params, **values}).recorded()
    return dataclasses.replace(template, algorithm_params=params, coords={**template.coords, "tuning": [slot]})


def next_round(points: Sequence[Point], axis: Mapping[str, Any], entries: Sequence[Mapping[str, Any]],
               goal: str, summary: Summary) -> list[Point] | None:
    """The study's points with the next round added, or None when every study has its `trials` trials.

    `entries` are the study's algorithm entries (label, name, the fixed `params`); `summary(run_key)` a
    run's stored summary. A proposal equal to an existing configuration adds its slot to that point.
    """
    by_label = {e["label"]: e for e in entries}
    out = {p.key: p for p in points}
    grew = False
    for (label, prob), studies in _groups(points).items():
        entry = by_label[label]
        space = tuning.tunable_space(entry["name"], entry["params"])
        for study, trials in sorted(studies.items()):
            last = max(trials)
            if last >= axis["trials"]:
                continue
            losses = _losses(trials, label, study, axis["tune"], axis["metric"], goal, summary)
            history = [(trials[t].algorithm_params, losses[t]) for t in sorted(trials)]
            n = min(axis["batch"], axis["trials"] - last)
            for t, values in enumerate(propose(space, history, n, group_seed(axis["seed"], study, last, label, prob)),
                                       last + 1):
                new = with_values(trials[tuning.ONE_SHOT], entry["name"], values, [study, t])
                old = out.get(new.key)
                out[new.key] = new if old is None else dataclasses.replace(
                    old, coords={**old.coords, "tuning": [*old.coords["tuning"], [study, t]]})
            grew = True
    return list(out.values()) if grew else None
