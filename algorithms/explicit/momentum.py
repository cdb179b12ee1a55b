"""Recursive-momentum baselines as explicit-state definitions: FSLA (Li, Gu & Huang 2022, AAAI, Alg. 1) and
MRBO (Yang, Ji & Liang 2021, NeurIPS, Alg. 1).

The recursion of `algorithms.recursive_momentum.FSLA`: y⁺ = y − α_t ∇y g(x, y); v⁺ = v − α_t (H(x, y⁺) v −
∇y f(x, y⁺)); d = G(x, y⁺, v⁺) + (1 − ρ_t)(d − G(x_prev, y, v)), G = ∇x f − ∇²xy g v, the plain G at the
first step or where ρ_t = 1 (selected per run with `xp.where`, the other branch computed and dropped);
x⁺ = x − γ_t d. MRBO (`algorithms.recursive_momentum.MRBO`): u = ∇y g + (1 − ρ_t)(u − ∇y g(x_prev, y_prev)),
w = ∇̂Φ + (1 − ρ_t)(w − ∇̂Φ(x_prev, y_prev)) with ∇̂Φ the Neumann hypergradient (Q HVPs), the plain estimates
likewise at the first step or where ρ_t = 1; y⁺ = y − α_t u, x⁺ = x − γ_t w. Full batch only for now.
"""
from __future__ import annotations

from typing import Any, NamedTuple

from algorithms.base import AlgorithmConfig
from algorithms.explicit.definition import Definition, decaying, define, number
from algorithms.explicit.double_loop import neumann


class FSLAState(NamedTuple):
    """x, y, v, the direction d and the x it was last evaluated at (zeros before the first step), t, key."""

    x: Any
    y: Any
    v: Any
    d: Any
    x_prev: Any
    t: Any
    key: Any = None


def init(oracles: Any, hyper: Any, config: AlgorithmConfig, key: Any, xp: Any) -> FSLAState:
    x, y = oracles.initial_point(xp.zeros)
    return FSLAState(x, y, xp.zeros_like(y), xp.zeros_like(x), xp.zeros_like(x), xp.zeros(1), key)


def steps(state: FSLAState, hyper: Any, config: AlgorithmConfig) -> tuple[Any, Any, Any]:
    """(α_t, γ_t, ρ_t); ρ and its decay are shared by a stack (not among FSLA's varying fields)."""
    t = state.t
    momentum = decaying(number("momentum", hyper, config), number("momentum_decay", hyper, config), t)
    return decaying(hyper.alpha, hyper.alpha_decay, t), decaying(hyper.gamma, hyper.gamma_decay, t), momentum


def step(state: FSLAState, oracles: Any, hyper: Any, config: AlgorithmConfig, xp: Any) -> FSLAState:
    x, y_prev, v_prev = state.x, state.y, state.v
    alpha, gamma, rho = steps(state, hyper, config)
    y = y_prev - alpha * oracles.grad_y_g(x, y_prev)
    v = v_prev - alpha * (oracles.hvp_yy_g(x, y, v_prev) - oracles.grad_y_f(x, y))
    new = oracles.grad_x_f(x, y) - oracles.cross_xy_g(x, y, v)
    old = oracles.grad_x_f(state.x_prev, y_prev) - oracles.cross_xy_g(state.x_prev, y_prev, v_prev)
    plain = (state.t == 0) | (rho == 1.0)
    d = xp.where(plain, new, new + (1.0 - rho) * (state.d - old))
    return FSLAState(oracles.project_x(x - gamma * d), y, v, d, x, state.t + 1, state.key)


def diagnostics(state: FSLAState, hyper: Any, config: AlgorithmConfig, xp: Any) -> dict[str, Any]:
    alpha, gamma, rho = steps(state, hyper, config)
    return {"alpha": alpha, "gamma": gamma, "momentum": rho}


def refuses(config: AlgorithmConfig) -> str | None:
    """The per-run algorithm skips the previous-point terms at a step where ρ_t = 1 (fewer oracle calls); the
    engines' counts (counts.py) hold for ρ_t = 1 at every step, at the first only, or never. With ρ = 1 and a
    decay so small that 2^e rounds to 1, ρ_t = 1 for some iterations after the first and not later ones."""
    e = float(config.momentum_decay)
    if config.momentum == 1.0 and e > 0.0 and 1.0 / 2.0 ** e == 1.0:
        return (f"momentum_decay: {e:g} with momentum 1 keeps ρ_t = 1 for some steps and not later ones, whose "
                "oracle counts the explicit engines cannot give; allowed: 0 or at least 2e-16 (or use algorithms.run)")
    return None


FSLA = define(Definition("fsla", init, step, diagnostics, refuses=refuses))


class MRBOState(NamedTuple):
    """x, y, the estimates u (of ∇y g) and w (of ∇̂Φ), the point they were last evaluated at, t, key."""

    x: Any
    y: Any
    u: Any
    w: Any
    x_prev: Any
    y_prev: Any
    t: Any
    key: Any = None


def mrbo_init(oracles: Any, hyper: Any, config: AlgorithmConfig, key: Any, xp: Any) -> MRBOState:
    x, y = oracles.initial_point(xp.zeros)
    return MRBOState(x, y, xp.zeros_like(y), xp.zeros_like(x), xp.zeros_like(x), xp.zeros_like(y), xp.zeros(1), key)


def neumann_hypergradient(oracles: Any, x: Any, y: Any, eta: Any, config: AlgorithmConfig, xp: Any) -> Any:
    """∇x f − ∇²xy g · η Σ_{q=0}^{Q} (I − ηH)^q ∇y f at (x, y)."""
    v = neumann(lambda u, _: oracles.hvp_yy_g(x, y, u), oracles.grad_y_f(x, y), None, eta, config, None, xp)
    return oracles.grad_x_f(x, y) - oracles.cross_xy_g(x, y, v)


def mrbo_step(state: MRBOState, oracles: Any, hyper: Any, config: AlgorithmConfig, xp: Any) -> MRBOState:
    x, y = state.x, state.y
    alpha, gamma, rho = steps(state, hyper, config)
    grad, hypergrad = oracles.grad_y_g(x, y), neumann_hypergradient(oracles, x, y, hyper.eta, config, xp)
    old_grad = oracles.grad_y_g(state.x_prev, state.y_prev)
    old_hypergrad = neumann_hypergradient(oracles, state.x_prev, state.y_prev, hyper.eta, config, xp)
    plain = (state.t == 0) | (rho == 1.0)
    u = xp.where(plain, grad, grad + (1.0 - rho) * (state.u - old_grad))
    w = xp.where(plain, hypergrad, hypergrad + (1.0 - rho) * (state.w - old_hypergrad))
    return MRBOState(oracles.project_x(x - gamma * w), y - alpha * u, u, w, x, y, state.t + 1, state.key)


MRBO = define(Definition("mrbo", mrbo_init, mrbo_step, diagnostics, refuses=refuses))
