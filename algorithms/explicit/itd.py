"""ITD (Franceschi et al. 2017; Ji, Yang & Liang 2021, ITD-BiO) as an explicit-state definition.

The recursion of `algorithms.aid.ITD` with `algorithms.hypergradient.itd_reverse`: from y_0 (the previous
y_T with `warm_start`, else the starting y), T steps y_{k+1} = y_k − α_t ∇y g(x, y_k), the last K of them
(`truncate`, all when null) kept on a tape; with a = ∇y f(x, y_T), for k = T−1 down to T−K:
d −= α_t J(y_k) a, a −= α_t H(y_k) a; x −= γ_t (∇x f(x, y_T) + d). T and K are the stack's shared loop
counts; the tape is a `scan`'s stacked outputs, walked back by a reverse `scan`. With a `batch_size` on a finite
sum, step k's minibatch (drawn with f's, as the per-run ITD's `batches(T + 1)`) serves its forward gradient and,
reused, its backward products (algorithms/explicit/minibatch.py).
"""
from __future__ import annotations

from typing import Any, NamedTuple

from algorithms.base import AlgorithmConfig
from algorithms.explicit.definition import Definition, define, scan
from algorithms.explicit.double_loop import diagnostics, steps
from algorithms.explicit.minibatch import at, chunks, drawing, grad_f_at, loop, minibatched
from problems.pure import pure_minibatched


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
    x, key, o = state.x, state.key, oracles
    alpha, gamma = steps(state, hyper)
    inner_steps = config.inner_steps
    kept = inner_steps if config.truncate is None else min(config.truncate, inner_steps)
    early = late = f_idx = None  # the minibatches of the untaped steps, the taped ones', f's (None: full batch)
    if minibatched(o, config):  # the inner steps' minibatches, then f's, drawn together
        key, drawn = chunks(o, key, config, inner_steps + 1, xp)
        early, late, f_idx = drawn[:inner_steps - kept], drawn[inner_steps - kept:inner_steps], drawn[inner_steps]
    inner = lambda y, i: y - alpha * at(o, "grad_y_g", i, x, y)  # noqa: E731

    def forward(y: Any, i: Any) -> tuple[Any, Any]:
        return inner(y, i), y  # y_k goes on the tape before its step

    y = loop(inner_steps - kept, inner, state.y if config.warm_start else state.y_start, early, xp)
    y, tape = scan(forward, y, late, xp, length=kept)

    def backward(carry: tuple[Any, Any], taped: Any) -> tuple[tuple[Any, Any], None]:
        (d, a), (y_k, i) = carry, (taped if late is not None else (taped, None))
        return (d - alpha * at(o, "cross_xy_g", i, x, y_k, a), a - alpha * at(o, "hvp_yy_g", i, x, y_k, a)), None

    grad_x_f, grad_y_f = grad_f_at(o, f_idx, x, y)
    (d, _), _ = scan(backward, (xp.zeros_like(grad_x_f), grad_y_f), tape if late is None else (tape, late), xp,
                     reverse=True)
    return ITDState(o.project_x(x - gamma * (grad_x_f + d)), y, state.v, state.y_start, state.t + 1, key)


ITD = define(Definition("itd", init, step, diagnostics, oracles_of=pure_minibatched, draws=drawing))
