"""Online bilevel problems (F2OBO paper): sequences (f_t, g_t), t = 1..T, with exact ground truth per t.

- oscillating_toy (paper §4.3): f_t = c e^{−y²}, g_t = (μ_g/2)(y − (−1)^t x)², X = [−1, 1]. The inner
  solution flips sign every step (H_{2,T} = 4T − 4) while F_t(x) = c e^{−x²} never changes (V_T = 0).
- drifting_quadratic: the quadratic family with its lower-level linear term a_t (and optionally the
  outer target e_t) moving along a seeded random walk; X is a ball so that V_T is finite.

Path quantities (paper eq. 5): V_T = Σ_{t≥2} sup_X |F_{t−1} − F_t|, H_{2,T} = Σ_{t≥2} sup_X ‖y*_{t−1} − y*_t‖².
"""
from __future__ import annotations

import copy
from dataclasses import dataclass

import numpy as np
import scipy.linalg as sla

from problems.base import Array, Batch, BilevelProblem, OnlineProblem
from problems.quadratic import Quadratic, QuadraticParams
from problems.registry import register
from problems.validation import Params, param


def _check_time(t: int, horizon: int) -> None:
    if not (1 <= int(t) <= horizon):
        raise ValueError(f"time step t must be in 1..{horizon}, got {t!r}")


# ---------------------------------------------------------------------------------------------------
# oscillating_toy
# ---------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class OscillatingToyParams(Params):
    """Parameters of the oscillating toy (the paper fixes no numbers for c, μ_g; these are defaults)."""

    T: int = param(1000, "positive_int", "horizon: number of time steps")
    c: float = param(1.0, "positive", "scale c of f_t(x, y) = c exp(−y²)")
    mu_g: float = param(1.0, "positive", "curvature μ_g of g_t(x, y) = (μ_g/2)(y − (−1)^t x)²")
    x1: float = param(0.5, "real", "starting outer point x_1 (in [−1, 1]; 0 is a stationary point)")
    y1: float = param(0.0, "real", "starting inner point")
    regret_gamma: float = param(0.1, "positive", "γ of the regret's gradient mapping (eq. 3–4); 0.1 is the "
                                "online algorithms' default outer step")

    def validate(self) -> None:
        if abs(self.x1) > 1.0:
            self.fail("x1", "in [-1, 1]", self.x1)


class OscillatingInstance(BilevelProblem):
    """(f_t, g_t) of the toy for one sign s = (−1)^t; scalar x, y held as arrays of size 1."""

    dim_x = 1
    dim_y = 1

    def __init__(self, sign: float, c: float, mu_g: float, start: tuple[float, float]) -> None:
        self.s, self.c, self.mu = float(sign), c, mu_g
        self._start = start

    def f(self, x: Array, y: Array, batch: Batch = None) -> float:
        return float(self.c * np.exp(-y[0] ** 2))

    def g(self, x: Array, y: Array, batch: Batch = None) -> float:
        r = y[0] - self.s * x[0]
        return float(0.5 * self.mu * r * r)

    def grad_y_f(self, x: Array, y: Array, batch: Batch = None) -> Array:
        return -2.0 * self.c * y * np.exp(-y * y)

    def grad_f(self, x: Array, y: Array, batch: Batch = None) -> tuple[Array, Array]:
        return np.zeros(1), self.grad_y_f(x, y)

    def grad_y_g(self, x: Array, y: Array, batch: Batch = None) -> Array:
        return self.mu * (y - self.s * x)

    def grad_g(self, x: Array, y: Array, batch: Batch = None) -> tuple[Array, Array]:
        gy = self.grad_y_g(x, y)
        return -self.s * gy, gy

    def hvp_yy_g(self, x: Array, y: Array, v: Array, batch: Batch = None) -> Array:
        return self.mu * v

    def cross_xy_g(self, x: Array, y: Array, v: Array, batch: Batch = None) -> Array:
        return -self.mu * self.s * v

    def project_x(self, x: Array) -> Array:
        return np.clip(x, -1.0, 1.0)

    def initial_point(self) -> tuple[Array, Array]:
        return np.array([self._start[0]]), np.array([self._start[1]])

    # ---- ground truth ----
    def y_star(self, x: Array) -> Array:
        return self.s * np.asarray(x, dtype=float)

    def grad_F(self, x: Array) -> Array:
        return -2.0 * self.c * x * np.exp(-x * x)

    def x_opt(self) -> Array | None:
        """F = c e^{−x²} is minimised on X = [−1, 1] at both ends; +1 is returned."""
        return np.array([1.0])


class OscillatingToy(OnlineProblem):
    """The §4.3 toy: the inner solution y*_t(x) = (−1)^t x flips sign every step."""

    dim_x = 1
    dim_y = 1

    def __init__(self, p: OscillatingToyParams) -> None:
        self.horizon = p.T
        self.c, self.mu_g = p.c, p.mu_g
        self.regret_gamma = p.regret_gamma
        start = (p.x1, p.y1)
        # Only two distinct instances exist (t odd, t even): share them.
        self._by_parity = {0: OscillatingInstance(1.0, p.c, p.mu_g, start),
                           1: OscillatingInstance(-1.0, p.c, p.mu_g, start)}

    def at(self, t: int) -> OscillatingInstance:
        _check_time(t, self.horizon)
        return self._by_parity[int(t) % 2]

    def project_x(self, x: Array) -> Array:
        return np.clip(x, -1.0, 1.0)

    def initial_point(self) -> tuple[Array, Array]:
        return self._by_parity[1].initial_point()

    def variation(self, grid: int = 2001) -> dict[str, float]:
        """V_T and H_{2,T} from eq. 5 over the sequence.

        ‖y*_{t−1}(x) − y*_t(x)‖² = (s_{t−1} − s_t)² x² is convex in x, so its sup over [−1, 1] is at an
        end point (exact). |F_{t−1} − F_t| is evaluated on a grid of X (it vanishes identically here).
        """
        s = (-1.0) ** np.arange(1, self.horizon + 1)
        ends = np.array([-1.0, 1.0])
        ys = s[:, None] * ends[None, :]
        H = float(np.sum(np.max((ys[1:] - ys[:-1]) ** 2, axis=1)))
        xs = np.linspace(-1.0, 1.0, grid)
        F = self.c * np.exp(-(s[:, None] * xs[None, :]) ** 2)
        V = float(np.sum(np.max(np.abs(F[:-1] - F[1:]), axis=1)))
        return {"V_T": V, "H_2T": H}


@register("oscillating_toy", OscillatingToyParams, online=True)
def build_oscillating_toy(p: OscillatingToyParams, seed: int) -> OscillatingToy:
    """F2OBO §4.3 toy: V_T = 0, H_{2,T} = 4T − 4 (deterministic; the seed is unused)."""
    return OscillatingToy(p)


# ---------------------------------------------------------------------------------------------------
# drifting_quadratic
# ---------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class DriftingQuadraticParams(QuadraticParams):
    """The quadratic family's parameters plus the drift of its lower-level linear term and outer target."""

    T: int = param(200, "positive_int", "horizon: number of time steps")
    drift: float = param(0.01, "nonnegative", "distance y*_t(x) moves per step (drift of a_t)")
    target_drift: float = param(0.0, "nonnegative", "distance the outer target e_t moves per step")
    radius: float = param(10.0, "positive", "radius of the outer ball X = {‖x‖ ≤ radius}")
    regret_gamma: float = param(0.1, "positive", "γ of the regret's gradient mapping (eq. 3–4); 0.1 is the "
                                "online algorithms' default outer step")


class BallQuadratic(Quadratic):
    """A quadratic instance whose outer set is the ball of the online problem."""

    def __init__(self, p: DriftingQuadraticParams, seed: int) -> None:
        super().__init__(p, seed)
        self.radius = p.radius

    def project_x(self, x: Array) -> Array:
        return project_ball(x, self.radius)

    def x_opt(self) -> Array | None:
        """The unconstrained minimiser of F when it lies in the ball, else None."""
        x = super().x_opt()
        return x if x is not None and np.linalg.norm(x) <= self.radius else None


def project_ball(x: Array, radius: float) -> Array:
    """Euclidean projection onto {‖x‖ ≤ radius}."""
    n = float(np.linalg.norm(x))
    return x if n <= radius else x * (radius / n)


def unit_rows(rng: np.random.Generator, n: int, d: int) -> Array:
    """n random unit vectors in R^d (rows)."""
    u = rng.standard_normal((n, d))
    return u / np.linalg.norm(u, axis=1, keepdims=True)


class DriftingQuadratic(OnlineProblem):
    """Quadratic instances with a_t, e_t on a seeded random walk: y*_t shifts by `drift` every step.

    a_t − a_{t−1} = drift · A ξ_t with unit ξ_t, so y*_t(x) − y*_{t−1}(x) = −drift ξ_t for every x;
    e_t − e_{t−1} = target_drift · ζ_t with unit ζ_t.
    """

    def __init__(self, p: DriftingQuadraticParams, seed: int) -> None:
        self._base = BallQuadratic(p, seed)
        self.dim_x, self.dim_y = p.dim_x, p.dim_y
        self.horizon, self.radius = p.T, p.radius
        self.regret_gamma = p.regret_gamma
        rng = np.random.default_rng([seed, 1])  # a stream separate from the instance's own
        b = self._base
        steps = np.zeros((p.T, p.dim_y))
        steps[1:] = p.drift * unit_rows(rng, p.T - 1, p.dim_y) @ b.A  # rows: (A ξ_t)ᵀ, A symmetric
        self.a_path = b.a + np.cumsum(steps, axis=0)
        tsteps = np.zeros((p.T, p.dim_y))
        tsteps[1:] = p.target_drift * unit_rows(rng, p.T - 1, p.dim_y)
        self.e_path = b.e + np.cumsum(tsteps, axis=0)

    def at(self, t: int) -> BallQuadratic:
        _check_time(t, self.horizon)
        inst = copy.copy(self._base)
        inst.a = self.a_path[t - 1]
        inst.e = self.e_path[t - 1]
        if self._base.n_samples is not None:
            # Shifting every sample's linear term keeps the sample mean equal to a_t.
            inst.a_i = self._base.a_i + (inst.a - self._base.a)
        return inst

    def project_x(self, x: Array) -> Array:
        return project_ball(x, self.radius)

    def initial_point(self) -> tuple[Array, Array]:
        return self._base.initial_point()

    def variation(self) -> dict[str, float]:
        """V_T and H_{2,T} (eq. 5) in closed form.

        With K = A⁻¹C and m_t = A⁻¹a_t + e_t, F_{t−1}(x) − F_t(x) = wᵀx + b, w = KᵀP(m_t − m_{t−1}),
        b = ½(m_{t−1}ᵀPm_{t−1} − m_tᵀPm_t), whose sup of |·| over the ball is radius·‖w‖ + |b|;
        y*_{t−1}(x) − y*_t(x) = A⁻¹(a_t − a_{t−1}) does not depend on x.
        """
        b = self._base
        chol = b._A_chol
        # Solved on the steps a_t − a_{t−1}, not on each a_t: a path that does not move gives exactly 0 (LAPACK may
        # round equal right-hand sides differently by their column), and small steps lose no digits to cancellation.
        d_inv = sla.cho_solve(chol, np.diff(self.a_path, axis=0).T).T  # A⁻¹(a_t − a_{t−1})
        A_inv_a = sla.cho_solve(chol, self.a_path[0]) + np.vstack([np.zeros_like(d_inv[:1]), np.cumsum(d_inv, axis=0)])
        m = A_inv_a + self.e_path
        K = sla.cho_solve(chol, b.C)
        dm = d_inv + np.diff(self.e_path, axis=0)
        w = dm @ b.P @ K  # rows (KᵀP dm_t)ᵀ
        off = -0.5 * np.einsum("ti,ij,tj->t", dm, b.P, m[:-1] + m[1:])  # ½(m_{t−1}ᵀPm_{t−1} − m_tᵀPm_t)
        V = float(np.sum(self.radius * np.linalg.norm(w, axis=1) + np.abs(off)))
        H = float(np.sum(d_inv ** 2))
        return {"V_T": V, "H_2T": H}


@register("drifting_quadratic", DriftingQuadraticParams, online=True)
def build_drifting_quadratic(p: DriftingQuadraticParams, seed: int) -> DriftingQuadratic:
    """Quadratic with a drifting lower-level linear term (and outer target) on a ball X."""
    return DriftingQuadratic(p, seed)
