"""The double-loop baselines as explicit-state definitions: AmIGO (Arbel & Mairal 2022), StocBiO (Ji, Yang &
Liang 2021, eq. 9), AID-FP (Grazzi et al. 2020) and AID-CG (Ji, Yang & Liang 2021).

The recursion of `algorithms.aid.DoubleLoop`: T warm-started steps y −= α_t ∇y g(x, y); at (x, y_T),
v ≈ H⁻¹∇y f by the solve; x −= γ_t (∇x f − J v). The solves (algorithms/hypergradient.py):
AmIGO and AID-FP take K steps v −= η(H v − ∇y f) from the previous v (AID-FP from 0 without `warm_start`);
StocBiO sums the Neumann series η Σ_{q=0}^{Q} (I − ηH)^q ∇y f; AID-CG takes K conjugate-gradient
iterations. T, K and Q are loop counts of the stack's
shared config (`repeat`). With a `batch_size` on a finite sum, each step draws its minibatches together from the
run's stream, in the per-run algorithm's order: one per inner step, f's, one per HVP of the solve (AID-CG's K
iterations share one: CG needs a fixed operator), J v's (algorithms/explicit/minibatch.py).
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

from algorithms.base import AlgorithmConfig
from algorithms.explicit.definition import Definition, decaying, define, repeat
from algorithms.explicit.minibatch import at, chunks, drawing, grad_f_at, loop, minibatched
from problems.pure import pure_minibatched


class DoubleLoopState(NamedTuple):
    """x, y, the solve's v, the iteration t and the key."""

    x: Any
    y: Any
    v: Any
    t: Any
    key: Any = None


#: (hvp(u, minibatch), b, v, η, config, the solve's minibatches (None: full batch), xp) -> v
Solve = Callable[[Callable[[Any, Any], Any], Any, Any, Any, AlgorithmConfig, Any, Any], Any]


def init(oracles: Any, hyper: Any, config: AlgorithmConfig, key: Any, xp: Any) -> DoubleLoopState:
    x, y = oracles.initial_point(xp.zeros)
    return DoubleLoopState(x, y, xp.zeros_like(y), xp.zeros(1), key)


def _eta(hyper: Any) -> Any:
    """η of the solve (AID-CG has none)."""
    return getattr(hyper, "eta", None)


def steps(state: DoubleLoopState, hyper: Any) -> tuple[Any, Any]:
    """(α_t, γ_t)."""
    return decaying(hyper.alpha, hyper.alpha_decay, state.t), decaying(hyper.gamma, hyper.gamma_decay, state.t)


def double_loop(solve: Solve, solve_batches: Callable[[AlgorithmConfig], int]) -> Callable[..., DoubleLoopState]:
    """The step of a double loop with this solve, which takes `solve_batches(config)` minibatches."""

    def step(state: DoubleLoopState, oracles: Any, hyper: Any, config: AlgorithmConfig, xp: Any) -> DoubleLoopState:
        x, key, o = state.x, state.key, oracles
        alpha, gamma = steps(state, hyper)
        inner = f_idx = solving = j_idx = None
        if minibatched(o, config):  # T inner steps' minibatches, f's, the solve's, J v's, drawn together
            t, k = config.inner_steps, solve_batches(config)
            key, drawn = chunks(o, key, config, t + k + 2, xp)
            inner, f_idx, solving, j_idx = drawn[:t], drawn[t], drawn[t + 1:t + 1 + k], drawn[t + 1 + k]
        y = loop(config.inner_steps, lambda y, i: y - alpha * at(o, "grad_y_g", i, x, y),
                 state.y, inner, xp)
        gx, gy = grad_f_at(o, f_idx, x, y)
        v = solve(lambda u, i: at(o, "hvp_yy_g", i, x, y, u), gy, state.v, _eta(hyper), config,
                  solving, xp)
        hypergrad = gx - at(o, "cross_xy_g", j_idx, x, y, v)
        return DoubleLoopState(o.project_x(x - gamma * hypergrad), y, v, state.t + 1, key)

    return step


def fixed_point(steps_field: str, warm: Callable[[AlgorithmConfig], bool]) -> Solve:
    """K = config.<steps_field> steps v −= η(H v − b), from the previous v when `warm(config)`, else from 0."""

    def solve(hvp: Callable, b: Any, v: Any, eta: Any, config: AlgorithmConfig, batches: Any, xp: Any) -> Any:
        start = v if warm(config) else xp.zeros_like(b)
        return loop(getattr(config, steps_field), lambda u, i: u - eta * (hvp(u, i) - b), start, batches, xp)

    return solve


def neumann_sum(hvp: Callable, b: Any, eta: Any, terms: int, xp: Any, batches: Any = None) -> Any:
    """η Σ_{q=0}^{Q} (I − ηH)^q b with Q = `terms`, in the order of `algorithms.hypergradient.neumann_series`
    (`hvp(u, minibatch)`: each term's HVP on its own minibatch of `batches`, or the full batch)."""

    def term(carry: tuple[Any, Any], idx: Any) -> tuple[Any, Any]:
        u, total = carry
        u = u - eta * hvp(u, idx)
        return u, total + u

    return eta * loop(terms, term, (b, b), batches, xp)[1]


def neumann(hvp: Callable, b: Any, v: Any, eta: Any, config: AlgorithmConfig, batches: Any, xp: Any) -> Any:
    """η Σ_{q=0}^{Q} (I − ηH)^q b, Q = config.neumann_terms (the previous v unused)."""
    return neumann_sum(hvp, b, eta, config.neumann_terms, xp, batches)


def conjugate_gradient(hvp_at: Callable, b: Any, v: Any, eta: Any, config: AlgorithmConfig, batches: Any,
                       xp: Any) -> Any:
    """K = config.cg_steps CG iterations on H v = b from the previous v (`warm_start`) or 0 (η unused), every
    HVP on the solve's one minibatch (or the full batch). A run whose residual is exactly zero or whose curvature
    along p is not positive keeps its iterate, as `algorithms.hypergradient.cg_solve` stops there (masked, since
    the loop cannot stop per run)."""
    hvp = (lambda u: hvp_at(u, None)) if batches is None else (lambda u: hvp_at(u, batches[0]))  # noqa: E731
    v = v if config.warm_start else xp.zeros_like(b)
    r = b - hvp(v) if config.warm_start else b
    dot = lambda a, c: (a * c).sum(-1, keepdims=True)  # noqa: E731  a per-run number, kept as a column

    def iteration(carry: tuple[Any, Any, Any, Any, Any]) -> tuple[Any, Any, Any, Any, Any]:
        v, r, p, rr, live = carry
        live = live & (rr > 0.0)
        hp = hvp(p)
        curvature = dot(p, hp)
        live = live & (curvature > 0.0)
        step = xp.where(live, rr / xp.where(live, curvature, 1.0), 0.0)
        v, r = v + step * p, r - step * hp
        rr_next = dot(r, r)
        p = xp.where(live, r + (rr_next / xp.where(live, rr, 1.0)) * p, p)
        return v, r, p, xp.where(live, rr_next, rr), live

    rr = dot(r, r)
    return repeat(config.cg_steps, iteration, (v, r, r, rr, xp.ones(rr.shape, dtype=bool)), xp)[0]


def diagnostics(state: DoubleLoopState, hyper: Any, config: AlgorithmConfig, xp: Any) -> dict[str, Any]:
    alpha, gamma = steps(state, hyper)
    return {"alpha": alpha, "gamma": gamma}


def _defined(name: str, solve: Solve, solve_batches: Callable[[AlgorithmConfig], int]) -> Definition:
    return define(Definition(name, init, double_loop(solve, solve_batches), diagnostics, oracles_of=pure_minibatched,
                             draws=drawing))


AMIGO = _defined("amigo", fixed_point("v_steps", lambda c: True), lambda c: c.v_steps)
STOCBIO = _defined("stocbio", neumann, lambda c: c.neumann_terms)
AID_CG = _defined("aid_cg", conjugate_gradient, lambda c: 1)
AID_FP = _defined("aid_fp", fixed_point("fp_steps", lambda c: c.warm_start), lambda c: c.fp_steps)
