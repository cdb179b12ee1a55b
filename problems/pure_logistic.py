"""Regularization selection's arrays and oracles in pure form, for the compiled engine (problems/logistic.py).

g(x, y) = (1/n) Σ_train log(1 + exp(−b_i d_iᵀy)) + ½ Σ_k exp(x_k) y_k²,  f(x, y) = (1/m) Σ_val log(1 + exp(−b_j d_jᵀy)),
written with operators and the arrays' own namespace (`__array_namespace__`: NumPy's or JAX's, traced ones too) so
that a step under `jax.jit` and `jax.vmap` takes them as arguments. Only the oracles are here: the ground truth (y*
by Newton, ∇F, the accuracies) stays the problem's own, evaluated on the host at the points (the JAX engine hands
it the iterates there), so every engine records the same metrics.

Minibatches: one minibatch is 2b indices, g's training samples then f's validation samples, as `sample_batches`
draws a two-set batch (`index_bounds`); `on_batch` gives an oracle on the rows it names.
"""
from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

from problems.logistic import RegularizationSelection
from problems.shared.errors import ParameterError


def _exp(a: Any) -> Any:
    """exp in the array's own namespace (each function takes it from its argument: under `jax.jit` an argument may
    be traced while another is a NumPy constant)."""
    return a.__array_namespace__().exp(a)


def _sigmoid(z: Any) -> Any:
    return 1.0 / (1.0 + _exp(-z))


def _log_sigmoid(z: Any) -> Any:
    """log σ(z) without overflow: min(z, 0) − log(1 + exp(−|z|))."""
    xp = z.__array_namespace__()
    return xp.minimum(z, 0.0) - xp.log1p(xp.exp(-xp.abs(z)))


def _loss_grad(D: Any, b: Any, y: Any) -> Any:
    """Mean ∇ log(1 + exp(−b_i d_iᵀy)) over the rows of D: −Σ b_i σ(−b_i d_iᵀy) d_i / n."""
    return (-b * _sigmoid(-b * (y @ D.T))) @ D / b.shape[-1]


def full_batch(name: str) -> Any:
    """The oracle `name` of a form with `on_batch`, on the full batch: `on_batch(name, None, x, y, *v)`."""
    def oracle(self: Any, x: Any, y: Any, *v: Any) -> Any:
        return self.on_batch(name, None, x, y, *v)

    oracle.__name__ = name
    return oracle


class PureRegularization(NamedTuple):
    """Training rows D (n, p) and signs b (n,), validation rows Dv (m, p) and signs bv (m,), the start's
    log-strength."""

    D: Any
    b: Any
    Dv: Any
    bv: Any
    x_init: Any

    #: A config's `batch_size` gives minibatches here (algorithms/explicit/minibatch.py).
    takes_minibatches = True

    def initial_point(self, zeros: Any) -> tuple[Any, Any]:
        """(x0, y0) = (x_init everywhere, 0), made by `zeros(n)` of the caller's namespace."""
        p = self.D.shape[1]
        return zeros(p) + self.x_init, zeros(p)

    def index_bounds(self) -> tuple[int, int]:
        """A minibatch's index draws: b below n (g's samples), then b below m (f's)."""
        return self.b.shape[0], self.bv.shape[0]

    def sample_counts(self) -> tuple[int, int]:
        """(samples of g, samples of f)."""
        return self.index_bounds()

    # ---- per-sample oracles (SABA's memory): one row per sample idx of its level (every sample: idx None) ----
    def _per_sample_loss_grads(self, D: Any, b: Any, y: Any) -> Any:
        """Rows ∇ log(1 + exp(−b_i d_iᵀy)) = −b_i σ(−b_i d_iᵀy) d_i."""
        return (-b * _sigmoid(-b * (y @ D.T)))[..., None] * D

    def grad_y_g_samples(self, x: Any, y: Any, idx: Any = None) -> Any:
        D, b = (self.D, self.b) if idx is None else (self.D[idx], self.b[idx])
        return self._per_sample_loss_grads(D, b, y) + (_exp(x) * y)[..., None, :]

    def hvp_yy_g_samples(self, x: Any, y: Any, v: Any, idx: Any = None) -> Any:
        D, b = (self.D, self.b) if idx is None else (self.D[idx], self.b[idx])
        z = b * (y @ D.T)
        return (_sigmoid(z) * _sigmoid(-z) * (v @ D.T))[..., None] * D + (_exp(x) * v)[..., None, :]

    def cross_xy_g_samples(self, x: Any, y: Any, v: Any, idx: Any = None) -> Any:
        """The regulariser's, the same in every sample (one row per sample)."""
        n = self.b.shape[0] if idx is None else idx.shape[-1]
        row = _exp(x) * y * v
        return row.__array_namespace__().broadcast_to(row[..., None, :], row.shape[:-1] + (n, row.shape[-1]))

    def grad_f_samples(self, x: Any, y: Any, idx: Any = None) -> tuple[Any, Any]:
        """(∇x f_j, ∇y f_j): ∇x f is zero, one row for every sample."""
        D, b = (self.Dv, self.bv) if idx is None else (self.Dv[idx], self.bv[idx])
        return (x * 0.0)[..., None, :], self._per_sample_loss_grads(D, b, y)

    g = full_batch("g")
    grad_y_g = full_batch("grad_y_g")

    def grad_x_g(self, x: Any, y: Any) -> Any:
        return 0.5 * _exp(x) * y * y

    hvp_yy_g = full_batch("hvp_yy_g")

    def cross_xy_g(self, x: Any, y: Any, v: Any) -> Any:
        return _exp(x) * y * v  # the regulariser: the only x–y coupling, not sampled

    def grad_x_f(self, x: Any, y: Any) -> Any:
        return x * 0.0

    def grad_y_f(self, x: Any, y: Any) -> Any:
        return _loss_grad(self.Dv, self.bv, y)

    def project_x(self, x: Any) -> Any:
        return x

    def project_y(self, y: Any) -> Any:
        return y

    def _rows(self, idx: Any) -> tuple[Any, Any, Any, Any]:
        """(D, b, Dv, bv) of minibatch idx (g's indices, then f's), or every row (idx None)."""
        if idx is None:
            return self.D, self.b, self.Dv, self.bv
        half = idx.shape[-1] // 2
        inner, outer = idx[..., :half], idx[..., half:]
        return self.D[inner], self.b[inner], self.Dv[outer], self.bv[outer]

    def on_batch(self, name: str, idx: Any, x: Any, y: Any, *v: Any) -> Any:
        """Oracle `name` on minibatch idx (None: the full batch); `grad_f` the pair (∇x f, ∇y f), g a (1,) number."""
        D, b, Dv, bv = self._rows(idx)
        if name == "grad_f":
            return x * 0.0, _loss_grad(Dv, bv, y)
        if name == "grad_y_g":
            return _loss_grad(D, b, y) + _exp(x) * y
        if name == "hvp_yy_g":
            z = b * (y @ D.T)
            w = _sigmoid(z) * _sigmoid(-z)
            return (w * (v[0] @ D.T)) @ D / b.shape[-1] + _exp(x) * v[0]
        if name == "g":
            loss = -_log_sigmoid(b * (y @ D.T)).mean(-1, keepdims=True)
            return loss + 0.5 * (_exp(x) * y * y).sum(-1, keepdims=True)
        return getattr(self, name)(x, y, *v)  # not sampled (the regulariser's terms)


def pure_regularization(problem: Any) -> PureRegularization:
    """The pure form of a regularization_selection instance (NumPy arrays)."""
    if not isinstance(problem, RegularizationSelection):
        raise ParameterError(f"problem: '{problem.name}' has no pure-array form for the compiled engine; allowed: "
                             "'quadratic', 'nonunique_toy', 'minimax_toy', 'regularization_selection', "
                             "'hyper_cleaning'")
    return PureRegularization(*(np.asarray(a, dtype=float) for a in (problem.D, problem.b, problem.Dv, problem.bv)),
                              float(problem.x_init))
