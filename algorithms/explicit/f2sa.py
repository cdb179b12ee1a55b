"""F2SA (Kwon, Kwon, Wright & Nowak 2023) as an explicit-state definition.

The recursion of `algorithms.f2sa.F2SA`: K warm-started steps y −= (α_t/λ)(∇y f + λ∇y g)(y) and
z −= β_t ∇y g(z), then x −= γ_t (∇x f(y) + λ(∇x g(y) − ∇x g(z))) and λ += δ_λ. K (`inner_steps`) is a
loop count of the stack's shared config (`repeat`: a fori_loop when compiled). With a `batch_size` on a finite
sum, each of the K + 1 rounds draws g's minibatch (y's, then z's unless `shared_batch`) and then f's, as the
per-run F2SA's `penalty_hypergradient` draws them (algorithms/explicit/minibatch.py).
"""
from __future__ import annotations

from typing import Any, NamedTuple

from algorithms.base import AlgorithmConfig
from algorithms.explicit.definition import Definition, decaying, define
from algorithms.explicit.minibatch import at, chunks, drawing, grad_f_at, grouped, loop, minibatched
from problems.pure import pure_minibatched


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
    x, y, z, lam, key, o = state.x, state.y, state.z, state.lam, state.key, oracles
    alpha, beta, gamma = steps(state, hyper)
    y_step, k = alpha / lam, config.inner_steps
    per = 2 if config.shared_batch else 3  # a step's minibatches: g's (y's, then z's unless shared), then f's
    groups = None
    if minibatched(o, config):
        key, drawn = chunks(o, key, config, (k + 1) * per, xp)
        groups = grouped(drawn, per)

    def parts(group: Any) -> tuple[Any, Any, Any]:
        """(y's g minibatch, z's, f's) of one step (None: the full batch)."""
        return (None, None, None) if group is None else (group[0], group[per - 2], group[per - 1])

    def inner(yz: tuple[Any, Any], group: Any) -> tuple[Any, Any]:
        (y, z), (b_y, b_z, b_f) = yz, parts(group)
        return (y - y_step * (grad_f_at(o, b_f, x, y)[1] + lam * at(o, "grad_y_g", b_y, x, y)),
                z - beta * at(o, "grad_y_g", b_z, x, z))

    y, z = loop(k, inner, (y, z), None if groups is None else groups[:k], xp)
    b_y, b_z, b_f = parts(None if groups is None else groups[k])
    hypergrad = grad_f_at(o, b_f, x, y)[0] + lam * (at(o, "grad_x_g", b_y, x, y) - at(o, "grad_x_g", b_z, x, z))
    return F2SAState(o.project_x(x - gamma * hypergrad), y, z, lam + config.lam_step, state.t + 1, key)


def diagnostics(state: F2SAState, hyper: Any, config: AlgorithmConfig, xp: Any) -> dict[str, Any]:
    alpha, beta, gamma = steps(state, hyper)
    return {"lambda": state.lam, "alpha": alpha, "beta": beta, "gamma": gamma}


F2SA = define(Definition("f2sa", init, step, diagnostics, oracles_of=pure_minibatched, draws=drawing))
