"""A problem's oracles as pure functions of its arrays, for engines that compile or stack them.

`pure(problem)` gives a NamedTuple of the instance's arrays whose methods are the oracles and the ground
truth, written with operators and array methods only (`y @ A.T`, `.sum(-1)`), so the same code runs on
NumPy arrays, on JAX arrays under `jit`/`vmap`, on one run's vectors (d,) and on a stack of runs (K, d):
every reduction is over the last axis, and a product is a stack's rows times a matrix from the right or, in the
quadratic at small dimensions (`_times`), one run's vector times a matrix from the left. Being a NamedTuple, it
is a JAX pytree: the arrays pass through `jit` as arguments, not as constants baked into the program.

Ground truth that needs a solve (y*(x) = A⁻¹(Cx − a), ∇F) uses matrices solved once here with NumPy, so
its cost per evaluation is two products. `pure` gives the deterministic quadratic's form and the closed-form
toys' (`nonunique_toy`, `minimax_toy`: problems/toys.py, their metrics those the run loop records for them);
`pure_finite_sum` the finite-sum quadratic's, with each sample's oracles (for algorithms that keep a
memory per sample, SABA). Any other problem is refused with one line naming it.
"""
from __future__ import annotations

import math
from typing import Any, NamedTuple

import numpy as np
import scipy.linalg as sla

from problems.base import Array
from problems.quadratic import Quadratic
from problems.shared.errors import ParameterError
from problems.toys import MinimaxToy, NonuniqueToy


#: The largest dimension at which a compiled stack of quadratic runs keeps its runs on the last axis (`runs_axis`).
#: The JAX engine's loop with the runs last against first, K = 1,000 SOBA runs × 200 iterations on CPU (XLA's products
#: of a (d, K) stack against a (K, d) one), process CPU, medians in turn in one process (20 a side up to d = 20, else
#: 6): 1.8x faster at d = 5, 1.4-1.7x at d = 10 (3 processes), equal at d = 20, 0.77x at d = 40, 0.90x at d = 100.
RUNS_LAST_UP_TO = 16


class PureQuadratic(NamedTuple):
    """g = ½yᵀAy − yᵀCx + aᵀy, f = ½(y − e)ᵀP(y − e) + ½m‖x‖² + cᵀx, full batch (problems/quadratic.py).

    Its products are `_times`: at small dimensions one run's vector times a matrix from the left, so that a compiled
    stack of its runs has them on the last axis (`runs_axis`)."""

    A: Any
    C: Any
    P: Any
    a: Any
    e: Any
    c: Any
    m: Any
    ys_x: Any  # A⁻¹C: y*(x) = x (A⁻¹C)ᵀ − A⁻¹a
    ys_0: Any  # A⁻¹a
    gF_y: Any  # CᵀA⁻¹P: ∇F(x) = m x + c + (y*(x) − e)(CᵀA⁻¹P)ᵀ
    f_opt: Any  # F at the minimiser (NaN when F has none)

    @property
    def runs_axis(self) -> int:
        """The axis of the runs in a compiled stack's state (algorithms/explicit/jax_programs.py): the last up to
        RUNS_LAST_UP_TO dimensions (where XLA's products are faster so), else the first."""
        return -1 if max(self.A.shape[-1], self.C.shape[-1]) <= RUNS_LAST_UP_TO else 0

    def _times(self, m: Any, v: Any) -> Any:
        """m v: `m @ v` for one run's vector when the runs go last (under `jax.vmap` the stacked product then has
        them on its last axis), else `v @ m.T`, which takes a stack's rows (K, d) too: the same product, to
        rounding."""
        return m @ v if v.ndim == 1 and self.runs_axis == -1 else v @ m.T

    # ---- oracles (what an algorithm sees) ----
    def initial_point(self, zeros: Any) -> tuple[Any, Any]:
        """(x0, y0) = (0, 0), made by `zeros(n)` of the caller's namespace."""
        return zeros(self.C.shape[1]), zeros(self.A.shape[0])

    def g(self, x: Any, y: Any) -> Any:
        """g(x, y), a per-run number of shape (1,) ((K, 1) for a stack)."""
        return ((0.5 * self._times(self.A, y) - self._times(self.C, x) + self.a) * y).sum(-1, keepdims=True)

    def grad_y_g(self, x: Any, y: Any) -> Any:
        return self._times(self.A, y) - self._times(self.C, x) + self.a

    def grad_x_g(self, x: Any, y: Any) -> Any:
        return -self._times(self.C.T, y)

    def hvp_yy_g(self, x: Any, y: Any, v: Any) -> Any:
        return self._times(self.A, v)

    def cross_xy_g(self, x: Any, y: Any, v: Any) -> Any:
        return -self._times(self.C.T, v)

    def grad_x_f(self, x: Any, y: Any) -> Any:
        return self.m * x + self.c

    def grad_y_f(self, x: Any, y: Any) -> Any:
        return self._times(self.P, y - self.e)

    def project_x(self, x: Any) -> Any:
        return x

    def project_y(self, y: Any) -> Any:
        return y

    # ---- ground truth (evaluation only) ----
    def y_star(self, x: Any) -> Any:
        return self._times(self.ys_x, x) - self.ys_0

    def metrics(self, x: Any, y: Any) -> dict[str, Any]:
        """F, F_gap, ‖∇F‖², ‖y − y*‖² at (x, y): scalars for one run, (K,) for a stack."""
        ys = self.y_star(x)
        r = ys - self.e
        grad_F = self.m * x + self.c + self._times(self.gF_y, r)
        F = 0.5 * (self._times(self.P, r) * r).sum(-1) + 0.5 * self.m * (x * x).sum(-1) + (x * self.c).sum(-1)
        d = y - ys
        return {"F": F, "F_gap": F - self.f_opt, "grad_F_sq": (grad_F * grad_F).sum(-1), "y_err_sq": (d * d).sum(-1)}


def _toy_start(form: Any, zeros: Any) -> tuple[Any, Any]:
    """A toy's (x_start, y_start), as new arrays of the caller's namespace (its `initial_point`)."""
    return zeros(form.x_start.shape[-1]) + form.x_start, zeros(form.y_start.shape[-1]) + form.y_start


class PureNonunique(NamedTuple):
    """f = ½(x − y₂)² + ½(y₁ − 1)², g = ½y₁² − x y₁, y*(x) = (x, x) (problems/toys.py, NonuniqueToy).

    A coordinate is a slice (`y[..., :1]`, a per-run column) and a vector is put together from columns by
    products with the unit rows `e1`, `e2` ((1, 2)), so that one run's (d,) and a stack's (K, d) take the same code.
    """

    x_start: Any  # (1,)
    y_start: Any  # (2,)
    e1: Any  # [[1, 0]]: a column s as the vector (s, 0)
    e2: Any  # [[0, 1]]: a column s as the vector (0, s)
    x_opt: Any
    y_opt: Any
    f_opt: Any

    initial_point = _toy_start

    def f(self, x: Any, y: Any) -> Any:
        """f(x, y), a per-run number of shape (1,) ((K, 1) for a stack)."""
        return 0.5 * (x - y[..., 1:]) ** 2 + 0.5 * (y[..., :1] - 1.0) ** 2

    def g(self, x: Any, y: Any) -> Any:
        y1 = y[..., :1]
        return 0.5 * y1 ** 2 - x * y1

    def grad_y_g(self, x: Any, y: Any) -> Any:
        return (y[..., :1] - x) @ self.e1

    def grad_x_g(self, x: Any, y: Any) -> Any:
        return -y[..., :1]

    def hvp_yy_g(self, x: Any, y: Any, v: Any) -> Any:
        return v[..., :1] @ self.e1

    def cross_xy_g(self, x: Any, y: Any, v: Any) -> Any:
        return -v[..., :1]

    def grad_x_f(self, x: Any, y: Any) -> Any:
        return x - y[..., 1:]

    def grad_y_f(self, x: Any, y: Any) -> Any:
        return (y[..., :1] - 1.0) @ self.e1 + (y[..., 1:] - x) @ self.e2

    def project_x(self, x: Any) -> Any:
        return x

    def project_y(self, y: Any) -> Any:
        return y

    def y_star(self, x: Any) -> Any:
        """The optimistic selection (x, x) from the solution set {(x, t)}."""
        return x @ (self.e1 + self.e2)

    def metrics(self, x: Any, y: Any) -> dict[str, Any]:
        """The run loop's record for this toy: F, F_gap, ‖∇F‖² (∇F = x − 1), ‖y − y*‖², opt_dist."""
        ys = self.y_star(x)
        F = self.f(x, ys)[..., 0]
        return {"F": F, "F_gap": F - self.f_opt, "grad_F_sq": _sq(x - 1.0), "y_err_sq": _sq(y - ys),
                "opt_dist": _opt_dist(self, x, y)}


class PureMinimax(NamedTuple):
    """f = x·y, g = −x·y, x and y projected on [−b, b] (problems/toys.py, MinimaxToy); y*(x) = b·sign(x)."""

    x_start: Any  # (1,)
    y_start: Any  # (1,)
    b: Any
    cA: Any  # the lower-level constraints h = A x − B y − b ≤ 0 (|y| ≤ b), for constraint_violation
    cB: Any
    cb: Any
    x_opt: Any
    y_opt: Any
    f_opt: Any

    initial_point = _toy_start

    def f(self, x: Any, y: Any) -> Any:
        """f(x, y), a per-run number of shape (1,) ((K, 1) for a stack)."""
        return (x * y).sum(-1, keepdims=True)

    def g(self, x: Any, y: Any) -> Any:
        return -(x * y).sum(-1, keepdims=True)

    def grad_y_g(self, x: Any, y: Any) -> Any:
        return -x

    def grad_x_g(self, x: Any, y: Any) -> Any:
        return -y

    def hvp_yy_g(self, x: Any, y: Any, v: Any) -> Any:
        return 0.0 * v  # g is linear in y

    def cross_xy_g(self, x: Any, y: Any, v: Any) -> Any:
        return -v

    def grad_x_f(self, x: Any, y: Any) -> Any:
        return y

    def grad_y_f(self, x: Any, y: Any) -> Any:
        return x

    def project_x(self, x: Any) -> Any:
        return x.clip(-self.b, self.b)

    def project_y(self, y: Any) -> Any:
        return y.clip(-self.b, self.b)

    def y_star(self, x: Any) -> Any:
        """b·sign(x), sign by comparisons (no array method): 0 at x = 0, the toy's selection there (and at NaN,
        where F is NaN all the same)."""
        return self.b * (x > 0) - self.b * (x < 0)

    def metrics(self, x: Any, y: Any) -> dict[str, Any]:
        """The run loop's record for this toy: F, F_gap, ‖∇F‖² (∇F = b·sign(x)), ‖y − y*‖², the violation of
        |y| ≤ b (y steps that are not projected leave the box), opt_dist."""
        ys = self.y_star(x)
        F = self.f(x, ys)[..., 0]
        h = (x @ self.cA.T - y @ self.cB.T - self.cb).clip(0.0, None)
        return {"F": F, "F_gap": F - self.f_opt, "grad_F_sq": _sq(ys), "y_err_sq": _sq(y - ys),
                "constraint_violation": _sq(h) ** 0.5, "opt_dist": _opt_dist(self, x, y)}


def _sq(v: Any) -> Any:
    """‖v‖² over the last axis: a number for one run, (K,) for a stack."""
    return (v * v).sum(-1)


def _opt_dist(form: Any, x: Any, y: Any) -> Any:
    """‖(x, y) − (x_opt, y_opt)‖, the toys' `opt_dist`."""
    return (_sq(x - form.x_opt) + _sq(y - form.y_opt)) ** 0.5


def _toy_arrays(problem: NonuniqueToy | MinimaxToy) -> tuple[Any, ...]:
    """(x_start, y_start, x_opt, y_opt, f_opt) of a toy; f_opt = F(x_opt) as the run loop computes its gap."""
    x_opt = problem.x_opt()
    return (*(np.asarray(a, dtype=float) for a in (*problem.start, x_opt, problem.y_opt)), float(problem.F(x_opt)))


def _nonunique(problem: NonuniqueToy) -> PureNonunique:
    x_start, y_start, x_opt, y_opt, f_opt = _toy_arrays(problem)
    return PureNonunique(x_start, y_start, np.array([[1.0, 0.0]]), np.array([[0.0, 1.0]]), x_opt, y_opt, f_opt)


def _minimax(problem: MinimaxToy) -> PureMinimax:
    x_start, y_start, x_opt, y_opt, f_opt = _toy_arrays(problem)
    c = problem.constraints
    return PureMinimax(x_start, y_start, float(problem.b), *(np.asarray(a, dtype=float) for a in (c.A, c.B, c.b)),
                       x_opt, y_opt, f_opt)


#: The problems with a pure form besides the deterministic quadratic, by class.
_TOYS = {NonuniqueToy: _nonunique, MinimaxToy: _minimax}


def pure(problem: Any) -> PureQuadratic | PureNonunique | PureMinimax:
    """The pure form of `problem` (NumPy arrays; an engine converts them to its own)."""
    if type(problem) in _TOYS:
        return _TOYS[type(problem)](problem)
    if isinstance(problem, Quadratic) and problem.stochastic:
        raise ParameterError("problem: the stochastic quadratic's pure form is `pure_finite_sum` (per-sample "
                             "oracles) or `pure_minibatched`; allowed here: the deterministic 'quadratic', "
                             "'nonunique_toy', 'minimax_toy'")
    if not isinstance(problem, Quadratic):
        raise ParameterError(f"problem: '{problem.name}' has no pure-array form yet; allowed: 'quadratic' (its "
                             f"finite sum too, with n_samples), 'nonunique_toy', 'minimax_toy'")
    return _full_batch(problem)


def _full_batch(problem: Quadratic) -> PureQuadratic:
    """The full-batch oracles and ground truth of a quadratic instance (its samples' mean, when it has samples)."""
    factor = sla.cho_factor(problem.A)  # the factor the instance's own y_star uses (same numbers)
    ys_x, ys_0 = sla.cho_solve(factor, problem.C), sla.cho_solve(factor, problem.a)
    x_opt = problem.x_opt()
    f_opt = problem.F(x_opt) if x_opt is not None else math.nan
    arrays = (problem.A, problem.C, problem.P, problem.a, problem.e, problem.c)
    return PureQuadratic(*(np.asarray(a, dtype=float) for a in arrays), float(problem.m), ys_x, ys_0,
                         ys_x.T @ problem.P, float(f_opt))


class PureFiniteSum(NamedTuple):
    """The finite-sum quadratic: A_i = μ₀I + U_iU_iᵀ, C_i = U_iV_iᵀ, P_i = p₀I + S_iS_iᵀ, a_i (problems/quadratic.py),
    whose mean over the n samples is the deterministic problem exactly: its full-batch oracles and ground truth
    are `full`'s (reached as attributes of this record), its per-sample oracles are below.

    A per-sample oracle gives one row per sample on the second-to-last axis, (n, d) for one run's vectors and
    (K, n, d) for a stack's rows: every sample when `idx` is None, else samples `idx` ((b,), or (K, b) for a stack).
    """

    full: PureQuadratic
    U: Any  # (n, r, dy)
    V: Any  # (n, r, dx)
    S: Any  # (n, r, dy)
    a_i: Any  # (n, dy)
    mu0: Any
    p0: Any

    #: A compiled stack's runs stay on the first axis: the per-sample oracles were not measured with them last (the
    #: full-batch ones, `full`'s, give the same numbers either way).
    runs_axis = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.full, name)  # the full-batch oracles, ground truth and metrics

    def sample_counts(self) -> tuple[int, int]:
        """(samples of g, samples of f): one set of n samples for both levels here."""
        return self.U.shape[0], self.S.shape[0]

    def grad_y_g_samples(self, x: Any, y: Any, idx: Any = None) -> Any:
        U, V, a = _picked(self.U, idx), _picked(self.V, idx), _picked(self.a_i, idx)
        t = _rank_products(y, U) - _rank_products(x, V)
        return self.mu0 * y[..., None, :] + _combined(t, U) + a

    def hvp_yy_g_samples(self, x: Any, y: Any, v: Any, idx: Any = None) -> Any:
        U = _picked(self.U, idx)
        return self.mu0 * v[..., None, :] + _combined(_rank_products(v, U), U)

    def cross_xy_g_samples(self, x: Any, y: Any, v: Any, idx: Any = None) -> Any:
        U = _picked(self.U, idx)
        return -_combined(_rank_products(v, U), _picked(self.V, idx))

    def grad_f_samples(self, x: Any, y: Any, idx: Any = None) -> tuple[Any, Any]:
        """(∇x f_i, ∇y f_i) per sample; ∇x f_i = m x + c is the same for every sample: one row, (..., 1, dx)."""
        S, r = _picked(self.S, idx), y - self.full.e
        gy = self.p0 * r[..., None, :] + _combined(_rank_products(r, S), S)
        return self.full.grad_x_f(x, y)[..., None, :], gy

    def g_samples(self, x: Any, y: Any, idx: Any = None) -> Any:
        """g_i = ½μ₀‖y‖² + ½‖U_i y‖² − (U_i y)·(V_i x) + a_i·y per sample, (..., n, 1)."""
        uy, vx = _rank_products(y, _picked(self.U, idx)), _rank_products(x, _picked(self.V, idx))
        per = 0.5 * (uy * uy).sum(-1) - (uy * vx).sum(-1) + (_picked(self.a_i, idx) * y[..., None, :]).sum(-1)
        return (0.5 * self.mu0 * (y * y).sum(-1, keepdims=True) + per)[..., None]

    def grad_x_g_samples(self, x: Any, y: Any, idx: Any = None) -> Any:
        """∇x g_i = −V_iᵀU_i y per sample: g is bilinear in (x, y), so ∇x g_i = ∇²xy g_i · y."""
        return self.cross_xy_g_samples(x, y, y, idx)


def _picked(rows: Any, idx: Any) -> Any:
    """The samples `idx` of a per-sample array (all of them when idx is None)."""
    return rows if idx is None else rows[idx]


def _rank_products(v: Any, rows: Any) -> Any:
    """u_{i,k} · v for every sample i and rank k: (..., n, r) from v (..., d) and rows (..., n, r, d)."""
    return (v[..., None, None, :] * rows).sum(-1)


def _combined(weights: Any, rows: Any) -> Any:
    """Σ_k w_{i,k} u_{i,k} per sample i: (..., n, d) from weights (..., n, r) and rows (..., n, r, d)."""
    return (weights[..., None] * rows).sum(-2)


def pure_finite_sum(problem: Any) -> PureFiniteSum:
    """The pure form of a finite-sum quadratic (NumPy arrays), with its per-sample oracles."""
    if not isinstance(problem, Quadratic) or not problem.stochastic:
        what = "the deterministic quadratic" if isinstance(problem, Quadratic) else f"'{problem.name}'"
        raise ParameterError(f"problem: {what} has no per-sample oracles; allowed: the 'quadratic' with n_samples")
    return PureFiniteSum(_full_batch(problem), *(np.asarray(a, dtype=float) for a in
                                                  (problem.U, problem.V, problem.S, problem.a_i)),
                         float(problem.mu0), float(problem.p0))


def pure_minibatched(problem: Any) -> Any:
    """The form of an algorithm that takes minibatches of a finite sum: the finite-sum quadratic's (its per-sample
    oracles, and the full-batch ones through it) for a stochastic quadratic, else `pure`."""
    if isinstance(problem, Quadratic) and problem.stochastic:
        return pure_finite_sum(problem)
    return pure(problem)


def as_arrays(oracles: Any, asarray: Any) -> Any:
    """The same oracles with every array converted by `asarray` (e.g. jax.numpy.asarray), nested records and tuples
    too."""
    items = [as_arrays(v, asarray) if isinstance(v, tuple) else asarray(v) for v in oracles]
    return type(oracles)(*items) if hasattr(oracles, "_fields") else tuple(items)


__all__ = ["PureFiniteSum", "PureMinimax", "PureNonunique", "PureQuadratic", "pure", "pure_finite_sum",
           "pure_minibatched", "as_arrays", "Array"]
