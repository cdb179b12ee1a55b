"""Bilevel-optimization algorithms behind one contract, and the run loop that drives them.

    import problems, algorithms
    p = problems.make("quadratic", seed=0)
    records = list(algorithms.run("dtfbo", p, seed=0, budget={"iterations": 50}))
"""
from algorithms.base import Algorithm, AlgorithmConfig, StochasticConfig, available, get, make_config, register
from algorithms.run import Budget, Divergence, Run, run
from algorithms.batched import BatchedRuns, batchable, run_batched

# Importing a family module registers its algorithms.
from algorithms import (  # noqa: E402,F401  isort:skip
    aid, bome, bsg, coreset, f2ba, f2csa, f2sa, implicit_constrained, neumann_sa, online, online_hypergradient, optimistic,
    recursive_momentum, stationary_penalty, stochastic_hypergradient, tfbo, value_function, variance_reduced, vrbo,
)

__all__ = [
    "Algorithm", "AlgorithmConfig", "StochasticConfig", "available", "get", "make_config", "register",
    "Budget", "Divergence", "Run", "run", "BatchedRuns", "batchable", "run_batched",
]
