"""Recursive-momentum (STORM) bilevel baselines: FSLA (Li, Gu & Huang 2022) and MRBO (Yang, Ji & Liang 2021).

Both track a stochastic quantity G along the iterates with the recursive-momentum estimator
(Cutkosky & Orabona 2019)

    d_t = G(z_t; ξ_t) + (1 − ρ_t) (d_{t−1} − G(z_{t−1}; ξ_t)),

which evaluates G at the current and at the previous point on the *same* samples ξ_t. ρ_t = 1 is the
plain stochastic estimate; with full-batch oracles the two evaluations telescope and d_t = G(z_t)
exactly for every ρ_t. The first direction is the plain estimate, as in the papers (benchmark_bilevel
starts from zero memories instead, which biases the first iterations). Sign convention: v ≈ H⁻¹∇y f
and the hypergradient direction is ∇x f − ∇²xy g · v.

FSLA keeps a warm-started v moved by one SGD step per iteration; MRBO builds a fresh Neumann-series
hypergradient (Q HVPs, `NeumannSamples`) at both points, which VRBO (algorithms/vrbo.py) reuses.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Callable

import numpy as np

from algorithms.base import Algorithm, StochasticConfig, register
from algorithms.hypergradient import neumann_series
from algorithms.schedules import decaying
from problems.base import Array, Batch
from problems.validation import param


@dataclasses.dataclass(frozen=True)
class NeumannSamples:
    """The minibatches of one Neumann hypergradient estimate ∇̂Φ(x, y; B̄) (Yang, Ji & Liang 2021).

    One minibatch of f, one for the cross derivative and one per Neumann factor; reusing the same
    record at two points is what makes a recursive difference ∇̂Φ(z; B̄) − ∇̂Φ(z'; B̄) small.
    """

    outer: Batch
    cross: Batch
    hvp: tuple[Batch, ...]

    @classmethod
    def draw(cls, sample: Callable[[], Batch], terms: int) -> NeumannSamples:
        """Fresh minibatches from `sample` (which returns None in full batch)."""
        return cls(sample(), sample(), tuple(sample() for _ in range(terms)))


def neumann_hypergradient(problem, x: Array, y: Array, samples: NeumannSamples, eta: float) -> Array:
    """∇x f − ∇²xy g · η Σ_{q=0}^{Q} Π_{j} (I − η H_j) ∇y f on `samples` (Q = len(samples.hvp)).

    One grad_f, Q HVPs and one cross product. With full-batch oracles the sum is M_{Q+1} ∇y f with
    M_N = H⁻¹(I − (I − ηH)^N), the truncated Neumann series of H⁻¹ (Ji, Yang & Liang 2021, eq. 9).
    """
    grad_x_f, grad_y_f = problem.grad_f(x, y, samples.outer)
    factors = iter(samples.hvp)
    v = neumann_series(lambda u: problem.hvp_yy_g(x, y, u, next(factors)), grad_y_f, eta, len(samples.hvp))
    return grad_x_f - problem.cross_xy_g(x, y, v, samples.cross)


@dataclasses.dataclass(frozen=True)
class FSLAConfig(StochasticConfig):
    """FSLA hyperparameters (benchmark_bilevel defaults: every step and the momentum 0.1/√(t+1))."""

    alpha: float = param(0.1, "positive", "initial step α of y and v (benchmark_bilevel: step_size)")
    alpha_decay: float = param(0.5, "nonnegative", "e in α_t = α/(t+1)^e (0: constant)")
    gamma: float = param(0.1, "positive", "initial outer step γ (benchmark_bilevel: step_size/outer_ratio)")
    gamma_decay: float = param(0.5, "nonnegative", "e in γ_t = γ/(t+1)^e (0: constant)")
    momentum: float = param(0.1, "probability", "initial weight ρ of the new estimate (benchmark_bilevel ties it "
                                                "to step_size; 1: no momentum)")
    momentum_decay: float = param(0.5, "nonnegative", "e in ρ_t = ρ/(t+1)^e (0: constant)")


@register
class FSLA(Algorithm):
    """FSLA: one SGD step on y, one on v at the new y, and x along a STORM hypergradient direction.

    Li, Gu & Huang 2022 (AAAI), Alg. 1. Each iteration t, from (x_t, y_t, v_t):
        y_{t+1} = y_t − α_t ∇y g(x_t, y_t)
        v_{t+1} = v_t − α_t (∇²yy g(x_t, y_{t+1}) v_t − ∇y f(x_t, y_{t+1}))
        d_t     = G(x_t, y_{t+1}, v_{t+1}) + (1 − ρ_t)(d_{t−1} − G(x_{t−1}, y_t, v_t)),  G = ∇x f − ∇²xy g v
        x_{t+1} = x_t − γ_t d_t
    with d_0 = G(x_0, y_1, v_1). (x_{t−1}, y_t, v_t) is where the previous G was evaluated, so in full
    batch d_t = G exactly and FSLA is SOBA in Gauss–Seidel order, converging to x* (no Neumann bias).
    """

    name = "fsla"
    draws_ahead = True
    Config = FSLAConfig
    step_sizes = ("alpha", "gamma")
    first_order = False
    stochastic = True
    loops = "single"
    state = ("v", "d", "x_prev")
    paper = "Li, Gu & Huang 2022 (AAAI), Alg. 1"

    def __init__(self, problem, config: FSLAConfig, rng: np.random.Generator) -> None:
        super().__init__(problem, config, rng)
        self.v = np.zeros(problem.dim_y)
        self.d: Array | None = None  # no direction before the first step
        self.x_prev: Array | None = None

    def steps_now(self) -> tuple[float, float, float]:
        """(α_t, γ_t, ρ_t)."""
        c, t = self.config, self.iteration
        return (decaying(c.alpha, c.alpha_decay, t), decaying(c.gamma, c.gamma_decay, t),
                decaying(c.momentum, c.momentum_decay, t))

    def direction(self, x: Array, y: Array, v: Array, samples: tuple[Batch, Batch]) -> Array:
        """G(x, y, v) = ∇x f − ∇²xy g · v on (f's, g's) minibatches."""
        p = self.problem
        return p.grad_f(x, y, samples[0])[0] - p.cross_xy_g(x, y, v, samples[1])

    def step(self) -> None:
        p, x, y_prev, v_prev = self.problem, self.x, self.y, self.v
        alpha, gamma, rho = self.steps_now()
        # Five minibatches, drawn together: y's, the HVP's, ∇y f's, and (f's, g's) shared by both points.
        batch_y, batch_hvp, batch_f, sample_f, sample_g = self.batches(5)
        y = y_prev - alpha * p.grad_y_g(x, y_prev, batch_y)
        v = v_prev - alpha * (p.hvp_yy_g(x, y, v_prev, batch_hvp) - p.grad_y_f(x, y, batch_f))
        samples = (sample_f, sample_g)
        new = self.direction(x, y, v, samples)
        if self.d is None or rho == 1.0:
            self.d = new  # the plain estimate: the old term has weight 1 − ρ = 0 (or there is none)
        else:
            self.d = new + (1.0 - rho) * (self.d - self.direction(self.x_prev, y_prev, v_prev, samples))
        self.x_prev, self.y, self.v = x, y, v
        self.x = p.project_x(x - gamma * self.d)

    def diagnostics(self) -> dict[str, float]:
        alpha, gamma, rho = self.steps_now()
        return {"alpha": alpha, "gamma": gamma, "momentum": rho}


@dataclasses.dataclass(frozen=True)
class MRBOConfig(StochasticConfig):
    """MRBO hyperparameters (benchmark_bilevel defaults: steps 0.1/(t+1)^{1/3}, momentum 0.5/(t+1)^{2/3})."""

    alpha: float = param(0.1, "positive", "initial inner step α (benchmark_bilevel: step_size)")
    alpha_decay: float = param(1 / 3, "nonnegative", "e in α_t = α/(t+1)^e (paper: 1/3; 0: constant)")
    gamma: float = param(0.1, "positive", "initial outer step γ (benchmark_bilevel: step_size/outer_ratio)")
    gamma_decay: float = param(1 / 3, "nonnegative", "e in γ_t = γ/(t+1)^e (paper: 1/3; 0: constant)")
    eta: float = param(0.1, "positive", "Neumann step η (needs η < 2/L_g; benchmark_bilevel: step_size)")
    neumann_terms: int = param(10, "positive_int", "Q: Neumann-series HVPs per estimate (Q + 1 terms)")
    momentum: float = param(0.5, "probability", "initial weight ρ of the new estimates (benchmark_bilevel: eta)")
    momentum_decay: float = param(2 / 3, "nonnegative", "e in ρ_t = ρ/(t+1)^e (paper: 2/3, ρ ∝ step²)")


@register
class MRBO(Algorithm):
    """MRBO: simultaneous y and x steps along STORM estimates of ∇y g and of a Neumann hypergradient.

    Yang, Ji & Liang 2021 (NeurIPS), Alg. 1. Each iteration t, from (x_t, y_t):
        u_t = ∇y g(x_t, y_t; B) + (1 − ρ_t)(u_{t−1} − ∇y g(x_{t−1}, y_{t−1}; B))
        w_t = ∇̂Φ(x_t, y_t; B̄) + (1 − ρ_t)(w_{t−1} − ∇̂Φ(x_{t−1}, y_{t−1}; B̄))
        y_{t+1} = y_t − α_t u_t,   x_{t+1} = x_t − γ_t w_t
    with ∇̂Φ the Neumann estimate (`neumann_hypergradient`) and (u_0, w_0) the plain estimates. One
    momentum weight serves both estimators (benchmark_bilevel; the paper allows c₁ ≠ c₂). In full batch
    u_t, w_t are exact and the fixed point is the Neumann-biased x̂_{Q+1}, not x*.
    """

    name = "mrbo"
    draws_ahead = True
    Config = MRBOConfig
    step_sizes = ("alpha", "eta", "gamma")
    first_order = False
    stochastic = True
    loops = "single"
    state = ("u", "w", "x_prev", "y_prev")
    paper = "Yang, Ji & Liang 2021 (NeurIPS), Alg. 1"

    def __init__(self, problem, config: MRBOConfig, rng: np.random.Generator) -> None:
        super().__init__(problem, config, rng)
        self.u: Array | None = None  # no estimates before the first step
        self.w: Array | None = None
        self.x_prev: Array | None = None
        self.y_prev: Array | None = None

    def steps_now(self) -> tuple[float, float, float]:
        """(α_t, γ_t, ρ_t)."""
        c, t = self.config, self.iteration
        return (decaying(c.alpha, c.alpha_decay, t), decaying(c.gamma, c.gamma_decay, t),
                decaying(c.momentum, c.momentum_decay, t))

    def step(self) -> None:
        p, c, x, y = self.problem, self.config, self.x, self.y
        alpha, gamma, rho = self.steps_now()
        draw = self.batch_source(c.neumann_terms + 3)  # y's, then f's, the cross one and the Q factors'
        batch = draw()
        samples = NeumannSamples.draw(draw, c.neumann_terms)
        grad_y_g = p.grad_y_g(x, y, batch)
        hypergrad = neumann_hypergradient(p, x, y, samples, c.eta)
        if self.u is None or rho == 1.0:
            self.u, self.w = grad_y_g, hypergrad
        else:
            xp, yp = self.x_prev, self.y_prev
            self.u = grad_y_g + (1.0 - rho) * (self.u - p.grad_y_g(xp, yp, batch))
            self.w = hypergrad + (1.0 - rho) * (self.w - neumann_hypergradient(p, xp, yp, samples, c.eta))
        self.x_prev, self.y_prev = x, y
        self.y = y - alpha * self.u
        self.x = p.project_x(x - gamma * self.w)

    def diagnostics(self) -> dict[str, float]:
        alpha, gamma, rho = self.steps_now()
        return {"alpha": alpha, "gamma": gamma, "momentum": rho}
