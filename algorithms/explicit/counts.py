"""Oracle counts of explicit runs: the run loop's `calls/<kind>` and `samples/<kind>` at every evaluation point.

The engines step a definition on pure arrays (problems/pure.py), which no counter sees, and a definition's
own calls are not the run loop's: it asks ∇x f and ∇y f apart where the per-run algorithm asks grad_f once,
computes branches it then drops (FSLA's and MRBO's previous-point terms at the first step, selected with
`xp.where`), and fills SABA's tables in `init` where the per-run SABA fills them at its first step. So the
counts come from what the run loop counts: the registered algorithm itself, on the run's problem wrapped in
the run loop's `CountingProblem` (ground truth hidden, as there), started and stepped three times.

Its counts per step are fixed by the stack's shared config (loop lengths, batch sizes, memory_init: the
fields a stack may not vary) except at the first step (FSLA's and MRBO's plain first estimate, SABA's table
fill under `memory_init: full` with minibatches), so the counts at iteration t are
start + first step + (t − 1) × a later step; the third step checks that the later steps agree (one line
otherwise). Step sizes do not change counts: the measuring run uses the defaults of the varying fields, so a
stack's diverging run cannot stop a measured CG solve early. Per-run exceptions the engines cannot see: a CG
solve the run loop stops at an exactly zero residual (algorithms/hypergradient.py), which batched runs count
alike (`_cg_rows`); FSLA/MRBO configs whose ρ_t = 1 at some later steps only are refused (momentum.py).
"""
from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from algorithms.base import AlgorithmConfig, get
from algorithms.run_settings import generator
from algorithms.stacked import group_key, varying_fields
from problems.counting import CountingProblem, OracleCounter
from problems.shared.errors import ParameterError

#: The steps measured: the first, then two later ones that must agree.
_STEPS = 3


@dataclasses.dataclass(frozen=True)
class Counts:
    """`calls/*` and `samples/*` (with totals, the run loop's snapshot keys) after the start (`start`), the
    first step's increase (`first`) and every later step's (`later`), as int arrays in `names`' order."""

    names: tuple[str, ...]
    start: np.ndarray
    first: np.ndarray
    later: np.ndarray

    def at(self, iteration: int) -> tuple[int, ...]:
        """The counts after `iteration` steps, as Python ints (the run loop's record values)."""
        if iteration <= 0:
            return tuple(self.start.tolist())
        return tuple((self.start + self.first + (iteration - 1) * self.later).tolist())


#: Measured counts by (algorithm, the shared config fields, the problem's type, dimensions and sample counts).
_CACHE: dict[tuple, Counts] = {}


def counts(name: str, problem: Any, config: AlgorithmConfig) -> Counts:
    """The counts of a run of algorithm `name` with `config` on `problem`, measured once per shared config and
    problem sizes (the counts depend on the problem only through its type, dimensions and sample counts). A
    stack's runs share them: the engines take only configs whose shared fields are equal (`Definition.configs`)."""
    sizes = (type(problem).__name__, problem.dim_x, problem.dim_y,
             *(getattr(problem, n, None) for n in ("n_samples", "n_outer", "n_inner")))
    key = (name, group_key(get(name), config), sizes)
    if key not in _CACHE:
        if len(_CACHE) >= 256:  # a long sweep over many shapes: keep the memory bounded
            _CACHE.clear()
        _CACHE[key] = measure(name, problem, config)
    return _CACHE[key]


def measure(name: str, problem: Any, config: AlgorithmConfig) -> Counts:
    """Start the registered algorithm `name` on the counted problem and step it `_STEPS` times, as the run loop
    does (its iteration advanced after each step), reading the counter after each."""
    cls = get(name)
    varying = varying_fields(cls)
    defaults = {f.name: f.default for f in dataclasses.fields(config)
                if f.name in varying and f.default is not dataclasses.MISSING}
    try:
        config = dataclasses.replace(config, **defaults)
    except ParameterError:  # the defaults do not fit the shared fields: the config as given counts the same
        pass
    view = CountingProblem(problem, OracleCounter())
    algorithm = cls(view, config, generator(0))
    snapshots = [view.counter.snapshot()]
    with np.errstate(all="ignore"):  # counts only: the values are not used
        for _ in range(_STEPS):
            algorithm.step()
            algorithm.iteration += 1
            snapshots.append(view.counter.snapshot())
    names = tuple(snapshots[0])
    table = np.array([[s[n] for n in names] for s in snapshots], dtype=np.int64)
    steps = np.diff(table, axis=0)
    if not (steps[1:] == steps[1]).all():
        raise ParameterError(f"algorithm '{name}': its oracle calls per step vary after the first step with this "
                             f"config; the explicit engines cannot count them (use algorithms.run)")
    return Counts(names, table[0], steps[0], steps[1])


def run_counts(defn: Any, problem: Any, config: AlgorithmConfig) -> tuple[Counts, np.ndarray | None]:
    """(the counts every run of a stack has, and, for a definition whose runs make calls of their own
    (`Definition.counted`), one unit's calls a step, which a run's records add per unit it made; else None)."""
    pair = defn.counted(config)
    if pair is None:
        return counts(defn.name, problem, config), None
    base, one_more = (counts(defn.name, problem, c) for c in pair)
    return base, one_more.later - base.later
