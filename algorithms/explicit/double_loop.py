"""The double-loop baselines as explicit-state definitions: AmIGO (Arbel & Mairal 2022), StocBiO (Ji, Yang &
Liang 2021, eq. 9), AID-FP (Grazzi et al. 2020) and AID-CG (Ji, Yang & Liang 2021).

The recursion of `algorithms.aid.DoubleLoop`: T warm-started steps y −= α_t ∇y g(x, y); at (x, y_T),
v ≈ H⁻¹∇y f by the solve; x −= γ_t (∇x f − J v). The solves (algorithms/hypergradient.py):
AmIGO and AID-FP take K steps v −= η(H v − ∇y f) from the previous v (AID-FP from 0 without `warm_start`);
StocBiO sums the Neumann series η Σ_{q=0}^{Q} (I − ηH)^q ∇y f; AID-CG takes K conjugate-gradient
iterations. T, K and Q are loop counts of the stack's
shared config (`repeat`). Full batch only for now.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

from algorithms.base import AlgorithmConfig
from algorithms.explicit.definition import Definition, decaying, define, repeat


class DoubleLoopState(NamedTuple):
    """x, y, the solve's v, the iteration t and the key."""

    x: Any
    y: Any
    v: Any
    t: Any
    key: Any = None


Solve = Callable[[Callable[[Any], Any], Any, Any, Any, AlgorithmConfig, Any], Any]  # (hvp, b, v, η, config, xp)


def init(oracles: Any, hyper: Any, config: AlgorithmConfig, key: Any, xp: Any) -> DoubleLoopState:
    x, y = oracles.initial_point(xp.zeros)
    return DoubleLoopState(x, y, xp.zeros_like(y), xp.zeros(1), key)


def _eta(hyper: Any) -> Any:
    """η of the solve (AID-CG has none)."""
    return getattr(hyper, "eta", None)


def steps(state: DoubleLoopState, hyper: Any) -> tuple[Any, Any]:
    """(α_t, γ_t)."""
    return decaying(hyper.alpha, hyper.alpha_decay, state.t), decaying(hyper.gamma, hyper.gamma_decay, state.t)


def double_loop(solve: Solve) -> Callable[..., DoubleLoopState]:
    """The step of a double loop with this solve."""

    def step(state: DoubleLoopState, oracles: Any, hyper: Any, config: AlgorithmConfig, xp: Any) -> DoubleLoopState:
        x = state.x
        alpha, gamma = steps(state, hyper)
        y = repeat(config.inner_steps, lambda y: y - alpha * oracles.grad_y_g(x, y), state.y, xp)
        v = solve(lambda u: oracles.hvp_yy_g(x, y, u), oracles.grad_y_f(x, y), state.v, _eta(hyper), config, xp)
        hypergrad = oracles.grad_x_f(x, y) - oracles.cross_xy_g(x, y, v)
        return DoubleLoopState(oracles.project_x(x - gamma * hypergrad), y, v, state.t + 1, state.key)

    return step


def fixed_point(steps_field: str, warm: Callable[[AlgorithmConfig], bool]) -> Solve:
    """K = config.<steps_field> steps v −= η(H v − b), from the previous v when `warm(config)`, else from 0."""

    def solve(hvp: Callable, b: Any, v: Any, eta: Any, config: AlgorithmConfig, xp: Any) -> Any:
        start = v if warm(config) else xp.zeros_like(b)
        return repeat(getattr(config, steps_field), lambda u: u - eta * (hvp(u) - b), start, xp)

    return solve


def neumann_sum(hvp: Callable, b: Any, eta: Any, terms: int, xp: Any) -> Any:
    """η Σ_{q=0}^{Q} (I − ηH)^q b with Q = `terms`, in the order of `algorithms.hypergradient.neumann_series`."""

    def term(carry: tuple[Any, Any]) -> tuple[Any, Any]:
        u, total = carry
        u = u - eta * hvp(u)
        return u, total + u

    return eta * repeat(terms, term, (b, b), xp)[1]


def neumann(hvp: Callable, b: Any, v: Any, eta: Any, config: AlgorithmConfig, xp: Any) -> Any:
    """η Σ_{q=0}^{Q} (I − ηH)^q b, Q = config.neumann_terms (the previous v unused)."""
    return neumann_sum(hvp, b, eta, config.neumann_terms, xp)


def conjugate_gradient(hvp: Callable, b: Any, v: Any, eta: Any, config: AlgorithmConfig, xp: Any) -> Any:
    """K = config.cg_steps CG iterations on H v = b from the previous v (`warm_start`) or 0 (η unused). A run
    whose residual is exactly zero or whose curvature along p is not positive keeps its iterate, as
    `algorithms.hypergradient.cg_solve` stops there (masked, since the loop cannot stop per run)."""
    v = v if config.warm_start else xp.zeros_like(b)
    r = b - hvp(v) if config.warm_start else b
    dot = lambda a, c: (a * c).sum(-1, keepdims=True)  # noqa: E731  a per-run number, kept as a column

    def iteration(carry: tuple[Any, Any, Any, Any, Any]) -> tuple[Any, Any, Any, Any, Any]:
        v, r, p, rr, live = carry
        live = live & (rr > 0.0)
        hp = hvp(p)
        curvature = dot(p, hp)
        live = live & (curvature > 0.0)
        step = xp.where(live, rr / xp.where(live, curvature, 1.0), 0.0)
        v, r = v + step * p, r - step * hp
        rr_next = dot(r, r)
        p = xp.where(live, r + (rr_next / xp.where(live, rr, 1.0)) * p, p)
        return v, r, p, xp.where(live, rr_next, rr), live

    rr = dot(r, r)
    return repeat(config.cg_steps, iteration, (v, r, r, rr, xp.ones(rr.shape, dtype=bool)), xp)[0]


def diagnostics(state: DoubleLoopState, hyper: Any, config: AlgorithmConfig, xp: Any) -> dict[str, Any]:
    alpha, gamma = steps(state, hyper)
    return {"alpha": alpha, "gamma": gamma}


AMIGO = define(Definition("amigo", init, double_loop(fixed_point("v_steps", lambda c: True)), diagnostics))
STOCBIO = define(Definition("stocbio", init, double_loop(neumann), diagnostics))
AID_CG = define(Definition("aid_cg", init, double_loop(conjugate_gradient), diagnostics))
AID_FP = define(Definition("aid_fp", init, double_loop(fixed_point("fp_steps", lambda c: c.warm_start)),
                           diagnostics))
