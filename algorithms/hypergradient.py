"""Hypergradient estimators as pure functions over oracle callables.

Every estimator approximates the implicit-function hypergradient ∇F = ∇x f − J H⁻¹ ∇y f
(H = ∇²yy g, J = ∇²xy g) through a linear-system solve H v = ∇y f (CG, fixed point, Neumann series)
or by differentiating through unrolled inner gradient steps (ITD, reverse mode). They take oracle
callables with the point and minibatch already bound, so any algorithm family — offline, online,
stochastic — can reuse them and every oracle call still goes through the counting wrapper.

    hvp = lambda v: problem.hvp_yy_g(x, y, v, batch)
    v = cg_solve(hvp, grad_y_f, steps=10)
    hypergrad = grad_x_f - problem.cross_xy_g(x, y, v, batch)
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from problems.base import Array

#: v ↦ H v with the point (and batch) bound.
Hvp = Callable[[Array], Array]


def cg_solve(hvp: Hvp, b: Array, steps: int, v0: Array | None = None, tol: float = 0.0) -> Array:
    """`steps` conjugate-gradient iterations on H v = b from v0 (zero when None); the latest iterate.

    Costs `steps` HVPs from zero and one more from a warm start (the initial residual). Stops early
    only when the residual norm reaches `tol` (exactly zero by default) or the curvature along the
    search direction is not positive; either way the current iterate is returned, never an older one.
    """
    if v0 is None:
        v, r = np.zeros_like(b), b.copy()
    else:
        v = v0.copy()
        r = b - hvp(v)
    p = r.copy()
    rr = float(r @ r)
    for _ in range(steps):
        if rr <= tol * tol:
            break
        hp = hvp(p)
        curvature = float(p @ hp)
        if not curvature > 0.0:
            break  # H is not positive definite along p (a noisy or non-convex minibatch)
        step = rr / curvature
        v = v + step * p
        r = r - step * hp
        rr_next = float(r @ r)
        p = r + (rr_next / rr) * p
        rr = rr_next
    return v


def fixed_point_solve(hvp: Hvp, b: Array, eta: float, steps: int, v0: Array | None = None) -> Array:
    """`steps` fixed-point (gradient) steps v ← v − η(H v − b) from v0 (zero when None); `steps` HVPs."""
    v = np.zeros_like(b) if v0 is None else v0.copy()
    for _ in range(steps):
        v = v - eta * (hvp(v) - b)
    return v


def neumann_series(hvp: Hvp, b: Array, eta: float, terms: int) -> Array:
    """η Σ_{q=0}^{Q} Π_{j=Q−q+1}^{Q} (I − η H_j) b with Q = `terms` (StocBiO, Ji et al. 2021, eq. 9).

    Q HVPs. `hvp` is called for j = Q, Q−1, ..., 1 in that order, so a stochastic caller that draws a
    fresh minibatch per call gets the paper's independent H_j; the q-th term applies H_Q first.
    """
    term = b.copy()
    total = b.copy()
    for _ in range(terms):
        term = term - eta * hvp(term)
        total = total + term
    return eta * total


def itd_reverse(
    grad_y_g: Callable[[Array, Any], Array],
    hvp: Callable[[Array, Array, Any], Array],
    cross: Callable[[Array, Array, Any], Array],
    grad_f: Callable[[Array], tuple[Array, Array]],
    y0: Array,
    alpha: float,
    steps: int,
    truncate: int | None = None,
    batches: Sequence[Any] | None = None,
) -> tuple[Array, Array]:
    """Reverse-mode hypergradient through `steps` inner steps y_{k+1} = y_k − α ∇y g(y_k); (∇̂F, y_T).

    Callables take (y, batch), (y, v, batch), (y, v, batch) and y_T respectively; batches[k] is the
    minibatch of step k, reused by the backward pass at y_k (None entries: full batch). With
    a = ∇y f(y_T), for k = T−1 down to T−K: d += −α J(y_k) a, a ← a − α H(y_k) a; ∇̂F = ∇x f(y_T) + d.
    `truncate` = K (None: all T steps). Cost: T gradients, one ∇f, K HVPs and K cross products.
    """
    keep = steps if truncate is None else min(truncate, steps)
    batches = [None] * steps if batches is None else list(batches)
    y = y0.copy()
    tape: list[tuple[Array, Any]] = []
    for k in range(steps):
        if k >= steps - keep:
            tape.append((y, batches[k]))  # only the last K states are differentiated through
        y = y - alpha * grad_y_g(y, batches[k])
    gx, a = grad_f(y)
    d = np.zeros_like(gx)
    for yk, bk in reversed(tape):
        d = d - alpha * cross(yk, a, bk)
        a = a - alpha * hvp(yk, a, bk)
    return gx + d, y


def gradient_steps(grad: Callable[[Array], Array], y0: Array, step: float, steps: int) -> Array:
    """`steps` plain gradient steps y ← y − step · grad(y) from y0 (a stochastic `grad` draws its batch)."""
    y = y0.copy()
    for _ in range(steps):
        y = y - step * grad(y)
    return y
