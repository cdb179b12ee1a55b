"""A problem's oracles as pure functions of its arrays, for engines that compile or stack them.

`pure(problem)` gives a NamedTuple of the instance's arrays whose methods are the oracles and the ground
truth, written with operators and array methods only (`y @ A.T`, `.sum(-1)`), so the same code runs on
NumPy arrays, on JAX arrays under `jit`/`vmap`, on one run's vectors (d,) and on a stack of runs (K, d):
every product multiplies from the right, every reduction is over the last axis. Being a NamedTuple, it
is a JAX pytree: the arrays pass through `jit` as arguments, not as constants baked into the program.

Ground truth that needs a solve (y*(x) = A⁻¹(Cx − a), ∇F) uses matrices solved once here with NumPy, so
its cost per evaluation is two products. `pure` gives the deterministic quadratic's form;
`pure_finite_sum` the finite-sum quadratic's, with each sample's oracles (for algorithms that keep a
memory per sample, SABA). Any other problem is refused with one line naming it.
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
    return _full_batch(problem)


def _full_batch(problem: Quadratic) -> PureQuadratic:
    """The full-batch oracles and ground truth of a quadratic instance (its samples' mean, when it has samples)."""
    factor = sla.cho_factor(problem.A)  # the factor the instance's own y_star uses (same numbers)
    ys_x, ys_0 = sla.cho_solve(factor, problem.C), sla.cho_solve(factor, problem.a)
    x_opt = problem.x_opt()
    f_opt = problem.F(x_opt) if x_opt is not None else math.nan
    arrays = (problem.A, problem.C, problem.P, problem.a, problem.e, problem.c)
    return PureQuadratic(*(np.asarray(a, dtype=float) for a in arrays), float(problem.m), ys_x, ys_0,
                         ys_x.T @ problem.P, float(f_opt))


class PureFiniteSum(NamedTuple):
    """The finite-sum quadratic: A_i = μ₀I + U_iU_iᵀ, C_i = U_iV_iᵀ, P_i = p₀I + S_iS_iᵀ, a_i (problems/quadratic.py),
    whose mean over the n samples is the deterministic problem exactly: its full-batch oracles and ground truth
    are `full`'s (reached as attributes of this record), its per-sample oracles are below.

    A per-sample oracle gives one row per sample on the second-to-last axis, (n, d) for one run's vectors and
    (K, n, d) for a stack's rows: every sample when `idx` is None, else samples `idx` ((b,), or (K, b) for a stack).
    """

    full: PureQuadratic
    U: Any  # (n, r, dy)
    V: Any  # (n, r, dx)
    S: Any  # (n, r, dy)
    a_i: Any  # (n, dy)
    mu0: Any
    p0: Any

    def __getattr__(self, name: str) -> Any:
        return getattr(self.full, name)  # the full-batch oracles, ground truth and metrics

    def sample_counts(self) -> tuple[int, int]:
        """(samples of g, samples of f): one set of n samples for both levels here."""
        return self.U.shape[0], self.S.shape[0]

    def grad_y_g_samples(self, x: Any, y: Any, idx: Any = None) -> Any:
        U, V, a = _picked(self.U, idx), _picked(self.V, idx), _picked(self.a_i, idx)
        t = _rank_products(y, U) - _rank_products(x, V)
        return self.mu0 * y[..., None, :] + _combined(t, U) + a

    def hvp_yy_g_samples(self, x: Any, y: Any, v: Any, idx: Any = None) -> Any:
        U = _picked(self.U, idx)
        return self.mu0 * v[..., None, :] + _combined(_rank_products(v, U), U)

    def cross_xy_g_samples(self, x: Any, y: Any, v: Any, idx: Any = None) -> Any:
        U = _picked(self.U, idx)
        return -_combined(_rank_products(v, U), _picked(self.V, idx))

    def grad_f_samples(self, x: Any, y: Any, idx: Any = None) -> tuple[Any, Any]:
        """(∇x f_i, ∇y f_i) per sample; ∇x f_i = m x + c is the same for every sample: one row, (..., 1, dx)."""
        S, r = _picked(self.S, idx), y - self.full.e
        gy = self.p0 * r[..., None, :] + _combined(_rank_products(r, S), S)
        return self.full.grad_x_f(x, y)[..., None, :], gy


def _picked(rows: Any, idx: Any) -> Any:
    """The samples `idx` of a per-sample array (all of them when idx is None)."""
    return rows if idx is None else rows[idx]


def _rank_products(v: Any, rows: Any) -> Any:
    """u_{i,k} · v for every sample i and rank k: (..., n, r) from v (..., d) and rows (..., n, r, d)."""
    return (v[..., None, None, :] * rows).sum(-1)


def _combined(weights: Any, rows: Any) -> Any:
    """Σ_k w_{i,k} u_{i,k} per sample i: (..., n, d) from weights (..., n, r) and rows (..., n, r, d)."""
    return (weights[..., None] * rows).sum(-2)


def pure_finite_sum(problem: Any) -> PureFiniteSum:
    """The pure form of a finite-sum quadratic (NumPy arrays), with its per-sample oracles."""
    if not isinstance(problem, Quadratic) or not problem.stochastic:
        what = "the deterministic quadratic" if isinstance(problem, Quadratic) else f"'{problem.name}'"
        raise ParameterError(f"problem: {what} has no per-sample oracles; allowed: the 'quadratic' with n_samples")
    return PureFiniteSum(_full_batch(problem), *(np.asarray(a, dtype=float) for a in
                                                  (problem.U, problem.V, problem.S, problem.a_i)),
                         float(problem.mu0), float(problem.p0))


def as_arrays(oracles: Any, asarray: Any) -> Any:
    """The same oracles with every array converted by `asarray` (e.g. jax.numpy.asarray), nested records too."""
    return type(oracles)(*(as_arrays(v, asarray) if isinstance(v, tuple) else asarray(v) for v in oracles))


__all__ = ["PureFiniteSum", "PureQuadratic", "pure", "pure_finite_sum", "as_arrays", "Array"]
