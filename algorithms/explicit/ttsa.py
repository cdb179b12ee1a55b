"""TTSA (Hong, Wai, Wang & Yang 2023, Algorithm 1) as an explicit-state definition, its HIA in expected mode.

The recursion of `algorithms.neumann_sa.TTSA` with `hia_mode: expected`: y ← y − α_t ∇y g(x, y); at the new
y, v = η Σ_{j=0}^{N−1} (I − ηH)^j ∇y f (the HIA's mean over its length p, N − 1 HVPs);
x ← Proj_X(x − γ_t (∇x f − J v)). The sampled mode draws p per run and iteration from the run's generator:
the explicit engines carry no such stream yet, so they refuse it (it runs per run and in `run_batched`). With a
`batch_size` on a finite sum, y's and f's minibatches, the N − 1 factors' and the cross term's (or y's again with
`reuse_y_batch`) are drawn together in that order, as the per-run TTSA draws them (algorithms/explicit/minibatch.py).
"""
from __future__ import annotations

from typing import Any, NamedTuple

from algorithms.base import AlgorithmConfig
from algorithms.explicit.definition import Definition, decaying, define
from algorithms.explicit.double_loop import neumann_sum
from algorithms.explicit.minibatch import at, chunks, drawing, grad_f_at, minibatched
from problems.pure import pure_minibatched


class TTSAState(NamedTuple):
    """x, y, the last HIA's number of HVP factors (N − 1; 0 before the first step), the iteration t, the key."""

    x: Any
    y: Any
    hia_length: Any
    t: Any
    key: Any = None


def init(oracles: Any, hyper: Any, config: AlgorithmConfig, key: Any, xp: Any) -> TTSAState:
    x, y = oracles.initial_point(xp.zeros)
    return TTSAState(x, y, xp.zeros(1), xp.zeros(1), key)


def steps(state: TTSAState, hyper: Any) -> tuple[Any, Any]:
    """(α_t, γ_t)."""
    return decaying(hyper.alpha, hyper.alpha_decay, state.t), decaying(hyper.gamma, hyper.gamma_decay, state.t)


def step(state: TTSAState, oracles: Any, hyper: Any, config: AlgorithmConfig, xp: Any) -> TTSAState:
    x, key, o, factors = state.x, state.key, oracles, config.hia_terms - 1
    alpha, gamma = steps(state, hyper)
    y_idx = f_idx = hvps = c_idx = None
    if minibatched(o, config):  # y's and f's minibatches, the HIA's factors', the cross term's, drawn together
        fresh = 0 if config.reuse_y_batch else 1
        key, drawn = chunks(o, key, config, 2 + factors + fresh, xp)
        y_idx, f_idx, hvps = drawn[0], drawn[1], drawn[2:2 + factors]
        c_idx = y_idx if config.reuse_y_batch else drawn[2 + factors]
    y = state.y - alpha * at(o, "grad_y_g", y_idx, x, state.y)
    grad_x_f, grad_y_f = grad_f_at(o, f_idx, x, y)
    v = neumann_sum(lambda u, i: at(o, "hvp_yy_g", i, x, y, u), grad_y_f, hyper.eta, factors, xp, hvps)
    hypergrad = grad_x_f - at(o, "cross_xy_g", c_idx, x, y, v)
    length = xp.zeros_like(state.hia_length) + factors
    return TTSAState(o.project_x(x - gamma * hypergrad), y, length, state.t + 1, key)


def diagnostics(state: TTSAState, hyper: Any, config: AlgorithmConfig, xp: Any) -> dict[str, Any]:
    alpha, gamma = steps(state, hyper)
    return {"alpha": alpha, "gamma": gamma, "hia_length": state.hia_length}


def refuses(config: AlgorithmConfig) -> str | None:
    """The sampled HIA draws its length from a per-run generator the explicit state does not carry yet."""
    if config.hia_mode == "sampled":
        return ("hia_mode: 'sampled' draws the HIA length from a per-run stream the explicit engines do not "
                "carry yet; allowed here: 'expected' (use algorithms.run or run_batched for 'sampled')")
    return None


TTSA = define(Definition("ttsa", init, step, diagnostics, refuses=refuses, oracles_of=pure_minibatched,
                         draws=drawing))
