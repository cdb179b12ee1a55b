"""Newton's method and conjugate gradients run to the rounding floor: the exact lower-level solutions and
inverse-Hessian products that the ground truth of the logistic and coreset problems rests on."""
from __future__ import annotations

from collections.abc import Callable

import numpy as np

from problems.base import Array

#: Below this gradient norm Newton takes full steps (values no longer resolve the decrease).
LOCAL_PHASE = 1e-8


def conjugate_gradient(hvp: Callable[[Array], Array], b: Array, rtol: float = 1e-13,
                       max_iter: int | None = None, restarts: int = 3) -> Array:
    """Solve H z = b for SPD H given as a product; restarted on the true residual for accuracy."""
    z = np.zeros_like(b)
    bnorm = np.linalg.norm(b)
    if bnorm == 0:
        return z
    max_iter = max_iter or max(10 * b.size, 1000)
    for _ in range(restarts + 1):
        r = b - hvp(z)
        if np.linalg.norm(r) <= rtol * bnorm:
            break
        z = z + _cg(hvp, r, rtol * bnorm, max_iter)
    return z


def _cg(hvp: Callable[[Array], Array], b: Array, atol: float, max_iter: int) -> Array:
    z, r = np.zeros_like(b), b.copy()
    p, rs = r.copy(), r @ r
    for _ in range(max_iter):
        if rs <= atol * atol:
            break
        Hp = hvp(p)
        alpha = rs / (p @ Hp)
        z += alpha * p
        r -= alpha * Hp
        rs, rs_old = r @ r, rs
        p = r + (rs / rs_old) * p
    return z


def newton_minimize(value: Callable[[Array], float], grad: Callable[[Array], Array],
                    solve: Callable[[Array, Array], Array], y0: Array, max_iter: int = 100) -> tuple[Array, float]:
    """Damped Newton for a smooth strongly convex function, run down to the rounding floor of ‖∇‖.

    Returns the iterate with the smallest gradient norm and that norm.
    """
    y, gr = y0.copy(), grad(y0)
    gn = np.linalg.norm(gr)
    for _ in range(max_iter):
        if gn == 0:
            break
        step = -solve(y, gr)
        if gn < LOCAL_PHASE:
            # Quadratic convergence region: full steps until the gradient norm stops halving.
            trial = y + step
            gt = grad(trial)
            gtn = np.linalg.norm(gt)
            if gtn < gn:
                y, gr, gn, go_on = trial, gt, gtn, gtn < gn / 2
            else:
                go_on = False
            if not go_on:
                break
            continue
        accepted = _armijo(value, grad, y, gr, step)
        if accepted is None:
            break
        y, gr, gn = accepted
    return y, float(gn)


def _armijo(value, grad, y, gr, step):
    v0, slope, t = value(y), float(gr @ step), 1.0
    for _ in range(60):
        trial = y + t * step
        if value(trial) <= v0 + 1e-4 * t * slope:
            gt = grad(trial)
            return trial, gt, np.linalg.norm(gt)
        t *= 0.5
    return None
