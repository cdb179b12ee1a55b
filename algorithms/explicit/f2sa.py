"""F2SA (Kwon, Kwon, Wright & Nowak 2023) as an explicit-state definition.

The recursion of `algorithms.f2sa.F2SA`: K warm-started steps y −= (α_t/λ)(∇y f + λ∇y g)(y) and
z −= β_t ∇y g(z), then x −= γ_t (∇x f(y) + λ(∇x g(y) − ∇x g(z))) and λ += δ_λ. K (`inner_steps`) is a
loop count of the stack's shared config (`repeat`: a fori_loop when compiled). Full batch only for now.
"""
from __future__ import annotations

from typing import Any, NamedTuple

from algorithms.base import AlgorithmConfig
from algorithms.explicit.definition import Definition, decaying, define, repeat


class F2SAState(NamedTuple):
    """x, y (≈ y_λ), z (≈ y*), the penalty λ (a per-run number), the iteration t and the key."""

    x: Any
    y: Any
    z: Any
    lam: Any
    t: Any
    key: Any = None


def init(oracles: Any, hyper: Any, config: AlgorithmConfig, key: Any, xp: Any) -> F2SAState:
    x, y = oracles.initial_point(xp.zeros)
    return F2SAState(x, y, y, xp.full(1, float(config.lam0)), xp.zeros(1), key)


def steps(state: F2SAState, hyper: Any) -> tuple[Any, Any, Any]:
    """(α_t, β_t, γ_t)."""
    t = state.t
    return (decaying(hyper.alpha, hyper.alpha_decay, t), decaying(hyper.beta, hyper.beta_decay, t),
            decaying(hyper.gamma, hyper.gamma_decay, t))


def step(state: F2SAState, oracles: Any, hyper: Any, config: AlgorithmConfig, xp: Any) -> F2SAState:
    x, y, z, lam = state.x, state.y, state.z, state.lam
    alpha, beta, gamma = steps(state, hyper)
    y_step = alpha / lam

    def inner(yz: tuple[Any, Any]) -> tuple[Any, Any]:
        y, z = yz
        return y - y_step * (oracles.grad_y_f(x, y) + lam * oracles.grad_y_g(x, y)), z - beta * oracles.grad_y_g(x, z)

    y, z = repeat(config.inner_steps, inner, (y, z), xp)
    hypergrad = oracles.grad_x_f(x, y) + lam * (oracles.grad_x_g(x, y) - oracles.grad_x_g(x, z))
    return F2SAState(oracles.project_x(x - gamma * hypergrad), y, z, lam + config.lam_step, state.t + 1, state.key)


def diagnostics(state: F2SAState, hyper: Any, config: AlgorithmConfig, xp: Any) -> dict[str, Any]:
    alpha, beta, gamma = steps(state, hyper)
    return {"lambda": state.lam, "alpha": alpha, "beta": beta, "gamma": gamma}


F2SA = define(Definition("f2sa", init, step, diagnostics))
