"""Stochastic hypergradient baselines: SOBA (Dagréou, Ablin, Vaiter & Moreau 2022), AmIGO (Arbel & Mairal
2022) and StocBiO (Ji, Yang & Liang 2021).

All three estimate ∇F = ∇x f − J H⁻¹ ∇y f on minibatches (`batch_size`; null runs them full batch):
SOBA moves y, v and x together, one step each per iteration; AmIGO and StocBiO run T warm-started
SGD steps on y, then approximate H⁻¹∇y f by T warm SGD steps on v (AmIGO) or a Neumann series
(StocBiO), then take one outer step. Step sizes follow c/(t+1)^e schedules (algorithms/schedules.py).
"""
from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from algorithms.aid import InnerOuterConfig, StepSolve
from algorithms.base import Algorithm, BatchSource, StochasticConfig, register
from algorithms.hypergradient import fixed_point_solve, neumann_series
from algorithms.schedules import decaying
from problems.base import Array
from problems.validation import param


Directions = tuple[Array, Array, Array]


def soba_directions(p: Any, x: Array, y: Array, v: Array, batch_g: Any, batch_f: Any) -> Directions:
    """(D_y, D_v, D_x) = (∇y g, H v + ∇y f, J v + ∇x f) at (x, y, v): g's terms on batch_g, f's on batch_f
    (None: full batch): the directions of Dagréou, Ablin, Vaiter & Moreau 2022, Algorithm 1."""
    grad_y_g = p.grad_y_g(x, y, batch_g)
    hvp = p.hvp_yy_g(x, y, v, batch_g)
    cross = p.cross_xy_g(x, y, v, batch_g)
    grad_x_f, grad_y_f = p.grad_f(x, y, batch_f)
    return grad_y_g, hvp + grad_y_f, cross + grad_x_f


@dataclasses.dataclass(frozen=True)
class SOBAConfig(StochasticConfig):
    """SOBA hyperparameters: ρ_t = ρ/(t+1)^{2/5}, γ_t = γ/(t+1)^{3/5} (Dagréou et al. 2022, Thm. 1)."""

    rho: float = param(0.1, "positive", "initial step ρ of y and v")
    rho_decay: float = param(0.4, "nonnegative", "e in ρ_t = ρ/(t+1)^e (paper: 2/5; 0: constant)")
    gamma: float = param(0.1, "positive", "initial outer step γ")
    gamma_decay: float = param(0.6, "nonnegative", "e in γ_t = γ/(t+1)^e (paper: 3/5; 0: constant)")


@register
class SOBA(Algorithm):
    """SOBA: y −= ρ∇y g; v −= ρ(H v + ∇y f); x −= γ(J v + ∇x f), all from the same iterate."""

    state = ("v",)
    name = "soba"
    draws_ahead = True
    Config = SOBAConfig
    step_sizes = ("rho", "gamma")
    first_order = False
    stochastic = True
    loops = "single"
    paper = "Dagréou, Ablin, Vaiter & Moreau 2022"

    def __init__(self, problem, config: SOBAConfig, rng: np.random.Generator) -> None:
        super().__init__(problem, config, rng)
        self.v = np.zeros(problem.dim_y)  # v ≈ −H⁻¹ ∇y f (SOBA's sign convention)

    def steps_now(self) -> tuple[float, float]:
        """(ρ_t, γ_t)."""
        c, t = self.config, self.iteration
        return decaying(c.rho, c.rho_decay, t), decaying(c.gamma, c.gamma_decay, t)

    def step(self) -> None:
        rho, gamma = self.steps_now()
        batch_g, batch_f = self.batches(2)  # one minibatch for ∇y g, H v and J v; another for ∇f
        d_y, d_v, d_x = soba_directions(self.problem, self.x, self.y, self.v, batch_g, batch_f)
        self.y = self.y - rho * d_y
        self.v = self.v - rho * d_v
        self.x = self.problem.project_x(self.x - gamma * d_x)

    def diagnostics(self) -> dict[str, float]:
        rho, gamma = self.steps_now()
        return {"rho": rho, "gamma": gamma}


@dataclasses.dataclass(frozen=True)
class AmIGOConfig(InnerOuterConfig):
    """AmIGO hyperparameters (benchmark_bilevel defaults: steps 0.1, T = 10 for y and v)."""

    v_steps: int = param(10, "positive_int", "SGD steps on v for ½vᵀHv − vᵀ∇y f (warm-started)")
    eta: float = param(0.1, "positive", "SGD step on v")


@register
class AmIGO(StepSolve):
    """AmIGO: T SGD steps on y, warm-started SGD steps on v for the linear system, one outer step."""

    name = "amigo"
    draws_ahead = True
    Config = AmIGOConfig
    solve_steps = "v_steps"
    paper = "Arbel & Mairal 2022"

    def solve(self, x: Array, grad_y_f: Array, draw: BatchSource) -> Array:
        p, y, c = self.problem, self.y, self.config
        return fixed_point_solve(lambda v: p.hvp_yy_g(x, y, v, draw()), grad_y_f, c.eta, c.v_steps, self.v)


@dataclasses.dataclass(frozen=True)
class StocBiOConfig(InnerOuterConfig):
    """StocBiO hyperparameters (benchmark_bilevel defaults: steps 0.1, T = Q = 10)."""

    neumann_terms: int = param(10, "positive_int", "Q: Neumann-series terms (Q HVPs on fresh minibatches)")
    eta: float = param(0.1, "positive", "Neumann step η (needs η < 1/L_g)")


@register
class StocBiO(StepSolve):
    """StocBiO: T SGD steps on y, v = η Σ_{q=0}^{Q} Π (I − ηH_j) ∇y f, one outer step."""

    name = "stocbio"
    draws_ahead = True
    Config = StocBiOConfig
    solve_steps = "neumann_terms"
    paper = "Ji, Yang & Liang 2021 (eq. 9, the paper's formula)"

    def solve(self, x: Array, grad_y_f: Array, draw: BatchSource) -> Array:
        p, y, c = self.problem, self.y, self.config
        return neumann_series(lambda v: p.hvp_yy_g(x, y, v, draw()), grad_y_f, c.eta, c.neumann_terms)
