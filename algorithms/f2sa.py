"""F2SA (Kwon, Kwon, Wright & Nowak 2023): fully first-order penalty method (ICML 2023).

With penalty λ, L_λ(x, y) = f(x, y) + λ(g(x, y) − min_z g(x, z)) has
∇x L_λ* = ∇x f(x, y_λ) + λ(∇x g(x, y_λ) − ∇x g(x, y*)), y_λ = argmin_y f + λ g, which tends to ∇F as
λ → ∞ (bias O(1/λ)). Each outer step tracks y ≈ y_λ and z ≈ y* with K warm-started gradient steps,
steps x along the estimate and raises λ by δ_λ. The y step is α_t/λ_t on ∇y f + λ_t ∇y g, i.e. α_t on
∇y f/λ_t + ∇y g, so α_t λ_t stays bounded as λ grows (a fixed step on ∇y f + λ∇y g diverges once
λ exceeds 2/(α L_g)). Defaults follow benchmark_bilevel (steps 0.1, λ0 = 1, δ_λ = 0.1, K = 10).
"""
from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import numpy as np

from algorithms.base import Algorithm, StochasticConfig, register
from algorithms.schedules import decaying
from algorithms.search_space import Range
from problems.base import Array
from problems.validation import param

Gradient = Callable[[Array], Array]
BatchGradient = Callable[[Array, Any], Array]


def penalty_hypergradient(
    grad_y_f: Gradient, grad_x_f: Gradient, grad_y_g: BatchGradient, grad_x_g: BatchGradient,
    draw: Callable[[], Any], y: Array, z: Array, lam: float, y_step: float, z_step: float, steps: int,
    shared_batch: bool = True,
) -> tuple[Array, Array, Array]:
    """K steps y −= y_step(∇y f + λ∇y g)(y), z −= z_step ∇y g(z), then the penalty hypergradient.

    x is bound in the callables; f's oracles draw their own minibatch, g's take the one `draw()` gives.
    With `shared_batch` the y and z steps of an iteration, and the two ∇x g terms of the estimate,
    use one minibatch, so their noise cancels in λ(y − z) instead of being amplified by λ.
    Returns (∇x f(y) + λ(∇x g(y) − ∇x g(z)), y, z). Cost: K + 1 gradients of f and 2K + 2 of g.
    """
    def pair() -> tuple[Any, Any]:
        batch = draw()
        return batch, batch if shared_batch else draw()

    for _ in range(steps):
        batch_y, batch_z = pair()
        y_next = y - y_step * (grad_y_f(y) + lam * grad_y_g(y, batch_y))
        z = z - z_step * grad_y_g(z, batch_z)
        y = y_next
    batch_y, batch_z = pair()
    gap = grad_x_g(y, batch_y) - grad_x_g(z, batch_z)
    return grad_x_f(y) + lam * gap, y, z


def penalty_draws(steps: int, shared_batch: bool) -> int:
    """Minibatches `penalty_hypergradient` takes when f's oracles draw theirs too: per step and at the
    end, g's one (two without `shared_batch`) then f's one. Known ahead, so a caller can draw them together."""
    return (steps + 1) * (2 if shared_batch else 3)


@dataclasses.dataclass(frozen=True)
class F2SAConfig(StochasticConfig):
    """F2SA hyperparameters."""

    inner_steps: int = param(10, "positive_int", "K: warm-started gradient steps on y and z per outer step")
    alpha: float = param(0.1, "positive", "y step per unit penalty: y −= (α/λ)(∇y f + λ∇y g)")
    alpha_decay: float = param(0.0, "nonnegative", "e in α_t = α/(t+1)^e (0: constant)")
    beta: float = param(0.1, "positive", "z step on ∇y g")
    beta_decay: float = param(0.0, "nonnegative", "e in β_t = β/(t+1)^e (0: constant)")
    gamma: float = param(0.1, "positive", "outer step on x")
    gamma_decay: float = param(0.0, "nonnegative", "e in γ_t = γ/(t+1)^e (0: constant)")
    lam0: float = param(1.0, "positive", "initial penalty λ")
    lam_step: float = param(0.1, "nonnegative", "δ_λ added to λ after every outer step")
    shared_batch: bool = param(True, "bool", "one minibatch for the y and z steps (and both ∇x g terms)")


@register
class F2SA(Algorithm):
    """F2SA: first-order penalty hypergradient with an increasing penalty λ."""

    state = ("lam", "z")
    name = "f2sa"
    draws_ahead = True
    Config = F2SAConfig
    step_sizes = ("alpha", "beta", "gamma")
    tunables = {"lam0": Range(0.1, 10.0), "lam_step": Range(0.01, 1.0), "inner_steps": Range(1, 100, integer=True)}
    first_order = True
    stochastic = True
    loops = "double"
    paper = "Kwon, Kwon, Wright & Nowak 2023"

    def __init__(self, problem, config: F2SAConfig, rng: np.random.Generator) -> None:
        super().__init__(problem, config, rng)
        self.z = self.y.copy()
        self.lam = config.lam0

    def steps_now(self) -> tuple[float, float, float]:
        """(α_t, β_t, γ_t)."""
        c, t = self.config, self.iteration
        return (decaying(c.alpha, c.alpha_decay, t), decaying(c.beta, c.beta_decay, t),
                decaying(c.gamma, c.gamma_decay, t))

    def step(self) -> None:
        p, x, c = self.problem, self.x, self.config
        alpha, beta, gamma = self.steps_now()
        draw = self.batch_source(penalty_draws(c.inner_steps, c.shared_batch))
        hypergrad, self.y, self.z = penalty_hypergradient(
            lambda y: p.grad_y_f(x, y, draw()),
            lambda y: p.grad_f(x, y, draw())[0],
            lambda y, batch: p.grad_y_g(x, y, batch),
            lambda y, batch: p.grad_g(x, y, batch)[0],
            draw, self.y, self.z, self.lam, alpha / self.lam, beta, c.inner_steps, c.shared_batch,
        )
        self.x = p.project_x(x - gamma * hypergrad)
        self.lam += c.lam_step

    def diagnostics(self) -> dict[str, float]:
        alpha, beta, gamma = self.steps_now()
        return {"lambda": self.lam, "alpha": alpha, "beta": beta, "gamma": gamma}
