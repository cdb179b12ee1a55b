"""F2BA (Chen, Ma & Zhang, JMLR 2025, arXiv:2306.14853): fully first-order penalty method, constant λ.

Algorithm 1 of the paper: with z_0 = y_0, every outer step runs K gradient steps on two warm-started
lower-level copies at the current x,

    z ← z − α ∇y g(x, z),       y ← y − τ (∇y f(x, y) + λ ∇y g(x, y)),

then x ← x − η (∇x f(x, y) + λ(∇x g(x, y) − ∇x g(x, z))), an estimate of ∇L*_λ(x) for
L*_λ(x) = min_y f + λ(g − min_z g); ‖∇L*_λ − ∇F‖ = O(1/λ). Both copies carry over between outer steps
(z is not reset to y). It is F2SA (algorithms/f2sa.py) with the penalty held constant; the paper's
theory takes α = 1/L_g and τ = 1/(2λL_g), so the y step per unit penalty is half the z step. No HVP or
cross-derivative oracle is used. Minibatch oracles (`batch_size`) give the stochastic form.
"""
from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from algorithms.base import Algorithm, StochasticConfig, register
from algorithms.f2sa import penalty_draws, penalty_hypergradient
from algorithms.search_space import Range
from problems.validation import param


@dataclasses.dataclass(frozen=True)
class F2BAConfig(StochasticConfig):
    """F2BA hyperparameters (the paper's step ratios; λ and K as the authors' code, --lmbd 10, 10 steps)."""

    lam: float = param(10.0, "positive", "penalty λ (constant; the bias of ∇L*_λ is O(1/λ))")
    inner_steps: int = param(10, "positive_int", "K: gradient steps on z and on y per outer step")
    alpha: float = param(0.1, "positive", "z step on ∇y g (paper α = 1/L_g)")
    tau: float = param(0.05, "positive",
                       "y step per unit penalty: y −= (τ/λ)(∇y f + λ∇y g) (paper λτ = 1/(2L_g))")
    eta: float = param(0.1, "positive", "outer step η on x")
    shared_batch: bool = param(False, "bool", "one g minibatch for the y and z steps and both ∇x g terms "
                               "(false: independent draws)")


@register
class F2BA(Algorithm):
    """F2BA: F2SA's first-order penalty hypergradient with a constant penalty λ (Algorithm 1)."""

    name = "f2ba"
    draws_ahead = True
    Config = F2BAConfig
    step_sizes = ("alpha", "tau", "eta")
    tunables = {"lam": Range(1.0, 100.0), "inner_steps": Range(1, 100, integer=True)}
    first_order = True
    stochastic = True
    loops = "double"
    state = ("z",)
    paper = "Chen, Ma & Zhang 2025 (JMLR; arXiv:2306.14853, Algorithm 1)"

    def __init__(self, problem: Any, config: F2BAConfig, rng: np.random.Generator) -> None:
        super().__init__(problem, config, rng)
        self.z = self.y.copy()  # z_0 = y_0

    def step(self) -> None:
        p, x, c = self.problem, self.x, self.config
        draw = self.batch_source(penalty_draws(c.inner_steps, c.shared_batch))
        hypergrad, self.y, self.z = penalty_hypergradient(
            lambda y: p.grad_y_f(x, y, draw()),
            lambda y: p.grad_f(x, y, draw())[0],
            lambda y, batch: p.grad_y_g(x, y, batch),
            lambda y, batch: p.grad_g(x, y, batch)[0],
            draw, self.y, self.z, c.lam, c.tau / c.lam, c.alpha, c.inner_steps, c.shared_batch,
        )
        self.x = p.project_x(x - c.eta * hypergrad)

    def diagnostics(self) -> dict[str, float]:
        c = self.config
        return {"lambda": c.lam, "alpha": c.alpha, "tau": c.tau, "eta": c.eta}
