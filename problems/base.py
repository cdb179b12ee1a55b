"""The problem contract: oracles, batches, constraints and ground truth.

A problem instance is min_x F(x) = f(x, y*(x)), y*(x) = argmin_{y in Y(x)} g(x, y). Oracles take an
optional `batch` (from `sample_batch`); `batch=None` is the exact full-batch oracle. Ground-truth
methods (`y_star`, `F`, `grad_F`, `lambda_star`, `metrics`) are for evaluation only and are hidden from
algorithms by the counting wrapper.
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from collections.abc import Sequence
from typing import Any

import numpy as np

from problems.gather import frozen_indices

Array = np.ndarray
Batch = Any  # index array for finite sums, a noise draw for noisy oracles; opaque to algorithms

#: Names an algorithm must never see (evaluation-only ground truth).
GROUND_TRUTH = frozenset({"y_star", "F", "grad_F", "lambda_star", "x_opt", "metrics", "params",
                          "y_star_rows", "grad_F_rows", "metrics_rows"})

#: Metric a problem sets to 1.0 at an x where g is not strongly convex in y, so y*(x), F(x) and ∇F(x)
#: are not defined (they are NaN there): the run loop records the NaNs instead of calling it divergence.
NOT_STRONGLY_CONVEX = "gt/not_strongly_convex"


@dataclass(frozen=True)
class LinearConstraints:
    """Lower-level constraints h(x, y) = A x − B y − b ≤ 0, one row per constraint."""

    A: Array
    B: Array
    b: Array

    def h(self, x: Array, y: Array) -> Array:
        """Constraint values h(x, y)."""
        return self.A @ x - self.B @ y - self.b

    def violation(self, x: Array, y: Array) -> float:
        """Euclidean norm of the positive part of h(x, y)."""
        return float(np.linalg.norm(np.maximum(self.h(x, y), 0.0)))


class BilevelProblem(ABC):
    """One seeded bilevel instance. Subclasses implement the oracles and ground truth."""

    name: str = "problem"
    dim_x: int
    dim_y: int
    #: Number of samples of a finite sum (None for a deterministic or a noise-driven problem).
    n_samples: int | None = None
    #: True when `sample_batch` gives random (minibatch or noisy) oracles.
    stochastic: bool = False
    #: Lower-level linear constraints, or None when y is unconstrained.
    constraints: LinearConstraints | None = None

    # ---- oracles (counted when seen through CountingProblem) ----
    @abstractmethod
    def f(self, x: Array, y: Array, batch: Batch = None) -> float:
        """Upper-level value f(x, y)."""

    @abstractmethod
    def g(self, x: Array, y: Array, batch: Batch = None) -> float:
        """Lower-level value g(x, y)."""

    @abstractmethod
    def grad_f(self, x: Array, y: Array, batch: Batch = None) -> tuple[Array, Array]:
        """(∇x f, ∇y f) at (x, y)."""

    @abstractmethod
    def grad_g(self, x: Array, y: Array, batch: Batch = None) -> tuple[Array, Array]:
        """(∇x g, ∇y g) at (x, y)."""

    def grad_y_g(self, x: Array, y: Array, batch: Batch = None) -> Array:
        """∇y g alone; override when it is cheaper than the full gradient."""
        return self.grad_g(x, y, batch)[1]

    def grad_y_f(self, x: Array, y: Array, batch: Batch = None) -> Array:
        """∇y f alone; override when it is cheaper than the full gradient."""
        return self.grad_f(x, y, batch)[1]

    @abstractmethod
    def hvp_yy_g(self, x: Array, y: Array, v: Array, batch: Batch = None) -> Array:
        """∇²yy g(x, y) · v, in R^{dim_y}."""

    @abstractmethod
    def cross_xy_g(self, x: Array, y: Array, v: Array, batch: Batch = None) -> Array:
        """∇²xy g(x, y) · v, in R^{dim_x} for v in R^{dim_y}."""

    def hessian_yy_g(self, x: Array, y: Array, batch: Batch = None) -> Array:
        """Dense ∇²yy g (dim_y × dim_y); only for algorithms that ask for it explicitly."""
        return np.column_stack([self.hvp_yy_g(x, y, e, batch) for e in np.eye(self.dim_y)])

    def jacobian_xy_g(self, x: Array, y: Array, batch: Batch = None) -> Array:
        """Dense ∇²xy g (dim_x × dim_y); only for algorithms that ask for it explicitly."""
        return np.column_stack([self.cross_xy_g(x, y, e, batch) for e in np.eye(self.dim_y)])

    # ---- stacked oracles: row k of X, Y (and V) is one run's point, batches[k] its minibatch ----
    # (algorithms.stacked advances K runs at once). These loop over the rows, correct for any problem;
    # a family overrides the ones it can compute as one stacked product (batches None: full batch).
    def f_rows(self, X: Array, Y: Array, batches: Sequence[Batch] | None = None) -> Array:
        """f at each row: (K,)."""
        return np.array([self.f(x, y, b) for x, y, b in zip(X, Y, _per_row(batches, len(X)))])

    def g_rows(self, X: Array, Y: Array, batches: Sequence[Batch] | None = None) -> Array:
        """g at each row: (K,)."""
        return np.array([self.g(x, y, b) for x, y, b in zip(X, Y, _per_row(batches, len(X)))])

    def grad_f_rows(self, X: Array, Y: Array, batches: Sequence[Batch] | None = None) -> tuple[Array, Array]:
        """(∇x f, ∇y f) at each row: (K, dim_x), (K, dim_y)."""
        pairs = [self.grad_f(x, y, b) for x, y, b in zip(X, Y, _per_row(batches, len(X)))]
        return np.array([gx for gx, _ in pairs]), np.array([gy for _, gy in pairs])

    def grad_g_rows(self, X: Array, Y: Array, batches: Sequence[Batch] | None = None) -> tuple[Array, Array]:
        """(∇x g, ∇y g) at each row."""
        pairs = [self.grad_g(x, y, b) for x, y, b in zip(X, Y, _per_row(batches, len(X)))]
        return np.array([gx for gx, _ in pairs]), np.array([gy for _, gy in pairs])

    def grad_y_f_rows(self, X: Array, Y: Array, batches: Sequence[Batch] | None = None) -> Array:
        """∇y f at each row."""
        return np.array([self.grad_y_f(x, y, b) for x, y, b in zip(X, Y, _per_row(batches, len(X)))])

    def grad_y_g_rows(self, X: Array, Y: Array, batches: Sequence[Batch] | None = None) -> Array:
        """∇y g at each row."""
        return np.array([self.grad_y_g(x, y, b) for x, y, b in zip(X, Y, _per_row(batches, len(X)))])

    def hvp_yy_g_rows(self, X: Array, Y: Array, V: Array, batches: Sequence[Batch] | None = None) -> Array:
        """∇²yy g · v at each row."""
        return np.array([self.hvp_yy_g(x, y, v, b) for x, y, v, b in zip(X, Y, V, _per_row(batches, len(X)))])

    def cross_xy_g_rows(self, X: Array, Y: Array, V: Array, batches: Sequence[Batch] | None = None) -> Array:
        """∇²xy g · v at each row."""
        return np.array([self.cross_xy_g(x, y, v, b) for x, y, v, b in zip(X, Y, V, _per_row(batches, len(X)))])

    def grad_f_samples_rows(self, X: Array, Y: Array, idx: Array) -> tuple[Array, Array]:
        """`grad_f_samples` of each row on its indices idx[k] (idx 1-D: the same for every row): (K, b, ·)."""
        pairs = [self.grad_f_samples(x, y, i) for x, y, i in zip(X, Y, _index_rows(idx, len(X)))]
        return np.array([gx for gx, _ in pairs]), np.array([gy for _, gy in pairs])

    def grad_y_g_samples_rows(self, X: Array, Y: Array, idx: Array) -> Array:
        """`grad_y_g_samples` of each row: (K, b, dim_y)."""
        return np.array([self.grad_y_g_samples(x, y, i) for x, y, i in zip(X, Y, _index_rows(idx, len(X)))])

    def hvp_yy_g_samples_rows(self, X: Array, Y: Array, V: Array, idx: Array) -> Array:
        """`hvp_yy_g_samples` of each row: (K, b, dim_y)."""
        return np.array([self.hvp_yy_g_samples(x, y, v, i) for x, y, v, i in zip(X, Y, V, _index_rows(idx, len(X)))])

    def cross_xy_g_samples_rows(self, X: Array, Y: Array, V: Array, idx: Array) -> Array:
        """`cross_xy_g_samples` of each row: (K, b, dim_x)."""
        return np.array([self.cross_xy_g_samples(x, y, v, i) for x, y, v, i in zip(X, Y, V, _index_rows(idx, len(X)))])

    def project_x_rows(self, X: Array) -> Array:
        """Proj_X of each row (X itself when X is the whole space)."""
        if type(self).project_x is BilevelProblem.project_x:
            return X
        return np.array([self.project_x(x) for x in X])

    def project_y_rows(self, Y: Array) -> Array:
        """Proj_Y of each row (Y itself when Y is the whole space)."""
        if type(self).project_y is BilevelProblem.project_y:
            return Y
        return np.array([self.project_y(y) for y in Y])

    # ---- per-sample oracles of a finite sum (the memory of SAGA-type methods) ----
    # `idx` indexes one level's samples (g's for the g-oracles, f's for grad_f_samples); row k is the
    # oracle of sample idx[k] alone, so the mean of the rows is the minibatch oracle on those samples.
    def sample_counts(self) -> tuple[int, int]:
        """(samples of g, samples of f); both n_samples unless the levels average different sets."""
        if self.n_samples is None:
            raise TypeError(f"problem '{self.name}' is not a finite sum")
        return self.n_samples, self.n_samples

    def grad_f_samples(self, x: Array, y: Array, idx: Array) -> tuple[Array, Array]:
        """Per-sample (∇x f_j, ∇y f_j) for f's samples j in idx: arrays (len(idx), dim_x), (len(idx), dim_y)."""
        raise NotImplementedError(f"problem '{self.name}' has no per-sample oracles")

    def grad_y_g_samples(self, x: Array, y: Array, idx: Array) -> Array:
        """Per-sample ∇y g_i for g's samples i in idx: (len(idx), dim_y)."""
        raise NotImplementedError(f"problem '{self.name}' has no per-sample oracles")

    def hvp_yy_g_samples(self, x: Array, y: Array, v: Array, idx: Array) -> Array:
        """Per-sample ∇²yy g_i · v: (len(idx), dim_y)."""
        raise NotImplementedError(f"problem '{self.name}' has no per-sample oracles")

    def cross_xy_g_samples(self, x: Array, y: Array, v: Array, idx: Array) -> Array:
        """Per-sample ∇²xy g_i · v: (len(idx), dim_x)."""
        raise NotImplementedError(f"problem '{self.name}' has no per-sample oracles")

    # ---- sampling, sets, start ----
    def sample_batch(self, rng: np.random.Generator, size: int) -> Batch:
        """A minibatch of `size` indices drawn with `rng` (None for a deterministic problem).

        The indices are read-only, so oracles sharing the batch may share its gathered rows (problems.gather).
        """
        if self.n_samples is None:
            return None
        return frozen_indices(rng.integers(0, self.n_samples, size=size))

    def sample_batches(self, rng: np.random.Generator, size: int, count: int) -> list[Batch]:
        """`count` minibatches: the same batches, and the same end state of `rng`, as `count` sample_batch calls.

        Index minibatches come from one draw (a generator hands out its numbers in sequence across
        calls, tests/problems/test_sampling.py), which saves the draw's fixed cost (~6 µs) per extra
        minibatch; a problem with its own `sample_batch` has it called `count` times in turn.
        """
        if type(self).sample_batch is not BilevelProblem.sample_batch or self.n_samples is None:
            return [self.sample_batch(rng, size) for _ in range(count)]
        drawn = frozen_indices(rng.integers(0, self.n_samples, size=count * size))
        return [drawn[k * size:(k + 1) * size] for k in range(count)]  # read-only views of a read-only array

    def batches_drawn_whole(self) -> bool:
        """True when a minibatch is all drawn when made (no generator kept to draw from later): minibatches
        drawn ahead are then the ones drawn when used (algorithms.minibatch_stream). Index minibatches
        (`index_bounds`) are; a problem that draws otherwise says so itself (False until it does)."""
        return self.index_bounds() is not None

    def index_bounds(self) -> tuple[int, ...] | None:
        """The index draws that make one minibatch, in draw order: `size` indices below each bound, drawn
        as `rng.integers(0, bound, size)` (then an algorithm may decode them from numbers drawn ahead,
        algorithms.index_stream); None when a minibatch is drawn otherwise. A problem with its own
        `sample_batch` says so itself (None until it does)."""
        if type(self).sample_batch is not BilevelProblem.sample_batch or self.n_samples is None:
            return None
        return (self.n_samples,)

    def batch_of(self, *indices: Array) -> Batch:
        """The minibatch made of one read-only index array per `index_bounds` entry."""
        return indices[0]

    def batch_size(self, batch: Batch) -> int:
        """Samples a batch touches (n_samples, or 1, for the full batch)."""
        if batch is None:
            return self.n_samples or 1
        return batch.size if type(batch) is np.ndarray else int(np.size(batch))

    def samples_touched(self, kind: str, batch: Batch) -> int:
        """Samples an oracle of `kind` (see counting.ORACLE_KINDS) touches on `batch`.

        `batch_size` by default; problems whose f and g sum over different sample sets override it.
        """
        return self.batch_size(batch)

    def project_x(self, x: Array) -> Array:
        """Euclidean projection onto the outer feasible set X (identity when unconstrained)."""
        return x

    def project_y(self, y: Array) -> Array:
        """Euclidean projection onto a simple lower-level set Y such as a box (identity by default)."""
        return y

    @abstractmethod
    def initial_point(self) -> tuple[Array, Array]:
        """The instance's starting (x0, y0) (fresh copies)."""

    # ---- ground truth (evaluation only) ----
    @abstractmethod
    def y_star(self, x: Array) -> Array:
        """Lower-level solution y*(x), exact or solved to 1e-10."""

    def F(self, x: Array) -> float:
        """Value function F(x) = f(x, y*(x))."""
        return float(self.f(x, self.y_star(x)))

    @abstractmethod
    def grad_F(self, x: Array) -> Array:
        """Exact hypergradient ∇F(x)."""

    # Stacked ground truth (row k: one run's x), for evaluating a batch of runs at once; loops by default.
    def y_star_rows(self, X: Array) -> Array:
        """y*(x) of each row: (K, dim_y)."""
        return np.array([self.y_star(x) for x in X])

    def grad_F_rows(self, X: Array, Ys: Array | None = None) -> Array:
        """∇F(x) of each row: (K, dim_x); `Ys`, y_star_rows(X) when the caller has it (a family may use it)."""
        return np.array([self.grad_F(x) for x in X])

    def metrics_rows(self, X: Array, Y: Array) -> list[dict[str, float]]:
        """`metrics` of each row (none without a `metrics` of the problem's own)."""
        if type(self).metrics is BilevelProblem.metrics:
            return [{} for _ in range(len(X))]
        return [self.metrics(x, y) for x, y in zip(X, Y)]

    def lambda_star(self, x: Array) -> Array | None:
        """Lower-level multipliers at y*(x) (None when unconstrained)."""
        return None

    def x_opt(self) -> Array | None:
        """A global minimiser of F when known (for optimality gaps), else None."""
        return None

    def metrics(self, x: Array, y: Array) -> dict[str, float]:
        """Problem-specific evaluation metrics (e.g. test accuracy); none by default."""
        return {}


class OnlineProblem(ABC):
    """A sequence of bilevel instances (f_t, g_t), t = 1..horizon, sharing dimensions and X."""

    name: str = "online"
    dim_x: int
    dim_y: int
    horizon: int

    @abstractmethod
    def at(self, t: int) -> BilevelProblem:
        """The instance at time t (1-based)."""

    def project_x(self, x: Array) -> Array:
        """Projection onto the shared outer set X."""
        return x

    @abstractmethod
    def initial_point(self) -> tuple[Array, Array]:
        """The starting (x1, y0)."""

    def variation(self) -> dict[str, float]:
        """Path quantities of the sequence where computable (V_T, H_{2,T}); empty by default."""
        return {}


def _per_row(batches: Sequence[Batch] | None, count: int) -> Sequence[Batch]:
    """One minibatch per row: the rows' own, or None (full batch) for each."""
    return (None,) * count if batches is None else batches


def _index_rows(idx: Array, count: int) -> Sequence[Array]:
    """Each row's sample indices: idx's rows, or the one 1-D idx for every row."""
    return (idx,) * count if idx.ndim == 1 else idx


def stacked_indices(batches: Sequence[Batch]) -> Array:
    """The runs' index minibatches (equal sizes) as one (K, batch) array."""
    return np.stack(batches)


def gradient_mapping(project_x, x: Array, grad: Array, gamma: float) -> Array:
    """G_X(x, g, γ) = (x − Proj_X(x − γ g)) / γ (F2OBO paper, eq. 3)."""
    return (x - project_x(x - gamma * grad)) / gamma
