"""Closed-form quadratic bilevel problem, deterministic or finite-sum stochastic.

g(x, y) = ½ yᵀA y − yᵀC x + aᵀy,   f(x, y) = ½ (y − e)ᵀP (y − e) + ½ m‖x‖² + cᵀx.

The finite-sum form has n samples with low-rank structure whose mean is exactly the full problem:
A_i = μ₀I + U_iU_iᵀ, C_i = U_iV_iᵀ, P_i = p₀I + S_iS_iᵀ, a_i (U_i, S_i ∈ R^{dy×r}, V_i ∈ R^{dx×r}),
so a minibatch oracle costs O(batch · r · d), not O(d²). Each sample's r columns of U_i, V_i, S_i are
stored as r contiguous rows (arrays (n, r, d)), so a minibatch is a (batch · r) × d block and its
oracles are BLAS matrix–vector products on it; oracles sharing a minibatch gather it once (RowCache).

Any of A, C, P, a, e, c may be given as parameters instead of drawn from the seed (the dimensions
follow from them); the rest is still drawn, from the same random stream as without them.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.linalg as sla

from problems import matrices as mx
from problems.base import Array, Batch, BilevelProblem, stacked_indices
from problems.gather import RowCache
from problems.registry import register
from problems.rowwise import row_combinations, row_products, tiled
from problems.validation import Params, param


@dataclass(frozen=True)
class QuadraticParams(Params):
    """Parameters of the quadratic family."""

    dim_x: int = param(20, "positive_int", "outer dimension")
    dim_y: int = param(20, "positive_int", "inner dimension")
    mu: float = param(0.2, "positive", "smallest eigenvalue of the inner Hessian A")
    L: float = param(1.0, "positive", "largest eigenvalue of the inner Hessian A")
    cross: float = param(0.5, "nonnegative", "scale of the coupling C")
    outer_curvature: float = param(0.1, "real", "m in ½m‖x‖² (negative makes f non-convex in x)")
    n_samples: int | None = param(None, "optional_positive_int", "finite-sum size (null: deterministic)")
    rank: int = param(1, "positive_int", "rank r of each sample's inner Hessian term")
    sample_spread: float = param(1.0, "nonnegative", "spread of the per-sample linear terms a_i")
    A: list | None = param(None, "optional_matrix", "inner Hessian (dim_y × dim_y, symmetric positive definite; "
                           "null: drawn with spectrum [mu, L])")
    C: list | None = param(None, "optional_matrix", "coupling in g = ½yᵀAy − yᵀCx + aᵀy (dim_y × dim_x; null: drawn)")
    P: list | None = param(None, "optional_matrix", "outer Hessian in y (dim_y × dim_y, symmetric; positive definite "
                           "with n_samples; null: drawn)")
    a: list | None = param(None, "optional_vector", "inner linear term (dim_y; null: drawn)")
    e: list | None = param(None, "optional_vector", "outer target of y (dim_y; null: drawn)")
    c: list | None = param(None, "optional_vector", "outer linear term in x (dim_x; null: drawn)")

    @classmethod
    def implied(cls, values: dict) -> dict:
        """dim_y and dim_x from the given matrices and vectors, unless set."""
        out = dict(values)
        for name, dim, of in (("A", "dim_y", mx.rows_of), ("P", "dim_y", mx.rows_of), ("C", "dim_y", mx.rows_of),
                              ("a", "dim_y", mx.rows_of), ("e", "dim_y", mx.rows_of), ("C", "dim_x", mx.cols_of),
                              ("c", "dim_x", mx.rows_of)):
            if dim not in out and out.get(name) is not None and of(out[name]) is not None:
                out[dim] = of(out[name])
        return out

    def validate(self) -> None:
        if self.L < self.mu:
            self.fail("L", f"at least mu = {self.mu}", self.L)
        if self.n_samples is not None and self.n_samples * self.rank < self.dim_y:
            self.fail("rank", f"at least dim_y / n_samples = {self.dim_y / self.n_samples:g}", self.rank)
        dx, dy = self.dim_x, self.dim_y
        for name, shape in (("A", (dy, dy)), ("C", (dy, dx)), ("P", (dy, dy)), ("a", (dy,)), ("e", (dy,)), ("c", (dx,))):
            mx.require_shape(self, name, shape, f"dim_x = {dx}, dim_y = {dy}")
        mx.require_symmetric(self, "A")
        mx.require_positive_definite(self, "A", "g strongly convex in y")
        mx.require_symmetric(self, "P")
        if self.n_samples is not None:
            mx.require_positive_definite(self, "P", "the finite-sum form splits P − ½λmin(P)·I into samples")

    def array_bytes(self) -> float:
        """A, P and their Cholesky factors (dy²), C (dy × dx); with samples, U, S, V and their drafts (n·r·(5dy + dx))."""
        dx, dy, nr = self.dim_x, self.dim_y, (self.n_samples or 0) * self.rank
        return 8.0 * (4 * dy * dy + dy * dx + nr * (5 * dy + dx))


def random_rotation(rng: np.random.Generator, d: int) -> Array:
    """A Haar-random orthogonal d × d matrix."""
    q, r = np.linalg.qr(rng.standard_normal((d, d)))
    return q * np.sign(np.diag(r))


def spd_with_spectrum(rng: np.random.Generator, d: int, lo: float, hi: float) -> Array:
    """Random rotation of log-spaced eigenvalues in [lo, hi]."""
    q = random_rotation(rng, d)
    eig = np.geomspace(lo, hi, d) if d > 1 else np.array([lo])
    return (q * eig) @ q.T


def orthonormal_rows(rng: np.random.Generator, rows: int, cols: int) -> Array:
    """A rows × cols matrix R with R Rᵀ = I (rows ≤ cols)."""
    q, _ = np.linalg.qr(rng.standard_normal((cols, rows)))
    return q.T


class Quadratic(BilevelProblem):
    """The quadratic instance; see the module docstring for the model."""

    def __init__(self, p: QuadraticParams, seed: int) -> None:
        rng = np.random.default_rng(seed)
        dx, dy = p.dim_x, p.dim_y
        self.dim_x, self.dim_y = dx, dy
        self.A = spd_with_spectrum(rng, dy, p.mu, p.L)
        self.C = p.cross * rng.standard_normal((dy, dx)) / np.sqrt(max(dx, dy))
        self.P = spd_with_spectrum(rng, dy, 0.5, 1.5)
        self.a = rng.standard_normal(dy)
        self.e = rng.standard_normal(dy)
        self.c = rng.standard_normal(dx) / np.sqrt(dx)
        self.m = p.outer_curvature
        self._use_given(p)
        self._A_chol = sla.cho_factor(self.A)
        if p.n_samples is not None:
            self._build_samples(rng, p)

    def _use_given(self, p: QuadraticParams) -> None:
        """The matrices and vectors the parameters give, in place of the drawn ones (validated already)."""
        for name in ("A", "P"):
            if getattr(p, name) is not None:
                setattr(self, name, mx.symmetric(getattr(p, name)))
        for name in ("C", "a", "e", "c"):
            if getattr(p, name) is not None:
                setattr(self, name, mx.given(getattr(p, name)))

    def _build_samples(self, rng: np.random.Generator, p: QuadraticParams) -> None:
        n, r, dy = p.n_samples, p.rank, self.dim_y
        self.n_samples, self.stochastic = n, True
        # Half the smallest eigenvalue stays in the shared term (μ₀I, p₀I); the drawn spectra give μ/2, 1/4.
        self.mu0 = p.mu / 2 if p.A is None else float(np.linalg.eigvalsh(self.A)[0]) / 2
        self.p0 = 0.25 if p.P is None else float(np.linalg.eigvalsh(self.P)[0]) / 2
        # A − μ₀I = W Wᵀ and P − p₀I = Z Zᵀ; spreading W, Z over orthonormal rows R gives
        # (1/n) Σ U_iU_iᵀ = W R Rᵀ Wᵀ = A − μ₀I exactly, and likewise for P and C.
        W = np.linalg.cholesky(self.A - self.mu0 * np.eye(dy))
        Z = np.linalg.cholesky(self.P - self.p0 * np.eye(dy))
        R = orthonormal_rows(rng, dy, n * r)
        Rp = orthonormal_rows(rng, dy, n * r)
        G = np.sqrt(n) * W @ R
        H = np.sqrt(n) * sla.solve_triangular(W, self.C, lower=True).T @ R
        S = np.sqrt(n) * Z @ Rp
        # Row k of U[i] is column i·r + k of G: U_i = U[i]ᵀ (dy × r); likewise V and S.
        self.U = np.ascontiguousarray(G.T.reshape(n, r, dy))  # (n, r, dy)
        self.V = np.ascontiguousarray(H.T.reshape(n, r, self.dim_x))  # (n, r, dx)
        self.S = np.ascontiguousarray(S.T.reshape(n, r, dy))  # (n, r, dy)
        noise = rng.standard_normal((n, dy)) * p.sample_spread
        self.a_i = self.a + noise - noise.mean(axis=0)
        self._g_rows, self._f_rows = RowCache(), RowCache()  # g's arrays and f's: batches differ per level

    def _rows(self, cache: RowCache, name: str, idx: Array) -> Array:
        """The minibatch's samples of U, V or S: (len(idx), r, d)."""
        return cache.rows(name, getattr(self, name), idx)

    def _block(self, cache: RowCache, name: str, idx: Array) -> Array:
        """The minibatch's rows of U, V or S as one (len(idx) · r) × d matrix."""
        return _flat(self._rows(cache, name, idx))

    # ---- full-batch pieces ----
    def _outer_x(self, x: Array) -> tuple[float, Array]:
        return 0.5 * self.m * x @ x + self.c @ x, self.m * x + self.c

    def f(self, x: Array, y: Array, batch: Batch = None) -> float:
        r = y - self.e
        if batch is None:
            return float(0.5 * r @ self.P @ r + self._outer_x(x)[0])
        s = (self._block(self._f_rows, "S", batch) @ r).reshape(len(batch), -1)
        return float(0.5 * self.p0 * r @ r + 0.5 * np.mean(np.sum(s * s, axis=1)) + self._outer_x(x)[0])

    def g(self, x: Array, y: Array, batch: Batch = None) -> float:
        if batch is None:
            return float(0.5 * y @ self.A @ y - y @ self.C @ x + self.a @ y)
        shape = (len(batch), -1)
        uy = (self._block(self._g_rows, "U", batch) @ y).reshape(shape)
        vx = (self._block(self._g_rows, "V", batch) @ x).reshape(shape)
        a = self._g_rows.rows("a_i", self.a_i, batch)
        per = 0.5 * np.sum(uy * uy, axis=1) - np.sum(uy * vx, axis=1) + a @ y
        return float(0.5 * self.mu0 * y @ y + per.mean())

    def grad_y_f(self, x: Array, y: Array, batch: Batch = None) -> Array:
        r = y - self.e
        if batch is None:
            return self.P @ r
        Sb = self._block(self._f_rows, "S", batch)
        return self.p0 * r + ((Sb @ r) @ Sb) / len(batch)

    def grad_f(self, x: Array, y: Array, batch: Batch = None) -> tuple[Array, Array]:
        return self._outer_x(x)[1], self.grad_y_f(x, y, batch)

    def grad_y_g(self, x: Array, y: Array, batch: Batch = None) -> Array:
        if batch is None:
            return self.A @ y - self.C @ x + self.a
        vx = self._block(self._g_rows, "V", batch) @ x  # V first: U, gathered last, is still cached for t @ U
        Ub, n = self._block(self._g_rows, "U", batch), len(batch)
        t = Ub @ y - vx
        # sum(0) / n is mean(0) operation for operation, without numpy's mean overhead.
        return self.mu0 * y + (t @ Ub) / n + self._g_rows.rows("a_i", self.a_i, batch).sum(0) / n

    def grad_g(self, x: Array, y: Array, batch: Batch = None) -> tuple[Array, Array]:
        return self._grad_x_g(y, batch), self.grad_y_g(x, y, batch)

    def _grad_x_g(self, y: Array, batch: Batch) -> Array:
        return self.cross_xy_g(None, None, y, batch)  # g is bilinear in (x, y): ∇x g = ∇²xy g · y

    def hvp_yy_g(self, x: Array, y: Array, v: Array, batch: Batch = None) -> Array:
        if batch is None:
            return self.A @ v
        Ub = self._block(self._g_rows, "U", batch)
        return self.mu0 * v + ((Ub @ v) @ Ub) / len(batch)

    def cross_xy_g(self, x: Array, y: Array, v: Array, batch: Batch = None) -> Array:
        if batch is None:
            return -self.C.T @ v
        uv = self._block(self._g_rows, "U", batch) @ v
        return -(uv @ self._block(self._g_rows, "V", batch)) / len(batch)

    # ---- per-sample oracles (rows: one sample each) ----
    def grad_f_samples(self, x: Array, y: Array, idx: Array) -> tuple[Array, Array]:
        r = y - self.e
        S = self._rows(self._f_rows, "S", idx)
        gy = self.p0 * r + _per_sample(_flat(S) @ r, S)
        return np.tile(self._outer_x(x)[1], (len(idx), 1)), gy

    def grad_y_g_samples(self, x: Array, y: Array, idx: Array) -> Array:
        U = self._rows(self._g_rows, "U", idx)
        t = _flat(U) @ y - self._block(self._g_rows, "V", idx) @ x
        return self.mu0 * y + _per_sample(t, U) + self._g_rows.rows("a_i", self.a_i, idx)

    def hvp_yy_g_samples(self, x: Array, y: Array, v: Array, idx: Array) -> Array:
        U = self._rows(self._g_rows, "U", idx)
        return self.mu0 * v + _per_sample(_flat(U) @ v, U)

    def cross_xy_g_samples(self, x: Array, y: Array, v: Array, idx: Array) -> Array:
        return -_per_sample(self._block(self._g_rows, "U", idx) @ v, self._rows(self._g_rows, "V", idx))

    # ---- stacked oracles (rows: one run each; algorithms.stacked): one product for every run ----
    def _tile(self, vector: Array, rows: int) -> Array:
        """`vector` as `rows` rows (rowwise.tiled): a stack adds it without broadcasting."""
        return tiled(self.__dict__.setdefault("_tiles", {}), vector, rows)

    def grad_y_g_rows(self, X: Array, Y: Array, batches=None) -> Array:
        if batches is None:
            return Y @ self.A.T - X @ self.C.T + self._tile(self.a, len(Y))
        idx = stacked_indices(batches)
        Ub, n = self._stacked_block("U", idx), idx.shape[1]
        t = row_products(Ub, Y) - row_products(self._stacked_block("V", idx), X)
        return self.mu0 * Y + row_combinations(t, Ub) / n + self.a_i[idx].sum(1) / n

    def grad_y_f_rows(self, X: Array, Y: Array, batches=None) -> Array:
        R = Y - self._tile(self.e, len(Y))
        if batches is None:
            return R @ self.P.T
        idx = stacked_indices(batches)
        Sb = self._stacked_block("S", idx)
        return self.p0 * R + row_combinations(row_products(Sb, R), Sb) / idx.shape[1]

    def grad_f_rows(self, X: Array, Y: Array, batches=None) -> tuple[Array, Array]:
        return self.m * X + self._tile(self.c, len(X)), self.grad_y_f_rows(X, Y, batches)

    def grad_g_rows(self, X: Array, Y: Array, batches=None) -> tuple[Array, Array]:
        return self.cross_xy_g_rows(X, Y, Y, batches), self.grad_y_g_rows(X, Y, batches)

    def hvp_yy_g_rows(self, X: Array, Y: Array, V: Array, batches=None) -> Array:
        if batches is None:
            return V @ self.A.T
        idx = stacked_indices(batches)
        Ub = self._stacked_block("U", idx)
        return self.mu0 * V + row_combinations(row_products(Ub, V), Ub) / idx.shape[1]

    def cross_xy_g_rows(self, X: Array, Y: Array, V: Array, batches=None) -> Array:
        if batches is None:
            return -(V @ self.C)
        idx = stacked_indices(batches)
        uv = row_products(self._stacked_block("U", idx), V)
        return -row_combinations(uv, self._stacked_block("V", idx)) / idx.shape[1]

    def _stacked_block(self, name: str, idx: Array) -> Array:
        """Each run's minibatch rows of U, V or S: (K, batch · r, d)."""
        rows = getattr(self, name)[idx]
        return rows.reshape(idx.shape[0], -1, rows.shape[-1])

    def hessian_yy_g(self, x: Array, y: Array, batch: Batch = None) -> Array:
        if batch is None:
            return self.A.copy()
        Ub = self._block(self._g_rows, "U", batch)
        return self.mu0 * np.eye(self.dim_y) + (Ub.T @ Ub) / len(batch)

    def jacobian_xy_g(self, x: Array, y: Array, batch: Batch = None) -> Array:
        if batch is None:
            return -self.C.T.copy()
        return -(self._block(self._g_rows, "V", batch).T @ self._block(self._g_rows, "U", batch)) / len(batch)

    def initial_point(self) -> tuple[Array, Array]:
        return np.zeros(self.dim_x), np.zeros(self.dim_y)

    # ---- ground truth ----
    def y_star(self, x: Array) -> Array:
        return sla.cho_solve(self._A_chol, self.C @ x - self.a)

    def grad_F(self, x: Array) -> Array:
        ys = self.y_star(x)
        return self.m * x + self.c + self.C.T @ sla.cho_solve(self._A_chol, self.P @ (ys - self.e))

    def y_star_rows(self, X: Array) -> Array:
        return sla.cho_solve(self._A_chol, self.C @ X.T - self.a[:, None]).T

    def grad_F_rows(self, X: Array, Ys: Array | None = None) -> Array:
        Ys = self.y_star_rows(X) if Ys is None else Ys
        n = len(X)
        solved = sla.cho_solve(self._A_chol, self.P @ (Ys - self._tile(self.e, n)).T)
        return self.m * X + self._tile(self.c, n) + (self.C.T @ solved).T

    def f_rows(self, X: Array, Y: Array, batches=None) -> Array:
        if batches is not None:
            return super().f_rows(X, Y, batches)
        R = Y - self._tile(self.e, len(Y))
        return 0.5 * np.einsum("ij,ij->i", R @ self.P.T, R) + 0.5 * self.m * np.einsum("ij,ij->i", X, X) + X @ self.c

    def hessian_F(self) -> Array:
        """∇²F = Cᵀ A⁻¹ P A⁻¹ C + m I (constant)."""
        K = sla.cho_solve(self._A_chol, self.C)
        return K.T @ self.P @ K + self.m * np.eye(self.dim_x)

    def x_opt(self) -> Array | None:
        """The minimiser of F when ∇²F is positive definite, else None."""
        H = self.hessian_F()
        if np.linalg.eigvalsh(H)[0] <= 0:
            return None
        return np.linalg.solve(H, -self.grad_F(np.zeros(self.dim_x)))


def _flat(rows: Array) -> Array:
    """Samples' rows (batch, r, d) as one (batch · r) × d matrix (a view)."""
    return rows.reshape(-1, rows.shape[-1])


def _per_sample(coef: Array, rows: Array) -> Array:
    """Σ_k coef[b·r + k] · rows[b, k] for each sample b: (batch, d)."""
    return np.einsum("br,brd->bd", coef.reshape(rows.shape[:2]), rows)


@register("quadratic", QuadraticParams)
def build_quadratic(p: QuadraticParams, seed: int) -> Quadratic:
    """Closed-form quadratic (deterministic, or finite-sum with low-rank samples)."""
    return Quadratic(p, seed)
