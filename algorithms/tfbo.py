"""Tuning-free bilevel optimizers D-TFBO (Alg. 1) and S-TFBO (Alg. 2), tfbo_tuning_free_bilevel §3.

Both use "inverse of cumulative gradient norms" step sizes: a step 1/s with s² accumulating the
squared norms of the gradients it is applied to. With R(x, y, v) = ½ vᵀH v − vᵀ∇y f the linear-system
objective (∇v R = H v − ∇y f) and ∇̄f = ∇x f − J v the hypergradient estimate (paper eq. 2–3).
The tunable variants (Remarks 1–2) multiply the steps by η_x, η_y, η_v (default 1: the paper's
tuning-free algorithms). The paper defines the deterministic algorithms; its §5 experiments ran them on
minibatches of 64, which `batch_size` reproduces (fresh minibatches at every inner and outer step).
"""
from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable

import numpy as np

from algorithms.base import Algorithm, StochasticConfig, register
from algorithms.search_space import Range
from problems.base import Array
from problems.validation import param


def _accumulate(s: float, sq_norm: float) -> float:
    """s_{k+1} = sqrt(s_k² + ‖gradient‖²)."""
    return math.sqrt(s * s + sq_norm)


def adaptive_loop(grad: Callable[[Array], Array], z: Array, s0: float, eta: float, tol: float,
                  limit: int) -> tuple[Array, float, int]:
    """Steps z ← z − (η/s) ∇, s² += ‖∇‖² from s = s0, until ‖∇‖² ≤ tol or `limit` steps: (z, s, steps).

    The gradient at the final z is evaluated only to test the tolerance, so a loop that meets it
    makes steps + 1 gradient calls and one stopped by the limit makes `steps`.
    """
    s, steps = s0, 0
    while True:
        g = grad(z)
        sq = float(g @ g)
        if sq <= tol:  # fixed mode (tol −1) never stops early
            return z, s, steps
        s = _accumulate(s, sq)
        z = z - (eta / s) * g
        steps += 1
        if steps >= limit:
            return z, s, steps


@dataclasses.dataclass(frozen=True)
class DTFBOConfig(StochasticConfig):
    """D-TFBO hyperparameters (paper Alg. 1 and Remark 1; §5 defaults α0 = β0 = γ0 = 5)."""

    alpha0: float = param(5.0, "positive", "initial accumulator of the x step 1/α")
    beta0: float = param(5.0, "positive", "initial accumulator of the y step 1/β (reset every outer step)")
    gamma0: float = param(5.0, "positive", "initial accumulator of the v step 1/γ (reset every outer step)")
    eta_x: float = param(1.0, "positive", "tunable-variant factor of the x step (Remark 1)")
    eta_y: float = param(1.0, "positive", "tunable-variant factor of the y step (Remark 1)")
    eta_v: float = param(1.0, "positive", "tunable-variant factor of the v step (Remark 1)")
    sub_loops: str = param("tolerance", "str", "sub-loop stopping: paper tolerances, or fixed counts (§B.2)",
                           choices=("tolerance", "fixed"))
    horizon: int = param(1000, "positive_int", "T in the tolerances ε_y = c_y/T, ε_v = c_v/T")
    c_y: float = param(1.0, "positive", "c_y in ε_y = c_y/T")
    c_v: float = param(1.0, "positive", "c_v in ε_v = c_v/T")
    max_sub_steps: int = param(10_000, "positive_int", "cap on each tolerance sub-loop (hits are reported)")
    y_steps: int = param(10, "positive_int", "y sub-loop length in fixed mode (paper §B.2: 10)")
    v_steps: int = param(10, "positive_int", "v sub-loop length in fixed mode (paper §B.2: 10)")


class TuningFree(Algorithm):
    """What D-TFBO and S-TFBO share: the declared initial accumulators α0, β0, γ0 and the v iterate."""

    state = ("alpha", "beta", "gamma", "v")
    scalar_state = ("alpha", "beta", "gamma")
    step_sizes = ("alpha0", "beta0", "gamma0")
    first_order = False
    stochastic = True

    def __init__(self, problem, config: DTFBOConfig | STFBOConfig, rng: np.random.Generator) -> None:
        super().__init__(problem, config, rng)
        self.v = np.zeros(problem.dim_y)
        self.alpha = config.alpha0
        self.beta = config.beta0
        self.gamma = config.gamma0


@register
class DTFBO(TuningFree):
    """D-TFBO: double loop, adaptive cold-start inner step sizes, warm-started y and v."""

    state = ("y_loop", "v_loop", "y_cap_hits", "v_cap_hits")
    name = "dtfbo"
    draws_ahead = True
    Config = DTFBOConfig
    loops = "double"
    paper = "tfbo_tuning_free_bilevel Alg. 1"

    def __init__(self, problem, config: DTFBOConfig, rng: np.random.Generator) -> None:
        super().__init__(problem, config, rng)
        self.y_loop = 0
        self.v_loop = 0
        self.y_cap_hits = 0
        self.v_cap_hits = 0

    def _loop_bounds(self, c_eps: float, fixed_steps: int) -> tuple[float, int]:
        """(tolerance, step limit): (c/T, cap) in tolerance mode; (−1, count) in fixed mode (−1 is never met)."""
        c = self.config
        if c.sub_loops == "tolerance":
            return c_eps / c.horizon, c.max_sub_steps
        return -1.0, fixed_steps

    def _capped(self, steps: int) -> int:
        """1 when a tolerance loop stopped at the cap, else 0."""
        return int(self.config.sub_loops == "tolerance" and steps >= self.config.max_sub_steps)

    def step(self) -> None:
        c, p, x = self.config, self.problem, self.x
        # Fixed loops know their minibatches (y_steps, ∇f's, v_steps, J v's): drawn together.
        draw = self.batch_source(c.y_steps + c.v_steps + 2 if c.sub_loops == "fixed" else 0)
        # Sub-loops warm-start y and v but cold-start their step sizes from β0 and γ0 (paper §3.3).
        tol, limit = self._loop_bounds(c.c_y, c.y_steps)
        self.y, self.beta, self.y_loop = adaptive_loop(
            lambda y: p.grad_y_g(x, y, draw()), self.y, c.beta0, c.eta_y, tol, limit)
        self.y_cap_hits += self._capped(self.y_loop)
        grad_x_f, grad_y_f = p.grad_f(x, self.y, draw())
        tol, limit = self._loop_bounds(c.c_v, c.v_steps)
        self.v, self.gamma, self.v_loop = adaptive_loop(
            lambda v: p.hvp_yy_g(x, self.y, v, draw()) - grad_y_f, self.v, c.gamma0, c.eta_v, tol, limit)
        self.v_cap_hits += self._capped(self.v_loop)
        hypergrad = grad_x_f - p.cross_xy_g(x, self.y, self.v, draw())
        self.alpha = _accumulate(self.alpha, float(hypergrad @ hypergrad))
        self.x = p.project_x(x - (c.eta_x / self.alpha) * hypergrad)

    def diagnostics(self) -> dict[str, float]:
        return {
            "alpha": self.alpha, "beta": self.beta, "gamma": self.gamma,
            "y_loop": self.y_loop, "v_loop": self.v_loop,
            "y_cap_hits": self.y_cap_hits, "v_cap_hits": self.v_cap_hits,
        }


@dataclasses.dataclass(frozen=True)
class STFBOConfig(StochasticConfig):
    """S-TFBO hyperparameters (paper Alg. 2 and Remark 2; α0 ≥ 1 as the algorithm requires)."""

    alpha0: float = param(5.0, "positive", "initial accumulator of the x step 1/(αφ); at least 1")
    beta0: float = param(5.0, "positive", "initial accumulator of the y step 1/β")
    gamma0: float = param(5.0, "positive", "initial accumulator γ of φ = max(β, γ)")
    eta_x: float = param(1.0, "positive", "tunable-variant factor of the x step (Remark 2)")
    eta_y: float = param(1.0, "positive", "tunable-variant factor of the y step (Remark 2)")
    eta_v: float = param(1.0, "positive", "tunable-variant factor of the v step (Remark 2)")

    def validate(self) -> None:
        if self.alpha0 < 1:
            self.fail("alpha0", "at least 1 (S-TFBO, Alg. 2)", self.alpha0)


@register
class STFBO(TuningFree):
    """S-TFBO: single loop, y, v and x updated together with jointly designed adaptive steps."""

    name = "stfbo"
    draws_ahead = True
    Config = STFBOConfig
    # Alg. 2 requires α0 ≥ 1: the default range [0.5, 50] is clipped below.
    tunables = {"alpha0": Range(1.0, 50.0)}
    loops = "single"
    paper = "tfbo_tuning_free_bilevel Alg. 2"

    def step(self) -> None:
        c, p, x, y, v = self.config, self.problem, self.x, self.y, self.v
        batch_g, batch_f = self.batches(2)  # one minibatch for ∇y g, H v and J v; another for ∇f
        grad_y_g = p.grad_y_g(x, y, batch_g)
        grad_x_f, grad_y_f = p.grad_f(x, y, batch_f)
        residual = p.hvp_yy_g(x, y, v, batch_g) - grad_y_f
        hypergrad = grad_x_f - p.cross_xy_g(x, y, v, batch_g)
        self.beta = _accumulate(self.beta, float(grad_y_g @ grad_y_g))
        self.gamma = _accumulate(self.gamma, float(residual @ residual))
        phi = max(self.beta, self.gamma)
        self.alpha = _accumulate(self.alpha, float(hypergrad @ hypergrad))
        self.y = y - (c.eta_y / self.beta) * grad_y_g
        self.v = v - (c.eta_v / phi) * residual
        self.x = p.project_x(x - (c.eta_x / (self.alpha * phi)) * hypergrad)

    def diagnostics(self) -> dict[str, float]:
        return {"alpha": self.alpha, "beta": self.beta, "gamma": self.gamma,
                "phi": max(self.beta, self.gamma)}
