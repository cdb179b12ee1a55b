"""The tuning-free baselines as explicit-state definitions: S-TFBO (Alg. 2) and D-TFBO (Alg. 1) with fixed
sub-loops.

The recursion of `algorithms.tfbo.STFBO`: from (x, y, v) and the accumulators α, β, γ (per-run numbers,
starting at α0, β0, γ0): β ← √(β² + ‖∇y g‖²), γ ← √(γ² + ‖Hv − ∇y f‖²), φ = max(β, γ),
α ← √(α² + ‖∇x f − Jv‖²); y −= (η_y/β) ∇y g, v −= (η_v/φ)(Hv − ∇y f), x −= (η_x/(αφ))(∇x f − Jv); with a
`batch_size` on a finite sum, g's oracles at one minibatch and f's at another (algorithms/explicit/minibatch.py).
D-TFBO (`algorithms.tfbo.DTFBO`, `sub_loops: fixed`): y_steps adaptive steps on y (z −= (η_y/s)∇, s² += ‖∇‖²
from s = β0), then v_steps on v for Hv − ∇y f (from γ0), then α ← √(α² + ‖h‖²), x −= (η_x/α) h. Its
tolerance sub-loops (a loop length per run, decided by the data) cannot stack, as in algorithms.batched. With a
`batch_size` on a finite sum, D-TFBO's minibatches (each y step's, f's, each v step's, J v's) are drawn together
in that order, as the per-run D-TFBO draws them.
"""
from __future__ import annotations

from typing import Any, NamedTuple

from algorithms.base import AlgorithmConfig
from algorithms.explicit.definition import Definition, define, number
from algorithms.explicit.minibatch import at, chunks, drawing, grad_f_at, loop, minibatched, values
from problems.pure import pure_minibatched


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
    key, o = values(oracles, x, y, v, state.key, config, xp)  # full batch, or S-TFBO's two minibatches
    grad_y_g, residual, hypergrad = o.grad_y_g, o.hvp - o.grad_y_f, o.grad_x_f - o.cross
    beta, gamma = _accumulate(state.beta, grad_y_g, xp), _accumulate(state.gamma, residual, xp)
    phi = xp.maximum(beta, gamma)
    alpha = _accumulate(state.alpha, hypergrad, xp)
    eta_x, eta_y, eta_v = (number(f"eta_{n}", hyper, config) for n in "xyv")
    return TFBOState(oracles.project_x(x - (eta_x / (alpha * phi)) * hypergrad), y - (eta_y / beta) * grad_y_g,
                     v - (eta_v / phi) * residual, alpha, beta, gamma, state.t + 1, key)


def diagnostics(state: TFBOState, hyper: Any, config: AlgorithmConfig, xp: Any) -> dict[str, Any]:
    return {"alpha": state.alpha, "beta": state.beta, "gamma": state.gamma,
            "phi": xp.maximum(state.beta, state.gamma)}


STFBO = define(Definition("stfbo", init, step, diagnostics, oracles_of=pure_minibatched, draws=drawing))


def adaptive_loop(grad: Any, z: Any, s0: Any, eta: Any, steps: int, xp: Any,
                  batches: Any = None) -> tuple[Any, Any]:
    """`steps` steps z −= (η/s) ∇(z) with s ← √(s² + ‖∇(z)‖²) first, from s = s0: (z, s); `grad(z, minibatch)`,
    each step on its own minibatch of `batches` (None: the full batch)."""

    def one(carry: tuple[Any, Any], idx: Any) -> tuple[Any, Any]:
        z, s = carry
        g = grad(z, idx)
        s = _accumulate(s, g, xp)
        return z - (eta / s) * g, s

    return loop(steps, one, (z, s0 * xp.ones(1)), batches, xp)


def dtfbo_step(state: TFBOState, oracles: Any, hyper: Any, config: AlgorithmConfig, xp: Any) -> TFBOState:
    x, key, o = state.x, state.key, oracles
    eta_x, eta_y, eta_v = (number(f"eta_{n}", hyper, config) for n in "xyv")
    ys = f_idx = vs = j_idx = None
    if minibatched(o, config):  # the y loop's minibatches, f's, the v loop's, J v's, drawn together
        ny, nv = config.y_steps, config.v_steps
        key, drawn = chunks(o, key, config, ny + nv + 2, xp)
        ys, f_idx, vs, j_idx = drawn[:ny], drawn[ny], drawn[ny + 1:ny + 1 + nv], drawn[ny + 1 + nv]
    y, beta = adaptive_loop(lambda y, i: at(o, "grad_y_g", i, x, y), state.y, hyper.beta0, eta_y, config.y_steps,
                            xp, ys)
    grad_x_f, grad_y_f = grad_f_at(o, f_idx, x, y)
    v, gamma = adaptive_loop(lambda v, i: at(o, "hvp_yy_g", i, x, y, v) - grad_y_f, state.v, hyper.gamma0, eta_v,
                             config.v_steps, xp, vs)
    hypergrad = grad_x_f - at(o, "cross_xy_g", j_idx, x, y, v)
    alpha = _accumulate(state.alpha, hypergrad, xp)
    return TFBOState(o.project_x(x - (eta_x / alpha) * hypergrad), y, v, alpha, beta, gamma, state.t + 1, key)


def dtfbo_diagnostics(state: TFBOState, hyper: Any, config: AlgorithmConfig, xp: Any) -> dict[str, Any]:
    """The accumulators and the sub-loops' lengths (fixed: never capped)."""
    zero, stepped = state.t * 0.0, state.t > 0  # per-run numbers, as the accumulators are
    return {"alpha": state.alpha, "beta": state.beta, "gamma": state.gamma,
            "y_loop": xp.where(stepped, float(config.y_steps), zero),
            "v_loop": xp.where(stepped, float(config.v_steps), zero),
            "y_cap_hits": zero, "v_cap_hits": zero}


def dtfbo_refuses(config: AlgorithmConfig) -> str | None:
    """Fixed sub-loops only: a tolerance loop's length is each run's own, decided by its data."""
    if config.sub_loops != "fixed":
        return (f"sub_loops: '{config.sub_loops}' loops stop at each run's own length, which a stack cannot; "
                "allowed: 'fixed' (or run the runs one by one)")
    return None


DTFBO = define(Definition("dtfbo", init, dtfbo_step, dtfbo_diagnostics, refuses=dtfbo_refuses,
                          oracles_of=pure_minibatched, draws=drawing))
