"""SOBA (Dagréou, Ablin, Vaiter & Moreau 2022, Algorithm 1) as an explicit-state definition.

The recursion of `algorithms.stochastic_hypergradient.SOBA`, from the same iterate:
y −= ρ_t ∇y g;  v −= ρ_t (H v + ∇y f);  x −= γ_t (J v + ∇x f),  ρ_t = ρ/(t+1)^{e_ρ}, γ_t = γ/(t+1)^{e_γ}.
Minibatches (`batch_size`, on a finite sum): a minibatch for g's oracles and one for f's each step, from the
run's stream (algorithms/explicit/minibatch.py); on the NumPy engines that stream is the generator
`algorithms.run` gives the run, so the iterates are its own; the JAX engine's keys are its own stream.
"""
from __future__ import annotations

from typing import Any, NamedTuple

from algorithms.base import AlgorithmConfig
from algorithms.explicit.definition import Definition, decaying, define
from algorithms.explicit.minibatch import drawing, values
from problems.pure import pure_minibatched


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
    key, o = values(oracles, x, y, v, state.key, config, xp)
    d_y, d_v, d_x = o.grad_y_g, o.hvp + o.grad_y_f, o.cross + o.grad_x_f
    return SOBAState(oracles.project_x(x - gamma * d_x), y - rho * d_y, v - rho * d_v, state.t + 1, key)


def diagnostics(state: SOBAState, hyper: Any, config: AlgorithmConfig, xp: Any) -> dict[str, Any]:
    rho, gamma = steps(state, hyper)
    return {"rho": rho, "gamma": gamma}


SOBA = define(Definition("soba", init, step, diagnostics, oracles_of=pure_minibatched, draws=drawing))
