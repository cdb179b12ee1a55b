"""Bilevel-optimization algorithms behind one contract, and the run loop that drives them.

    import problems, algorithms
    p = problems.make("quadratic", seed=0)
    records = list(algorithms.run("dtfbo", p, seed=0, budget={"iterations": 50}))
"""
from algorithms.base import Algorithm, AlgorithmConfig, StochasticConfig, available, get, make_config, register
from algorithms.run import Budget, Run, run

# Importing a family module registers its algorithms.
# (family modules are added below as they land)
from algorithms import bome, bsg, stationary_penalty, value_function  # noqa: E402,F401  isort:skip
from algorithms import aid, f2sa, stochastic_hypergradient, tfbo  # noqa: E402,F401  isort:skip
from algorithms import online, online_hypergradient  # noqa: E402,F401  isort:skip
from algorithms import f2csa, implicit_constrained  # noqa: E402,F401  isort:skip

__all__ = [
    "Algorithm", "AlgorithmConfig", "StochasticConfig", "available", "get", "make_config", "register",
    "Budget", "Run", "run",
]
