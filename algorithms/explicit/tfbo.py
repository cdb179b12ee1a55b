"""S-TFBO (tuning-free bilevel optimization, Alg. 2) as an explicit-state definition.

The recursion of `algorithms.tfbo.STFBO`: from (x, y, v) and the accumulators α, β, γ (per-run numbers,
starting at α0, β0, γ0): β ← √(β² + ‖∇y g‖²), γ ← √(γ² + ‖Hv − ∇y f‖²), φ = max(β, γ),
α ← √(α² + ‖∇x f − Jv‖²); y −= (η_y/β) ∇y g, v −= (η_v/φ)(Hv − ∇y f), x −= (η_x/(αφ))(∇x f − Jv).
D-TFBO's sub-loops stop on tolerances per run (a data-dependent loop length): not ported yet.
"""
from __future__ import annotations

from typing import Any, NamedTuple

from algorithms.base import AlgorithmConfig
from algorithms.explicit.definition import Definition, define, number


class TFBOState(NamedTuple):
    """x, y, v, the accumulators α, β, γ (per-run numbers), t and the key."""

    x: Any
    y: Any
    v: Any
    alpha: Any
    beta: Any
    gamma: Any
    t: Any
    key: Any = None


def init(oracles: Any, hyper: Any, config: AlgorithmConfig, key: Any, xp: Any) -> TFBOState:
    x, y = oracles.initial_point(xp.zeros)
    one = xp.ones(1)
    return TFBOState(x, y, xp.zeros_like(y), hyper.alpha0 * one, hyper.beta0 * one, hyper.gamma0 * one,
                     xp.zeros(1), key)


def _accumulate(s: Any, d: Any, xp: Any) -> Any:
    """√(s² + ‖d‖²), per run."""
    return xp.sqrt(s * s + (d * d).sum(-1, keepdims=True))


def step(state: TFBOState, oracles: Any, hyper: Any, config: AlgorithmConfig, xp: Any) -> TFBOState:
    x, y, v = state.x, state.y, state.v
    grad_y_g = oracles.grad_y_g(x, y)
    residual = oracles.hvp_yy_g(x, y, v) - oracles.grad_y_f(x, y)
    hypergrad = oracles.grad_x_f(x, y) - oracles.cross_xy_g(x, y, v)
    beta, gamma = _accumulate(state.beta, grad_y_g, xp), _accumulate(state.gamma, residual, xp)
    phi = xp.maximum(beta, gamma)
    alpha = _accumulate(state.alpha, hypergrad, xp)
    eta_x, eta_y, eta_v = (number(f"eta_{n}", hyper, config) for n in "xyv")
    return TFBOState(oracles.project_x(x - (eta_x / (alpha * phi)) * hypergrad), y - (eta_y / beta) * grad_y_g,
                     v - (eta_v / phi) * residual, alpha, beta, gamma, state.t + 1, state.key)


def diagnostics(state: TFBOState, hyper: Any, config: AlgorithmConfig, xp: Any) -> dict[str, Any]:
    return {"alpha": state.alpha, "beta": state.beta, "gamma": state.gamma,
            "phi": xp.maximum(state.beta, state.gamma)}


STFBO = define(Definition("stfbo", init, step, diagnostics))
