"""Bilevel-optimization algorithms behind one contract, and the run loop that drives them.

    import problems, algorithms
    p = problems.make("quadratic", seed=0)
    records = list(algorithms.run("dtfbo", p, seed=0, budget={"iterations": 50}))
"""
from algorithms.base import Algorithm, AlgorithmConfig, StochasticConfig, available, get, make_config, register
from algorithms.run import Budget, Divergence, Run, run
from algorithms.batched import batchable, run_batched
from problems.shared.registries import discover

discover(__name__, __path__)  # every module of the package, each registering its algorithms

__all__ = [
    "Algorithm", "AlgorithmConfig", "StochasticConfig", "available", "get", "make_config", "register",
    "Budget", "Divergence", "Run", "run", "batchable", "run_batched",
]
