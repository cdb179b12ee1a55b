"""Hypergradient estimators as pure functions over oracle callables.

Every estimator approximates the implicit-function hypergradient ∇F = ∇x f − J H⁻¹ ∇y f
(H = ∇²yy g, J = ∇²xy g) through a linear-system solve H v = ∇y f (CG, fixed point, Neumann series
and its randomized truncation HIA) or by differentiating through unrolled inner gradient steps (ITD,
reverse mode). They take oracle callables with the point and minibatch already bound, so any
algorithm family — offline, online, stochastic — can reuse them and every oracle call still goes
through the counting wrapper.

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
    v, r = _cg_start(hvp, b, v0)
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


def _cg_start(hvp: Hvp, b: Array, v0: Array | None) -> tuple[Array, Array]:
    """CG's first iterate and residual: from zero (no HVP), or from a warm start (one HVP)."""
    if v0 is None:
        return np.zeros_like(b), b.copy()
    v = v0.copy()
    return v, b - hvp(v)


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


def hia_length(terms: int, rng: np.random.Generator) -> int:
    """The HIA's number of HVP factors p, uniform in {0, ..., N−1} (N = `terms`)."""
    return int(rng.integers(terms))


def hia(hvp: Hvp, b: Array, eta: float, terms: int, rng: np.random.Generator | None = None,
        length: int | None = None) -> tuple[Array, int]:
    """Randomized truncated Neumann estimate of H⁻¹ b (Ghadimi & Wang 2018, Alg. 3); (v, p).

    Draws p uniformly in {0, ..., N−1} with `rng` (N = `terms`; `length` given: that p, drawn by the caller
    as `hia_length` draws it) and returns v = N η Π_{i=1}^{p} (I − η H_i) b: p HVPs, each a fresh call of `hvp` (a
    stochastic caller draws an independent H_i per call).
    E_p[v] = η Σ_{j<N} (I − ηH)^j b = H⁻¹(I − (I − ηH)^N) b for a fixed H (`hia_expected`).
    """
    p = hia_length(terms, rng) if length is None else length
    u = b.copy()
    for _ in range(p):
        u = u - eta * hvp(u)
    return terms * eta * u, p


def hia_expected(hvp: Hvp, b: Array, eta: float, terms: int) -> Array:
    """The HIA averaged over p: η Σ_{j=0}^{N−1} Π_{i≤j} (I − η H_i) b (`neumann_series`, N − 1 HVPs)."""
    return neumann_series(hvp, b, eta, terms - 1)


#: (u, u') ↦ (H_i u, H'_i u'): one HVP at each of two points on one shared minibatch.
HvpPair = Callable[[Array, Array], tuple[Array, Array]]


def _stacked(hvp_pair: HvpPair, dim: int) -> Hvp:
    """The pair of HVPs as one operator on stacked vectors [u; u'], so both chains share every call."""
    def hvp(w: Array) -> Array:
        a, b = hvp_pair(w[:dim], w[dim:])
        return np.concatenate([a, b])
    return hvp


def joint_hia(
    hvp_pair: HvpPair, b: Array, b_prev: Array, eta: float, terms: int, rng: np.random.Generator | None = None,
    length: int | None = None,
) -> tuple[Array, Array, int]:
    """HIA at two points with one p and one minibatch per Neumann factor (SUSTAIN); (v, v', p).

    Each call of `hvp_pair` is one factor i: it returns (H_i u, H'_i u') with H_i, H'_i the Hessians at
    the two points on the same minibatch. 2p HVPs. With equal points and right-hand sides v' == v.
    """
    v, p = hia(_stacked(hvp_pair, b.size), np.concatenate([b, b_prev]), eta, terms, rng, length)
    return v[:b.size], v[b.size:], p


def joint_hia_expected(hvp_pair: HvpPair, b: Array, b_prev: Array, eta: float, terms: int) -> tuple[Array, Array]:
    """`hia_expected` at two points sharing every minibatch (2(N − 1) HVPs)."""
    v = hia_expected(_stacked(hvp_pair, b.size), np.concatenate([b, b_prev]), eta, terms)
    return v[:b.size], v[b.size:]


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
