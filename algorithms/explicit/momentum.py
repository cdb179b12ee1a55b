"""Recursive-momentum baselines as explicit-state definitions: FSLA (Li, Gu & Huang 2022, AAAI, Alg. 1) and
MRBO (Yang, Ji & Liang 2021, NeurIPS, Alg. 1).

The recursion of `algorithms.recursive_momentum.FSLA`: y⁺ = y − α_t ∇y g(x, y); v⁺ = v − α_t (H(x, y⁺) v −
∇y f(x, y⁺)); d = G(x, y⁺, v⁺) + (1 − ρ_t)(d − G(x_prev, y, v)), G = ∇x f − ∇²xy g v, the plain G at the
first step or where ρ_t = 1 (selected per run with `xp.where`, the other branch computed and dropped);
x⁺ = x − γ_t d. MRBO (`algorithms.recursive_momentum.MRBO`): u = ∇y g + (1 − ρ_t)(u − ∇y g(x_prev, y_prev)),
w = ∇̂Φ + (1 − ρ_t)(w − ∇̂Φ(x_prev, y_prev)) with ∇̂Φ the Neumann hypergradient (Q HVPs), the plain estimates
likewise at the first step or where ρ_t = 1; y⁺ = y − α_t u, x⁺ = x − γ_t w. With a `batch_size` on a finite
sum, each step's minibatches are drawn together in the per-run algorithm's order, those of the direction (FSLA) or
of both estimates (MRBO) shared by the current and the previous point (algorithms/explicit/minibatch.py).
"""
from __future__ import annotations

from typing import Any, NamedTuple

from algorithms.base import AlgorithmConfig
from algorithms.explicit.definition import Definition, decaying, define, number
from algorithms.explicit.double_loop import neumann
from algorithms.explicit.minibatch import at, chunks, drawing, grad_f_at, minibatched
from problems.pure import pure_minibatched


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
    x, y_prev, v_prev, key, o = state.x, state.y, state.v, state.key, oracles
    alpha, gamma, rho = steps(state, hyper, config)
    b_y = b_hvp = b_f = s_f = s_g = None
    if minibatched(o, config):  # y's, the HVP's, ∇y f's, then (f's, g's) shared by both points: drawn together
        key, drawn = chunks(o, key, config, 5, xp)
        b_y, b_hvp, b_f, s_f, s_g = (drawn[k] for k in range(5))
    y = y_prev - alpha * at(o, "grad_y_g", b_y, x, y_prev)
    v = v_prev - alpha * (at(o, "hvp_yy_g", b_hvp, x, y, v_prev) - grad_f_at(o, b_f, x, y)[1])

    def direction(x: Any, y: Any, v: Any) -> Any:  # G(x, y, v) = ∇x f − ∇²xy g · v on (f's, g's) minibatches
        return grad_f_at(o, s_f, x, y)[0] - at(o, "cross_xy_g", s_g, x, y, v)

    new, old = direction(x, y, v), direction(state.x_prev, y_prev, v_prev)
    plain = (state.t == 0) | (rho == 1.0)
    d = xp.where(plain, new, new + (1.0 - rho) * (state.d - old))
    return FSLAState(o.project_x(x - gamma * d), y, v, d, x, state.t + 1, key)


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


FSLA = define(Definition("fsla", init, step, diagnostics, refuses=refuses, oracles_of=pure_minibatched,
                         draws=drawing))


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


def neumann_hypergradient(oracles: Any, x: Any, y: Any, eta: Any, config: AlgorithmConfig, xp: Any,
                          batches: tuple[Any, Any, Any] = (None, None, None)) -> Any:
    """∇x f − ∇²xy g · η Σ_{q=0}^{Q} (I − ηH)^q ∇y f at (x, y), on (f's, the cross term's, the Q factors')
    minibatches (None: the full batch)."""
    b_f, b_cross, factors = batches
    grad_x_f, grad_y_f = grad_f_at(oracles, b_f, x, y)
    v = neumann(lambda u, i: at(oracles, "hvp_yy_g", i, x, y, u), grad_y_f, None, eta, config, factors, xp)
    return grad_x_f - at(oracles, "cross_xy_g", b_cross, x, y, v)


def mrbo_step(state: MRBOState, oracles: Any, hyper: Any, config: AlgorithmConfig, xp: Any) -> MRBOState:
    x, y, key, o = state.x, state.y, state.key, oracles
    alpha, gamma, rho = steps(state, hyper, config)
    b_y, samples = None, (None, None, None)
    if minibatched(o, config):  # y's, then f's, the cross one and the Q factors', shared by both points
        key, drawn = chunks(o, key, config, config.neumann_terms + 3, xp)
        b_y, samples = drawn[0], (drawn[1], drawn[2], drawn[3:])
    grad = at(o, "grad_y_g", b_y, x, y)
    hypergrad = neumann_hypergradient(o, x, y, hyper.eta, config, xp, samples)
    old_grad = at(o, "grad_y_g", b_y, state.x_prev, state.y_prev)
    old_hypergrad = neumann_hypergradient(o, state.x_prev, state.y_prev, hyper.eta, config, xp, samples)
    plain = (state.t == 0) | (rho == 1.0)
    u = xp.where(plain, grad, grad + (1.0 - rho) * (state.u - old_grad))
    w = xp.where(plain, hypergrad, hypergrad + (1.0 - rho) * (state.w - old_hypergrad))
    return MRBOState(o.project_x(x - gamma * w), y - alpha * u, u, w, x, y, state.t + 1, key)


MRBO = define(Definition("mrbo", mrbo_init, mrbo_step, diagnostics, refuses=refuses, oracles_of=pure_minibatched,
                         draws=drawing))
