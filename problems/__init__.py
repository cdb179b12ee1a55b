"""Seeded bilevel problem generators with exact ground truth.

    import problems
    p = problems.make("quadratic", seed=0, dim_x=20, dim_y=20)
"""
from problems.base import BilevelProblem, LinearConstraints, OnlineProblem, gradient_mapping
from problems.counting import CountingProblem, OracleCounter, counted
from problems.registry import available, make
from problems.validation import ParameterError

# Importing a family module registers its problems.
from problems import (  # noqa: E402,F401  isort:skip
    constrained, logistic, online, quadratic, simulated, streaming, toys,
)

__all__ = [
    "BilevelProblem", "OnlineProblem", "LinearConstraints", "gradient_mapping",
    "CountingProblem", "OracleCounter", "counted", "available", "make", "ParameterError",
]
