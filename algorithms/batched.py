"""Batched runs: K runs of one algorithm on one problem instance for one budget, advanced as one.

    import problems, algorithms
    p = problems.make("quadratic", seed=0)
    configs = [{"rho": r, "gamma": 0.1} for r in (0.05, 0.1, 0.2)]
    for k, record in algorithms.run_batched("soba", p, configs, seeds=[0, 0, 0], budget={"iterations": 100}):
        print(k, record["iteration"], record["grad_F_sq"])

Runs of an algorithm with an explicit-state definition (algorithms/explicit) on an offline problem, under an
iteration or an oracle-call budget (or both), run as NumPy stacks (`algorithms.explicit.NumpyStack`), one per set of configs
that share the fields a stack may not vary (loop counts, flags); under a call budget each run's last, cut step is
the run loop's own (algorithms/explicit/call_budget.py). Run k's records are those `algorithms.run` gives it alone
(to rounding: a stacked product sums as the single one does, up to BLAS blocking), its seconds a share of its
stack's (`time_mode: batched`). Every other batch (a seconds budget, an online problem, an
algorithm without a definition, a config a definition refuses) runs its runs one after another on the run loop.
"""
from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from algorithms import explicit
from algorithms.base import AlgorithmConfig, get
from algorithms.explicit.call_budget import CallPlan, course
from algorithms.explicit.problem_oracles import numpy_oracles
from algorithms.run import Budget, Divergence, Run
from algorithms.stacked import group_key
from problems.base import BilevelProblem
from problems.shared.errors import ParameterError

Config = Mapping[str, Any] | AlgorithmConfig | None
Records = Iterator[tuple[int, dict[str, Any]]]


def batchable(algorithm: str, problem: Any) -> bool:
    """Whether runs of `algorithm` on `problem` can run as a stack (else they run one after another)."""
    return algorithm in explicit.defined() and isinstance(problem, BilevelProblem)


def run_batched(algorithm: str, problem: Any, configs: Sequence[Config], seeds: Sequence[int],
                budget: Budget | Mapping[str, Any] | None = None, n_evals: int = 30,
                divergence: Divergence | Mapping[str, Any] | None = None) -> Records:
    """Yield (k, record) for K runs of `algorithm` on one `problem` instance: run k's records are those of
    `algorithms.run(algorithm, problem, configs[k], seeds[k], budget, n_evals, divergence)`, stack by stack.
    Every argument is checked before any run starts."""
    if len(configs) != len(seeds):
        raise ParameterError(f"batched runs: {len(configs)} configs but {len(seeds)} seeds; one seed per config")
    budget = budget if isinstance(budget, Budget) else Budget.from_dict({"iterations": 100} if budget is None
                                                                       else budget)
    divergence = divergence if isinstance(divergence, Divergence) else Divergence.from_dict(divergence)
    stacks = _stacks(algorithm, problem, configs, budget, n_evals)
    if stacks is None:
        runs = [Run(algorithm, problem, c, s, budget, n_evals, divergence) for c, s in zip(configs, seeds)]
        return ((k, record) for k, run in enumerate(runs) for record in run.records())
    return _stacked(algorithm, problem, stacks, seeds, budget, n_evals, divergence)


Stack = tuple[list[tuple[int, AlgorithmConfig]], CallPlan | None]


def _stacks(algorithm: str, problem: Any, configs: Sequence[Config], budget: Budget, n_evals: int
            ) -> list[Stack] | None:
    """The runs' (index, config) by stack, each with its course under a call budget; None when they cannot run as
    stacks (a config invalid or refused, calls of a run's own: the run loop then says why or runs it)."""
    kinds = {k for k in ("iterations", "oracle_calls", "seconds") if getattr(budget, k) is not None}
    if not batchable(algorithm, problem) or not kinds or "seconds" in kinds:
        return None
    cls, defn = get(algorithm), explicit.definition(algorithm)
    out: dict[tuple, list[tuple[int, AlgorithmConfig]]] = {}
    try:
        numpy_oracles(defn.oracles_of, problem)
        for k, c in enumerate(configs):
            config = c if isinstance(c, AlgorithmConfig) else cls.Config.from_dict(c or {})
            out.setdefault(group_key(cls, config), []).append((k, config))
        return [(stack, course(defn, problem, defn.configs([c for _, c in stack])[0], budget, n_evals))
                for stack in out.values()]
    except ParameterError:
        return None


def _stacked(algorithm: str, problem: Any, stacks: list[Stack], seeds: Sequence[int], budget: Budget, n_evals: int,
             divergence: Divergence) -> Records:
    """The stacks' records, each stack run to its end in turn."""
    defn = explicit.definition(algorithm)
    for stack, calls in stacks:
        points = explicit.points(budget.iterations, n_evals) if calls is None else calls.points
        engine = explicit.NumpyStack(defn, problem, [c for _, c in stack], points, [seeds[k] for k, _ in stack],
                                     divergence, calls=calls)
        if len(points) > 1:
            engine.advance(len(points) - 1)
        yield from ((stack[j][0], record) for j, record in engine.result().records())
