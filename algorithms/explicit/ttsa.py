"""TTSA (Hong, Wai, Wang & Yang 2023, Algorithm 1) as an explicit-state definition, its HIA sampled or expected.

The recursion of `algorithms.neumann_sa.TTSA`: y ← y − α_t ∇y g(x, y); at the new y, the HIA's v:
`hia_mode: sampled` (the papers) draws p ~ U{0..N−1} per run and iteration from the run's stream and takes
v = N η Π_{i≤p} (I − ηH_i) ∇y f (p HVPs; the stack loops N − 1 times, each run's factors past its p left out);
`expected` takes the mean over p, v = η Σ_{j=0}^{N−1} (I − ηH)^j ∇y f (N − 1 HVPs); then
x ← Proj_X(x − γ_t (∇x f − J v)). With a `batch_size` on a finite sum: y's and f's minibatches, then (sampled) p,
then the p factors' and the cross term's (or y's again with `reuse_y_batch`), as the per-run TTSA draws them
(algorithms/explicit/minibatch.py); expected mode draws them all at once. A sampled run's HVP calls are its own: the
state counts them (`hvp_calls`) and its records add them to the calls every run makes (`counted`).
"""
from __future__ import annotations

import dataclasses
from typing import Any, NamedTuple

from algorithms.base import AlgorithmConfig
from algorithms.explicit.definition import Definition, decaying, define, draw_below, scan
from algorithms.explicit.double_loop import neumann_sum
from algorithms.explicit.minibatch import at, chunks, chunks_each, drawing, grad_f_at, minibatched, pick
from problems.pure import pure_minibatched


class TTSAState(NamedTuple):
    """x, y, the last HIA's number of HVP factors (p, or N − 1 expected; 0 before the first step), the HIA factors
    of every step so far (`hvp_calls`), the iteration t, the key."""

    x: Any
    y: Any
    hia_length: Any
    hvp_calls: Any
    t: Any
    key: Any = None


def init(oracles: Any, hyper: Any, config: AlgorithmConfig, key: Any, xp: Any) -> TTSAState:
    x, y = oracles.initial_point(xp.zeros)
    return TTSAState(x, y, xp.zeros(1), xp.zeros(1), xp.zeros(1), key)


def steps(state: TTSAState, hyper: Any) -> tuple[Any, Any]:
    """(α_t, γ_t)."""
    return decaying(hyper.alpha, hyper.alpha_decay, state.t), decaying(hyper.gamma, hyper.gamma_decay, state.t)


def step(state: TTSAState, oracles: Any, hyper: Any, config: AlgorithmConfig, xp: Any) -> TTSAState:
    if config.hia_mode == "sampled":
        return sampled_step(state, oracles, hyper, config, xp)
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
    return TTSAState(o.project_x(x - gamma * hypergrad), y, length, state.hvp_calls + factors, state.t + 1, key)


def sampled_step(state: TTSAState, oracles: Any, hyper: Any, config: AlgorithmConfig, xp: Any) -> TTSAState:
    """A step with the HIA's length p drawn per run after y's and f's minibatches, then its p factors' minibatches
    and the cross term's (`Algorithm.random_integer`, then `factor_batches`)."""
    x, key, o, n = state.x, state.key, oracles, config.hia_terms
    alpha, gamma = steps(state, hyper)
    fresh = 0 if config.reuse_y_batch else 1
    y_idx = f_idx = hvps = c_idx = None
    if minibatched(o, config):
        key, (y_idx, f_idx) = chunks(o, key, config, 2, xp)
    y = state.y - alpha * at(o, "grad_y_g", y_idx, x, state.y)
    grad_x_f, grad_y_f = grad_f_at(o, f_idx, x, y)
    key, p = draw_below(key, n, xp)
    if y_idx is not None:  # run k's p_k factors' minibatches and its cross term's; the rest are y's, never used
        key, drawn = chunks_each(o, key, config, p + fresh, n - 1 + fresh, y_idx, xp)
        hvps = drawn[:n - 1] if n > 1 else None
        c_idx = y_idx if config.reuse_y_batch else pick(drawn, p)

    def factor(carry: tuple[Any, Any], idx: Any) -> tuple[tuple[Any, Any], None]:
        u, q = carry  # factor q applies to the runs whose p is above q
        return (xp.where(q < p, u - hyper.eta * at(o, "hvp_yy_g", idx, x, y, u), u), q + 1.0), None

    (u, _), _ = scan(factor, (grad_y_f, 0.0), hvps, xp, length=n - 1)
    hypergrad = grad_x_f - at(o, "cross_xy_g", c_idx, x, y, n * hyper.eta * u)
    return TTSAState(o.project_x(x - gamma * hypergrad), y, p, state.hvp_calls + p, state.t + 1, key)


def diagnostics(state: TTSAState, hyper: Any, config: AlgorithmConfig, xp: Any) -> dict[str, Any]:
    alpha, gamma = steps(state, hyper)
    return {"alpha": alpha, "gamma": gamma, "hia_length": state.hia_length}


def draws(config: AlgorithmConfig) -> bool:
    """Minibatches, or the sampled HIA's length (a draw on a deterministic problem too)."""
    return drawing(config) or config.hia_mode == "sampled"


def counted(config: AlgorithmConfig) -> tuple[AlgorithmConfig, AlgorithmConfig] | None:
    """Sampled: the config whose calls every run makes (no HIA factor) and the one that makes one factor more a step;
    a run's records add `hvp_calls` times that factor's calls to the first's."""
    if config.hia_mode != "sampled":
        return None
    base = dataclasses.replace(config, hia_mode="expected", hia_terms=1)
    return base, dataclasses.replace(base, hia_terms=2)


TTSA = define(Definition("ttsa", init, step, diagnostics, oracles_of=pure_minibatched, draws=draws,
                         counted=counted))
