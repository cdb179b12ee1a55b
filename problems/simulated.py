"""The quadratic finite-sum problem of benchopt's benchmark_bilevel ("simulated", Dagréou et al. 2022).

Both levels are means of per-sample quadratics in (x, y) with rank-one Hessian blocks:

    h_i(x, y) = ½ (a_i·y)² + ½ (b_i·x)² + (c_i·x)(e_i·y) + l_i·y + m_i·x,

g the mean over n_inner such samples, f over n_outer independent ones. As in the benchmark's generator:
a_i = S_y z_i with S_y = Q diag(√geomspace(μ, L_yy)) Qᵀ (so E a_i a_iᵀ has spectrum [μ, L_yy]);
b_i = S_x w_i with one zero eigenvalue in S_x; c_i e_iᵀ = (U D z_i)(Vᵀ z_i)ᵀ with U D Vᵀ the SVD of a
Gaussian matrix whose singular values are replaced by geomspace(μ, L_cross); l_i, m_i standard normal.
Instances are redrawn (at most 20 times) until the value function F is strongly convex, as the
benchmark intends; its own test halves the cross terms of ∇²F and so also accepts slightly non-convex F
(e.g. at d = 400 with 1024 samples), which `convexity='benchmark'` reproduces. A minibatch oracle costs O(batch · d); full-batch oracles use the dense means.

`sample_dtype='float32'` keeps the per-sample arrays in single precision (half the memory; the benchmark's
JAX arrays are float32 by default): the instance is then the float64 draw rounded to float32, its dense
means are computed from the rounded samples in float64, and every oracle computes in float64, so the
ground truth stays exact for the stored instance.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.linalg as sla

from problems.base import Array, Batch
from problems.gather import RowCache
from problems.registry import register
from problems.rowwise import index_rows, level_indices, row_combinations, row_products
from problems.sampling import TwoSetFiniteSum, inner_index, outer_index
from problems.shared.errors import ParameterError
from problems.simulated_draw import SampleQuadratics, draw_level
from problems.validation import Params, param

MAX_DRAWS = 20
#: Smallest eigenvalue of ∇²F accepted (the benchmark's threshold).
MIN_CURVATURE = 1e-12


@dataclass(frozen=True)
class SimulatedParams(Params):
    """Parameters of the simulated quadratic (benchmark_bilevel defaults)."""

    dim_x: int = param(100, "positive_int", "outer dimension (benchmark: dim_outer)")
    dim_y: int = param(100, "positive_int", "inner dimension (benchmark: dim_inner)")
    n_samples_inner: int = param(1024, "positive_int", "samples of g")
    n_samples_outer: int = param(1024, "positive_int", "samples of f")
    mu: float = param(0.1, "positive", "smallest eigenvalue of every Hessian block (benchmark: mu_inner)")
    L_g_yy: float = param(1.0, "positive", "largest eigenvalue of E ∇²yy g (L_inner_inner)")
    L_g_xx: float = param(1.0, "positive", "largest eigenvalue of E ∇²xx g (L_outer_inner)")
    L_f_yy: float = param(1.0, "positive", "largest eigenvalue of E ∇²yy f (L_inner_outer)")
    L_f_xx: float = param(1.0, "positive", "largest eigenvalue of E ∇²xx f (L_outer_outer)")
    cross_g: float = param(0.1, "positive", "largest singular value of E ∇²xy g (L_cross_inner)")
    cross_f: float = param(0.1, "positive", "largest singular value of E ∇²xy f (L_cross_outer)")
    x_init: float = param(-2.0, "real", "every coordinate of the starting x (the benchmark's −2)")
    sample_dtype: str = param("float64", "str", "storage of the per-sample arrays; 'float32' halves their memory "
                              "(oracles still compute in float64)", choices=("float64", "float32"),
                              omit_at_default=True)  # added later: studies recorded before keep their run keys
    convexity: str = param("exact", "str", "redraw until ∇²F ≻ 0 ('exact'), until the benchmark's test "
                           "F_xx + ½(C_f J + JᵀC_fᵀ) + JᵀF_yy J ≻ 0 passes ('benchmark'), or keep the first "
                           "draw ('none')", choices=("exact", "benchmark", "none"))

    def validate(self) -> None:
        # Rank-one samples: the mean inner Hessian is invertible only with at least dim_y of them.
        if self.n_samples_inner < self.dim_y:
            self.fail("n_samples_inner", f"at least dim_y = {self.dim_y}", self.n_samples_inner)

    def array_bytes(self) -> float:
        """Each level's dense means (dx² + dy² + dx·dy, and as much for the SVD of the draw) and per-sample arrays
        (3n·(dx + dy))."""
        dx, dy = self.dim_x, self.dim_y
        return 8.0 * 3 * (dx * dx + dy * dy + dx * dy + (self.n_samples_inner + self.n_samples_outer) * (dx + dy))


class Simulated(TwoSetFiniteSum):
    """The benchmark_bilevel quadratic; see the module docstring."""

    def __init__(self, p: SimulatedParams, seed: int) -> None:
        self.dim_x, self.dim_y = p.dim_x, p.dim_y
        self._set_sizes(p.n_samples_inner, p.n_samples_outer)
        self.x_init = p.x_init
        self._row_caches = (RowCache(), RowCache())  # inner level, outer level
        for draw in np.random.SeedSequence(seed).spawn(MAX_DRAWS):
            self.inner = self.outer = None  # a rejected draw's arrays go before the next is drawn
            rng_g, rng_f = (np.random.default_rng(s) for s in draw.spawn(2))
            args = (p.dim_x, p.dim_y, p.mu)
            self.inner = draw_level(rng_g, p.n_samples_inner, *args, p.L_g_yy, p.L_g_xx, p.cross_g, p.sample_dtype)
            self.outer = draw_level(rng_f, p.n_samples_outer, *args, p.L_f_yy, p.L_f_xx, p.cross_f, p.sample_dtype)
            if self._inner_invertible() and self._accepted(p.convexity):
                return
        raise ParameterError(
            f"problem 'simulated': no instance with a strongly convex value function in {MAX_DRAWS} draws; "
            "raise 'n_samples_inner' and 'n_samples_outer', or set 'convexity' to 'benchmark' or 'none'"
        )

    def _accepted(self, convexity: str) -> bool:
        if convexity == "none":
            return True
        return np.linalg.eigvalsh(self.hessian_F(cross_weight=0.5 if convexity == "benchmark" else 1.0))[0] \
            >= MIN_CURVATURE

    def _inner_invertible(self) -> bool:
        try:
            self._H_chol = sla.cho_factor(self.inner.H_yy)
        except np.linalg.LinAlgError:
            return False
        return True

    # ---- per-level pieces: value, ∇x, ∇y of mean_i h_i over the batch ----
    # Minibatch rows come from a per-level RowCache: oracles sharing a batch gather its rows once.
    def _rows(self, q: SampleQuadratics, idx: Array, name: str) -> Array:
        return self._row_caches[q is self.outer].rows(name, getattr(q, name), idx)

    def _value(self, q: SampleQuadratics, x: Array, y: Array, idx: Array | None) -> float:
        if idx is None:
            return float(0.5 * y @ q.H_yy @ y + 0.5 * x @ q.H_xx @ x + x @ q.C @ y + q.l_mean @ y + q.m_mean @ x)
        rows = lambda name: self._rows(q, idx, name)  # noqa: E731
        ay, bx = rows("a") @ y, rows("b") @ x
        per = 0.5 * ay * ay + 0.5 * bx * bx + (rows("c") @ x) * (rows("e") @ y) + rows("l") @ y + rows("m") @ x
        return float(per.mean())

    def _grad_y(self, q: SampleQuadratics, x: Array, y: Array, idx: Array | None) -> Array:
        if idx is None:
            return q.H_yy @ y + q.C.T @ x + q.l_mean
        a, e, n = self._rows(q, idx, "a"), self._rows(q, idx, "e"), len(idx)
        # sum(0) / n is mean(0) operation for operation (numpy's mean divides the same sum), without its overhead.
        l_sum = self._rows(q, idx, "l").sum(0, dtype=np.float64)  # float64 even over float32 samples
        return ((a @ y) @ a + (self._rows(q, idx, "c") @ x) @ e) / n + l_sum / n

    def _grad_x(self, q: SampleQuadratics, x: Array, y: Array, idx: Array | None) -> Array:
        if idx is None:
            return q.H_xx @ x + q.C @ y + q.m_mean
        b, c, n = self._rows(q, idx, "b"), self._rows(q, idx, "c"), len(idx)
        m_sum = self._rows(q, idx, "m").sum(0, dtype=np.float64)
        return ((b @ x) @ b + (self._rows(q, idx, "e") @ y) @ c) / n + m_sum / n

    # ---- oracles ----
    def f(self, x: Array, y: Array, batch: Batch = None) -> float:
        return self._value(self.outer, x, y, outer_index(batch))

    def g(self, x: Array, y: Array, batch: Batch = None) -> float:
        return self._value(self.inner, x, y, inner_index(batch))

    def grad_f(self, x: Array, y: Array, batch: Batch = None) -> tuple[Array, Array]:
        idx = outer_index(batch)
        return self._grad_x(self.outer, x, y, idx), self._grad_y(self.outer, x, y, idx)

    def grad_g(self, x: Array, y: Array, batch: Batch = None) -> tuple[Array, Array]:
        idx = inner_index(batch)
        return self._grad_x(self.inner, x, y, idx), self._grad_y(self.inner, x, y, idx)

    def grad_y_f(self, x: Array, y: Array, batch: Batch = None) -> Array:
        return self._grad_y(self.outer, x, y, outer_index(batch))

    def grad_y_g(self, x: Array, y: Array, batch: Batch = None) -> Array:
        return self._grad_y(self.inner, x, y, inner_index(batch))

    def hvp_yy_g(self, x: Array, y: Array, v: Array, batch: Batch = None) -> Array:
        idx = inner_index(batch)
        if idx is None:
            return self.inner.H_yy @ v
        a = self._rows(self.inner, idx, "a")
        return (a @ v) @ a / len(idx)

    def cross_xy_g(self, x: Array, y: Array, v: Array, batch: Batch = None) -> Array:
        idx = inner_index(batch)
        if idx is None:
            return self.inner.C @ v
        return (self._rows(self.inner, idx, "e") @ v) @ self._rows(self.inner, idx, "c") / len(idx)

    # ---- stacked oracles (rows: one run each; algorithms.stacked): the dense means for the full batch, each
    # run's gathered sample rows (K, batch, d) in batched products for minibatches (idx: (K, batch)) ----
    @staticmethod
    def _sum_rows(u: Array, idx: Array) -> Array:
        return u[idx].sum(1, dtype=np.float64)  # float64 even over float32 samples

    def _value_rows(self, q: SampleQuadratics, X: Array, Y: Array, idx: Array | None) -> Array:
        if idx is None:
            rows = lambda A, B: np.einsum("ij,ij->i", A, B)  # noqa: E731
            return (0.5 * rows(Y @ q.H_yy.T, Y) + 0.5 * rows(X @ q.H_xx.T, X) + rows(X @ q.C, Y)
                    + Y @ q.l_mean + X @ q.m_mean)
        ay, bx = row_products(q.a[idx], Y), row_products(q.b[idx], X)
        per = (0.5 * ay * ay + 0.5 * bx * bx + row_products(q.c[idx], X) * row_products(q.e[idx], Y)
               + row_products(q.l[idx], Y) + row_products(q.m[idx], X))
        return per.mean(1)

    def _grad_y_rows(self, q: SampleQuadratics, X: Array, Y: Array, idx: Array | None) -> Array:
        if idx is None:
            return Y @ q.H_yy.T + X @ q.C + q.l_mean
        a, e, n = q.a[idx], q.e[idx], idx.shape[1]
        return (row_combinations(row_products(a, Y), a) + row_combinations(row_products(q.c[idx], X), e)) / n \
            + self._sum_rows(q.l, idx) / n

    def _grad_x_rows(self, q: SampleQuadratics, X: Array, Y: Array, idx: Array | None) -> Array:
        if idx is None:
            return X @ q.H_xx.T + Y @ q.C.T + q.m_mean
        b, c, n = q.b[idx], q.c[idx], idx.shape[1]
        return (row_combinations(row_products(b, X), b) + row_combinations(row_products(q.e[idx], Y), c)) / n \
            + self._sum_rows(q.m, idx) / n

    def f_rows(self, X: Array, Y: Array, batches=None) -> Array:
        return self._value_rows(self.outer, X, Y, level_indices(batches)[1])

    def g_rows(self, X: Array, Y: Array, batches=None) -> Array:
        return self._value_rows(self.inner, X, Y, level_indices(batches)[0])

    def grad_f_rows(self, X: Array, Y: Array, batches=None) -> tuple[Array, Array]:
        idx = level_indices(batches)[1]
        return self._grad_x_rows(self.outer, X, Y, idx), self._grad_y_rows(self.outer, X, Y, idx)

    def grad_g_rows(self, X: Array, Y: Array, batches=None) -> tuple[Array, Array]:
        idx = level_indices(batches)[0]
        return self._grad_x_rows(self.inner, X, Y, idx), self._grad_y_rows(self.inner, X, Y, idx)

    def grad_y_f_rows(self, X: Array, Y: Array, batches=None) -> Array:
        return self._grad_y_rows(self.outer, X, Y, level_indices(batches)[1])

    def grad_y_g_rows(self, X: Array, Y: Array, batches=None) -> Array:
        return self._grad_y_rows(self.inner, X, Y, level_indices(batches)[0])

    def hvp_yy_g_rows(self, X: Array, Y: Array, V: Array, batches=None) -> Array:
        idx = level_indices(batches)[0]
        if idx is None:
            return V @ self.inner.H_yy.T
        a = self.inner.a[idx]
        return row_combinations(row_products(a, V), a) / idx.shape[1]

    def cross_xy_g_rows(self, X: Array, Y: Array, V: Array, batches=None) -> Array:
        idx = level_indices(batches)[0]
        if idx is None:
            return V @ self.inner.C.T
        return row_combinations(row_products(self.inner.e[idx], V), self.inner.c[idx]) / idx.shape[1]

    # Per-sample oracles of each run (idx: (K, batch), or one batch for all): the single ones' rows, stacked.
    def grad_f_samples_rows(self, X: Array, Y: Array, idx: Array) -> tuple[Array, Array]:
        o, idx = self.outer, index_rows(idx, len(X))
        b, c, a, e = o.b[idx], o.c[idx], o.a[idx], o.e[idx]
        gx = row_products(b, X)[..., None] * b + row_products(e, Y)[..., None] * c + o.m[idx]
        gy = row_products(a, Y)[..., None] * a + row_products(c, X)[..., None] * e + o.l[idx]
        return gx, gy

    def grad_y_g_samples_rows(self, X: Array, Y: Array, idx: Array) -> Array:
        q, idx = self.inner, index_rows(idx, len(X))
        a, e = q.a[idx], q.e[idx]
        return row_products(a, Y)[..., None] * a + row_products(q.c[idx], X)[..., None] * e + q.l[idx]

    def hvp_yy_g_samples_rows(self, X: Array, Y: Array, V: Array, idx: Array) -> Array:
        a = self.inner.a[index_rows(idx, len(X))]
        return row_products(a, V)[..., None] * a

    def cross_xy_g_samples_rows(self, X: Array, Y: Array, V: Array, idx: Array) -> Array:
        idx = index_rows(idx, len(X))
        return row_products(self.inner.e[idx], V)[..., None] * self.inner.c[idx]

    # ---- per-sample oracles (rows: one sample each) ----
    def grad_f_samples(self, x: Array, y: Array, idx: Array) -> tuple[Array, Array]:
        o = self.outer
        b, c, a, e = o.b[idx], o.c[idx], o.a[idx], o.e[idx]
        gx = (b @ x)[:, None] * b + (e @ y)[:, None] * c + o.m[idx]
        gy = (a @ y)[:, None] * a + (c @ x)[:, None] * e + o.l[idx]
        return gx, gy

    def grad_y_g_samples(self, x: Array, y: Array, idx: Array) -> Array:
        q = self.inner
        a, e = q.a[idx], q.e[idx]
        return (a @ y)[:, None] * a + (q.c[idx] @ x)[:, None] * e + q.l[idx]

    def hvp_yy_g_samples(self, x: Array, y: Array, v: Array, idx: Array) -> Array:
        a = self.inner.a[idx]
        return (a @ v)[:, None] * a

    def cross_xy_g_samples(self, x: Array, y: Array, v: Array, idx: Array) -> Array:
        return (self.inner.e[idx] @ v)[:, None] * self.inner.c[idx]

    def hessian_yy_g(self, x: Array, y: Array, batch: Batch = None) -> Array:
        idx = inner_index(batch)
        if idx is None:
            return self.inner.H_yy.copy()
        a = self.inner.a[idx].astype(np.float64, copy=False)  # float32 samples: a float64 product
        return a.T @ a / len(idx)

    def jacobian_xy_g(self, x: Array, y: Array, batch: Batch = None) -> Array:
        idx = inner_index(batch)
        if idx is None:
            return self.inner.C.copy()
        c, e = (u[idx].astype(np.float64, copy=False) for u in (self.inner.c, self.inner.e))
        return c.T @ e / len(idx)

    def initial_point(self) -> tuple[Array, Array]:
        return np.full(self.dim_x, self.x_init), np.zeros(self.dim_y)

    # ---- ground truth ----
    def y_star(self, x: Array) -> Array:
        return -sla.cho_solve(self._H_chol, self.inner.C.T @ x + self.inner.l_mean)

    def grad_F(self, x: Array) -> Array:
        ys = self.y_star(x)
        gx, gy = self.grad_f(x, ys)
        return gx - self.inner.C @ sla.cho_solve(self._H_chol, gy)

    def y_star_rows(self, X: Array) -> Array:
        return -sla.cho_solve(self._H_chol, self.inner.C.T @ X.T + self.inner.l_mean[:, None]).T

    def grad_F_rows(self, X: Array, Ys: Array | None = None) -> Array:
        gx, gy = self.grad_f_rows(X, self.y_star_rows(X) if Ys is None else Ys)
        return gx - (self.inner.C @ sla.cho_solve(self._H_chol, gy.T)).T

    def hessian_F(self, cross_weight: float = 1.0) -> Array:
        """∇²F = F_xx + C_f J + Jᵀ C_fᵀ + Jᵀ F_yy J with J = dy*/dx = −H⁻¹ C_gᵀ (constant).

        `cross_weight` scales the C_f J terms (0.5 gives the benchmark's acceptance matrix).
        """
        J = -sla.cho_solve(self._H_chol, self.inner.C.T)
        o = self.outer
        CJ = cross_weight * (o.C @ J)
        return o.H_xx + CJ + CJ.T + J.T @ o.H_yy @ J

    def x_opt(self) -> Array | None:
        """The unique minimiser of F when F is strongly convex, else None."""
        H = self.hessian_F()
        if np.linalg.eigvalsh(H)[0] < MIN_CURVATURE:
            return None
        return np.linalg.solve(H, -self.grad_F(np.zeros(self.dim_x)))


@register("simulated", SimulatedParams)
def build_simulated(p: SimulatedParams, seed: int) -> Simulated:
    """benchmark_bilevel's quadratic finite sum (rank-one samples, separate f and g samples)."""
    return Simulated(p, seed)
