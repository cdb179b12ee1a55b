"""SSIGD (Khanduri et al. 2023) and DS-BLO (Khanduri et al. 2024): implicit-gradient methods for lower
levels with linear constraints h(x, y) = A x − B y − b ≤ 0, the baselines of the F2CSA paper (§6, Fig. 2).

Both perturb the lower level to g + qᵀy with a small Gaussian q, so strict complementarity holds almost
surely, and use the implicit gradient of the perturbed problem through its active rows a:
  dλ/dx = (B_a H⁻¹B_aᵀ)⁻¹(A_a + B_a H⁻¹Jᵀ),  dy/dx = H⁻¹(B_aᵀ dλ/dx − Jᵀ),  ∇F = ∇x f + (dy/dx)ᵀ∇y f,
H = ∇²yy g, J = ∇²xy g. It is applied as a vector (adjoint form): w = H⁻¹∇y f, r = S⁻¹B_a w with
S = B_a H⁻¹B_aᵀ, u = w − H⁻¹B_aᵀ r, ∇F = ∇x f + A_aᵀ r − J u. H and J come from the counted dense
oracles (one "hessian" call each); the lower level is solved as a dense QP (problems.qp) by
sequential quadratic steps with that H on one sample of g (one step is exact for a quadratic g; the
next confirms it). That dense work — Cholesky of H, the QP, the active KKT system — is what the F2CSA
paper timed against its first-order oracle.

SSIGD: one fixed q; x ← Proj_X(x − β_t ĝ), β_t = β/(t+1)^e (paper §6 of F2CSA: β = 1e-4, diminishing).
DS-BLO (its Alg. 1, option II): m_1 = ĝ(x_1); then x_{t+1} = x_t − m_t/(γ1‖m_t‖ + γ2);
x̄_{t+1} ~ U[x_t, x_{t+1}]; fresh q; m_{t+1} = β m_t + (1 − β) ĝ(x̄_{t+1}).
"""
from __future__ import annotations

import dataclasses

import numpy as np
import scipy.linalg as sla

from algorithms.base import Algorithm, StochasticConfig, register
from algorithms.f2csa import power_lipschitz
from algorithms.primal_dual import primal_dual
from algorithms.schedules import decaying
from algorithms.search_space import Range
from problems.base import Array
from problems.qp import Polyhedron
from problems.validation import param


@dataclasses.dataclass(frozen=True)
class ImplicitConstrainedConfig(StochasticConfig):
    """Settings shared by SSIGD and DS-BLO."""

    batch_size: int | None = param(1, "optional_positive_int", "samples per oracle call (null: exact oracles)")
    q_std: float = param(0.01, "nonnegative", "standard deviation of the perturbation q in g + qᵀy")
    ll_max_iter: int = param(10, "positive_int", "cap on sequential QP steps of the lower-level solve")
    ll_tol: float = param(1e-12, "positive", "stop the lower-level solve when ‖Δy‖ ≤ ll_tol (1 + ‖y‖)")
    lower_solver: str = param("qp", "str", "perturbed lower level: exact dense QP, or the primal–dual iteration of "
                                           "F2CSA's Remark 4.1 (the F2CSA paper's §6)", choices=("qp", "primal_dual"))
    pd_max_iter: int = param(35, "positive_int", "primal–dual iterations per solve (lower_solver: primal_dual)")
    pd_tol: float = param(1e-3, "positive", "stop the primal–dual loop when ‖Δy‖/η_y + ‖Δλ‖/η_λ ≤ pd_tol")


class ImplicitConstrained(Algorithm):
    """Shared machinery: perturbed lower-level QP solve and the active-set implicit gradient."""

    state = ("ll_iters", "n_active", "lam", "v_top")
    first_order = False
    stochastic = True
    loops = "single"
    constrained = True

    def __init__(self, problem, config: ImplicitConstrainedConfig, rng: np.random.Generator) -> None:
        super().__init__(problem, config, rng)
        cons = problem.constraints
        self.A, self.B, self.b = cons.A, cons.B, cons.b
        self.poly = Polyhedron(-self.B)
        self.b_norm_sq = self.poly.max_weighted_eig(np.ones(len(self.b)))
        self.n_active = 0
        self.ll_iters = 0
        self.lam = np.zeros(len(self.b))
        # The power-iteration vector for L̂ is drawn only for the primal–dual solver, so that runs with the
        # exact QP solve draw the same random stream as before that solver existed.
        self.v_top = self.rng.standard_normal(problem.dim_y) if config.lower_solver == "primal_dual" else None

    def sample_q(self) -> Array:
        """A fresh perturbation q ~ N(0, q_std² I)."""
        return self.config.q_std * self.rng.standard_normal(self.problem.dim_y)

    def implicit_gradient(self, x: Array, q: Array) -> Array:
        """∇F_q(x; ξ): solve the perturbed lower level at x, then the active KKT system (adjoint form)."""
        p = self.problem
        batch_g = self.batch()
        H = p.hessian_yy_g(x, self.y, batch_g)
        J = p.jacobian_xy_g(x, self.y, batch_g)
        chol = sla.cho_factor(H, check_finite=False)
        if self.config.lower_solver == "primal_dual":
            y, active = self._lower_primal_dual(x, q, H)
        else:
            y, active = self._lower(x, q, H, chol, batch_g)
        self.y = y
        gx, gy = p.grad_f(x, y, self.batch())
        w = sla.cho_solve(chol, gy, check_finite=False)
        if active.size == 0:
            return gx - J @ w
        B_a = self.B[active]
        W = sla.cho_solve(chol, B_a.T, check_finite=False)
        r = np.linalg.solve(B_a @ W, B_a @ w)
        u = w - W @ r
        return gx + self.A[active].T @ r - J @ u

    def _lower(self, x: Array, q: Array, H: Array, chol, batch) -> tuple[Array, Array]:
        """Sequential QP steps with the sampled H on one sample of g; returns (y, active rows)."""
        rhs = self.b - self.A @ x
        y = self.y
        sol = None
        for k in range(1, self.config.ll_max_iter + 1):
            grad = self.problem.grad_y_g(x, y, batch) + q
            sol = self.poly.solve(H, grad - H @ y, rhs, chol=chol)
            moved = float(np.linalg.norm(sol.y - y))
            y = sol.y
            self.ll_iters = k
            if moved <= self.config.ll_tol * (1.0 + float(np.linalg.norm(y))):
                break
        self.n_active = int(sol.active.size)
        return y, sol.active

    def _lower_primal_dual(self, x: Array, q: Array, H: Array) -> tuple[Array, Array]:
        """Remark 4.1's primal–dual iteration on g + qᵀy with fresh samples; active rows: λ̃ > 0."""
        p, cap = self.problem, self.config.pd_max_iter
        iters = 3 if self.ll_iters else 20  # warm-started power iterations after the first solve
        L, self.v_top = power_lipschitz(lambda v: H @ v, self.v_top, iters)
        eta_y = 1.0 / (1.1 * L)  # power iteration approaches λmax from below: keep a margin
        eta_l = eta_y / max(1.0, self.b_norm_sq)
        noisy = self.batch_size_now() is not None
        h = (lambda y: self.poly.apply(y) - self.b) if not np.any(self.A) else \
            (lambda y: self.A @ x + self.poly.apply(y) - self.b)
        y, self.lam, self.ll_iters = primal_dual(lambda y: p.grad_y_g(x, y, self.batch()) + q, h, self.poly.apply_t,
                                                 self.y, self.lam, eta_y, eta_l, self.config.pd_tol, cap,
                                                 cap // 2 + 1 if noisy else None)
        active = np.flatnonzero(self.lam > 0)
        self.n_active = int(active.size)
        return y, active

    def batch_size_now(self) -> int | None:
        """The oracles' batch size, or None when they are exact."""
        if self.config.batch_size is None or not getattr(self.problem, "stochastic", False):
            return None
        return self.config.batch_size


@dataclasses.dataclass(frozen=True)
class SSIGDConfig(ImplicitConstrainedConfig):
    """SSIGD hyperparameters (β from the F2CSA paper's §6)."""

    beta: float = param(1e-4, "positive", "β: initial step size (F2CSA §6: 1e-4)")
    beta_decay: float = param(0.5, "nonnegative", "e in the diminishing step β_t = β/(t+1)^e")


@register
class SSIGD(ImplicitConstrained):
    """SSIGD: projected stochastic implicit-gradient steps on a once-perturbed lower level."""

    name = "ssigd"
    Config = SSIGDConfig
    state = ("q",)  # drawn once from the run's RNG: part of what a resumed run must carry
    step_sizes = ("beta",)
    paper = "Khanduri, Tsaknakis, Zhang, Liu & Hong 2023 (SIGD/SSIGD)"

    def __init__(self, problem, config: SSIGDConfig, rng: np.random.Generator) -> None:
        super().__init__(problem, config, rng)
        self.q = self.sample_q()

    def step_size(self) -> float:
        """β_t."""
        return decaying(self.config.beta, self.config.beta_decay, self.iteration)

    def step(self) -> None:
        grad = self.implicit_gradient(self.x, self.q)
        self.x = self.problem.project_x(self.x - self.step_size() * grad)

    def diagnostics(self) -> dict[str, float]:
        return {"beta": self.step_size(), "active": float(self.n_active), "ll_iters": float(self.ll_iters)}


@dataclasses.dataclass(frozen=True)
class DSBLOConfig(ImplicitConstrainedConfig):
    """DS-BLO hyperparameters (the paper sets them from unknown constants; these are practical)."""

    momentum: float = param(0.9, "probability", "β in m ← β m + (1 − β) ĝ")
    gamma1: float = param(10.0, "positive", "γ1 in η_t = 1/(γ1‖m_t‖ + γ2); steps are at most 1/γ1 long")
    gamma2: float = param(10.0, "positive", "γ2 in η_t = 1/(γ1‖m_t‖ + γ2); η_t → 1/γ2 as m → 0")


@register
class DSBLO(ImplicitConstrained):
    """DS-BLO: doubly stochastic perturbed implicit gradient with momentum and normalised steps."""

    state = ("eta", "m")
    name = "dsblo"
    Config = DSBLOConfig
    step_sizes = ("gamma1", "gamma2")
    tunables = {"momentum": Range(0.5, 0.99, log=False)}
    paper = "Khanduri, Tsaknakis, Zhang, Liu & Hong 2024 (DS-BLO)"

    def __init__(self, problem, config: DSBLOConfig, rng: np.random.Generator) -> None:
        super().__init__(problem, config, rng)
        self.m: Array | None = None
        self.eta = 0.0

    def step(self) -> None:
        c = self.config
        if self.m is None:
            self.m = self.implicit_gradient(self.x, self.sample_q())
        self.eta = 1.0 / (c.gamma1 * float(np.linalg.norm(self.m)) + c.gamma2)
        x_next = self.x - self.eta * self.m
        x_bar = self.x + self.rng.uniform() * (x_next - self.x)
        self.x = x_next
        g = self.implicit_gradient(x_bar, self.sample_q())
        self.m = c.momentum * self.m + (1.0 - c.momentum) * g

    def diagnostics(self) -> dict[str, float]:
        return {"eta": self.eta, "active": float(self.n_active), "ll_iters": float(self.ll_iters)}
