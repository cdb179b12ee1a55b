"""hyper_cleaning: multinomial logistic regression on a training set whose labels were corrupted, with one
weight per training sample (TFBO §5.2; benchopt benchmark_bilevel); its ground truth is the logistic
problems' Newton solve (problems.logistic), its metrics score how well the weights flag corrupted labels.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.special import expit, logsumexp

from problems.base import Array, Batch
from problems.datasets import SOURCES, DataParams, Split, prepare
from problems.logistic import LogisticBilevel
from problems.registry import register
from problems.sampling import inner_index, outer_index
from problems.softmax import softmax
from problems.validation import param


def auc(scores: Array, positive: Array) -> float:
    """Area under the ROC curve of `scores` for the boolean labels `positive` (ties count half)."""
    from scipy.stats import rankdata  # imported here: scipy.stats costs ~40 MB and a second at start-up

    ranks = rankdata(scores)
    n_pos = int(positive.sum())
    n_neg = positive.size - n_pos
    return float((ranks[positive].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg))


# ---------------------------------------------------------------- data hyper-cleaning
def corrupt_labels(rng: np.random.Generator, labels: Array, n_classes: int, p: float) -> tuple[Array, Array]:
    """Each label replaced by a uniform random class with probability p (benchmark_bilevel's scheme).

    Returns the noisy labels and the mask of labels that actually changed.
    """
    hit = rng.random(labels.size) < p
    noisy = labels.copy()
    noisy[hit] = rng.integers(0, n_classes, size=int(hit.sum()))
    return noisy, noisy != labels


class HyperCleaning(LogisticBilevel):
    """Per-sample weights σ(x_i) on a corrupted training set; multinomial logistic inner model."""

    def __init__(self, data: Split, noisy_labels: Array, corrupted: Array, reg: float, x_init: float = -2.0) -> None:
        self.K, self.p = data.n_classes, data.n_features
        self.D, self.c = data.X_train, noisy_labels
        self.Dv, self.cv = data.X_val, data.y_val
        self.Dt, self.ct = data.X_test, data.y_test
        self.corrupted = corrupted
        self.reg, self.x_init = reg, x_init
        self.dim_x, self.dim_y = len(noisy_labels), self.p * self.K
        self._set_sizes(len(noisy_labels), len(data.y_val))
        self._init_cache()

    def _scores(self, D: Array, y: Array) -> Array:
        return D @ y.reshape(self.p, self.K)

    def _ce(self, Z: Array, labels: Array) -> Array:
        return logsumexp(Z, axis=1) - Z[np.arange(len(labels)), labels]

    def _residual(self, Z: Array, labels: Array) -> Array:
        R = softmax(Z, axis=1)
        R[np.arange(len(labels)), labels] -= 1.0  # softmax − one-hot = ∂CE/∂Z
        return R

    def _train(self, batch: Batch) -> tuple[Array, Array, Array | None]:
        idx = inner_index(batch)
        if idx is None:
            return self.D, self.c, None
        return self._train_rows.rows("D", self.D, idx), self._train_rows.rows("c", self.c, idx), idx

    def _val(self, batch: Batch) -> tuple[Array, Array]:
        idx = outer_index(batch)
        if idx is None:
            return self.Dv, self.cv
        return self._val_rows.rows("D", self.Dv, idx), self._val_rows.rows("c", self.cv, idx)

    def _per_sample_x(self, idx: Array | None, x: Array, values: Array) -> Array:
        """(1/B) σ'(x_i) values_i accumulated on each training index (repeats add up)."""
        xi = x if idx is None else x[idx]
        w = expit(xi) * expit(-xi) * values / len(values)
        return w if idx is None else np.bincount(idx, weights=w, minlength=self.dim_x)

    def f(self, x: Array, y: Array, batch: Batch = None) -> float:
        D, c = self._val(batch)
        return float(np.mean(self._ce(self._scores(D, y), c)))

    def grad_y_f(self, x: Array, y: Array, batch: Batch = None) -> Array:
        D, c = self._val(batch)
        return (D.T @ self._residual(self._scores(D, y), c)).ravel() / len(c)

    def grad_f(self, x: Array, y: Array, batch: Batch = None) -> tuple[Array, Array]:
        return np.zeros(self.dim_x), self.grad_y_f(x, y, batch)

    def g(self, x: Array, y: Array, batch: Batch = None) -> float:
        D, c, idx = self._train(batch)
        s = expit(x if idx is None else x[idx])
        return float(np.mean(s * self._ce(self._scores(D, y), c)) + self.reg * y @ y)

    def grad_y_g(self, x: Array, y: Array, batch: Batch = None) -> Array:
        D, c, idx = self._train(batch)
        s = expit(x if idx is None else x[idx])
        R = self._residual(self._scores(D, y), c)
        return (D.T @ (s[:, None] * R)).ravel() / len(c) + 2 * self.reg * y

    def grad_g(self, x: Array, y: Array, batch: Batch = None) -> tuple[Array, Array]:
        D, c, idx = self._train(batch)
        xi = x if idx is None else x[idx]
        Z = self._scores(D, y)
        R = self._residual(Z, c)
        gy = (D.T @ (expit(xi)[:, None] * R)).ravel() / len(c) + 2 * self.reg * y
        return self._per_sample_x(idx, x, self._ce(Z, c)), gy

    def hvp_yy_g(self, x: Array, y: Array, v: Array, batch: Batch = None) -> Array:
        D, c, idx = self._train(batch)
        s = expit(x if idx is None else x[idx])
        P = softmax(self._scores(D, y), axis=1)
        Q = self._scores(D, v)
        R = P * (Q - np.sum(P * Q, axis=1, keepdims=True))  # (diag p − p pᵀ) q per sample
        return (D.T @ (s[:, None] * R)).ravel() / len(c) + 2 * self.reg * v

    def cross_xy_g(self, x: Array, y: Array, v: Array, batch: Batch = None) -> Array:
        D, c, idx = self._train(batch)
        R = self._residual(self._scores(D, y), c)
        return self._per_sample_x(idx, x, np.sum(R * self._scores(D, v), axis=1))

    # ---- per-sample oracles (rows: one sample each) ----
    def _rows_y(self, D: Array, R: Array) -> Array:
        """Rows vec(d_i r_iᵀ) for per-sample score gradients r_i (the y = vec(W) layout)."""
        return np.einsum("bp,bk->bpk", D, R).reshape(len(D), -1)

    def grad_f_samples(self, x: Array, y: Array, idx: Array) -> tuple[Array, Array]:
        D, c = self.Dv[idx], self.cv[idx]
        return np.zeros((len(idx), self.dim_x)), self._rows_y(D, self._residual(self._scores(D, y), c))

    def grad_y_g_samples(self, x: Array, y: Array, idx: Array) -> Array:
        D, c = self.D[idx], self.c[idx]
        R = expit(x[idx])[:, None] * self._residual(self._scores(D, y), c)
        return self._rows_y(D, R) + 2 * self.reg * y

    def hvp_yy_g_samples(self, x: Array, y: Array, v: Array, idx: Array) -> Array:
        D = self.D[idx]
        P = softmax(self._scores(D, y), axis=1)
        Q = self._scores(D, v)
        R = expit(x[idx])[:, None] * P * (Q - np.sum(P * Q, axis=1, keepdims=True))
        return self._rows_y(D, R) + 2 * self.reg * v

    def cross_xy_g_samples(self, x: Array, y: Array, v: Array, idx: Array) -> Array:
        # Sample i depends on x through σ(x_i) only: row k is zero except at column idx[k].
        D, c = self.D[idx], self.c[idx]
        xi = x[idx]
        values = np.sum(self._residual(self._scores(D, y), c) * self._scores(D, v), axis=1)
        out = np.zeros((len(idx), self.dim_x))
        out[np.arange(len(idx)), idx] = expit(xi) * expit(-xi) * values
        return out

    def initial_point(self) -> tuple[Array, Array]:
        return np.full(self.dim_x, self.x_init), np.zeros(self.dim_y)

    def _accuracy(self, D: Array, labels: Array, y: Array) -> float:
        return float(np.mean(np.argmax(self._scores(D, y), axis=1) == labels))

    def metrics(self, x: Array, y: Array) -> dict[str, float]:
        out = {"test_accuracy": self._accuracy(self.Dt, self.ct, y),
               "val_accuracy": self._accuracy(self.Dv, self.cv, y)}
        if 0 < self.corrupted.sum() < self.corrupted.size:
            out["corruption_auc"] = auc(-x, self.corrupted)  # low weight should flag a corrupted label
        return out


@dataclass(frozen=True)
class HyperCleaningParams(DataParams):
    """Data source, corruption and ridge constant of hyper_cleaning."""

    dataset: str = param("digits", "str", "data source", choices=SOURCES)
    corruption: float = param(0.1, "probability", "probability p that a training label is replaced (TFBO 0.1)")
    reg: float = param(0.2, "positive", "C in C‖W‖² (benchmark_bilevel's 0.2)")
    x_init: float = param(-2.0, "real", "every sample log-odds weight of the starting x (the benchmark's −2)")


@register("hyper_cleaning", HyperCleaningParams)
def build_hyper_cleaning(p: HyperCleaningParams, seed: int) -> HyperCleaning:
    """Per-sample weights cleaning corrupted labels, multinomial logistic regression (TFBO §5.2)."""
    rng = np.random.default_rng(seed)
    data = prepare(p, rng)
    noisy, changed = corrupt_labels(rng, data.y_train, data.n_classes, p.corruption)
    return HyperCleaning(data, noisy, changed, p.reg, p.x_init)
