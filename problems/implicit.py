"""Numerical ground truth for an unconstrained lower level: y*(x), F(x), ∇F(x) with certificates.

y*(x) is found by a trust-region Newton–Krylov solve (scipy's trust-krylov) with exact Hessian-vector
products, then polished by Newton steps down to the rounding floor of ‖∇y g‖. ∇F follows from implicit
differentiation, ∇F = ∇x f − ∇²xy g · w with ∇²yy g · w = ∇y f, w by conjugate gradients to a relative
residual of `cg_tol` (1e-10). Results are cached per x. Each solve starts from the problem's y0 (y* is
then a function of x alone), or, with `warm_start`, from the latest solution: for a nonconvex g this
follows one local minimiser along the points evaluated, where cold starts could land in different basins.

Where g is not strongly convex in y at x — CG meets non-positive curvature or cannot reach its
tolerance (on the implicit system, or on a seeded random right-hand side that excites every direction
of ∇²yy g), or the inner solve does not converge — y*, F and ∇F are NaN and `GroundTruth.defined` is
False, never a wrong number.
"""
from __future__ import annotations

import warnings
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from problems.base import NOT_STRONGLY_CONVEX, Array, BilevelProblem

#: Curvature pᵀHp ≤ this × (largest curvature seen) × ‖p‖² counts as non-positive (a singular or
#: indefinite Hessian); a strongly convex g with condition number below 1e12 never triggers it.
CURVATURE_TOL = 1e-12
#: The trust-region solve stops at ‖∇y g‖ ≤ HANDOFF × scale; Newton steps take it to the rounding floor.
HANDOFF = 1e-6


@dataclass(frozen=True)
class CGResult:
    """Solution of H z = b with its true relative residual and what CG saw."""

    z: Array
    rel_residual: float
    iterations: int
    nonpositive_curvature: bool


def cg_solve(hvp: Callable[[Array], Array], b: Array, rtol: float, max_iter: int | None = None,
             restarts: int = 3) -> CGResult:
    """Conjugate gradients for H z = b, restarted on the true residual, stopping at non-positive curvature."""
    z = np.zeros_like(b)
    bnorm = float(np.linalg.norm(b))
    if bnorm == 0.0:
        return CGResult(z, 0.0, 0, False)
    max_iter = max_iter or max(10 * b.size, 1000)
    top, iterations, rel = 0.0, 0, 1.0
    for _ in range(restarts + 1):
        r = b - hvp(z)
        rel = float(np.linalg.norm(r)) / bnorm
        if rel <= rtol:
            break
        step, its, top, bad = _cg(hvp, r, rtol * bnorm, max_iter, top)
        iterations += its
        if bad:
            return CGResult(z, rel, iterations, True)
        z = z + step
    else:
        rel = float(np.linalg.norm(b - hvp(z))) / bnorm
    return CGResult(z, rel, iterations, False)


def _cg(hvp: Callable[[Array], Array], b: Array, atol: float, max_iter: int,
        top: float) -> tuple[Array, int, float, bool]:
    """Plain CG from zero; returns (z, iterations, largest curvature seen, non-positive curvature met)."""
    z, r = np.zeros_like(b), b.copy()
    p, rs = r.copy(), float(r @ r)
    for k in range(max_iter):
        if rs <= atol * atol:
            return z, k, top, False
        Hp = hvp(p)
        curv = float(p @ Hp) / float(p @ p)
        top = max(top, curv)
        if not curv > CURVATURE_TOL * top:
            return z, k + 1, top, True
        alpha = rs / (curv * float(p @ p))
        z += alpha * p
        r -= alpha * Hp
        rs, rs_old = float(r @ r), rs
        p = r + (rs / rs_old) * p
    return z, max_iter, top, False


@dataclass(frozen=True)
class GroundTruth:
    """y*(x), F(x), ∇F(x) at one x, with the accuracy reached (NaN values when not defined)."""

    y: Array
    F: float
    grad_F: Array
    inner_grad_norm: float
    cg_residual: float
    cg_iterations: int
    defined: bool
    reason: str

    def metrics(self) -> dict[str, float]:
        """The certificate as run-record metrics."""
        return {"gt/inner_grad_norm": self.inner_grad_norm, "gt/cg_residual": self.cg_residual,
                "gt/cg_iterations": float(self.cg_iterations), NOT_STRONGLY_CONVEX: float(not self.defined)}


class ImplicitGroundTruth:
    """Ground truth of `problem` from its full-batch oracles (uncounted), cached per x."""

    def __init__(self, problem: BilevelProblem, inner_tol: float = 1e-10, cg_tol: float = 1e-10,
                 warm_start: bool = False, max_inner_iter: int = 500, cache_size: int = 8) -> None:
        self.problem = problem
        self.warm_start = warm_start
        self._last: Array | None = None  # the latest defined y*, the next start when warm_start
        self.inner_tol, self.cg_tol = inner_tol, cg_tol
        self.max_inner_iter = max_inner_iter
        self.cache_size = cache_size
        self._cache: OrderedDict[bytes, GroundTruth] = OrderedDict()
        self._probe = np.random.default_rng(0).standard_normal(problem.dim_y)

    def at(self, x: Array) -> GroundTruth:
        """The (cached) ground truth at x."""
        x = np.asarray(x, dtype=np.float64)
        key = x.tobytes()
        if key in self._cache:
            self._cache.move_to_end(key)
            return self._cache[key]
        truth = self._solve(x)
        self._cache[key] = truth
        if truth.defined:
            self._last = truth.y
        if len(self._cache) > self.cache_size:
            self._cache.popitem(last=False)
        return truth

    # ---- inner solve, curvature probe, implicit system ----
    def _solve(self, x: Array) -> GroundTruth:
        p = self.problem
        y, gnorm, ok, why = self._inner(x)
        if not ok:
            return self._undefined(p, gnorm, why)
        # ∇y f may miss a flat or negative direction; a seeded random right-hand side excites them all.
        probe = cg_solve(lambda v: p.hvp_yy_g(x, y, v), self._probe, self.cg_tol)
        if probe.nonpositive_curvature or not probe.rel_residual <= self.cg_tol:
            return self._undefined(p, gnorm, "∇²yy g is singular or indefinite (seen by a random probe)", probe)
        gx, gy = p.grad_f(x, y)
        cg = cg_solve(lambda v: p.hvp_yy_g(x, y, v), gy, self.cg_tol)
        if cg.nonpositive_curvature:
            return self._undefined(p, gnorm, "non-positive curvature of ∇²yy g in the implicit solve", cg)
        if not cg.rel_residual <= self.cg_tol:
            return self._undefined(p, gnorm, f"CG reached only {cg.rel_residual:.1e} relative residual", cg)
        grad = gx - p.cross_xy_g(x, y, cg.z)
        return GroundTruth(y, float(p.f(x, y)), grad, gnorm, cg.rel_residual, cg.iterations, True, "")

    def _inner(self, x: Array) -> tuple[Array, float, bool, str]:
        """(y, ‖∇y g(x, y)‖, converged and locally strongly convex, why not).

        From the problem's y0, so that y* is a function of x alone (for a nonconvex g: the local minimiser
        reached from y0); with warm_start from the latest solution, which follows one local minimiser
        along the evaluated points instead.
        """
        p = self.problem
        y0 = p.initial_point()[1]
        scale = max(1.0, float(np.linalg.norm(p.grad_y_g(x, y0))))
        start = self._last if self.warm_start and self._last is not None else y0
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")  # precision-loss notices: judged by the gradient norm below
            # Only down to HANDOFF: trust-krylov can stall near 1e-8, where Newton steps converge quadratically.
            import scipy.optimize as so  # only here: its import costs every trial process ~0.4 s

            res = so.minimize(lambda y: p.g(x, y), start, jac=lambda y: p.grad_y_g(x, y),
                              hessp=lambda y, v: p.hvp_yy_g(x, y, v), method="trust-krylov",
                              options={"gtol": max(HANDOFF, self.inner_tol) * scale, "maxiter": self.max_inner_iter})
        y, gnorm, curvature_ok = self._polish(x, np.asarray(res.x, dtype=np.float64))
        if not curvature_ok:
            return y, gnorm, False, "non-positive curvature of ∇²yy g at the inner solution"
        if not gnorm <= self.inner_tol * scale:
            return y, gnorm, False, f"inner solve stopped at ‖∇y g‖ = {gnorm:.1e} ({res.message})"
        return y, gnorm, True, ""

    def _polish(self, x: Array, y: Array, max_steps: int = 20) -> tuple[Array, float, bool]:
        """Full Newton steps while ‖∇y g‖ at least halves; False when CG meets non-positive curvature."""
        p = self.problem
        gr = p.grad_y_g(x, y)
        gnorm = float(np.linalg.norm(gr))
        for _ in range(max_steps):
            if gnorm == 0.0 or not np.isfinite(gnorm):
                break
            cg = cg_solve(lambda v: p.hvp_yy_g(x, y, v), -gr, 1e-8)  # a Newton step needs no more
            if cg.nonpositive_curvature:
                return y, gnorm, False
            trial = y + cg.z
            gt = p.grad_y_g(x, trial)
            tnorm = float(np.linalg.norm(gt))
            if not tnorm < gnorm:
                break
            y, gr, gnorm, halved = trial, gt, tnorm, tnorm <= gnorm / 2
            if not halved:
                break
        return y, gnorm, True

    @staticmethod
    def _undefined(p: BilevelProblem, gnorm: float, reason: str, cg: CGResult | None = None) -> GroundTruth:
        nan_y, nan_x = np.full(p.dim_y, np.nan), np.full(p.dim_x, np.nan)
        res, its = (cg.rel_residual, cg.iterations) if cg is not None else (np.nan, 0)
        return GroundTruth(nan_y, np.nan, nan_x, gnorm, res, its, False, reason)
