"""The toy problems of the BOME paper (§5, App. A): coreset, minimax game, non-unique lower level.

coreset_toy   min s‖y − x0‖²  s.t. y ∈ argmin_y' ‖y' − X softmax(x)‖²  (x ∈ R^m, y ∈ R², m vertices).
              y*(x) = X softmax(x). The infimum of F is attained at the Euclidean projection y_opt of x0 on
              the convex hull of the vertices; when y_opt lies on the hull's boundary (the default) no
              finite x reaches it (softmax weights are positive), so `x_opt()` is None and the problem
              reports y_opt, the infimum F_inf and distances to y_opt in `metrics`.
minimax_toy   f = x·y, g = −x·y on the box |x|, |y| ≤ b. The lower level is linear: its solution set is
              the corner y = b·sign(x), and the whole interval [−b, b] at x = 0, where f(0, ·) ≡ 0; the
              ground truth selects y*(0) = 0, the paper's reported optimum. F(x) = b|x| is non-smooth at
              its minimiser x = 0; grad_F is b·sign(x) (the zero subgradient at 0).
nonunique_toy f = ½(x − y₂)² + ½(y₁ − 1)², g = ½y₁² − x y₁ (Liu et al. 2020). y₂ is free in g, so the
              lower-level solution set is {(x, t)}; y*(x) is the optimistic selection argmin_t f = (x, x),
              F(x) = ½(x − 1)², optimum x = 1, y = (1, 1).

The toys are deterministic: `seed` is accepted and unused. Oracles ignore `batch`.
"""
from __future__ import annotations

import math
import numbers
from dataclasses import dataclass
from itertools import combinations
from typing import Any

import numpy as np

from problems.base import Array, Batch, BilevelProblem, LinearConstraints
from problems.registry import register
from problems.softmax import softmax
from problems.validation import Params, param

def _is_point_list(value: Any, minimum: int) -> bool:
    """A list of at least `minimum` points [a, b] with finite coordinates."""
    if isinstance(value, (str, bytes)) or not hasattr(value, "__len__") or len(value) < minimum:
        return False
    for pt in value:
        if isinstance(pt, (str, bytes)) or not hasattr(pt, "__len__") or len(pt) != 2:
            return False
        if not all(isinstance(c, numbers.Real) and not isinstance(c, bool) and math.isfinite(c) for c in pt):
            return False
    return True


# ---------------------------------------------------------------------------------------------------
# coreset_toy
# ---------------------------------------------------------------------------------------------------

#: The coreset toy's vertices and start points as the BOME paper prints them (App. A.1) and as the
#: authors' code runs them: the fourth vertex (−3, 2) against (−3, −2), the third start (3.5, 1) against
#: (3.5, −1).
CORESET_POINTS = {
    "code": {"vertices": [[1.0, 3.0], [3.0, 1.0], [-2.0, 2.0], [-3.0, -2.0]],
             "starts": [[0.0, 3.0], [-3.0, 1.0], [3.5, -1.0]]},
    "paper": {"vertices": [[1.0, 3.0], [3.0, 1.0], [-2.0, 2.0], [-3.0, 2.0]],
              "starts": [[0.0, 3.0], [-3.0, 1.0], [3.5, 1.0]]},
}


@dataclass(frozen=True)
class CoresetToyParams(Params):
    """Parameters of the coreset toy (defaults as the BOME authors' code ran it)."""

    points: str = param("code", "str", "default vertices and starts: the authors' code or the paper's App. A.1",
                        choices=tuple(CORESET_POINTS))
    vertices: list | None = param(None, "any", "the m points [a, b] whose convex hull constrains y (columns of X); "
                                               "null: those of `points`")
    x0: list = param([3.0, -2.0], "real_vector", "target point x0 of the outer objective (a 2-vector)")
    scale: float = param(0.1, "positive", "s in f = s‖y − x0‖²")
    starts: list | None = param(None, "any", "candidate start points of y; null: those of `points`")
    start: int = param(1, "positive_int", "which of `starts` (1-based) y begins at; x begins at 0")

    def validate(self) -> None:
        if self.vertices is not None and not _is_point_list(self.vertices, 2):
            self.fail("vertices", "a list of at least 2 points [a, b] with finite coordinates", self.vertices)
        if len(self.x0) != 2:
            self.fail("x0", "a 2-vector [a, b]", self.x0)
        if self.starts is not None and not _is_point_list(self.starts, 1):
            self.fail("starts", "a list of points [a, b] with finite coordinates", self.starts)
        if self.start > len(self.start_points):
            self.fail("start", f"between 1 and {len(self.start_points)} (the number of starts)", self.start)

    @property
    def vertex_points(self) -> list:
        """The vertices in use."""
        return self.vertices if self.vertices is not None else CORESET_POINTS[self.points]["vertices"]

    @property
    def start_points(self) -> list:
        """The start points in use."""
        return self.starts if self.starts is not None else CORESET_POINTS[self.points]["starts"]


def _project_on_segment(p: Array, a: Array, b: Array) -> Array:
    d = b - a
    dd = d @ d
    t = 0.0 if dd == 0 else min(max((p - a) @ d / dd, 0.0), 1.0)
    return a + t * d


def _in_triangle(p: Array, a: Array, b: Array, c: Array, tol: float = 1e-12) -> bool:
    M = np.column_stack([b - a, c - a])
    if abs(np.linalg.det(M)) < tol:  # degenerate triangle: covered by its segments
        return False
    u, v = np.linalg.solve(M, p - a)
    return u >= -tol and v >= -tol and u + v <= 1 + tol


def project_on_hull_2d(points: Array, p: Array) -> Array:
    """Euclidean projection of p on the convex hull of 2-D points (rows), exact.

    In the plane a point of the hull lies in a triangle of vertices (Carathéodory), and the closest hull
    point to an outside point lies on a hull edge, i.e. on one of the segments between vertices.
    """
    pts = [np.asarray(q, dtype=float) for q in points]
    if any(_in_triangle(p, a, b, c) for a, b, c in combinations(pts, 3)):
        return p.copy()
    candidates = [_project_on_segment(p, a, b) for a, b in combinations(pts, 2)]
    return min(candidates, key=lambda q: float((q - p) @ (q - p)))


class CoresetToy(BilevelProblem):
    """The coreset toy; see the module docstring."""

    def __init__(self, p: CoresetToyParams) -> None:
        self.X = np.asarray(p.vertex_points, dtype=float).T  # (2, m)
        self.x0 = np.asarray(p.x0, dtype=float)
        self.s = p.scale
        self.dim_x, self.dim_y = self.X.shape[1], 2
        self.y_start = np.asarray(p.start_points[p.start - 1], dtype=float)
        self.y_opt = project_on_hull_2d(self.X.T, self.x0)
        self.F_inf = float(self.s * (self.y_opt - self.x0) @ (self.y_opt - self.x0))

    # σ(x) and products with its Jacobian J = diag(σ) − σσᵀ (symmetric)
    def _sigma(self, x: Array) -> Array:
        return softmax(x)

    @staticmethod
    def _jac_sigma(sig: Array, v: Array) -> Array:
        return sig * v - sig * (sig @ v)

    def _residual(self, x: Array, y: Array) -> tuple[Array, Array]:
        sig = self._sigma(x)
        return y - self.X @ sig, sig

    def f(self, x: Array, y: Array, batch: Batch = None) -> float:
        d = y - self.x0
        return float(self.s * d @ d)

    def g(self, x: Array, y: Array, batch: Batch = None) -> float:
        r, _ = self._residual(x, y)
        return float(r @ r)

    def grad_f(self, x: Array, y: Array, batch: Batch = None) -> tuple[Array, Array]:
        return np.zeros(self.dim_x), 2 * self.s * (y - self.x0)

    def grad_g(self, x: Array, y: Array, batch: Batch = None) -> tuple[Array, Array]:
        r, sig = self._residual(x, y)
        return -2 * self._jac_sigma(sig, self.X.T @ r), 2 * r

    def grad_y_g(self, x: Array, y: Array, batch: Batch = None) -> Array:
        return 2 * self._residual(x, y)[0]

    def hvp_yy_g(self, x: Array, y: Array, v: Array, batch: Batch = None) -> Array:
        return 2 * np.asarray(v, dtype=float)

    def cross_xy_g(self, x: Array, y: Array, v: Array, batch: Batch = None) -> Array:
        return -2 * self._jac_sigma(self._sigma(x), self.X.T @ v)

    def initial_point(self) -> tuple[Array, Array]:
        return np.zeros(self.dim_x), self.y_start.copy()

    # ---- ground truth ----
    def y_star(self, x: Array) -> Array:
        return self.X @ self._sigma(x)

    def grad_F(self, x: Array) -> Array:
        sig = self._sigma(x)
        return 2 * self.s * self._jac_sigma(sig, self.X.T @ (self.X @ sig - self.x0))

    def x_opt(self) -> Array | None:
        """None: the infimum is reached only as x → ∞ (boundary y_opt) or by many x (interior y_opt)."""
        return None

    def metrics(self, x: Array, y: Array) -> dict[str, float]:
        """Distances of y and y*(x) to y_opt, and F(x) − F_inf."""
        ys = self.y_star(x)
        return {
            "y_opt_dist": float(np.linalg.norm(y - self.y_opt)),
            "y_star_opt_dist": float(np.linalg.norm(ys - self.y_opt)),
            "F_gap": self.F(x) - self.F_inf,
        }


@register("coreset_toy", CoresetToyParams)
def build_coreset_toy(p: CoresetToyParams, seed: int) -> CoresetToy:
    """BOME coreset toy: nearest point to x0 in the convex hull of vertices, through softmax weights."""
    return CoresetToy(p)


# ---------------------------------------------------------------------------------------------------
# minimax_toy
# ---------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class MinimaxToyParams(Params):
    """Parameters of the minimax toy (defaults as the BOME authors' code ran it)."""

    bound: float = param(10.0, "positive", "b: x and y are kept in [−b, b]")
    x_start: float = param(4.0, "real", "initial x")
    y_start: float = param(4.0, "real", "initial y")

    def validate(self) -> None:
        for name in ("x_start", "y_start"):
            if abs(getattr(self, name)) > self.bound:
                self.fail(name, f"within the box [−{self.bound:g}, {self.bound:g}]", getattr(self, name))


class MinimaxToy(BilevelProblem):
    """The minimax toy; see the module docstring."""

    dim_x = 1
    dim_y = 1

    def __init__(self, p: MinimaxToyParams) -> None:
        self.b = p.bound
        self.start = (np.array([p.x_start]), np.array([p.y_start]))
        # |y| ≤ b as h = A x − B y − b ≤ 0 with A = 0, B = (−1, 1)ᵀ, b = (b, b).
        self.constraints = LinearConstraints(np.zeros((2, 1)), np.array([[-1.0], [1.0]]), np.array([self.b, self.b]))
        self.y_opt = np.zeros(1)

    def f(self, x: Array, y: Array, batch: Batch = None) -> float:
        return float(x @ y)

    def g(self, x: Array, y: Array, batch: Batch = None) -> float:
        return float(-(x @ y))

    def grad_f(self, x: Array, y: Array, batch: Batch = None) -> tuple[Array, Array]:
        return np.array(y, dtype=float), np.array(x, dtype=float)

    def grad_g(self, x: Array, y: Array, batch: Batch = None) -> tuple[Array, Array]:
        return -np.array(y, dtype=float), -np.array(x, dtype=float)

    def hvp_yy_g(self, x: Array, y: Array, v: Array, batch: Batch = None) -> Array:
        return np.zeros(1)

    def cross_xy_g(self, x: Array, y: Array, v: Array, batch: Batch = None) -> Array:
        return -np.array(v, dtype=float)

    def project_x(self, x: Array) -> Array:
        return np.clip(x, -self.b, self.b)

    def project_y(self, y: Array) -> Array:
        return np.clip(y, -self.b, self.b)

    def initial_point(self) -> tuple[Array, Array]:
        return self.start[0].copy(), self.start[1].copy()

    # ---- ground truth ----
    def y_star(self, x: Array) -> Array:
        """b·sign(x): the maximising corner; at x = 0 the selection 0 (any y is optimal there)."""
        return self.b * np.sign(x)

    def grad_F(self, x: Array) -> Array:
        """∇F of F(x) = b|x|; the zero subgradient at x = 0."""
        return self.b * np.sign(x)

    def lambda_star(self, x: Array) -> Array | None:
        """Multipliers of y ≤ b and −y ≤ b at y*(x): (max(x, 0), max(−x, 0))."""
        return np.array([max(float(x[0]), 0.0), max(-float(x[0]), 0.0)])

    def x_opt(self) -> Array | None:
        return np.zeros(1)

    def metrics(self, x: Array, y: Array) -> dict[str, float]:
        """Distance of (x, y) to the optimum (0, 0)."""
        return {"opt_dist": float(np.hypot(x[0], y[0]))}


@register("minimax_toy", MinimaxToyParams)
def build_minimax_toy(p: MinimaxToyParams, seed: int) -> MinimaxToy:
    """BOME minimax toy: f = x·y, g = −x·y on a box; optimum (0, 0)."""
    return MinimaxToy(p)


# ---------------------------------------------------------------------------------------------------
# nonunique_toy
# ---------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class NonuniqueToyParams(Params):
    """Parameters of the non-unique lower-level toy (start as the BOME authors' code ran it)."""

    x_start: float = param(0.0, "real", "initial x")
    y_start: list = param([0.0, 0.0], "real_vector", "initial y (a 2-vector)")

    def validate(self) -> None:
        if len(self.y_start) != 2:
            self.fail("y_start", "a 2-vector [a, b]", self.y_start)


class NonuniqueToy(BilevelProblem):
    """The non-unique lower-level toy; see the module docstring."""

    dim_x = 1
    dim_y = 2

    def __init__(self, p: NonuniqueToyParams) -> None:
        self.start = (np.array([p.x_start], dtype=float), np.asarray(p.y_start, dtype=float))
        self.y_opt = np.ones(2)

    def f(self, x: Array, y: Array, batch: Batch = None) -> float:
        return float(0.5 * (x[0] - y[1]) ** 2 + 0.5 * (y[0] - 1) ** 2)

    def g(self, x: Array, y: Array, batch: Batch = None) -> float:
        return float(0.5 * y[0] ** 2 - x[0] * y[0])

    def grad_f(self, x: Array, y: Array, batch: Batch = None) -> tuple[Array, Array]:
        return np.array([x[0] - y[1]]), np.array([y[0] - 1, y[1] - x[0]])

    def grad_g(self, x: Array, y: Array, batch: Batch = None) -> tuple[Array, Array]:
        return np.array([-y[0]]), np.array([y[0] - x[0], 0.0])

    def hvp_yy_g(self, x: Array, y: Array, v: Array, batch: Batch = None) -> Array:
        return np.array([v[0], 0.0])

    def cross_xy_g(self, x: Array, y: Array, v: Array, batch: Batch = None) -> Array:
        return np.array([-v[0]])

    def initial_point(self) -> tuple[Array, Array]:
        return self.start[0].copy(), self.start[1].copy()

    # ---- ground truth ----
    def y_star(self, x: Array) -> Array:
        """Optimistic selection from the solution set {(x, t)}: t = argmin_t f = x."""
        return np.array([x[0], x[0]])

    def grad_F(self, x: Array) -> Array:
        return np.array([x[0] - 1.0])

    def x_opt(self) -> Array | None:
        return np.ones(1)

    def metrics(self, x: Array, y: Array) -> dict[str, float]:
        """Distance of (x, y) to the optimum (1, (1, 1))."""
        return {"opt_dist": float(np.sqrt((x[0] - 1.0) ** 2 + (y - self.y_opt) @ (y - self.y_opt)))}


@register("nonunique_toy", NonuniqueToyParams)
def build_nonunique_toy(p: NonuniqueToyParams, seed: int) -> NonuniqueToy:
    """Liu et al. 2020 toy whose lower level has no unique solution; optimum x = 1, y = (1, 1)."""
    return NonuniqueToy(p)
