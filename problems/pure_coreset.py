"""Coreset selection's arrays and oracles in pure form, for the compiled engine (problems/coreset.py).

g(λ, θ) = (N/B) Σ_batch λ_i CE(θ_{t(i)}; d_i, c_i) + (μ/2)‖θ‖²,  f(λ, θ) = (N/B) Σ_batch w_i CE(θ_{t(i)}; d_i, c_i)
+ C Σ_t R_K(λ_t), with w_i = 1/n_{t(i)}, θ = y as (T·p, m) and sample i's features in its task's block of a row of
T·p (zeros elsewhere), so that every sample's scores are one product. As problems/pure_cleaning.py: operators and the
arguments' own namespace, the oracles only (y*, F, A_T and FGT_T stay the problem's own, on the host); a minibatch
is B indices over all N samples (`index_bounds`), the problem's own draw; an index drawn twice counts twice. R_K's
gradient is −(1/S) × the count of draws in which an entry is among the K largest (ties: the lower index, as
`top_k`); each task's block of x is projected on its simplex by the same sort-based rule as `project_simplex`.
"""
from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

from problems.coreset import CoresetSelection
from problems.pure_cleaning import _cross_entropy, _softmax
from problems.pure_logistic import full_batch


class PureCoreset(NamedTuple):
    """Block rows D (N, T·p), one-hot task-local labels C (N, m), f's sample weights w (N,), the start x0 (N,), the
    ridge μ, the regularizer's weight `reg` and smoothing δ, K as the length of `k_slots` (a shape stays static under
    `jit`, as the tasks' sizes do as the shapes of their fixed draws Z_t (S, n_t))."""

    D: Any
    C: Any
    w: Any
    x0: Any
    mu: Any
    reg: Any
    delta: Any
    k_slots: Any
    draws: tuple[Any, ...]

    #: A config's `batch_size` gives minibatches here (algorithms/explicit/minibatch.py).
    takes_minibatches = True

    def initial_point(self, zeros: Any) -> tuple[Any, Any]:
        """(x0, y0) = (the uniform weights of every task, 0)."""
        return zeros(self.D.shape[0]) + self.x0, zeros(self.D.shape[1] * self.C.shape[1])

    def index_bounds(self) -> tuple[int]:
        return (self.D.shape[0],)

    def _theta(self, y: Any) -> Any:
        return y.reshape(y.shape[:-1] + (self.D.shape[1], self.C.shape[1]))

    def _rows(self, idx: Any) -> tuple[Any, Any, Any, Any, Any]:
        """(D, C, w, the samples' one-hot positions among the N, the scale N/B) of minibatch idx, or every row (idx
        None: positions None, scale 1)."""
        if idx is None:
            return self.D, self.C, self.w, None, 1.0
        where = (idx[:, None] == np.arange(self.D.shape[0])) * 1.0  # (B, N): sample k is row idx[k]
        return self.D[idx], self.C[idx], self.w[idx], where, self.D.shape[0] / idx.shape[-1]

    def _back(self, D: Any, weights: Any, R: Any, like: Any) -> Any:
        """Σ_i weights_i d_i r_iᵀ in each sample's task block, flattened like y."""
        return (D.T @ (weights[:, None] * R)).reshape(like.shape)

    g = full_batch("g")
    grad_y_g = full_batch("grad_y_g")
    grad_x_g = full_batch("grad_x_g")
    hvp_yy_g = full_batch("hvp_yy_g")
    cross_xy_g = full_batch("cross_xy_g")

    def grad_x_f(self, x: Any, y: Any) -> Any:
        return self.reg * self.regularizer_grad(x)

    def grad_y_f(self, x: Any, y: Any) -> Any:
        return self.on_batch("grad_f", None, x, y)[1]

    def project_y(self, y: Any) -> Any:
        return y

    def on_batch(self, name: str, idx: Any, x: Any, y: Any, *v: Any) -> Any:
        """Oracle `name` on minibatch idx (None: the full batch); `grad_f` the pair (∇x f, ∇y f), g a (1,) number."""
        D, C, w, where, scale = self._rows(idx)
        Z = D @ self._theta(y)
        if name == "grad_f":
            return self.grad_x_f(x, y), self._back(D, scale * w, _softmax(Z) - C, y)
        lam = x if where is None else where @ x
        if name == "g":
            return scale * (lam * _cross_entropy(Z, C)).sum(-1, keepdims=True) + 0.5 * self.mu * (y * y).sum(-1, keepdims=True)
        if name == "grad_y_g":
            return self._back(D, scale * lam, _softmax(Z) - C, y) + self.mu * y
        if name == "hvp_yy_g":
            P, Q = _softmax(Z), D @ self._theta(v[0])
            R = P * (Q - (P * Q).sum(-1, keepdims=True))  # (diag p − p pᵀ) q per sample
            return self._back(D, scale * lam, R, y) + self.mu * v[0]
        if name == "grad_x_g":
            per_sample = scale * _cross_entropy(Z, C)
        elif name == "cross_xy_g":
            per_sample = scale * ((_softmax(Z) - C) * (D @ self._theta(v[0]))).sum(-1)
        else:
            raise AttributeError(name)
        return per_sample if where is None else per_sample @ where  # back at the samples' indices, repeats add up

    # ---- the top-K regularizer and the simplices: per task block (block sizes are the draws' static shapes) ----
    def _blocks(self) -> list[tuple[int, int, Any]]:
        out, start = [], 0
        for Z in self.draws:
            out.append((start, start + Z.shape[-1], Z))
            start += Z.shape[-1]
        return out

    def regularizer_grad(self, x: Any) -> Any:
        """∇ Σ_t R_K(λ_t): −(1/S) × how often each entry is among the K largest of λ_t + δ z_s."""
        xp = x.__array_namespace__()
        parts = []
        for a, b, Z in self._blocks():
            parts.append(-_top_k_counts(x[a:b] + self.delta * Z, self.k_slots.shape[0], xp) / Z.shape[0])
        return xp.concat(parts, axis=-1)

    def project_x(self, x: Any) -> Any:
        """Each task's block onto its probability simplex (sort-based, as `project_simplex`)."""
        xp = x.__array_namespace__()
        return xp.concat([_simplex(x[a:b], xp) for a, b, _ in self._blocks()], axis=-1)


def _top_k_counts(values: Any, k: int, xp: Any) -> Any:
    """How many rows have each entry among their k largest, ties to the lower index (`top_k`'s rule), without a sort
    (XLA's on a CPU took 40x NumPy's; the array API has no top-k): k rounds of a row's maximum, each taking out every
    entry equal to it, find the k-th largest value t (with multiplicity); then the entries above t, and the first
    ones equal to t by index up to k."""
    rest = values
    t = xp.max(values, axis=-1, keepdims=True)
    taken = xp.zeros(values.shape[:-1] + (1,))
    for _ in range(k):
        top = xp.max(rest, axis=-1, keepdims=True)
        t = xp.where(taken < k, top, t)  # the value at which the running count first reaches k
        at_top = rest >= top
        taken = taken + xp.sum(at_top * 1.0, axis=-1, keepdims=True)
        rest = xp.where(at_top, -xp.inf, rest)
    above = values > t
    tied = (values == t) * 1.0
    room = k - xp.sum(above * 1.0, axis=-1, keepdims=True)
    chosen = above | ((tied > 0) & (xp.cumsum(tied, axis=-1) <= room))
    return xp.sum(chosen * 1.0, axis=0)


def _simplex(v: Any, xp: Any) -> Any:
    """The Euclidean projection of v onto {w ≥ 0, Σ w = 1}: the operations of `project_simplex`, with its last
    index where u_j > (Σ_{i≤j} u_i − 1)/j taken by a maximum instead of a lookup."""
    u = xp.flip(xp.sort(v, axis=-1), axis=-1)
    css = xp.cumsum(u, axis=-1) - 1.0
    j = xp.arange(v.shape[-1])
    rho = xp.max(xp.where(u - css / (j + 1.0) > 0, j, -1), axis=-1)
    theta = xp.sum(xp.where(j == rho, css, 0.0), axis=-1) / (rho + 1.0)
    return xp.maximum(v - theta, 0.0)


def pure_coreset(problem: CoresetSelection) -> PureCoreset:
    """The pure form of a coreset_selection instance (NumPy arrays: block rows, one-hot labels)."""
    n, p = problem.n_samples, problem.p
    D = np.zeros((n, problem.n_tasks * p))
    for t, block in enumerate(problem.blocks):
        D[block, t * p:(t + 1) * p] = problem.D[block]
    x0, _ = problem.initial_point()
    first = problem.regularizers[0]
    return PureCoreset(D, np.eye(problem.m)[problem.c], np.asarray(problem.w_outer, dtype=float), x0,
                       float(problem.mu), float(problem.C), float(first.delta), np.zeros(problem.coreset_size),
                       tuple(np.asarray(r.Z, dtype=float) for r in problem.regularizers))
