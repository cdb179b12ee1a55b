"""Double-loop hypergradient baselines: AID-CG, AID-FP (approximate implicit differentiation) and ITD.

Each outer step runs T warm-started inner gradient steps on y, estimates ∇F at (x, y_T), and takes a
projected step x ← Proj_X(x − γ_t ∇̂F). AID solves H v = ∇y f (CG or fixed point) and uses
∇̂F = ∇x f − J v (Ji, Yang & Liang 2021; Grazzi et al. 2020); ITD differentiates through the inner steps in
reverse mode (Franceschi et al. 2017).
With `batch_size` every inner step, the outer gradient and the solve draw fresh minibatches (CG keeps
one minibatch for its whole solve, since CG needs a fixed operator).
Defaults follow the benchmark_bilevel conventions (all steps 0.1, 10 inner and 10 solver steps).
"""
from __future__ import annotations

import dataclasses
from typing import Any, ClassVar

import numpy as np

from algorithms.base import Algorithm, BatchSource, StochasticConfig, register
from algorithms.hypergradient import cg_solve, fixed_point_solve, gradient_steps, itd_reverse
from algorithms.schedules import decaying
from algorithms.search_space import Range
from problems.base import Array
from problems.validation import param


@dataclasses.dataclass(frozen=True)
class InnerOuterConfig(StochasticConfig):
    """Fields shared by the double-loop baselines: T inner steps of size α, outer steps γ."""

    inner_steps: int = param(10, "positive_int", "T: inner gradient steps on y per outer step")
    alpha: float = param(0.1, "positive", "inner step on y")
    alpha_decay: float = param(0.0, "nonnegative", "e in α_t = α/(t+1)^e (0: constant)")
    gamma: float = param(0.1, "positive", "outer step on x")
    gamma_decay: float = param(0.0, "nonnegative", "e in γ_t = γ/(t+1)^e (0: constant)")


class DoubleLoop(Algorithm):
    """Shared outer loop: T inner steps, a hypergradient estimate, a projected outer step."""

    state = ("v",)
    first_order = False
    stochastic = True
    loops = "double"
    tunables = {"inner_steps": Range(1, 100, integer=True)}

    def __init__(self, problem, config: InnerOuterConfig, rng: np.random.Generator) -> None:
        super().__init__(problem, config, rng)
        self.v = np.zeros(problem.dim_y)

    def steps_now(self) -> tuple[float, float]:
        """(α_t, γ_t) at the current outer iteration."""
        c, t = self.config, self.iteration
        return decaying(c.alpha, c.alpha_decay, t), decaying(c.gamma, c.gamma_decay, t)

    def hypergradient(self, x: Array, alpha: float) -> Array:
        """∇̂F at x after T warm-started gradient steps on g(x, ·), each on a fresh minibatch (AID by default:
        ∇x f − J v with v from `solve`). Its minibatches (T, ∇f's, the solve's, J v's) are drawn together
        when the solve's count is known, else up to the solve."""
        p, c = self.problem, self.config
        known = self.solve_batches()
        draw = self.batch_source(c.inner_steps + 1 + (0 if known is None else known + 1))
        self.y = gradient_steps(lambda y: p.grad_y_g(x, y, draw()), self.y, alpha, c.inner_steps)
        grad_x_f, grad_y_f = p.grad_f(x, self.y, draw())
        self.v = self.solve(x, grad_y_f, draw)
        return grad_x_f - p.cross_xy_g(x, self.y, self.v, draw())

    def solve(self, x: Array, grad_y_f: Array, draw: BatchSource) -> Array:
        """v ≈ H⁻¹ ∇y f at (x, y), on minibatches from `draw`."""
        raise NotImplementedError

    def solve_batches(self) -> int | None:
        """Minibatches one `solve` takes, when known before it runs (None: it decides as it goes)."""
        return None

    def step(self) -> None:
        alpha, gamma = self.steps_now()
        self.x = self.problem.project_x(self.x - gamma * self.hypergradient(self.x, alpha))

    def diagnostics(self) -> dict[str, float]:
        alpha, gamma = self.steps_now()
        return {"alpha": alpha, "gamma": gamma}


class StepSolve(DoubleLoop):
    """A double loop whose solve takes K steps of size η, each HVP on a fresh minibatch (AID-FP, AmIGO,
    StocBiO): η is an initial step size beside α and γ; K is the config field `solve_steps` names, tuned
    on [1, 100]."""

    step_sizes = ("alpha", "eta", "gamma")
    solve_steps: ClassVar[str]

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "solve_steps" in cls.__dict__:
            cls.tunables = {cls.solve_steps: Range(1, 100, integer=True)}

    def solve_batches(self) -> int:
        return getattr(self.config, self.solve_steps)


@dataclasses.dataclass(frozen=True)
class AIDCGConfig(InnerOuterConfig):
    """AID-CG hyperparameters."""

    cg_steps: int = param(10, "positive_int", "K: conjugate-gradient iterations on H v = ∇y f")
    warm_start: bool = param(True, "bool", "start CG from the previous v (else from 0)")


@register
class AIDCG(DoubleLoop):
    """AID-CG: T inner GD steps, K CG iterations on H v = ∇y f, x −= γ(∇x f − J v)."""

    name = "aid_cg"
    draws_ahead = True
    Config = AIDCGConfig
    step_sizes = ("alpha", "gamma")
    tunables = {"cg_steps": Range(1, 100, integer=True)}
    paper = "Ji, Yang & Liang 2021 (AID-BiO); Grazzi et al. 2020"

    def solve(self, x: Array, grad_y_f: Array, draw: BatchSource) -> Array:
        p, y, batch = self.problem, self.y, draw()  # one minibatch: CG needs a fixed operator
        v0 = self.v if self.config.warm_start else None
        return cg_solve(lambda v: p.hvp_yy_g(x, y, v, batch), grad_y_f, self.config.cg_steps, v0)

    def solve_batches(self) -> int:
        return 1


@dataclasses.dataclass(frozen=True)
class AIDFPConfig(InnerOuterConfig):
    """AID-FP hyperparameters."""

    fp_steps: int = param(10, "positive_int", "K: fixed-point steps v ← v − η(H v − ∇y f)")
    eta: float = param(0.1, "positive", "fixed-point step η")
    warm_start: bool = param(True, "bool", "start from the previous v (else from 0: the Neumann sum)")


@register
class AIDFP(StepSolve):
    """AID-FP: T inner GD steps, K fixed-point steps on H v = ∇y f, x −= γ(∇x f − J v)."""

    name = "aid_fp"
    draws_ahead = True
    Config = AIDFPConfig
    solve_steps = "fp_steps"
    paper = "Grazzi et al. 2020 (fixed point); Ji, Yang & Liang 2021 (AID-BiO)"

    def solve(self, x: Array, grad_y_f: Array, draw: BatchSource) -> Array:
        p, y, c = self.problem, self.y, self.config
        v0 = self.v if c.warm_start else None
        return fixed_point_solve(lambda v: p.hvp_yy_g(x, y, v, draw()), grad_y_f, c.eta, c.fp_steps, v0)


@dataclasses.dataclass(frozen=True)
class ITDConfig(InnerOuterConfig):
    """ITD hyperparameters."""

    truncate: int | None = param(None, "optional_positive_int", "K: backpropagate through the last K steps (null: all)")
    warm_start: bool = param(True, "bool", "start the inner steps from the previous y_T (else from y0)")

    def validate(self) -> None:
        if self.truncate is not None and self.truncate > self.inner_steps:
            self.fail("truncate", f"at most inner_steps = {self.inner_steps} (or null)", self.truncate)


@register
class ITD(DoubleLoop):
    """ITD: reverse-mode differentiation through T inner GD steps (optionally the last K only)."""

    name = "itd"
    draws_ahead = True
    Config = ITDConfig
    step_sizes = ("alpha", "gamma")
    paper = "Franceschi et al. 2017; Ji, Yang & Liang 2021 (ITD-BiO); Shaban et al. 2019 (truncation)"

    def __init__(self, problem, config: ITDConfig, rng: np.random.Generator) -> None:
        super().__init__(problem, config, rng)
        self.y_start = self.y.copy()

    def hypergradient(self, x: Array, alpha: float) -> Array:
        p, c = self.problem, self.config
        *batches, batch_f = self.batches(c.inner_steps + 1)  # the inner steps' minibatches, then f's
        y0 = self.y if c.warm_start else self.y_start
        hypergrad, self.y = itd_reverse(
            lambda y, b: p.grad_y_g(x, y, b),
            lambda y, v, b: p.hvp_yy_g(x, y, v, b),
            lambda y, v, b: p.cross_xy_g(x, y, v, b),
            lambda y: p.grad_f(x, y, batch_f),
            y0, alpha, c.inner_steps, c.truncate, batches,
        )
        return hypergrad
