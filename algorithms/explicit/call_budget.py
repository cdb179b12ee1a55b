"""Oracle-call budgets on the NumPy stack: the whole steps a budget pays for, then the run loop's own cut step.

Under a budget of B oracle calls the run loop (algorithms/run.py) steps while a run's calls are below B; the step
whose calls would pass B is cut at the call that would, and the run ends where that step got (its iteration not
counted), with its last record there. An explicit run's counts are known before it starts (counts.py: start +
first step + (t − 1) × a later step), so a stack runs the T whole steps B pays for, evaluated at the run loop's
points up to T and at T (`plan`). When the calls after T are below B, each run still going at T is handed to the
run loop (`hand_over`: a `Run` at iteration T holding the stack's iterates, stream, counts, seconds and divergence
watch) to take the cut step: the run loop, not a model of where a step's calls fall, decides where it stops, so
the run's last state and record are the run loop's own (tests/algorithms/test_explicit_call_budget.py).
"""
from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import numpy as np

from algorithms.base import AlgorithmConfig
from algorithms.explicit.counts import Counts, run_counts
from algorithms.explicit.definition import Definition, definition
from algorithms.run import Run
from algorithms.run_settings import Budget, Divergence, eval_points
from problems.shared.errors import ParameterError

TOTAL = "calls/total"


@dataclasses.dataclass(frozen=True)
class CallPlan:
    """A stack's course under `budget` (its `oracle_calls` B): `steps` whole steps (T), evaluated at `points`
    (the run loop's points up to T, and T); `cut`: whether a cut step follows (the calls after T are below B);
    `natural`: whether T is one of the run loop's points (its record there then precedes the cut step's)."""

    budget: Budget
    n_evals: int
    steps: int
    cut: bool
    natural: bool
    points: tuple[int, ...]


def plan(defn: Definition, problem: Any, config: AlgorithmConfig, budget: Budget, n_evals: int) -> CallPlan:
    """The course of a stack of `config`'s runs under an oracle-call `budget` (with an iteration limit too, which
    ends the runs first when it comes before the calls do: no cut step then); one line when the stack cannot
    take it (calls that differ between its runs; a step that makes no call, which no call budget ends)."""
    calls = budget.oracle_calls
    counts, unit = run_counts(defn, problem, config)
    if unit is not None:
        raise ParameterError(f"budget.oracle_calls: {defn.name}'s runs with this config make calls of their own; "
                             "the NumPy stack takes an iteration budget for them")
    start, first, later = (int(c[counts.names.index(TOTAL)]) for c in (counts.start, counts.first, counts.later))
    if start > calls:
        raise ParameterError(f"budget: 'oracle_calls' {calls} is less than the calls '{defn.name}' makes to start "
                             "(before its first step)")
    if first <= 0 or later <= 0:
        raise ParameterError(f"budget.oracle_calls: a step of {defn.name} with this config makes no oracle call")
    steps = 0 if start + first > calls else 1 + (calls - start - first) // later
    cut = _total(counts, steps) < calls
    if budget.iterations is not None and budget.iterations <= steps:  # the iterations end the runs first
        steps, cut = budget.iterations, False
    natural = [p for p in eval_points(budget, n_evals) if p <= steps]
    return CallPlan(budget, n_evals, steps, cut, natural[-1] == steps, tuple(natural + [steps] * (natural[-1] < steps)))


def course(defn: Definition, problem: Any, config: AlgorithmConfig, budget: Budget, n_evals: int) -> CallPlan | None:
    """`plan` under a budget with oracle calls; None under an iteration budget alone (no cut step to plan)."""
    return None if budget.oracle_calls is None else plan(defn, problem, config, budget, n_evals)


def _total(counts: Counts, steps: int) -> int:
    return counts.at(steps)[counts.names.index(TOTAL)]


def hand_over(algorithm: str, problem: Any, config: AlgorithmConfig, seed: int, course: CallPlan,
              divergence: Divergence, row: Mapping[str, Any], counted: Mapping[str, int],
              seconds: Mapping[str, float], last: dict[str, Any], first: Mapping[str, Any],
              f_opt: float | None = None) -> Run:
    """A `Run` of `algorithm` at iteration T (`course.steps`) that goes on from a stack's run: its state's fields
    (`row`, one run's; its generator's state where it draws), its counts at T (`counted`, the records' `calls/*`
    and `samples/*`), its cumulative `seconds` (`time`, `cpu_time`, `eval_time`), its last record `last` and its
    first (`first`: the divergence watch's start values); `f_opt`, F at the known minimiser, when computed."""
    run = Run(algorithm, problem, config, seed, course.budget, course.n_evals, divergence)
    if f_opt is not None:
        run.set_f_opt(f_opt)
    alg = run.algorithm
    own, scalars = {n: getattr(alg, n) for n in alg.state_fields()}, type(alg).scalar_state
    rng = None
    if course.steps < definition(algorithm).diagnostics_from:  # not set before a step (BOME's λ): None, as at start
        scalars, row = (), {n: v for n, v in row.items() if not (n in scalars and own.get(n) is None)}
    for name, value in row.items():
        if isinstance(value, np.random.Generator):  # the run's stream, where the stack's draws left it
            rng = value.bit_generator.state
        elif name in own and value is not None:
            own[name] = _like(own[name], value, name in scalars)
    for name in own.keys() - row.keys():  # a field the definition keeps as a diagnostic only (D-TFBO's loop lengths)
        if f"diag/{name}" in last:
            own[name] = _like(own[name], last[f"diag/{name}"], name in scalars)
    alg.load_state_dict({**own, "rng": rng if rng is not None else alg.rng.bit_generator.state})
    starts = dict(run.start_values)  # x's and y's norms, and the watched metrics at iteration 0
    starts.update({n: abs(v) for n, v in divergence.watched(first).items()})
    run.resume_at(course.steps, _counter(counted), seconds, last, starts)
    run.time_mode = last.get("time_mode")
    return run


def _like(current: Any, value: Any, scalar: bool) -> Any:
    """A stack's row `value` in the form the per-run algorithm keeps the field (a vector, a number; `scalar`: a
    number where the algorithm declares one, `scalar_state`, which may start as None)."""
    if scalar and current is None:
        return float(np.ravel(value)[0])
    if isinstance(current, np.ndarray):
        return np.array(value, dtype=float).reshape(current.shape)
    if isinstance(current, (bool, np.bool_)):
        return bool(np.ravel(value)[0])
    if isinstance(current, (int, np.integer)):
        return int(np.ravel(value)[0])
    if isinstance(current, (float, np.floating)):
        return float(np.ravel(value)[0])
    return value


def _counter(counted: Mapping[str, int]) -> tuple[dict[str, int], dict[str, int]]:
    """A `Run` counter's (calls, samples) by oracle kind from a record's `calls/<kind>` and `samples/<kind>`."""
    out: tuple[dict[str, int], dict[str, int]] = ({}, {})
    for key, n in counted.items():
        what, kind = key.split("/", 1)
        if kind != "total" and n:
            out[what == "samples"][kind] = int(n)
    return out
