"""A reference value of F on an instance, from a solver that is not one of the compared methods.

Benchmarks measure progress towards F_L, the smallest value of F. Where the problem knows its minimiser
(`x_opt`), F_L is exact. Elsewhere `reference_solve` computes it: an accurate deterministic solve of the
outer problem min_x F(x) = f(x, y*(x)) on the problem's ground truth (exact y*(x) and ∇F(x), which no
algorithm sees), with its own convergence check:

- unconstrained x (`project_x` the identity): scipy's L-BFGS-B on F and ∇F;
- otherwise: projected gradient descent with Armijo backtracking on the projection arc;

stopped when the gradient mapping G(x) = (x − Proj(x − ∇F(x))) satisfies ‖G‖² ≤ `tol` · max(1, ‖G(x0)‖²)
(relative), or after `max_iter` iterations (then `converged` is false). Restarts from seeded perturbations
of x0 (`restarts`) keep the best end point; a compared run ending below the reference asks for them.

`gap` bounds F(x_ref) − min F near x_ref: ‖∇F‖²/(2μ) with μ the smallest eigenvalue of the finite-difference
Hessian of F at x_ref (central differences of ∇F; dim_x ≤ `HESSIAN_MAX_DIM`) when it is positive — the
bound for a μ-strongly convex F, valid in the basin where F is that convex; NaN when no such μ exists.

A problem may give its own reference: a method `reference_value()` returning (value, gap, source) is used
instead of the solver (user problems whose optimum is known some other way).
"""
from __future__ import annotations

import dataclasses
import math

import numpy as np

from problems.base import Array, BilevelProblem

#: Relative stopping tolerance on the squared gradient mapping.
TOL = 1e-14
MAX_ITER = 20_000
#: Largest dim_x for which the local gap bound builds a finite-difference Hessian (2 dim_x gradients).
HESSIAN_MAX_DIM = 400
#: L-BFGS-B searches the box x0 ± BOX · max(1, ‖x0‖∞).
BOX = 20.0
_FAILURES = (FloatingPointError, OverflowError, ZeroDivisionError, ValueError, np.linalg.LinAlgError)


@dataclasses.dataclass(frozen=True)
class Reference:
    """F at the reference point, a bound on how far above min F it may be, and how it was found."""

    value: float
    gap: float
    source: str
    converged: bool
    x: Array | None = None


def reference_solve(problem: BilevelProblem, tol: float = TOL, max_iter: int = MAX_ITER,
                    restarts: int = 0, seed: int = 0) -> Reference:
    """The reference value of `problem` (module docstring): exact, the problem's own, or solved."""
    x_opt = problem.x_opt()
    if x_opt is not None:
        return Reference(float(problem.F(x_opt)), 0.0, "exact optimum", True, x_opt)
    own = getattr(problem, "reference_value", None)
    if callable(own):
        value, gap, source = own()
        return Reference(float(value), float(gap), str(source), True)
    x0, _ = problem.initial_point()
    starts = [np.asarray(x0, dtype=float)]
    rng = np.random.default_rng(seed)
    scale = max(1.0, float(np.linalg.norm(x0)) / math.sqrt(max(x0.size, 1)))
    starts += [problem.project_x(x0 + 0.5 * scale * rng.standard_normal(x0.shape)) for _ in range(restarts)]
    best: tuple[float, Array, int, bool, str] | None = None
    for k, start in enumerate(starts):
        try:
            x, iterations, converged, method = _solve(problem, start, tol, max_iter)
            value = float(problem.F(x))
        except _FAILURES:
            if k == 0:
                raise
            continue  # a perturbed start where the lower level breaks down (g not strongly convex there)
        if best is None or value < best[0]:
            best = (value, x, iterations, converged, method)
    value, x, iterations, converged, method = best
    gap = local_gap(problem, x) if converged else math.nan
    rule = f"‖G‖² ≤ {tol:g}·max(1, ‖G(x0)‖²)"
    state = f"converged in {iterations} iterations" if converged else f"NOT converged after {iterations} iterations"
    runs = f", best of {len(starts)} starts" if len(starts) > 1 else ""
    source = f"reference solve: {method} on F with exact y*(x), ∇F; stop {rule}; {state}{runs}"
    return Reference(value, gap, source, converged, x)


def _identity_projection(problem: BilevelProblem, x: Array) -> bool:
    probe = x + np.random.default_rng(0).standard_normal(x.shape) * (1.0 + float(np.abs(x).max(initial=0)))
    return bool(np.array_equal(problem.project_x(probe), probe))


def _mapping_sq(problem: BilevelProblem, x: Array, g: Array) -> float:
    m = x - problem.project_x(x - g)
    return float(m @ m)


def _solve(problem: BilevelProblem, x0: Array, tol: float, max_iter: int) -> tuple[Array, int, bool, str]:
    """(end point, iterations, converged, method name) from x0."""
    threshold = tol * max(1.0, _mapping_sq(problem, x0, problem.grad_F(x0)))
    if _identity_projection(problem, x0):
        # A box around x0 keeps the line search's first trial steps where F is defined (exp(x) overflows in
        # regularization_selection past ~700); a minimiser on its edge fails the check below.
        radius = BOX * max(1.0, float(np.abs(x0).max(initial=0)))
        import scipy.optimize as optimize  # only here: scipy.optimize (and the scipy.stats it imports) costs every process ~0.4 s

        res = optimize.minimize(problem.F, x0, jac=problem.grad_F, method="L-BFGS-B",
                                bounds=list(zip(x0 - radius, x0 + radius)),
                                options={"maxiter": max_iter, "gtol": 0.0, "ftol": 0.0, "maxcor": 20})
        x = np.asarray(res.x, dtype=float)
        g = problem.grad_F(x)
        return x, int(res.nit), float(g @ g) <= threshold, "L-BFGS-B"
    return (*_projected_gradient(problem, x0, threshold, max_iter), "projected gradient (Armijo)")


def _projected_gradient(problem: BilevelProblem, x: Array, threshold: float,
                        max_iter: int) -> tuple[Array, int, bool]:
    """Projected gradient with backtracking: step halved until F(x⁺) ≤ F(x) − ‖x − x⁺‖²/(2 step)."""
    step, fx = 1.0, float(problem.F(x))
    for k in range(max_iter):
        g = problem.grad_F(x)
        if _mapping_sq(problem, x, g) <= threshold:
            return x, k, True
        while True:
            new = problem.project_x(x - step * g)
            d = x - new
            f_new = float(problem.F(new))
            if f_new <= fx - float(d @ d) / (2 * step) or step < 1e-20:
                break
            step /= 2
        x, fx, step = new, f_new, step * 2  # try a longer step next time
    return x, max_iter, _mapping_sq(problem, x, problem.grad_F(x)) <= threshold


def local_gap(problem: BilevelProblem, x: Array) -> float:
    """‖∇F(x)‖²/(2μ), μ the smallest eigenvalue of F's finite-difference Hessian at x; NaN if μ ≤ 0 or dim too big."""
    n = x.size
    if n > HESSIAN_MAX_DIM:
        return math.nan
    h = 1e-5 * max(1.0, float(np.linalg.norm(x)))
    cols = [(problem.grad_F(x + h * e) - problem.grad_F(x - h * e)) / (2 * h) for e in np.eye(n)]
    hess = np.array(cols)
    mu = float(np.linalg.eigvalsh((hess + hess.T) / 2).min())
    if not mu > 0:
        return math.nan
    g = problem.grad_F(x)
    return float(g @ g) / (2 * mu)
