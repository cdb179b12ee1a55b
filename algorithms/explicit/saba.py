"""SABA (Dagréou, Ablin, Vaiter & Moreau 2022, §2.2, eqs. 11a–c) as an explicit-state definition.

The recursion of `algorithms.variance_reduced.SABA` from the same iterate: SOBA's three directions at the
current (x, y, v), D_y = ∇y g, D_v = ∇²yy g · v + ∇y f, D_x = ∇²xy g · v + ∇x f (v ≈ −H⁻¹∇y f, SOBA's sign),
each a mean of per-sample terms replaced by its SAGA estimate over a memory of every sample's last term;
constant steps y −= ρ D_y, v −= ρ D_v, x −= γ D_x. The state carries the memory: one table per level (g's
samples: ∇y g_i, H_i v, J_i v side by side; f's: ∇y f_i, ∇x f_i), (n, width) per run, (K, n, width) in a
stack, and each table's running mean. `memory_init: full` fills the tables at the start point (the
per-run object fills them at its first step, at the same point: the same numbers); `zero` starts them at 0.

Full batch only (`batch_size: null`): every sample's term is refreshed each step, so the estimate is the
mean of the fresh terms. A minibatch's indices would be drawn from a per-run random stream carried in the
state, which the explicit engines do not carry yet; minibatch SABA runs per run and in `run_batched`.
"""
from __future__ import annotations

from typing import Any, NamedTuple

from algorithms.base import AlgorithmConfig
from algorithms.explicit.definition import Definition, define
from problems.pure import pure_finite_sum
from problems.shared.errors import ParameterError


class SABAState(NamedTuple):
    """x, y, v, the memory tables of g's and f's samples and their means, the iteration t, the key."""

    x: Any
    y: Any
    v: Any
    memory_g: Any  # (n_g, 2 dy + dx): ∇y g_i, H_i v, J_i v
    memory_f: Any  # (n_f, dy + dx): ∇y f_i, ∇x f_i
    mean_g: Any
    mean_f: Any
    t: Any
    key: Any = None


def terms(oracles: Any, x: Any, y: Any, v: Any, xp: Any) -> tuple[Any, Any]:
    """Every sample's terms at (x, y, v), side by side per level as SABA's tables hold them."""
    g = xp.concatenate((oracles.grad_y_g_samples(x, y), oracles.hvp_yy_g_samples(x, y, v),
                        oracles.cross_xy_g_samples(x, y, v)), axis=-1)
    gx, gy = oracles.grad_f_samples(x, y)
    f = xp.concatenate((gy, xp.broadcast_to(gx, gy.shape[:-1] + gx.shape[-1:])), axis=-1)
    return g, f


def check_memory(oracles: Any, config: AlgorithmConfig, dim_x: int, dim_y: int) -> None:
    """The run's tables within `memory_limit_gb`, as `algorithms.variance_reduced.SABA` refuses them (one line)."""
    n_g, n_f = oracles.sample_counts()
    gb = 8 * (n_g * (2 * dim_y + dim_x) + n_f * (dim_y + dim_x)) / 2**30
    if gb > config.memory_limit_gb:
        raise ParameterError(f"algorithm 'saba': per-sample memory needs {gb:.2f} GiB per run, above "
                             f"'memory_limit_gb' = {config.memory_limit_gb:g}; raise it or use fewer samples")


def init(oracles: Any, hyper: Any, config: AlgorithmConfig, key: Any, xp: Any) -> SABAState:
    x, y = oracles.initial_point(xp.zeros)
    check_memory(oracles, config, x.shape[-1], y.shape[-1])  # shapes only: before any table is made
    v = xp.zeros_like(y)
    if config.memory_init == "full":  # every sample's terms at the start point (the paper's w_i^0)
        g, f = terms(oracles, x, y, v, xp)
        mean_g, mean_f = g.mean(axis=-2), f.mean(axis=-2)
    else:
        n_g, n_f = oracles.sample_counts()
        g, f = xp.zeros((n_g, 2 * y.shape[-1] + x.shape[-1])), xp.zeros((n_f, y.shape[-1] + x.shape[-1]))
        mean_g, mean_f = g.sum(axis=-2), f.sum(axis=-2)
    return SABAState(x, y, v, g, f, mean_g, mean_f, xp.zeros(1), key)


def saga(table: Any, mean: Any, fresh: Any) -> tuple[Any, Any]:
    """(estimate, new mean) of SAGA with every sample refreshed (`algorithms.variance_reduced.saga` with idx
    all of them): mean + avg(fresh − table); the new table is `fresh`."""
    total = (fresh - table).sum(axis=-2)
    n = table.shape[-2]
    return mean + total / n, mean + total / n


def step(state: SABAState, oracles: Any, hyper: Any, config: AlgorithmConfig, xp: Any) -> SABAState:
    x, y, v = state.x, state.y, state.v
    fresh_g, fresh_f = terms(oracles, x, y, v, xp)
    est_g, mean_g = saga(state.memory_g, state.mean_g, fresh_g)
    est_f, mean_f = saga(state.memory_f, state.mean_f, fresh_f)
    dy = y.shape[-1]
    d_y, d_v, d_x = est_g[..., :dy], est_g[..., dy:2 * dy] + est_f[..., :dy], est_g[..., 2 * dy:] + est_f[..., dy:]
    return SABAState(oracles.project_x(x - hyper.gamma * d_x), y - hyper.rho * d_y, v - hyper.rho * d_v,
                     fresh_g, fresh_f, mean_g, mean_f, state.t + 1, state.key)


def diagnostics(state: SABAState, hyper: Any, config: AlgorithmConfig, xp: Any) -> dict[str, Any]:
    return {"rho": hyper.rho, "gamma": hyper.gamma}


def refuses(config: AlgorithmConfig) -> str | None:
    """A minibatch needs per-run index draws the explicit state does not carry yet."""
    if config.batch_size is not None:
        return ("batch_size: the explicit SABA refreshes every sample each step (a minibatch's indices would come "
                "from a per-run stream the engines do not carry yet); allowed here: null (use algorithms.run or "
                "run_batched for minibatches)")
    return None


SABA = define(Definition("saba", init, step, diagnostics, refuses=refuses, oracles_of=pure_finite_sum))
