"""Logistic-regression bilevel problems on real data (TFBO §5; benchopt benchmark_bilevel).

regularization_selection: binary logistic regression, y ∈ R^p, one strength per feature,
    g(x, y) = (1/n) Σ_train log(1 + exp(−b_i d_iᵀy)) + ½ Σ_k exp(x_k) y_k²,
    f(x, y) = (1/m) Σ_val log(1 + exp(−b_j d_jᵀy)).
hyper_cleaning: multinomial logistic regression, y = vec(W) with W ∈ R^{p×K} row-major, x ∈ R^n one
    weight per training sample whose label was replaced by a uniform random one with probability p,
    g(x, y) = (1/n) Σ_train σ(x_i) CE(W; d_i, c_i) + C‖W‖²,  f(x, y) = (1/m) Σ_val CE(W; d_j, c_j).

regularization_selection and the ground truth both share (`LogisticBilevel`) are here; hyper_cleaning is in
problems.logistic_cleaning. g averages training samples and f validation samples (two-set minibatches, problems.sampling). Ground
truth: y*(x) by Newton's method (dense Cholesky or conjugate gradients on exact Hessian-vector
products) run to the rounding floor; ∇F = ∇x f − ∇²xy g [∇²yy g]⁻¹ ∇y f with the same solver.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.linalg as sla
from scipy.special import expit, log_expit

from problems.base import Array, Batch
from problems.datasets import DataParams, Split, prepare
from problems.gather import RowCache
from problems.newton import conjugate_gradient, newton_minimize
from problems.registry import register
from problems.rowwise import index_rows, level_indices, row_combinations, row_products
from problems.sampling import TwoSetFiniteSum, inner_index, outer_index
from problems.validation import param

#: Inner Hessians up to this size are factorised densely; larger ones are solved by CG.
DENSE_LIMIT = 2000


# ---------------------------------------------------------------- shared ground truth
class LogisticBilevel(TwoSetFiniteSum):
    """Ground truth by Newton (memoised at the last x, warm-started) for the logistic problems."""

    def _init_cache(self) -> None:
        self._train_rows, self._val_rows = RowCache(), RowCache()  # minibatch rows, shared by its oracles
        self._memo_x: Array | None = None
        self._memo_y: Array | None = None
        self._memo_grad: Array | None = None
        self._warm: Array | None = None
        self.last_inner_residual = float("nan")
        self._at_y: tuple = (None, None, None, None)  # regularization selection's margins at the last y (_margins)

    def solve_yy(self, x: Array, y: Array, rhs: Array) -> Array:
        """[∇²yy g(x, y)]⁻¹ rhs (full batch)."""
        return conjugate_gradient(lambda v: self.hvp_yy_g(x, y, v), rhs)

    def y_star(self, x: Array) -> Array:
        if self._memo_x is not None and np.array_equal(x, self._memo_x):
            return self._memo_y.copy()
        y0 = self._warm if self._warm is not None else np.zeros(self.dim_y)
        y, gn = newton_minimize(lambda v: self.g(x, v), lambda v: self.grad_y_g(x, v),
                                lambda v, r: self.solve_yy(x, v, r), y0)
        self._memo_x, self._memo_y, self._memo_grad, self._warm = x.copy(), y, None, y
        self.last_inner_residual = gn
        return y.copy()

    def grad_F(self, x: Array) -> Array:
        ys = self.y_star(x)
        if self._memo_grad is None:
            gx, gy = self.grad_f(x, ys)
            self._memo_grad = gx - self.cross_xy_g(x, ys, self.solve_yy(x, ys, gy))
        return self._memo_grad.copy()


# ---------------------------------------------------------------- regularization selection
def binary_signs(labels: Array, n_classes: int) -> Array:
    """±1 targets: the upper half of the (sorted) classes is positive."""
    return np.where(labels >= n_classes / 2, 1.0, -1.0)


class RegularizationSelection(LogisticBilevel):
    """Per-feature ridge strengths exp(x_k) for binary logistic regression."""

    def __init__(self, data: Split, x_init: float = -2.0) -> None:
        self.D, self.b = data.X_train, binary_signs(data.y_train, data.n_classes)
        self.Dv, self.bv = data.X_val, binary_signs(data.y_val, data.n_classes)
        self.Dt, self.bt = data.X_test, binary_signs(data.y_test, data.n_classes)
        self.dim_x = self.dim_y = data.n_features
        self._set_sizes(len(self.b), len(self.bv))
        self.x_init = x_init
        self._init_cache()

    def _train(self, idx: Array | None) -> tuple[Array, Array]:
        if idx is None:
            return self.D, self.b
        return self._train_rows.rows("D", self.D, idx), self._train_rows.rows("b", self.b, idx)

    def _val(self, idx: Array | None) -> tuple[Array, Array]:
        if idx is None:
            return self.Dv, self.bv
        return self._val_rows.rows("D", self.Dv, idx), self._val_rows.rows("b", self.bv, idx)

    def f(self, x: Array, y: Array, batch: Batch = None) -> float:
        D, b = self._val(outer_index(batch))
        return float(-np.mean(log_expit(b * (D @ y))))

    def g(self, x: Array, y: Array, batch: Batch = None) -> float:
        D, b = self._train(inner_index(batch))
        return float(-np.mean(log_expit(b * (D @ y))) + 0.5 * np.exp(x) @ (y * y))

    def grad_y_f(self, x: Array, y: Array, batch: Batch = None) -> Array:
        D, b = self._val(outer_index(batch))
        return D.T @ (-b * expit(-b * (D @ y))) / len(b)

    def grad_f(self, x: Array, y: Array, batch: Batch = None) -> tuple[Array, Array]:
        return np.zeros(self.dim_x), self.grad_y_f(x, y, batch)

    def grad_y_g(self, x: Array, y: Array, batch: Batch = None) -> Array:
        idx = inner_index(batch)
        D, b = self._train(idx)
        s = expit(-b * (D @ y)) if idx is not None else self._margins(y)[1]
        return D.T @ (-b * s) / len(b) + np.exp(x) * y

    def grad_g(self, x: Array, y: Array, batch: Batch = None) -> tuple[Array, Array]:
        return 0.5 * np.exp(x) * y * y, self.grad_y_g(x, y, batch)

    def _curvature(self, y: Array, idx: Array | None) -> tuple[Array, Array]:
        D, b = self._train(idx)
        if idx is not None:
            z = b * (D @ y)
            return D, expit(z) * expit(-z)
        z, s, w = self._margins(y)
        if w is None:  # the weights once per y: D-TFBO's v-loop and the CG solves ask them again and again
            w = expit(z) * s
            self._at_y = (*self._at_y[:3], w)
        return D, w

    def _margins(self, y: Array) -> tuple[Array, Array, Array | None]:
        """(z = b ⊙ Dy, expit(−z), the Hessian weights expit(z) expit(−z) or None) on the whole training set, kept
        for the last y: a step asks the gradient and Hessian-vector products at one y (the same numbers, made once)."""
        key = y.tobytes()
        if self._at_y[0] != key:
            z = self.b * (self.D @ y)
            self._at_y = (key, z, expit(-z), None)
        return self._at_y[1:]

    def hvp_yy_g(self, x: Array, y: Array, v: Array, batch: Batch = None) -> Array:
        D, w = self._curvature(y, inner_index(batch))
        return D.T @ (w * (D @ v)) / len(w) + np.exp(x) * v

    def cross_xy_g(self, x: Array, y: Array, v: Array, batch: Batch = None) -> Array:
        return np.exp(x) * y * v  # the regulariser is the only x–y coupling, and it is not sampled

    # ---- stacked oracles (rows: one run each; algorithms.stacked): the whole data for the full batch (D 2-D),
    # each run's minibatch rows (D: (K, batch, p), signs (K, batch)) in batched products otherwise ----
    def _train_stack(self, idx: Array | None) -> tuple[Array, Array]:
        return (self.D, self.b) if idx is None else (self.D[idx], self.b[idx])

    def _val_stack(self, idx: Array | None) -> tuple[Array, Array]:
        return (self.Dv, self.bv) if idx is None else (self.Dv[idx], self.bv[idx])

    @staticmethod
    def _products(D: Array, V: Array) -> Array:
        """d_iᵀv of each run's samples: (K, n) for the whole data, (K, batch) for minibatch rows."""
        return V @ D.T if D.ndim == 2 else row_products(D, V)

    @staticmethod
    def _combine(R: Array, D: Array) -> Array:
        """Σ_i R[k, i] d_i per run: (K, p)."""
        return R @ D if D.ndim == 2 else row_combinations(R, D)

    def _loss_rows(self, D: Array, b: Array, Y: Array) -> Array:
        """Each row's mean log(1 + exp(−b_i d_iᵀy)): (K,)."""
        return -np.mean(log_expit(b * self._products(D, Y)), axis=-1)

    def _loss_grad_rows(self, D: Array, b: Array, Y: Array) -> Array:
        """Each row's mean ∇ log(1 + exp(−b_i d_iᵀy)): (K, dim_y)."""
        return self._combine(-b * expit(-b * self._products(D, Y)), D) / b.shape[-1]

    def f_rows(self, X: Array, Y: Array, batches=None) -> Array:
        return self._loss_rows(*self._val_stack(level_indices(batches)[1]), Y)

    def g_rows(self, X: Array, Y: Array, batches=None) -> Array:
        return self._loss_rows(*self._train_stack(level_indices(batches)[0]), Y) \
            + 0.5 * np.einsum("ij,ij->i", np.exp(X), Y * Y)

    def grad_y_f_rows(self, X: Array, Y: Array, batches=None) -> Array:
        return self._loss_grad_rows(*self._val_stack(level_indices(batches)[1]), Y)

    def grad_f_rows(self, X: Array, Y: Array, batches=None) -> tuple[Array, Array]:
        return np.zeros_like(X), self.grad_y_f_rows(X, Y, batches)

    def grad_y_g_rows(self, X: Array, Y: Array, batches=None) -> Array:
        return self._loss_grad_rows(*self._train_stack(level_indices(batches)[0]), Y) + np.exp(X) * Y

    def grad_g_rows(self, X: Array, Y: Array, batches=None) -> tuple[Array, Array]:
        return 0.5 * np.exp(X) * Y * Y, self.grad_y_g_rows(X, Y, batches)

    def hvp_yy_g_rows(self, X: Array, Y: Array, V: Array, batches=None) -> Array:
        D, b = self._train_stack(level_indices(batches)[0])
        Z = b * self._products(D, Y)
        return self._combine(expit(Z) * expit(-Z) * self._products(D, V), D) / b.shape[-1] + np.exp(X) * V

    def cross_xy_g_rows(self, X: Array, Y: Array, V: Array, batches=None) -> Array:
        return np.exp(X) * Y * V  # not sampled: the same for every minibatch

    # Per-sample oracles of each run (idx: (K, batch), or one batch for all): the single ones' rows, stacked.
    def _loss_grads_rows(self, D: Array, b: Array, Y: Array) -> Array:
        return (-b * expit(-b * row_products(D, Y)))[..., None] * D

    def grad_f_samples_rows(self, X: Array, Y: Array, idx: Array) -> tuple[Array, Array]:
        idx = index_rows(idx, len(X))
        return np.zeros((*idx.shape, self.dim_x)), self._loss_grads_rows(self.Dv[idx], self.bv[idx], Y)

    def grad_y_g_samples_rows(self, X: Array, Y: Array, idx: Array) -> Array:
        idx = index_rows(idx, len(X))
        return self._loss_grads_rows(self.D[idx], self.b[idx], Y) + (np.exp(X) * Y)[:, None, :]

    def hvp_yy_g_samples_rows(self, X: Array, Y: Array, V: Array, idx: Array) -> Array:
        idx = index_rows(idx, len(X))
        D, b = self.D[idx], self.b[idx]
        z = b * row_products(D, Y)
        return (expit(z) * expit(-z) * row_products(D, V))[..., None] * D + (np.exp(X) * V)[:, None, :]

    def cross_xy_g_samples_rows(self, X: Array, Y: Array, V: Array, idx: Array) -> Array:
        idx = index_rows(idx, len(X))
        return np.repeat((np.exp(X) * Y * V)[:, None, :], idx.shape[1], axis=1)  # the regulariser, in every sample

    # ---- per-sample oracles (rows: one sample each) ----
    @staticmethod
    def _loss_grads(D: Array, b: Array, y: Array) -> Array:
        """Rows ∇ log(1 + exp(−b_i d_iᵀy)) = −b_i σ(−b_i d_iᵀy) d_i."""
        return (-b * expit(-b * (D @ y)))[:, None] * D

    def grad_f_samples(self, x: Array, y: Array, idx: Array) -> tuple[Array, Array]:
        return np.zeros((len(idx), self.dim_x)), self._loss_grads(self.Dv[idx], self.bv[idx], y)

    def grad_y_g_samples(self, x: Array, y: Array, idx: Array) -> Array:
        return self._loss_grads(self.D[idx], self.b[idx], y) + np.exp(x) * y

    def hvp_yy_g_samples(self, x: Array, y: Array, v: Array, idx: Array) -> Array:
        D, w = self._curvature(y, idx)
        return (w * (D @ v))[:, None] * D + np.exp(x) * v

    def cross_xy_g_samples(self, x: Array, y: Array, v: Array, idx: Array) -> Array:
        return np.tile(np.exp(x) * y * v, (len(idx), 1))  # the regulariser: the same in every sample

    def hessian_yy_g(self, x: Array, y: Array, batch: Batch = None) -> Array:
        D, w = self._curvature(y, inner_index(batch))
        return D.T @ (w[:, None] * D) / len(w) + np.diag(np.exp(x))

    def jacobian_xy_g(self, x: Array, y: Array, batch: Batch = None) -> Array:
        return np.diag(np.exp(x) * y)

    def solve_yy(self, x: Array, y: Array, rhs: Array) -> Array:
        if self.dim_y > DENSE_LIMIT:
            return super().solve_yy(x, y, rhs)
        return sla.cho_solve(sla.cho_factor(self.hessian_yy_g(x, y)), rhs)

    def initial_point(self) -> tuple[Array, Array]:
        return np.full(self.dim_x, self.x_init), np.zeros(self.dim_y)

    def metrics(self, x: Array, y: Array) -> dict[str, float]:
        predict = lambda D: np.where(D @ y >= 0, 1.0, -1.0)  # noqa: E731
        return {"test_accuracy": float(np.mean(predict(self.Dt) == self.bt)),
                "val_accuracy": float(np.mean(predict(self.Dv) == self.bv)),
                "test_loss": float(-np.mean(log_expit(self.bt * (self.Dt @ y))))}


# ---------------------------------------------------------------- registration
@dataclass(frozen=True)
class RegularizationSelectionParams(DataParams):
    """Data source and start point of regularization_selection."""

    x_init: float = param(-2.0, "real", "every log-strength of the starting x (the benchmark's −2)")


@register("regularization_selection", RegularizationSelectionParams)
def build_regularization_selection(p: RegularizationSelectionParams, seed: int) -> RegularizationSelection:
    """Per-feature ridge strengths of binary logistic regression on real data (TFBO §5.1)."""
    return RegularizationSelection(prepare(p, np.random.default_rng(seed)), p.x_init)
