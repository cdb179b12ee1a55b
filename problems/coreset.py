"""Coreset selection for continual learning (TFBO §5.3, after BCSR: Hao, Ji & Liu, NeurIPS 2023).

For each task t of a stream (problems.continual) with pool P_t of n_t training samples, the BCSR formulation
selects a coreset through a distribution λ_t on the simplex over P_t:

    g_t(λ_t, θ_t) = Σ_{i∈P_t} λ_i l_i(θ_t) + (μ/2)‖θ_t‖²,      θ_t*(λ_t) = argmin g_t,
    f_t(λ_t, θ_t) = (1/n_t) Σ_{i∈P_t} l_i(θ_t) + C R_K(λ_t),   R_K(λ) = −Σ_{k≤K} E_z (λ + δ z)_[k],

with l_i the cross-entropy of a multinomial logistic model θ_t ∈ R^{p×m} on the task's m classes (the inner
"proxy" model of BCSR, a head per task) and R_K the smoothed top-K regularizer, which rewards mass on K
entries. The ridge μ > 0 makes g_t strongly convex. The coreset of task t is the K largest entries of λ_t.

How the stream fits the run loop: the T selection problems are independent given the data (BCSR selects a
task's coreset from that task's samples), so the problem is their sum over stacked variables,
x = (λ_1, …, λ_T) on a product of simplices (`project_x` projects each block) and y = (θ_1, …, θ_T),
F = Σ_t F_t. Any offline algorithm (D-TFBO, S-TFBO, BCSR, …) then runs on it unchanged, and the continual
part is evaluation: `metrics` takes the top-K coreset of every block as the replay memory of the learner
of problems.continual and reports its accuracy matrix's A_T and FGT_T (plus `memory_mass`, the share of
λ on the coresets). The difference from a sequential selection is that one run's adaptive step sizes and
minibatches are shared by the tasks. (An OnlineProblem with a task per time step would not do: the run loop
runs only online algorithms on those, and D-TFBO, S-TFBO and BCSR are offline.) So the formulation has no
"upper loss against task" curve (TFBO Fig. 3): every task's selection runs from the first iteration.

R_K's expectation is estimated with `draws` fixed seeded draws of z per task (common random numbers), so f
is deterministic and piecewise linear in λ; ∇R_K is minus the mean indicator of the top-K entries.
Minibatches are index draws over all N = Σ n_t samples, scaled by N/B so that both levels are unbiased.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np
from scipy.special import logsumexp

from problems.base import Array, Batch, BilevelProblem
from problems.continual import (TaskStream, accuracy_matrix, average_accuracy, forgetting, smallest_task,
                                split_digits)
from problems.bundled_data import load_bundled
from problems.newton import newton_minimize
from problems.registry import register
from problems.softmax import softmax
from problems.validation import Params, param

SCENARIOS = ("balanced", "imbalanced")


def project_simplex(v: Array) -> Array:
    """Euclidean projection of v onto the probability simplex {w ≥ 0, Σ w = 1} (sort-based)."""
    u = np.sort(v)[::-1]
    css = np.cumsum(u) - 1.0
    rho = np.flatnonzero(u - css / np.arange(1, v.size + 1) > 0)[-1]
    return np.maximum(v - css[rho] / (rho + 1.0), 0.0)


def top_k(values: Array, k: int) -> Array:
    """Indices of the k largest entries of each row (ties: the lower index first)."""
    order = np.argsort(-values, axis=-1, kind="stable")
    return order[..., :k]


class SmoothedTopK:
    """R_K(λ) = −(1/S) Σ_s Σ_{k≤K} (λ + δ z_s)_[k] over S fixed draws z_s ~ N(0, I)."""

    def __init__(self, k: int, delta: float, draws: Array) -> None:
        self.k, self.delta, self.Z = k, delta, draws

    def value(self, lam: Array) -> float:
        P = lam + self.delta * self.Z
        return -float(np.take_along_axis(P, top_k(P, self.k), axis=1).sum() / len(self.Z))

    def grad(self, lam: Array) -> Array:
        idx = top_k(lam + self.delta * self.Z, self.k)
        return -np.bincount(idx.ravel(), minlength=lam.size) / len(self.Z)


class CoresetSelection(BilevelProblem):
    """The T per-task BCSR selection problems side by side (module docstring); y = vec of (T, p, m) weights."""

    stochastic = True

    def __init__(self, stream: TaskStream, coreset_size: int, reg: float, delta: float, mu: float,
                 draws: int, rng: np.random.Generator, replay: float = 1.0, learner_reg: float = 1e-4) -> None:
        self.stream, self.coreset_size = stream, coreset_size
        self.C, self.mu, self.replay, self.learner_reg = reg, mu, replay, learner_reg
        tasks = stream.tasks
        self.n_tasks, self.p = len(tasks), stream.n_features
        self.m = max(len(t.classes) for t in tasks)
        self.D = np.concatenate([t.X_train for t in tasks])
        # Labels local to their task (0..m−1): each task's proxy model is its own head.
        self.c = np.concatenate([np.searchsorted(t.classes, t.y_train) for t in tasks])
        sizes = [len(t.y_train) for t in tasks]
        self.task_of = np.repeat(np.arange(self.n_tasks), sizes)
        starts = np.concatenate([[0], np.cumsum(sizes)])
        #: The per-task blocks of x (public: selection baselines read them).
        self.blocks = tuple(slice(int(a), int(b)) for a, b in zip(starts[:-1], starts[1:]))
        self.w_outer = 1.0 / np.asarray(sizes, dtype=float)[self.task_of]
        self.regularizers = [SmoothedTopK(coreset_size, delta, rng.standard_normal((draws, n))) for n in sizes]
        self.n_samples = int(starts[-1])
        self._all = np.arange(self.n_samples)
        self.dim_x, self.dim_y = self.n_samples, self.n_tasks * self.p * self.m
        self._memo: tuple[Array, Array, Array | None] | None = None
        self._memory_cache: dict[tuple, tuple[float, float]] = {}

    # ---- the model ----
    def _rows(self, batch: Batch) -> tuple[Array, float]:
        """Sample indices of the batch (all for None) and the scale N/B that makes sums over it unbiased."""
        if batch is None:
            return self._all, 1.0
        idx = np.asarray(batch)
        return idx, self.n_samples / len(idx)

    def _theta(self, y: Array) -> Array:
        return y.reshape(self.n_tasks, self.p, self.m)

    def _groups(self, idx: Array) -> list[tuple[int, Array | slice, Array]]:
        """(task, positions in idx, its feature rows) per task present in idx; slices for the full batch."""
        if len(idx) == self.n_samples and idx is self._all:
            return [(t, b, self.D[b]) for t, b in enumerate(self.blocks)]
        tasks = self.task_of[idx]
        return [(t, pos, self.D[idx[pos]]) for t in np.unique(tasks) for pos in [np.flatnonzero(tasks == t)]]

    def _scores(self, y: Array, idx: Array) -> Array:
        theta, Z = self._theta(y), np.empty((len(idx), self.m))
        for t, pos, D in self._groups(idx):
            Z[pos] = D @ theta[t]
        return Z

    def _losses(self, Z: Array, idx: Array) -> Array:
        return logsumexp(Z, axis=1) - Z[np.arange(len(idx)), self.c[idx]]

    def _residual(self, Z: Array, idx: Array) -> Array:
        R = softmax(Z, axis=1)
        R[np.arange(len(idx)), self.c[idx]] -= 1.0  # softmax − one-hot = ∂CE/∂Z
        return R

    def _to_theta(self, idx: Array, weights: Array, R: Array) -> Array:
        """Σ_i weights_i d_i r_iᵀ accumulated in each sample's task block, flattened like y."""
        G = np.zeros((self.n_tasks, self.p, self.m))
        for t, pos, D in self._groups(idx):
            G[t] = D.T @ (weights[pos, None] * R[pos])
        return G.ravel()

    def _regularizer(self, x: Array) -> float:
        return sum(r.value(x[b]) for r, b in zip(self.regularizers, self.blocks))

    def _regularizer_grad(self, x: Array) -> Array:
        return np.concatenate([r.grad(x[b]) for r, b in zip(self.regularizers, self.blocks)])

    # ---- oracles ----
    def f(self, x: Array, y: Array, batch: Batch = None) -> float:
        idx, scale = self._rows(batch)
        loss = scale * float(self.w_outer[idx] @ self._losses(self._scores(y, idx), idx))
        return loss + self.C * self._regularizer(x)

    def grad_y_f(self, x: Array, y: Array, batch: Batch = None) -> Array:
        idx, scale = self._rows(batch)
        return self._to_theta(idx, scale * self.w_outer[idx], self._residual(self._scores(y, idx), idx))

    def grad_f(self, x: Array, y: Array, batch: Batch = None) -> tuple[Array, Array]:
        return self.C * self._regularizer_grad(x), self.grad_y_f(x, y, batch)

    def g(self, x: Array, y: Array, batch: Batch = None) -> float:
        idx, scale = self._rows(batch)
        return scale * float(x[idx] @ self._losses(self._scores(y, idx), idx)) + 0.5 * self.mu * float(y @ y)

    def grad_y_g(self, x: Array, y: Array, batch: Batch = None) -> Array:
        idx, scale = self._rows(batch)
        R = self._residual(self._scores(y, idx), idx)
        return self._to_theta(idx, scale * x[idx], R) + self.mu * y

    def grad_g(self, x: Array, y: Array, batch: Batch = None) -> tuple[Array, Array]:
        idx, scale = self._rows(batch)
        Z = self._scores(y, idx)
        gx = np.bincount(idx, weights=scale * self._losses(Z, idx), minlength=self.dim_x)
        return gx, self._to_theta(idx, scale * x[idx], self._residual(Z, idx)) + self.mu * y

    def hvp_yy_g(self, x: Array, y: Array, v: Array, batch: Batch = None) -> Array:
        idx, scale = self._rows(batch)
        P = softmax(self._scores(y, idx), axis=1)
        Q = self._scores(v, idx)
        R = P * (Q - np.sum(P * Q, axis=1, keepdims=True))  # (diag p − p pᵀ) q per sample
        return self._to_theta(idx, scale * x[idx], R) + self.mu * v

    def cross_xy_g(self, x: Array, y: Array, v: Array, batch: Batch = None) -> Array:
        # ∂/∂λ_i of ∇θ g is ∇θ l_i: the product with v is ⟨r_i, d_iᵀ V_t⟩ at sample i.
        idx, scale = self._rows(batch)
        values = np.sum(self._residual(self._scores(y, idx), idx) * self._scores(v, idx), axis=1)
        return np.bincount(idx, weights=scale * values, minlength=self.dim_x)

    def hessian_yy_g(self, x: Array, y: Array, batch: Batch = None) -> Array:
        """Block-diagonal dense ∇²yy g (one (p·m)² block per task)."""
        idx, scale = self._rows(batch)
        P = softmax(self._scores(y, idx), axis=1)
        w = scale * x[idx]
        size = self.p * self.m
        H = np.zeros((self.dim_y, self.dim_y))
        for t, pos, D in self._groups(idx):
            Pt, wt = P[pos], w[pos]
            block = np.zeros((self.p, self.m, self.p, self.m))
            for k in range(self.m):  # curvature (diag p − p pᵀ)_{kl} of each sample, class pair by class pair
                for l in range(self.m):
                    curv = wt * Pt[:, k] * ((k == l) - Pt[:, l])
                    block[:, k, :, l] = D.T @ (curv[:, None] * D)
            H[t * size:(t + 1) * size, t * size:(t + 1) * size] = block.reshape(size, size)
        return H + self.mu * np.eye(self.dim_y)

    def project_x(self, x: Array) -> Array:
        return np.concatenate([project_simplex(x[b]) for b in self.blocks])

    def initial_point(self) -> tuple[Array, Array]:
        x = np.concatenate([np.full(b.stop - b.start, 1.0 / (b.stop - b.start)) for b in self.blocks])
        return x, np.zeros(self.dim_y)

    # ---- ground truth (evaluation only) ----
    def _solve(self, x: Array, y: Array, rhs: Array) -> Array:
        return np.linalg.solve(self.hessian_yy_g(x, y), rhs)

    def y_star(self, x: Array) -> Array:
        if self._memo is not None and np.array_equal(x, self._memo[0]):
            return self._memo[1].copy()
        # Cold-started (not from the last solution), so a value does not depend on what was evaluated before.
        y, _ = newton_minimize(lambda v: self.g(x, v), lambda v: self.grad_y_g(x, v),
                               lambda v, r: self._solve(x, v, r), np.zeros(self.dim_y))
        self._memo = (x.copy(), y, None)
        return y.copy()

    def grad_F(self, x: Array) -> Array:
        ys = self.y_star(x)
        if self._memo[2] is None:
            gx, gy = self.grad_f(x, ys)
            self._memo = (self._memo[0], ys, gx - self.cross_xy_g(x, ys, self._solve(x, ys, gy)))
        return self._memo[2].copy()

    def coresets(self, x: Array) -> list[Array]:
        """Per task: the pool indices of the K largest weights (the memory kept for replay), sorted."""
        return [np.sort(top_k(x[b], self.coreset_size)) for b in self.blocks]

    def continual(self, x: Array) -> tuple[float, float]:
        """(A_T, FGT_T) of the replay learner with the coresets of x (memoised on the coresets)."""
        memories = self.coresets(x)
        key = tuple(tuple(m) for m in memories)
        if key not in self._memory_cache:
            a = accuracy_matrix(self.stream, memories, self.replay, self.learner_reg)
            self._memory_cache[key] = (average_accuracy(a), forgetting(a))
        return self._memory_cache[key]

    def metrics(self, x: Array, y: Array) -> dict[str, float]:
        A, fgt = self.continual(x)
        mass = np.mean([np.sum(x[b][m]) for b, m in zip(self.blocks, self.coresets(x))])
        return {"A_T": A, "FGT_T": fgt, "memory_mass": float(mass)}


@dataclass(frozen=True)
class CoresetParams(Params):
    """Stream, coreset size and BCSR constants of coreset_selection (defaults: BCSR's code where it has them)."""

    n_tasks: int = param(5, "positive_int", "tasks of Split-digits (10 classes / n_tasks each): 1, 2 or 5")
    scenario: str = param("balanced", "str", "balanced, or imbalanced (one class per task thinned)",
                          choices=SCENARIOS)
    imbalance: float = param(0.2, "probability", "imbalanced only: share of training samples its thinned class keeps")
    test_fraction: float = param(0.3, "probability", "share of each class held out for test accuracy")
    pool_size: int | None = param(None, "optional_positive_int", "seeded subset of each task's training samples "
                                  "kept as its pool (null: all)")
    coreset_size: int = param(10, "positive_int", "K: samples kept per task (the top-K regularizer's K)")
    reg: float = param(0.1, "nonnegative", "C, the weight of the top-K regularizer (BCSR's beta 0.1)")
    delta: float = param(1e-3, "positive", "δ, the smoothing noise of the top-K regularizer (BCSR's 1e-3)")
    draws: int = param(32, "positive_int", "fixed draws of z estimating the regularizer's expectation")
    mu: float = param(1e-2, "positive", "ridge μ of the inner proxy model (makes g strongly convex)")
    replay: float = param(1.0, "nonnegative", "weight of each earlier task's coreset loss in the learner "
                          "(1: all tasks alike)")
    learner_reg: float = param(1e-4, "positive", "ridge of the continual learner")

    def validate(self) -> None:
        if self.n_tasks not in (1, 2, 5):
            self.fail("n_tasks", "1, 2 or 5 (10 digit classes split evenly, at least 2 per task)", self.n_tasks)
        if not 0 < self.test_fraction < 1:
            self.fail("test_fraction", "in (0, 1)", self.test_fraction)
        if self.scenario == "imbalanced" and self.imbalance <= 0:
            self.fail("imbalance", "in (0, 1] for the imbalanced scenario", self.imbalance)
        imbalance = self.imbalance if self.scenario == "imbalanced" else 1.0
        fewest = smallest_task(load_bundled("digits")[1], self.n_tasks, self.test_fraction, imbalance, self.pool_size)
        if self.coreset_size >= fewest:
            self.fail("coreset_size", f"below the smallest task's number of training samples ({fewest})",
                      self.coreset_size)


@lru_cache(maxsize=8)
def _stream(seed: int, n_tasks: int, test_fraction: float, imbalance: float, pool_size: int | None) -> TaskStream:
    # Cached: every trial of a study with this seed builds the same stream.
    return split_digits(np.random.default_rng([seed, 0]), n_tasks, test_fraction, imbalance, pool_size)


@register("coreset_selection", CoresetParams)
def build_coreset_selection(p: CoresetParams, seed: int) -> CoresetSelection:
    """BCSR coreset selection for continual learning on Split-digits, A_T/FGT_T metrics (TFBO §5.3)."""
    stream = _stream(seed, p.n_tasks, p.test_fraction, p.imbalance if p.scenario == "imbalanced" else 1.0,
                     p.pool_size)
    return CoresetSelection(stream, p.coreset_size, p.reg, p.delta, p.mu, p.draws, np.random.default_rng([seed, 1]),
                            p.replay, p.learner_reg)
