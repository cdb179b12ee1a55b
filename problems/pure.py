"""A problem's oracles as pure functions of its arrays, for engines that compile or stack them.

`pure(problem)` gives a NamedTuple of the instance's arrays whose methods are the oracles and the ground
truth, written with operators and array methods only (`y @ A.T`, `.sum(-1)`), so the same code runs on
NumPy arrays, on JAX arrays under `jit`/`vmap`, on one run's vectors (d,) and on a stack of runs (K, d):
every product multiplies from the right, every reduction is over the last axis. Being a NamedTuple, it
is a JAX pytree: the arrays pass through `jit` as arguments, not as constants baked into the program.

Ground truth that needs a solve (y*(x) = A⁻¹(Cx − a), ∇F) uses matrices solved once here with NumPy, so
its cost per evaluation is two products. Only the deterministic quadratic family has a pure form so far;
any other problem (and the quadratic's finite-sum form, whose minibatches would need a key) is refused
with one line naming it.
"""
from __future__ import annotations

import math
from typing import Any, NamedTuple

import numpy as np
import scipy.linalg as sla

from problems.base import Array
from problems.quadratic import Quadratic
from problems.shared.errors import ParameterError


class PureQuadratic(NamedTuple):
    """g = ½yᵀAy − yᵀCx + aᵀy, f = ½(y − e)ᵀP(y − e) + ½m‖x‖² + cᵀx, full batch (problems/quadratic.py)."""

    A: Any
    C: Any
    P: Any
    a: Any
    e: Any
    c: Any
    m: Any
    ys_x: Any  # A⁻¹C: y*(x) = x (A⁻¹C)ᵀ − A⁻¹a
    ys_0: Any  # A⁻¹a
    gF_y: Any  # CᵀA⁻¹P: ∇F(x) = m x + c + (y*(x) − e)(CᵀA⁻¹P)ᵀ
    f_opt: Any  # F at the minimiser (NaN when F has none)

    # ---- oracles (what an algorithm sees) ----
    def initial_point(self, zeros: Any) -> tuple[Any, Any]:
        """(x0, y0) = (0, 0), made by `zeros(n)` of the caller's namespace."""
        return zeros(self.C.shape[1]), zeros(self.A.shape[0])

    def g(self, x: Any, y: Any) -> Any:
        """g(x, y), a per-run number of shape (1,) ((K, 1) for a stack)."""
        return ((0.5 * (y @ self.A.T) - x @ self.C.T + self.a) * y).sum(-1, keepdims=True)

    def grad_y_g(self, x: Any, y: Any) -> Any:
        return y @ self.A.T - x @ self.C.T + self.a

    def grad_x_g(self, x: Any, y: Any) -> Any:
        return -(y @ self.C)

    def hvp_yy_g(self, x: Any, y: Any, v: Any) -> Any:
        return v @ self.A.T

    def cross_xy_g(self, x: Any, y: Any, v: Any) -> Any:
        return -(v @ self.C)

    def grad_x_f(self, x: Any, y: Any) -> Any:
        return self.m * x + self.c

    def grad_y_f(self, x: Any, y: Any) -> Any:
        return (y - self.e) @ self.P.T

    def project_x(self, x: Any) -> Any:
        return x

    def project_y(self, y: Any) -> Any:
        return y

    # ---- ground truth (evaluation only) ----
    def y_star(self, x: Any) -> Any:
        return x @ self.ys_x.T - self.ys_0

    def metrics(self, x: Any, y: Any) -> dict[str, Any]:
        """F, F_gap, ‖∇F‖², ‖y − y*‖² at (x, y): scalars for one run, (K,) for a stack."""
        ys = self.y_star(x)
        r = ys - self.e
        grad_F = self.m * x + self.c + r @ self.gF_y.T
        F = 0.5 * ((r @ self.P.T) * r).sum(-1) + 0.5 * self.m * (x * x).sum(-1) + (x * self.c).sum(-1)
        d = y - ys
        return {"F": F, "F_gap": F - self.f_opt, "grad_F_sq": (grad_F * grad_F).sum(-1), "y_err_sq": (d * d).sum(-1)}


def pure(problem: Any) -> PureQuadratic:
    """The pure form of `problem` (NumPy arrays; an engine converts them to its own)."""
    if not isinstance(problem, Quadratic) or problem.stochastic:
        what = "the stochastic quadratic" if isinstance(problem, Quadratic) else f"'{problem.name}'"
        raise ParameterError(f"problem: {what} has no pure-array form yet; allowed: the deterministic 'quadratic'")
    factor = sla.cho_factor(problem.A)  # the factor the instance's own y_star uses (same numbers)
    ys_x, ys_0 = sla.cho_solve(factor, problem.C), sla.cho_solve(factor, problem.a)
    x_opt = problem.x_opt()
    f_opt = problem.F(x_opt) if x_opt is not None else math.nan
    arrays = (problem.A, problem.C, problem.P, problem.a, problem.e, problem.c)
    return PureQuadratic(*(np.asarray(a, dtype=float) for a in arrays), float(problem.m), ys_x, ys_0,
                         ys_x.T @ problem.P, float(f_opt))


def as_arrays(oracles: PureQuadratic, asarray: Any) -> PureQuadratic:
    """The same oracles with every array converted by `asarray` (e.g. jax.numpy.asarray)."""
    return type(oracles)(*(asarray(v) for v in oracles))


__all__ = ["PureQuadratic", "pure", "as_arrays", "Array"]
