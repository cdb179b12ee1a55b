"""Exact solver for strongly convex QPs with linear inequality constraints.

    min_y ½ yᵀH y + cᵀy   s.t.   G y ≤ h,

returning y*, the multipliers λ* (H y + c + Gᵀλ = 0, λ ≥ 0, λᵀ(G y − h) = 0) and the active rows.
A `Polyhedron` holds a fixed G (h varies with the outer variable) and picks a finite method:
- box rows (every row ±e_i): a primal–dual active-set method on reduced Cholesky systems, which
  changes many bounds per iteration;
- general rows: a dual active-set method (Lawson–Hanson on min ½λᵀMλ + rᵀλ, λ ≥ 0, with
  M = G H⁻¹ Gᵀ), needing one Cholesky of H. The box method falls back to it if it ever cycles.
Both end on an exact solve of the KKT system of the final active set (residuals at rounding level).
It also projects onto the set and recovers multipliers from a gradient (for first-order methods).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.linalg as sla

Array = np.ndarray


@dataclass(frozen=True)
class QPSolution:
    """Primal solution, multipliers (one per row of G), strictly active rows and iterations used."""

    y: Array
    lam: Array
    active: Array
    iterations: int


def kkt_residuals(H: Array, c: Array, G: Array, h: Array, y: Array, lam: Array) -> dict[str, float]:
    """Max-norm KKT residuals: stationarity, primal and dual feasibility, complementarity."""
    slack = G @ y - h
    return {
        "stationarity": float(np.max(np.abs(H @ y + c + G.T @ lam), initial=0.0)),
        "primal": float(np.max(np.maximum(slack, 0.0), initial=0.0)),
        "dual": float(np.max(np.maximum(-lam, 0.0), initial=0.0)),
        "complementarity": float(np.max(np.abs(lam * slack), initial=0.0)),
    }


def box_pattern(G: Array) -> tuple[Array, Array] | None:
    """(coordinate, sign) of each row when every row is ±e_i with no (i, sign) repeated, else None."""
    if G.ndim != 2 or G.shape[0] == 0:
        return None
    coord = np.argmax(np.abs(G), axis=1)
    rows = np.arange(G.shape[0])
    sign = G[rows, coord]
    if not np.all(np.abs(sign) == 1.0) or np.count_nonzero(G) != G.shape[0]:
        return None
    key = coord * 2 + (sign > 0)
    if np.unique(key).size != key.size:
        return None
    return coord, sign


class Polyhedron:
    """The set {y : G y ≤ h} for a fixed G; h is passed per call."""

    def __init__(self, G: Array) -> None:
        self.G = np.asarray(G, dtype=float)
        self.m, self.d = self.G.shape
        self.pattern = box_pattern(self.G)
        # The Gram matrix G Gᵀ makes projections cheap for a few general rows.
        self._gram = None if self.pattern is not None else self.G @ self.G.T

    @property
    def is_box(self) -> bool:
        """True when every row is a bound ±y_i ≤ h_r."""
        return self.pattern is not None

    def bounds(self, h: Array) -> tuple[Array, Array]:
        """(lo, hi) per coordinate of a box (±inf where a side has no row)."""
        coord, sign = self.pattern  # type: ignore[misc]
        lo, hi = np.full(self.d, -np.inf), np.full(self.d, np.inf)
        up = sign > 0
        hi[coord[up]] = h[up]
        lo[coord[~up]] = -h[~up]
        return lo, hi

    # ---- the QP ----
    def solve(self, H: Array, c: Array, h: Array, chol=None, tol: float = 1e-13) -> QPSolution:
        """min ½yᵀHy + cᵀy s.t. G y ≤ h (H symmetric positive definite); `chol` = cho_factor(H)."""
        if self.is_box:
            sol = self._solve_box(H, c, h, tol)
            if sol is not None:
                return sol
            return self._solve_dual(H, c, h, chol, tol, start=None)
        return self._solve_dual(H, c, h, chol, tol, start=None)

    def _solve_dual(self, H: Array, c: Array, h: Array, chol, tol: float, start: Array | None) -> QPSolution:
        chol = chol if chol is not None else sla.cho_factor(H)
        return _DualActiveSet(self.G, h, lambda rhs: sla.cho_solve(chol, rhs), c, tol).run(start)

    def _solve_box(self, H: Array, c: Array, h: Array, tol: float, max_iter: int = 60) -> QPSolution | None:
        lo, hi = self.bounds(h)
        if np.any(lo > hi):
            raise ValueError("infeasible box: some lower bound exceeds its upper bound")
        scale = float(np.mean(np.diag(H)))
        y = np.clip(np.zeros(self.d), lo, hi)
        mu = -(H @ y + c)
        upper = lower = None
        for it in range(1, max_iter + 1):
            new_upper = mu + scale * (y - hi) > 0
            new_lower = mu + scale * (y - lo) < 0
            if upper is not None and np.array_equal(new_upper, upper) and np.array_equal(new_lower, lower):
                return self._box_solution(H, c, h, y, mu, upper, lower, it, tol)
            upper, lower = new_upper, new_lower
            y, mu = _reduced_solve(H, c, lo, hi, upper, lower)
        return None

    def _box_solution(self, H, c, h, y, mu, upper, lower, iterations, tol) -> QPSolution | None:
        coord, sign = self.pattern  # type: ignore[misc]
        lam = np.where(sign > 0, np.maximum(mu[coord], 0.0), np.maximum(-mu[coord], 0.0))
        lam[(sign > 0) & ~upper[coord]] = 0.0
        lam[(sign < 0) & ~lower[coord]] = 0.0
        scale = 1.0 + float(np.max(np.abs(h), initial=0.0)) + float(np.max(np.abs(y), initial=0.0))
        res = kkt_residuals(H, c, self.G, h, y, lam)
        # A stable active set is a KKT point unless bounds were crossed or a sign is wrong: verify.
        if res["primal"] > 1e-10 * scale or np.any(mu[upper] < -1e-10 * scale) or np.any(mu[lower] > 1e-10 * scale):
            return self._solve_dual(H, c, h, None, tol, start=np.flatnonzero(lam > 0))
        return QPSolution(y, lam, np.flatnonzero(lam > 0), iterations)

    # ---- first-order helpers ----
    def apply(self, y: Array) -> Array:
        """G y (O(m) for a box)."""
        if self.is_box:
            coord, sign = self.pattern  # type: ignore[misc]
            return sign * y[coord]
        return self.G @ y

    def apply_t(self, v: Array) -> Array:
        """Gᵀ v (O(m) for a box)."""
        if self.is_box:
            coord, sign = self.pattern  # type: ignore[misc]
            return np.bincount(coord, weights=sign * v, minlength=self.d)
        return self.G.T @ v

    def max_weighted_eig(self, w: Array) -> float:
        """Largest eigenvalue of Gᵀ diag(w) G for weights w ≥ 0."""
        if self.is_box:
            return float(np.max(np.bincount(self.pattern[0], weights=w, minlength=self.d), initial=0.0))
        s = np.sqrt(np.maximum(w, 0.0))
        return float(np.linalg.eigvalsh(s[:, None] * self._gram * s[None, :])[-1]) if self.m else 0.0

    def project(self, z: Array, h: Array) -> Array:
        """Euclidean projection of z onto {y : G y ≤ h}."""
        if self.is_box:
            lo, hi = self.bounds(h)
            return np.clip(z, lo, hi)
        solver = _DualActiveSet(self.G, h, lambda rhs: rhs, -z, 1e-13, gram=self._gram)
        return solver.run(None).y

    def multipliers(self, y: Array, grad: Array, h: Array, tol: float = 1e-9) -> Array:
        """λ ≥ 0 on the rows active at y that best satisfy grad + Gᵀλ = 0 (least squares)."""
        slack = self.G @ y - h
        active = np.flatnonzero(slack >= -tol * (1.0 + np.abs(h)))
        lam = np.zeros(self.m)
        if active.size == 0:
            return lam
        if self.is_box:
            _, sign = self.pattern  # type: ignore[misc]
            coord = self.pattern[0][active]  # type: ignore[index]
            lam[active] = -sign[active] * grad[coord]
        else:
            Ga = self.G[active]
            lam[active] = np.linalg.lstsq(Ga.T, -grad, rcond=None)[0]
        return np.maximum(lam, 0.0)


def _reduced_solve(H: Array, c: Array, lo: Array, hi: Array, upper: Array, lower: Array) -> tuple[Array, Array]:
    """Fix y at the bounds in `upper`/`lower`, solve H_II y_I = −c_I − H_IA y_A, return (y, μ = −(Hy + c))."""
    y = np.zeros(H.shape[0])
    y[upper] = hi[upper]
    y[lower] = lo[lower]
    free = ~(upper | lower)
    if np.any(free):
        fixed = ~free
        rhs = -c[free] - H[np.ix_(free, fixed)] @ y[fixed]
        y[free] = sla.cho_solve(sla.cho_factor(H[np.ix_(free, free)]), rhs)
    mu = -(H @ y + c)
    mu[free] = 0.0
    return y, mu


class _DualActiveSet:
    """Lawson–Hanson on the dual of min ½yᵀHy + cᵀy s.t. Gy ≤ h; `solve_h(R)` applies H⁻¹."""

    def __init__(self, G: Array, h: Array, solve_h, c: Array, tol: float, gram: Array | None = None) -> None:
        self.G, self.h, self.solve_h = G, h, solve_h
        self.m = G.shape[0]
        self.y0 = -solve_h(c)
        self.tol = tol * (1.0 + float(np.max(np.abs(h), initial=0.0)) + float(np.max(np.abs(self.y0), initial=0.0)))
        self._cols: dict[int, Array] = {}
        self._gram = gram
        if gram is None and self.m <= 64:
            V = solve_h(G.T)  # H⁻¹Gᵀ for every row at once when there are few rows
            self._cols = {j: V[:, j] for j in range(self.m)}

    def _V(self, rows: list[int]) -> Array:
        for j in rows:
            if j not in self._cols:
                self._cols[j] = self.solve_h(self.G[j])
        return np.column_stack([self._cols[j] for j in rows])

    def _M(self, rows: list[int]) -> Array:
        if self._gram is not None:
            return self._gram[np.ix_(rows, rows)]
        return self.G[rows] @ self._V(rows)

    def _y(self, rows: list[int], lam: Array) -> Array:
        if not rows:
            return self.y0.copy()
        if self._gram is not None:  # H = I: y = y0 − G_Pᵀλ_P
            return self.y0 - self.G[rows].T @ lam[rows]
        return self.y0 - self._V(rows) @ lam[rows]

    def _sub(self, rows: list[int]) -> Array:
        """Unconstrained dual minimiser on the rows: M_PP s = −r_P with r = h − G y0."""
        r = self.h[rows] - self.G[rows] @ self.y0
        return np.linalg.solve(self._M(rows), -r)

    def run(self, start: Array | None) -> QPSolution:
        lam = np.zeros(self.m)
        rows: list[int] = self._warm(list(start) if start is not None else [], lam)
        iterations = 0
        for iterations in range(1, 10 * self.m + 10):
            y = self._y(rows, lam)
            w = self.G @ y - self.h
            w[rows] = -np.inf
            j = int(np.argmax(w)) if self.m else 0
            if self.m == 0 or w[j] <= self.tol:
                break
            rows.append(j)
            rows = self._inner(rows, lam)
        y = self._y(rows, lam)
        return QPSolution(y, lam, np.flatnonzero(lam > 0), iterations)

    def _warm(self, rows: list[int], lam: Array) -> list[int]:
        """Drop rows of a guessed active set until their multipliers are all positive."""
        while rows:
            s = self._sub(rows)
            if np.all(s > 0):
                lam[rows] = s
                return rows
            rows = [j for j, v in zip(rows, s) if v > 0]
        return rows

    def _inner(self, rows: list[int], lam: Array) -> list[int]:
        while True:
            s = self._sub(rows)
            if np.all(s > 0):
                lam[rows] = s
                return rows
            cur = lam[rows]
            neg = s <= 0
            # Move from the current feasible λ towards s until the first multiplier reaches zero.
            gap = cur[neg] - s[neg]  # ≥ 0; zero only for a new row whose s is exactly 0
            step = float(np.min(np.divide(cur[neg], gap, out=np.zeros_like(gap), where=gap > 0)))
            lam[rows] = cur + step * (s - cur)
            drop = [j for j, v in zip(rows, lam[rows]) if v <= 0]
            # The newest row has w > 0, so its multiplier is positive; guard against rounding anyway.
            if not drop:
                drop = [rows[int(np.argmin(s))]]
            lam[drop] = 0.0
            rows = [j for j in rows if j not in drop]
            if not rows:
                return rows
