"""SOBA (Dagréou, Ablin, Vaiter & Moreau 2022, Algorithm 1) as an explicit-state definition.

The recursion of `algorithms.stochastic_hypergradient.SOBA`, from the same iterate:
y −= ρ_t ∇y g;  v −= ρ_t (H v + ∇y f);  x −= γ_t (J v + ∇x f),  ρ_t = ρ/(t+1)^{e_ρ}, γ_t = γ/(t+1)^{e_γ}.
Full batch only for now: a minibatch would be drawn from `key` (see algorithms/explicit/__init__.py).
"""
from __future__ import annotations

from typing import Any, NamedTuple

from algorithms.base import AlgorithmConfig
from algorithms.explicit.definition import Definition, decaying, define


class SOBAState(NamedTuple):
    """x, y, v (v ≈ −H⁻¹∇y f, SOBA's sign), the iteration t and the random key (None: full batch)."""

    x: Any
    y: Any
    v: Any
    t: Any
    key: Any = None


def init(oracles: Any, hyper: Any, config: AlgorithmConfig, key: Any, xp: Any) -> SOBAState:
    x, y = oracles.initial_point(xp.zeros)
    return SOBAState(x, y, xp.zeros_like(y), xp.zeros(1), key)


def steps(state: SOBAState, hyper: Any) -> tuple[Any, Any]:
    """(ρ_t, γ_t)."""
    return decaying(hyper.rho, hyper.rho_decay, state.t), decaying(hyper.gamma, hyper.gamma_decay, state.t)


def step(state: SOBAState, oracles: Any, hyper: Any, config: AlgorithmConfig, xp: Any) -> SOBAState:
    x, y, v = state.x, state.y, state.v
    rho, gamma = steps(state, hyper)
    d_y = oracles.grad_y_g(x, y)
    d_v = oracles.hvp_yy_g(x, y, v) + oracles.grad_y_f(x, y)
    d_x = oracles.cross_xy_g(x, y, v) + oracles.grad_x_f(x, y)
    return SOBAState(oracles.project_x(x - gamma * d_x), y - rho * d_y, v - rho * d_v, state.t + 1, state.key)


def diagnostics(state: SOBAState, hyper: Any, config: AlgorithmConfig, xp: Any) -> dict[str, Any]:
    rho, gamma = steps(state, hyper)
    return {"rho": rho, "gamma": gamma}


SOBA = define(Definition("soba", init, step, diagnostics))
