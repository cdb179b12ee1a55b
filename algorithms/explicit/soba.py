"""SOBA (Dagréou, Ablin, Vaiter & Moreau 2022, Algorithm 1) as an explicit-state definition.

The recursion of `algorithms.stochastic_hypergradient.SOBA`, from the same iterate:
y −= ρ_t ∇y g;  v −= ρ_t (H v + ∇y f);  x −= γ_t (J v + ∇x f),  ρ_t = ρ/(t+1)^{e_ρ}, γ_t = γ/(t+1)^{e_γ}.
Minibatches (`batch_size` b, on a finite sum): each step draws 2b indices with replacement from the run's stream
(`draw_integers`), the first b for g's oracles and the next b for f's, as the per-run SOBA's `batches(2)` draws
them; on the NumPy engines that stream is the generator `algorithms.run` gives the run, so the iterates are its
own; the JAX engine's keys are its own stream (equal in distribution). A deterministic problem takes no draw.
"""
from __future__ import annotations

from typing import Any, NamedTuple

from algorithms.base import AlgorithmConfig
from algorithms.explicit.definition import Definition, decaying, define, draw_integers
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
    x, y, v, key, b = state.x, state.y, state.v, state.key, config.batch_size
    rho, gamma = steps(state, hyper)
    if b is not None and hasattr(oracles, "grad_y_g_samples"):  # a finite sum: a minibatch for g, one for f
        key, idx = draw_integers(key, oracles.sample_counts()[0], 2 * b, xp)
        idx_g, idx_f = idx[..., :b], idx[..., b:]
        d_y = oracles.grad_y_g_samples(x, y, idx_g).mean(axis=-2)
        gx, gy = oracles.grad_f_samples(x, y, idx_f)
        d_v = oracles.hvp_yy_g_samples(x, y, v, idx_g).mean(axis=-2) + gy.mean(axis=-2)
        d_x = oracles.cross_xy_g_samples(x, y, v, idx_g).mean(axis=-2) + gx.mean(axis=-2)
    else:
        d_y = oracles.grad_y_g(x, y)
        d_v = oracles.hvp_yy_g(x, y, v) + oracles.grad_y_f(x, y)
        d_x = oracles.cross_xy_g(x, y, v) + oracles.grad_x_f(x, y)
    return SOBAState(oracles.project_x(x - gamma * d_x), y - rho * d_y, v - rho * d_v, state.t + 1, key)


def diagnostics(state: SOBAState, hyper: Any, config: AlgorithmConfig, xp: Any) -> dict[str, Any]:
    rho, gamma = steps(state, hyper)
    return {"rho": rho, "gamma": gamma}


SOBA = define(Definition("soba", init, step, diagnostics, oracles_of=pure_minibatched,
                         draws=lambda config: config.batch_size is not None))
