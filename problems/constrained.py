"""Quadratic bilevel problem with linearly constrained lower level (F2CSA paper §6.1).

f(x, y) = ½ xᵀQ_u x + c_uᵀx + ½ yᵀP y + xᵀP y,   g(x, y) = ½ yᵀQ_l y + c_lᵀy + xᵀy,
lower level over h(x, y) = A x − B y − b ≤ 0: either the box y ∈ [−1, 1]^d (A = 0, B = ±I, b = 1) or
p random rows (B of full row rank, so the set is non-empty for every x and LICQ holds).

Noise (σ = `noise`) perturbs every quadratic matrix (Q_u, P, Q_l) of each sample; a batch of m samples
averages m draws, so the oracles are unbiased with a variance σ²/m per entry. Two models:
- `dense` (the F2CSA paper's §6.1, "Gaussian noise N(0, σ²) added to the quadratic terms"): each sample's
  quadratic term ½uᵀ(Q + E)u has i.i.d. N(0, σ²) entries in E, so its gradient sees the symmetric (E + Eᵀ)/2
  (off-diagonal variance σ²/2, diagonal σ²). Its norm is ≈ σ√(2d), so σ√(2d) < μ is required to keep every
  sampled Q_l positive definite (d = 4000 at σ = 0.01: 0.89). The products are drawn lazily, exactly in
  distribution (problems.gaussian_matrix), so the noise costs O(d) per product, not O(d²); the dense
  Hessian oracle draws the rest of its matrix.
- `diagonal`: independent N(0, σ²) perturbations of the diagonals only, O(m·d) per call, positive
  definite for any d at small σ. `sample_batch` returns the draw (3 × m × d) as the batch.

Ground truth: y*, λ* from the exact QP solver (problems.qp); ∇F from the active-set implicit Jacobian
dλ/dx = (B_a H⁻¹B_aᵀ)⁻¹(A_a + B_a H⁻¹Jᵀ), dy/dx = H⁻¹(B_aᵀ dλ/dx − Jᵀ), H = Q_l, J = I, over the
strictly active rows (F is piecewise quadratic; its gradient jumps where the active set changes).

Any of Q_u, c_u, P, Q_l, c_l and the constraint rows A, B, b may be given as parameters instead of
drawn from the seed (d and p follow from them); the rest is still drawn, from the same random stream.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.linalg as sla
import scipy.sparse.linalg as spla

from problems import matrices as mx
from problems.base import Array, Batch, BilevelProblem, LinearConstraints
from problems.gaussian_matrix import LazySymmetricGaussian
from problems.qp import Polyhedron, QPSolution
from problems.registry import register
from problems.validation import Params, param


@dataclass(frozen=True)
class ConstrainedQuadraticParams(Params):
    """Parameters of constrained_quadratic."""

    d: int = param(50, "positive_int", "dimension of x and of y")
    constraints: str = param("linear", "str", "lower-level set: p random rows, or the box [-1, 1]^d",
                             choices=("linear", "box"))
    p: int = param(10, "positive_int", "number of random constraint rows (constraints: linear)")
    noise: float = param(0.01, "nonnegative", "σ of the Gaussian noise on the quadratic terms (0: exact)")
    noise_model: str = param("diagonal", "str", "noise on the diagonals only, or on every entry (F2CSA §6.1)",
                             choices=("diagonal", "dense"))
    mu: float = param(1.0, "positive", "μ in Q_l = GGᵀ/d + μI and P = GGᵀ/d + μI")
    mu_upper: float | None = param(None, "optional_positive",
                                   "μ of Q_u (null: λmax(P) + mu, so every piece of F is strongly convex)")
    offset: float = param(0.5, "nonnegative", "scale of b for linear rows (b = offset·|N(0,1)|)")
    Q_u: list | None = param(None, "optional_matrix", "outer Hessian in x (d × d, symmetric; null: drawn, "
                             "shifted by mu_upper)")
    c_u: list | None = param(None, "optional_vector", "outer linear term (d; null: drawn)")
    P: list | None = param(None, "optional_matrix", "outer coupling in ½yᵀPy + xᵀPy (d × d, symmetric; null: drawn)")
    Q_l: list | None = param(None, "optional_matrix", "inner Hessian (d × d, symmetric positive definite; "
                             "null: drawn)")
    c_l: list | None = param(None, "optional_vector", "inner linear term (d; null: drawn)")
    A: list | None = param(None, "optional_matrix", "constraint rows on x in Ax − By ≤ b (p × d; null: drawn)")
    B: list | None = param(None, "optional_matrix", "constraint rows on y (p × d, full row rank; null: drawn)")
    b: list | None = param(None, "optional_vector", "constraint bounds (p; null: drawn)")

    @classmethod
    def implied(cls, values: dict) -> dict:
        """d and p from the given matrices and vectors, unless set."""
        out = dict(values)
        for name, dim, of in (("Q_l", "d", mx.rows_of), ("Q_u", "d", mx.rows_of), ("P", "d", mx.rows_of),
                              ("c_u", "d", mx.rows_of), ("c_l", "d", mx.rows_of), ("B", "d", mx.cols_of),
                              ("A", "d", mx.cols_of), ("B", "p", mx.rows_of), ("A", "p", mx.rows_of),
                              ("b", "p", mx.rows_of)):
            if dim not in out and out.get(name) is not None and of(out[name]) is not None:
                out[dim] = of(out[name])
        return out

    def validate(self) -> None:
        d, rows = self.d, self.p
        for name, shape in (("Q_u", (d, d)), ("c_u", (d,)), ("P", (d, d)), ("Q_l", (d, d)), ("c_l", (d,))):
            mx.require_shape(self, name, shape, f"d = {d}")
        for name in ("Q_u", "P", "Q_l"):
            mx.require_symmetric(self, name)
        mx.require_positive_definite(self, "Q_l", "g strongly convex in y")
        rows_given = [n for n in ("A", "B", "b") if getattr(self, n) is not None]
        if rows_given and self.constraints != "linear":
            self.fail("constraints", f"'linear' when {', '.join(rows_given)} {'is' if len(rows_given) == 1 else 'are'} "
                                     "given", self.constraints)
        for name, shape in (("A", (rows, d)), ("B", (rows, d)), ("b", (rows,))):
            mx.require_shape(self, name, shape, f"p = {rows} rows, d = {d}")
        mx.require_full_row_rank(self, "B", "the feasible set is non-empty for every x and LICQ holds")
        if self.constraints == "linear" and self.p > self.d:
            self.fail("p", f"at most d = {self.d} (linear rows must be independent)", self.p)
        if self.noise_model == "dense" and self.noise * np.sqrt(2 * self.d) >= self.mu:
            self.fail("noise", f"below μ/√(2d) = {self.mu / np.sqrt(2 * self.d):.4g} with dense noise (its norm "
                               "σ√(2d) must stay below μ to keep the sampled lower level convex)", self.noise)

    def array_bytes(self) -> float:
        """The d × d matrices (Q_u, P, Q_l and their factors) and the p × d constraint rows."""
        return 8.0 * (6 * self.d * self.d + 2 * self.p * self.d)


def wishart_shift(rng: np.random.Generator, d: int, mu: float) -> Array:
    """G Gᵀ / d + μ I for a seeded Gaussian d × d matrix G."""
    G = rng.standard_normal((d, d))
    return G @ G.T / d + mu * np.eye(d)


def largest_eigenvalue(S: Array) -> float:
    """λmax of a symmetric matrix (Lanczos with a fixed start vector, so it is reproducible)."""
    if S.shape[0] <= 64:
        return float(np.linalg.eigvalsh(S)[-1])
    return float(spla.eigsh(S, k=1, which="LA", v0=np.ones(S.shape[0]), tol=1e-12)[0][0])


class ConstrainedQuadratic(BilevelProblem):
    """The constrained quadratic instance; see the module docstring for the model."""

    def __init__(self, p: ConstrainedQuadraticParams, seed: int) -> None:
        rng = np.random.default_rng(seed)
        d = p.d
        self.dim_x = self.dim_y = d
        self.Q_l = wishart_shift(rng, d, p.mu)
        self.P = wishart_shift(rng, d, p.mu)
        base_u = wishart_shift(rng, d, 0.0)
        self.c_u = rng.standard_normal(d)
        self.c_l = rng.standard_normal(d)
        self.constraints = self._make_constraints(rng, p)
        self._use_given(p)
        if p.Q_u is not None:
            self.Q_u = mx.symmetric(p.Q_u)
        else:  # the drawn Q_u's shift follows the final P (given or drawn)
            mu_u = p.mu_upper if p.mu_upper is not None else largest_eigenvalue(self.P) + p.mu
            self.Q_u = base_u + mu_u * np.eye(d)
        self.sigma = p.noise
        self.noise_model = p.noise_model
        self.stochastic = p.noise > 0
        self.polyhedron = Polyhedron(-self.constraints.B)
        self._chol_l = sla.cho_factor(self.Q_l)
        self._cache: tuple[bytes, QPSolution] | None = None
        self._Q_l_inv: Array | None = None

    def _use_given(self, p: ConstrainedQuadraticParams) -> None:
        """The matrices, vectors and constraint rows the parameters give, in place of the drawn ones."""
        for name in ("P", "Q_l"):
            if getattr(p, name) is not None:
                setattr(self, name, mx.symmetric(getattr(p, name)))
        for name in ("c_u", "c_l"):
            if getattr(p, name) is not None:
                setattr(self, name, mx.given(getattr(p, name)))
        c = self.constraints
        self.constraints = LinearConstraints(*(mx.given(getattr(p, n)) if getattr(p, n) is not None else getattr(c, n)
                                               for n in ("A", "B", "b")))

    @staticmethod
    def _make_constraints(rng: np.random.Generator, p: ConstrainedQuadraticParams) -> LinearConstraints:
        d = p.d
        if p.constraints == "box":
            B = np.vstack([-np.eye(d), np.eye(d)])  # rows: y − 1 ≤ 0, then −y − 1 ≤ 0
            return LinearConstraints(np.zeros((2 * d, d)), B, np.ones(2 * d))
        A = rng.standard_normal((p.p, d)) / np.sqrt(d)
        B = rng.standard_normal((p.p, d)) / np.sqrt(d)
        b = p.offset * np.abs(rng.standard_normal(p.p))
        return LinearConstraints(A, B, b)

    # ---- noise ----
    def sample_batch(self, rng: np.random.Generator, size: int) -> Batch:
        """The noise of m = size samples on (Q_u, P, Q_l); None when noise is off."""
        if not self.stochastic:
            return None
        if self.noise_model == "dense":
            return DenseNoise(self.dim_x, self.sigma, size, rng)
        return rng.standard_normal((3, size, self.dim_x))

    def batches_drawn_whole(self) -> bool:
        """The dense model's noise is drawn from the generator as the oracles ask for it."""
        return self.noise_model != "dense"

    def batch_size(self, batch: Batch) -> int:
        if batch is None:
            return 1
        return batch.size if isinstance(batch, DenseNoise) else int(batch.shape[1])

    def _diag(self, batch: Batch, k: int) -> Array | float:
        """Diagonal perturbation of matrix k (0: Q_u, 1: P, 2: Q_l), averaged over the batch."""
        if batch is None:
            return 0.0
        return self.sigma * batch[k].mean(axis=0)

    def _noisy(self, M: Array, k: int, v: Array, batch: Batch) -> Array:
        """(M + noise of matrix k) v."""
        if isinstance(batch, DenseNoise):
            return M @ v + batch.matrices[k].matvec(v)
        return M @ v + self._diag(batch, k) * v

    def _Qu(self, x: Array, batch: Batch) -> Array:
        return self._noisy(self.Q_u, 0, x, batch)

    def _P(self, v: Array, batch: Batch) -> Array:
        return self._noisy(self.P, 1, v, batch)

    def _Ql(self, v: Array, batch: Batch) -> Array:
        return self._noisy(self.Q_l, 2, v, batch)

    # ---- oracles ----
    def f(self, x: Array, y: Array, batch: Batch = None) -> float:
        return float(0.5 * x @ self._Qu(x, batch) + self.c_u @ x + (0.5 * y + x) @ self._P(y, batch))

    def g(self, x: Array, y: Array, batch: Batch = None) -> float:
        return float(0.5 * y @ self._Ql(y, batch) + self.c_l @ y + x @ y)

    def grad_f(self, x: Array, y: Array, batch: Batch = None) -> tuple[Array, Array]:
        Py = self._P(y, batch)
        return self._Qu(x, batch) + self.c_u + Py, self._P(x, batch) + Py

    def grad_y_f(self, x: Array, y: Array, batch: Batch = None) -> Array:
        return self._P(x + y, batch)

    def grad_g(self, x: Array, y: Array, batch: Batch = None) -> tuple[Array, Array]:
        return y.copy(), self.grad_y_g(x, y, batch)

    def grad_y_g(self, x: Array, y: Array, batch: Batch = None) -> Array:
        return self._Ql(y, batch) + self.c_l + x

    def hvp_yy_g(self, x: Array, y: Array, v: Array, batch: Batch = None) -> Array:
        return self._Ql(v, batch)

    def cross_xy_g(self, x: Array, y: Array, v: Array, batch: Batch = None) -> Array:
        return np.array(v, dtype=float, copy=True)  # ∇²xy g = I for the coupling xᵀy

    def hessian_yy_g(self, x: Array, y: Array, batch: Batch = None) -> Array:
        if isinstance(batch, DenseNoise):
            return self.Q_l + batch.matrices[2].dense()
        H = self.Q_l.copy()
        if batch is not None:
            H[np.diag_indices_from(H)] += self._diag(batch, 2)
        return H

    def jacobian_xy_g(self, x: Array, y: Array, batch: Batch = None) -> Array:
        return np.eye(self.dim_x)

    def initial_point(self) -> tuple[Array, Array]:
        return np.zeros(self.dim_x), np.zeros(self.dim_y)

    # ---- ground truth ----
    def _solve(self, x: Array) -> QPSolution:
        key = np.asarray(x, dtype=float).tobytes()
        if self._cache is None or self._cache[0] != key:
            c = self.constraints
            sol = self.polyhedron.solve(self.Q_l, self.c_l + x, c.b - c.A @ x, chol=self._chol_l)
            self._cache = (key, sol)
        return self._cache[1]

    def y_star(self, x: Array) -> Array:
        return self._solve(x).y.copy()

    def lambda_star(self, x: Array) -> Array:
        return self._solve(x).lam.copy()

    def _dy_star(self, x: Array) -> Array:
        """Jacobian dy*/dx (d × d) on the active set at x (one-sided where the active set changes)."""
        sol = self._solve(x)
        a = sol.active
        if self._Q_l_inv is None:
            self._Q_l_inv = sla.cho_solve(self._chol_l, np.eye(self.dim_y))
        Hinv = self._Q_l_inv  # H⁻¹Jᵀ with J = I
        if a.size == 0:
            return -Hinv
        A_a, B_a = self.constraints.A[a], self.constraints.B[a]
        S = B_a @ Hinv @ B_a.T
        dlam = np.linalg.solve(S, A_a + B_a @ Hinv)
        return Hinv @ (B_a.T @ dlam - np.eye(self.dim_y))

    def grad_F(self, x: Array) -> Array:
        y = self._solve(x).y
        gx, gy = self.grad_f(x, y)
        return gx + self._dy_star(x).T @ gy


class DenseNoise:
    """The dense noise of a batch of m samples: the mean of m draws of (E + Eᵀ)/2 for each of Q_u, P, Q_l,
    i.e. GOE(σ²/(2m)) matrices drawn lazily (see problems.gaussian_matrix). They draw from the generator
    that sampled the batch, as products are asked for: reproducible, since the calls come in a fixed order."""

    def __init__(self, d: int, sigma: float, size: int, rng: np.random.Generator) -> None:
        self.size = int(size)
        tau = sigma / np.sqrt(2.0 * size)
        self.matrices = [LazySymmetricGaussian(d, tau, rng) for _ in range(3)]


@register("constrained_quadratic", ConstrainedQuadraticParams)
def build_constrained_quadratic(p: ConstrainedQuadraticParams, seed: int) -> ConstrainedQuadratic:
    """Quadratic bilevel problem with a box or random linear lower-level constraints (F2CSA §6.1)."""
    return ConstrainedQuadratic(p, seed)
