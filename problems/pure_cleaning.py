"""Hyper-cleaning's arrays and oracles in pure form, for the compiled engine (problems/logistic_cleaning.py).

g(x, y) = (1/n) Σ_train σ(x_i) CE(W; d_i, c_i) + C‖W‖²,  f(x, y) = (1/m) Σ_val CE(W; d_j, c_j),  y = vec(W), W (p, K)
row-major; labels as one-hot rows. As problems/pure_logistic.py: operators and the arrays' own namespace, the
oracles only (the ground truth and the cleaning metrics stay the problem's own, on the host), a minibatch 2b
indices (g's training samples, then f's validation ones). A per-sample term of g depends on x through σ(x_i) only,
so ∇x g and ∇²xy g · v are one entry per sample drawn, added where an index repeats. The per-sample oracles (SABA's
memory) give one row per sample of a level, as the problem's own `*_samples`.
"""
from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

from problems.logistic_cleaning import HyperCleaning
from problems.pure_logistic import _exp, _sigmoid, full_batch


def _softmax(Z: Any) -> Any:
    e = _exp(Z - Z.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def _cross_entropy(Z: Any, onehot: Any) -> Any:
    """CE of each row: logsumexp(z) − z_label."""
    top = Z.max(-1, keepdims=True)
    log_sum = top[..., 0] + Z.__array_namespace__().log(_exp(Z - top).sum(-1))
    return log_sum - (Z * onehot).sum(-1)


class PureCleaning(NamedTuple):
    """Training rows D (n, p) and one-hot noisy labels C (n, K), validation rows Dv (m, p) and labels Cv (m, K),
    the ridge constant C in C‖W‖², the start's log-odds weight."""

    D: Any
    C: Any
    Dv: Any
    Cv: Any
    reg: Any
    x_init: Any

    #: A config's `batch_size` gives minibatches here (algorithms/explicit/minibatch.py).
    takes_minibatches = True

    def initial_point(self, zeros: Any) -> tuple[Any, Any]:
        """(x0, y0) = (x_init for every training sample, 0)."""
        return zeros(self.D.shape[0]) + self.x_init, zeros(self.D.shape[1] * self.C.shape[1])

    def index_bounds(self) -> tuple[int, int]:
        return self.C.shape[0], self.Cv.shape[0]

    def sample_counts(self) -> tuple[int, int]:
        """(samples of g, samples of f)."""
        return self.index_bounds()

    # ---- per-sample oracles (SABA's memory): one row per sample idx of its level (every sample: idx None) ----
    def _per_sample_rows(self, D: Any, R: Any) -> Any:
        """Rows vec(d_i r_iᵀ) for per-sample score gradients r_i (the y = vec(W) layout)."""
        return (D[:, :, None] * R[:, None, :]).reshape(D.shape[0], -1)

    def _training(self, x: Any, idx: Any) -> tuple[Any, Any, Any, Any]:
        """(D, C, x at those samples, their one-hot positions among the n) of training samples idx (None: all)."""
        if idx is None:
            return self.D, self.C, x, None
        where = (idx[:, None] == np.arange(self.D.shape[0])) * 1.0
        return self.D[idx], self.C[idx], where @ x, where

    def grad_y_g_samples(self, x: Any, y: Any, idx: Any = None) -> Any:
        D, C, xi, _ = self._training(x, idx)
        R = _sigmoid(xi)[:, None] * (_softmax(D @ self._W(y)) - C)
        return self._per_sample_rows(D, R) + 2 * self.reg * y

    def hvp_yy_g_samples(self, x: Any, y: Any, v: Any, idx: Any = None) -> Any:
        D, _, xi, _ = self._training(x, idx)
        P, Q = _softmax(D @ self._W(y)), D @ self._W(v)
        R = _sigmoid(xi)[:, None] * P * (Q - (P * Q).sum(-1, keepdims=True))
        return self._per_sample_rows(D, R) + 2 * self.reg * v

    def cross_xy_g_samples(self, x: Any, y: Any, v: Any, idx: Any = None) -> Any:
        """Sample i depends on x through σ(x_i) only: row k is zero but at column idx[k]."""
        D, C, xi, where = self._training(x, idx)
        values = ((_softmax(D @ self._W(y)) - C) * (D @ self._W(v))).sum(-1) * _sigmoid(xi) * _sigmoid(-xi)
        eye = where if where is not None else (np.arange(self.D.shape[0])[:, None] == np.arange(self.D.shape[0])) * 1.0
        return eye * values[:, None]

    def grad_f_samples(self, x: Any, y: Any, idx: Any = None) -> tuple[Any, Any]:
        """(∇x f_j, ∇y f_j): ∇x f is zero, one row for every sample."""
        D, C = (self.Dv, self.Cv) if idx is None else (self.Dv[idx], self.Cv[idx])
        return (x * 0.0)[..., None, :], self._per_sample_rows(D, _softmax(D @ self._W(y)) - C)

    def _W(self, y: Any) -> Any:
        return y.reshape(y.shape[:-1] + (self.D.shape[1], self.C.shape[1]))

    def _rows(self, idx: Any) -> tuple[Any, Any, Any, Any, Any]:
        """(D, C, the samples' one-hot positions among the n, Dv, Cv) of minibatch idx, or every row (idx None:
        positions None, the identity)."""
        if idx is None:
            return self.D, self.C, None, self.Dv, self.Cv
        half = idx.shape[-1] // 2
        inner, outer = idx[..., :half], idx[..., half:]
        where = (inner[:, None] == np.arange(self.D.shape[0])) * 1.0  # (b, n): sample k is training row inner[k]
        return self.D[inner], self.C[inner], where, self.Dv[outer], self.Cv[outer]

    def _at(self, x: Any, where: Any) -> Any:
        """x at the minibatch's training samples (every x_i for the full batch)."""
        return x if where is None else where @ x

    def _spread(self, values: Any, where: Any) -> Any:
        """Per-sample values put back at their training indices (repeats add up)."""
        return values if where is None else values @ where

    g = full_batch("g")
    grad_y_g = full_batch("grad_y_g")
    grad_x_g = full_batch("grad_x_g")
    hvp_yy_g = full_batch("hvp_yy_g")
    cross_xy_g = full_batch("cross_xy_g")

    def grad_x_f(self, x: Any, y: Any) -> Any:
        return x * 0.0

    def grad_y_f(self, x: Any, y: Any) -> Any:
        return self.on_batch("grad_f", None, x, y)[1]

    def project_x(self, x: Any) -> Any:
        return x

    def project_y(self, y: Any) -> Any:
        return y

    def on_batch(self, name: str, idx: Any, x: Any, y: Any, *v: Any) -> Any:
        """Oracle `name` on minibatch idx (None: the full batch); `grad_f` the pair (∇x f, ∇y f), g a (1,) number."""
        D, C, where, Dv, Cv = self._rows(idx)
        if name == "grad_f":
            return x * 0.0, (Dv.T @ (_softmax(Dv @ self._W(y)) - Cv)).reshape(y.shape) / Cv.shape[0]
        n, Z = C.shape[0], D @ self._W(y)
        s = _sigmoid(self._at(x, where))
        if name == "g":
            return (s * _cross_entropy(Z, C)).mean(-1, keepdims=True) + self.reg * (y * y).sum(-1, keepdims=True)
        if name == "grad_y_g":
            return (D.T @ (s[:, None] * (_softmax(Z) - C))).reshape(y.shape) / n + 2 * self.reg * y
        if name == "hvp_yy_g":
            P, Q = _softmax(Z), D @ self._W(v[0])
            R = P * (Q - (P * Q).sum(-1, keepdims=True))  # (diag p − p pᵀ) q per sample
            return (D.T @ (s[:, None] * R)).reshape(y.shape) / n + 2 * self.reg * v[0]
        slope = s * _sigmoid(-self._at(x, where)) / n  # σ'(x_i) / n per sample
        if name == "grad_x_g":
            return self._spread(slope * _cross_entropy(Z, C), where)
        if name == "cross_xy_g":
            return self._spread(slope * ((_softmax(Z) - C) * (D @ self._W(v[0]))).sum(-1), where)
        raise AttributeError(name)


def pure_cleaning(problem: HyperCleaning) -> PureCleaning:
    """The pure form of a hyper_cleaning instance (NumPy arrays, labels one-hot)."""
    eye = np.eye(problem.K)
    return PureCleaning(*(np.asarray(a, dtype=float) for a in (problem.D, eye[problem.c], problem.Dv,
                                                                eye[problem.cv])), float(problem.reg),
                        float(problem.x_init))
