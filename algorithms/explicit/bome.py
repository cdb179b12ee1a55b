"""BOME (Liu, Ye, Wright, Stone & Liu 2022, NeurIPS) as an explicit-state definition.

The recursion of `algorithms.bome.BOME`: ŷ = T steps y −= α ∇y g(x, ·) from y; ∇q̂ = (∇x g(x, y) −
∇x g(x, ŷ), ∇y g(x, y)), q̂ = g(x, y) − g(x, ŷ); φ = η‖∇q̂‖² (or η q̂); λ = max((φ − ⟨∇f, ∇q̂⟩)/(‖∇q̂‖² + ε), 0),
0 where ∇q̂ = 0 (per run, `xp.where`); (x, y) −= ξ(∇f + λ∇q̂), with ξ_x, ξ_y where set. Its diagnostics
(λ, ‖∇q̂‖, q̂) exist from the first step on, as the run loop records them. With a `batch_size` on a finite sum,
the T inner steps' minibatches and then one for every other oracle (f's and g's, at y and at ŷ) are drawn together,
as the per-run BOME draws them (algorithms/explicit/minibatch.py).
"""
from __future__ import annotations

from typing import Any, NamedTuple

from algorithms.base import AlgorithmConfig
from algorithms.explicit.definition import Definition, define
from algorithms.explicit.minibatch import at, chunks, drawing, grad_f_at, loop, minibatched
from problems.pure import pure_minibatched


class BOMEState(NamedTuple):
    """x, y, the last λ, q̂ and ‖∇q̂‖ (per-run numbers), t and the key."""

    x: Any
    y: Any
    lam: Any
    q_hat: Any
    grad_q_norm: Any
    t: Any
    key: Any = None


def init(oracles: Any, hyper: Any, config: AlgorithmConfig, key: Any, xp: Any) -> BOMEState:
    x, y = oracles.initial_point(xp.zeros)
    return BOMEState(x, y, xp.zeros(1), xp.zeros(1), xp.zeros(1), xp.zeros(1), key)


def bome_lambda(grad_f: Any, grad_q: Any, phi: Any, eps: float, xp: Any) -> Any:
    """max((φ − ⟨∇f, ∇q̂⟩)/(‖∇q̂‖² + ε), 0) per run, 0 where ∇q̂ = 0 or the denominator is 0."""
    denom = (grad_q * grad_q).sum(-1, keepdims=True) + eps
    zero = ~(grad_q != 0).any(-1, keepdims=True) | (denom == 0.0)
    lam = (phi - (grad_f * grad_q).sum(-1, keepdims=True)) / xp.where(zero, 1.0, denom)
    return xp.where(zero, 0.0, xp.maximum(lam, 0.0))


def step(state: BOMEState, oracles: Any, hyper: Any, config: AlgorithmConfig, xp: Any) -> BOMEState:
    x, y, c, key, o = state.x, state.y, config, state.key, oracles
    inner = last = None
    if minibatched(o, c):  # the T inner steps' minibatches, then the one of every other oracle, drawn together
        key, drawn = chunks(o, key, c, c.T + 1, xp)
        inner, last = drawn[:c.T], drawn[c.T]
    y_hat = loop(c.T, lambda z, i: o.project_y(z - hyper.alpha * at(o, "grad_y_g", i, x, z)), y, inner, xp)
    grad_f = xp.concatenate(grad_f_at(o, last, x, y), axis=-1)
    grad_q = xp.concatenate([at(o, "grad_x_g", last, x, y) - at(o, "grad_x_g", last, x, y_hat),
                             at(o, "grad_y_g", last, x, y)], axis=-1)
    q_hat = at(o, "g", last, x, y) - at(o, "g", last, x, y_hat)
    sq = (grad_q * grad_q).sum(-1, keepdims=True)
    lam = bome_lambda(grad_f, grad_q, c.eta * (sq if c.phi == "grad_norm" else q_hat), c.eps, xp)
    d = grad_f + lam * grad_q
    n = x.shape[-1]
    xi_x = hyper.xi if c.xi_x is None else c.xi_x
    xi_y = hyper.xi if c.xi_y is None else c.xi_y
    return BOMEState(o.project_x(x - xi_x * d[..., :n]), o.project_y(y - xi_y * d[..., n:]), lam, q_hat,
                     xp.sqrt(sq), state.t + 1, key)


def diagnostics(state: BOMEState, hyper: Any, config: AlgorithmConfig, xp: Any) -> dict[str, Any]:
    out = {"lambda": state.lam, "grad_q_norm": state.grad_q_norm}
    if config.track_q or config.phi == "value":
        out["q_hat"] = state.q_hat
    return out


BOME = define(Definition("bome", init, step, diagnostics, diagnostics_from=1, oracles_of=pure_minibatched,
                         draws=drawing))
