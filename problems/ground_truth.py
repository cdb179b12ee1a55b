"""The exact ground truth of any problem at a point: y*(x), F(x), ∇F(x) and the lower-level multipliers.

    import numpy as np, problems
    p = problems.make("quadratic", seed=0, dim_x=5, dim_y=5)
    gt = problems.ground_truth(p, np.ones(5))
    gt.grad_F, gt.y_star, gt.F

It reads the problem's evaluation-only methods (closed forms, exact QP solves, or the numerical solve of
a problem built from functions) and never counts oracle calls. An online problem needs the time step t.
"""
from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from problems.base import Array, BilevelProblem, OnlineProblem
from problems.counting import _CountingView
from problems.shared.errors import ParameterError


@dataclasses.dataclass(frozen=True)
class GroundTruth:
    """The ground truth at x: y*(x), F(x) = f(x, y*(x)), ∇F(x), and λ*(x) (None without constraints)."""

    x: Array
    y_star: Array
    F: float
    grad_F: Array
    lambda_star: Array | None


def ground_truth(problem: BilevelProblem | OnlineProblem, x: Any, t: int | None = None) -> GroundTruth:
    """The exact y*(x), F(x), ∇F(x) and λ*(x) of `problem` (of its instance at time `t` when online)."""
    if isinstance(problem, _CountingView):
        raise ParameterError("problem: this is the counting view algorithms see, which hides the ground truth; "
                             "pass the problem itself")
    if isinstance(problem, OnlineProblem):
        if t is None:
            raise ParameterError(f"t: problem '{problem.name}' is online; give the time step t in 1..{problem.horizon}")
        problem = problem.at(t)
    elif t is not None:
        raise ParameterError(f"t: problem '{problem.name}' is offline; it has no time step")
    point = _point(x, problem.dim_x)
    return GroundTruth(point, np.asarray(problem.y_star(point), dtype=float), float(problem.F(point)),
                       np.asarray(problem.grad_F(point), dtype=float), problem.lambda_star(point))


def _point(x: Any, dim: int) -> Array:
    """x as a float vector of length `dim` (a one-line error otherwise)."""
    try:
        arr = np.asarray(x, dtype=float)
    except (TypeError, ValueError):
        raise ParameterError(f"x: must be a vector of {dim} numbers, got {type(x).__name__}") from None
    if arr.shape != (dim,) or not np.all(np.isfinite(arr)):
        raise ParameterError(f"x: must be a vector of {dim} finite numbers (dim_x), got shape {arr.shape}")
    return arr
