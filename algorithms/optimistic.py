"""Optimistic gradient descent (Daskalakis, Ilyas, Syrgkanis & Zeng 2018, eq. (3)): the game baseline of the
BOME paper's minimax toy (its Fig. 1, "Optimistic GD [2]").

The bilevel problem is played as a two-player game, each player descending its own objective with the
optimistic (extrapolated) gradient 2∇_t − ∇_{t−1}:
    x_{t+1} = Proj_X(x_t − η (2∇x f(x_t, y_t) − ∇x f(x_{t−1}, y_{t−1}))),
    y_{t+1} = Proj_Y(y_t − η (2∇y g(x_t, y_t) − ∇y g(x_{t−1}, y_{t−1}))),
with the first step a plain gradient step (∇_{−1} = ∇_0). On the minimax toy (f = xy, g = −xy) this is
OGDA on min_x max_y xy, which converges where simultaneous gradient descent–ascent spirals out. It
ignores the lower level's optimality (y only follows ∇y g), so it is not a bilevel method in general.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from algorithms.base import Algorithm, StochasticConfig, register
from problems.base import Array
from problems.validation import param


@dataclass(frozen=True)
class OptimisticGDConfig(StochasticConfig):
    """The step size (the BOME paper's minimax toy uses 0.05 for every method)."""

    lr: float = param(0.05, "positive", "step η of both players")


@register
class OptimisticGD(Algorithm):
    """Optimistic gradient descent on (x: f, y: g), simultaneous, with the previous gradients as the correction."""

    state = ("gx_prev", "gy_prev")
    name = "ogd"
    draws_ahead = True
    Config = OptimisticGDConfig
    step_sizes = ("lr",)
    first_order = True
    stochastic = True
    loops = "single"
    paper = "Daskalakis, Ilyas, Syrgkanis & Zeng 2018, Training GANs with optimism (ICLR), eq. (3)"

    def __init__(self, problem, config: OptimisticGDConfig, rng: np.random.Generator) -> None:
        super().__init__(problem, config, rng)
        self.gx_prev: Array | None = None
        self.gy_prev: Array | None = None

    def step(self) -> None:
        p, lr, batch = self.problem, self.config.lr, self.batch()
        gx = p.grad_f(self.x, self.y, batch)[0]
        gy = p.grad_y_g(self.x, self.y, batch)
        px = gx if self.gx_prev is None else self.gx_prev
        py = gy if self.gy_prev is None else self.gy_prev
        self.x = p.project_x(self.x - lr * (2.0 * gx - px))
        self.y = p.project_y(self.y - lr * (2.0 * gy - py))
        self.gx_prev, self.gy_prev = gx, gy
