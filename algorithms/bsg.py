"""BSG-1 (Giovannelli, Kent & Vicente): hypergradient with rank-one gradient approximations of the Hessians.

Per outer step: T (projected) gradient steps on y itself, then with ∇²yy g ≈ ∇y g ∇y gᵀ and
∇²xy g ≈ ∇x g ∇y gᵀ the adjoint term collapses to a scalar:
    x ← x − ξ (∇x f − (⟨∇y f, ∇y g⟩ / ‖∇y g‖²) ∇x g),
with the correction dropped when ∇y g = 0 (0/0). First-order; the stochastic form uses one minibatch
per inner step and one shared minibatch for the outer gradients.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from algorithms.base import Algorithm, StochasticConfig, register
from algorithms.search_space import Range
from problems.validation import param


@dataclass(frozen=True)
class BSG1Config(StochasticConfig):
    """BSG-1 hyperparameters (steps as the BOME paper ran it on its toys)."""

    xi: float = param(0.05, "positive", "outer step ξ on x")
    alpha: float = param(0.05, "positive", "inner step α on y")
    T: int = param(10, "positive_int", "inner gradient steps on y per outer step")
    eps: float = param(0.0, "nonnegative", "added to ‖∇y g‖² in the denominator")


@register
class BSG1(Algorithm):
    """BSG-1: first-order hypergradient with rank-one Hessian approximations."""

    state = ("coef", "grad_y_g_norm")
    name = "bsg1"
    draws_ahead = True
    Config = BSG1Config
    step_sizes = ("xi", "alpha")
    tunables = {"T": Range(1, 100, integer=True)}
    first_order = True
    stochastic = True
    loops = "double"
    paper = "Bilevel stochastic methods for optimization and machine learning (Giovannelli, Kent, Vicente 2021)"

    def __init__(self, problem, config: BSG1Config, rng: np.random.Generator) -> None:
        super().__init__(problem, config, rng)
        self.coef: float | None = None
        self.grad_y_g_norm = 0.0

    def step(self) -> None:
        c, p = self.config, self.problem
        x, y = self.x, self.y
        *inner, batch = self.batches(c.T + 1)  # T minibatches for the inner steps, then one for the outer
        for b in inner:
            y = p.project_y(y - c.alpha * p.grad_y_g(x, y, b))
        fx, fy = p.grad_f(x, y, batch)
        gx, gy = p.grad_g(x, y, batch)
        denom = float(gy @ gy) + c.eps
        coef = float(fy @ gy) / denom if denom > 0 else 0.0
        self.x = p.project_x(x - c.xi * (fx - coef * gx))
        self.y = y
        self.coef, self.grad_y_g_norm = coef, float(np.sqrt(gy @ gy))

    def diagnostics(self) -> dict[str, float]:
        if self.coef is None:
            return {}
        return {"adjoint_coef": self.coef, "grad_y_g_norm": self.grad_y_g_norm}
