"""ITD (Franceschi et al. 2017; Ji, Yang & Liang 2021, ITD-BiO) as an explicit-state definition.

The recursion of `algorithms.aid.ITD` with `algorithms.hypergradient.itd_reverse`: from y_0 (the previous
y_T with `warm_start`, else the starting y), T steps y_{k+1} = y_k − α_t ∇y g(x, y_k), the last K of them
(`truncate`, all when null) kept on a tape; with a = ∇y f(x, y_T), for k = T−1 down to T−K:
d −= α_t J(y_k) a, a −= α_t H(y_k) a; x −= γ_t (∇x f(x, y_T) + d). T and K are the stack's shared loop
counts; the tape is a `scan`'s stacked outputs, walked back by a reverse `scan`. Full batch only for now.
"""
from __future__ import annotations

from typing import Any, NamedTuple

from algorithms.base import AlgorithmConfig
from algorithms.explicit.definition import Definition, define, repeat, scan
from algorithms.explicit.double_loop import diagnostics, steps


class ITDState(NamedTuple):
    """x, y (y_T), v (kept at zero, as the run loop's ITD keeps it), the starting y, the iteration t, the key."""

    x: Any
    y: Any
    v: Any
    y_start: Any
    t: Any
    key: Any = None


def init(oracles: Any, hyper: Any, config: AlgorithmConfig, key: Any, xp: Any) -> ITDState:
    x, y = oracles.initial_point(xp.zeros)
    return ITDState(x, y, xp.zeros_like(y), y, xp.zeros(1), key)


def step(state: ITDState, oracles: Any, hyper: Any, config: AlgorithmConfig, xp: Any) -> ITDState:
    x = state.x
    alpha, gamma = steps(state, hyper)
    inner_steps = config.inner_steps
    kept = inner_steps if config.truncate is None else min(config.truncate, inner_steps)
    inner = lambda y: y - alpha * oracles.grad_y_g(x, y)  # noqa: E731

    def forward(y: Any, _: Any) -> tuple[Any, Any]:
        return inner(y), y  # y_k goes on the tape before its step

    y = repeat(inner_steps - kept, inner, state.y if config.warm_start else state.y_start, xp)
    y, tape = scan(forward, y, None, xp, length=kept)

    def backward(carry: tuple[Any, Any], y_k: Any) -> tuple[tuple[Any, Any], None]:
        d, a = carry
        return (d - alpha * oracles.cross_xy_g(x, y_k, a), a - alpha * oracles.hvp_yy_g(x, y_k, a)), None

    grad_x_f = oracles.grad_x_f(x, y)
    (d, _), _ = scan(backward, (xp.zeros_like(grad_x_f), oracles.grad_y_f(x, y)), tape, xp, reverse=True)
    return ITDState(oracles.project_x(x - gamma * (grad_x_f + d)), y, state.v, state.y_start, state.t + 1, state.key)


ITD = define(Definition("itd", init, step, diagnostics))
