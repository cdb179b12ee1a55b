"""moving_quadratic: an online quadratic whose stationary point moves inside X along a smooth path.

The quadratic family's instance (g_t = ½yᵀAy − yᵀCx + a_tᵀy, f = ½(y − e)ᵀP(y − e) + ½m‖x‖² + cᵀx) on the
ball X = {‖x‖ ≤ radius}, with a_t = a − A u_t: the inner solution y*_t(x) = y*_1(x) + u_t moves by u_t, a point
on a circle of radius ρ through 0 in a random plane of R^dim_y, at a speed that varies smoothly,

    φ_t = φ_{t−1} + (drift/ρ)(1 + v sin(2π t / period)),   u_t = ρ((cos φ_t − 1) b_1 + sin φ_t b_2),

so y*_t moves `drift` per step on average (2ρ sin(Δφ_t/2) exactly), between (1 − v) and (1 + v) times it.
c is set so that the stationary point of F_1 is x*_1 = `center` · (a random unit vector); F_t is strongly convex
(m > 0) with x*_t = x*_1 + (∇²F)⁻¹KᵀP u_t (K = A⁻¹C), which stays well inside X (`x_path` gives it exactly).
Unlike drifting_quadratic's random walk, the path comes back on itself and its speed changes: a method that
tracks y*_t only as fast as a fixed inner loop allows falls behind in the fast stretches.

V_T and H_{2,T} (paper eq. 5) in closed form: `variation`, inherited from drifting_quadratic.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.linalg as sla

from problems.base import Array
from problems.online import BallQuadratic, DriftingQuadratic, unit_rows
from problems.quadratic import QuadraticParams, orthonormal_rows
from problems.registry import register
from problems.validation import param


@dataclass(frozen=True)
class MovingQuadraticParams(QuadraticParams):
    """The quadratic family's parameters plus the path of the inner solution and the outer ball."""

    T: int = param(200, "positive_int", "horizon: number of time steps")
    drift: float = param(0.01, "nonnegative", "mean distance y*_t(x) moves per step along its path")
    path_radius: float = param(1.0, "positive", "radius ρ of the circle u_t runs on")
    speed_variation: float = param(0.9, "nonnegative", "v: the speed varies between (1 − v) and (1 + v) × drift")
    speed_period: int = param(50, "positive_int", "steps per cycle of the speed")
    center: float = param(2.0, "nonnegative", "distance of x*_1 from the starting x = 0")
    radius: float = param(10.0, "positive", "radius of the outer ball X = {‖x‖ ≤ radius}")
    regret_gamma: float = param(0.1, "positive", "γ of the regret's gradient mapping (eq. 3–4); 0.1 is the "
                                "online algorithms' default outer step")

    def validate(self) -> None:
        super().validate()
        if self.speed_variation >= 1.0:
            self.fail("speed_variation", "below 1 (the speed stays positive)", self.speed_variation)
        if self.outer_curvature <= 0:
            self.fail("outer_curvature", "positive (F_t strongly convex: one stationary point)", self.outer_curvature)
        if self.dim_y < 2:
            self.fail("dim_y", "at least 2 (the path is a circle)", self.dim_y)
        if self.center >= self.radius:
            self.fail("center", f"below radius = {self.radius}", self.center)

    def array_bytes(self) -> float:
        """The quadratic's arrays plus the paths of a_t and e_t (T × dim_y each)."""
        return super().array_bytes() + 16.0 * self.T * self.dim_y


def phases(p: MovingQuadraticParams) -> Array:
    """φ_1 = 0, φ_t = φ_{t−1} + (drift/ρ)(1 + v sin(2π t/period))."""
    t = np.arange(2, p.T + 1)
    steps = (p.drift / p.path_radius) * (1.0 + p.speed_variation * np.sin(2.0 * np.pi * t / p.speed_period))
    return np.concatenate([[0.0], np.cumsum(steps)])


class MovingQuadratic(DriftingQuadratic):
    """Quadratic instances whose y*_t(x) = y*_1(x) + u_t follows a circle at a varying speed (module docstring)."""

    def __init__(self, p: MovingQuadraticParams, seed: int) -> None:
        b = BallQuadratic(p, seed)
        self._base = b
        self.dim_x, self.dim_y = p.dim_x, p.dim_y
        self.horizon, self.radius, self.regret_gamma = p.T, p.radius, p.regret_gamma
        rng = np.random.default_rng([seed, 2])  # a stream separate from the instance's own
        basis = orthonormal_rows(rng, 2, p.dim_y)
        phi = phases(p)
        self.u_path = p.path_radius * (np.outer(np.cos(phi) - 1.0, basis[0]) + np.outer(np.sin(phi), basis[1]))
        self.a_path = b.a - self.u_path @ b.A  # a_t = a − A u_t (A symmetric)
        self.e_path = np.tile(b.e, (p.T, 1))
        # c such that ∇F_1(x*_1) = 0 at x*_1 = center · (unit vector).
        start = p.center * unit_rows(rng, 1, p.dim_x)[0]
        b.c = np.zeros(p.dim_x)
        b.c = -b.grad_F(start)  # ∇F_1 with c = 0 at x*_1; adding c = −that makes x*_1 stationary
        self._hessian_F = b.hessian_F()

    def x_path(self) -> Array:
        """The stationary points x*_t of F_t, t = 1..T (rows): x*_t = H⁻¹(−∇F_t(0)), H = ∇²F."""
        b = self._base
        K = sla.cho_solve(b._A_chol, b.C)
        # ∇F_t(0) = c + Kᵀ P (A⁻¹(−a_t) − e) = c − KᵀP (A⁻¹a_t + e)
        m = sla.cho_solve(b._A_chol, self.a_path.T).T + self.e_path
        grad0 = b.c - m @ b.P @ K
        return -np.linalg.solve(self._hessian_F, grad0.T).T


@register("moving_quadratic", MovingQuadraticParams, online=True)
def build_moving_quadratic(p: MovingQuadraticParams, seed: int) -> MovingQuadratic:
    """Quadratic whose inner and outer solutions follow a smooth closed path at a varying speed, inside a ball X."""
    return MovingQuadratic(p, seed)
