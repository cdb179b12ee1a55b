"""SABA (Dagréou, Ablin, Vaiter & Moreau 2022, §2.2, eqs. 11a–c) as an explicit-state definition.

The recursion of `algorithms.variance_reduced.SABA` from the same iterate: SOBA's three directions at the
current (x, y, v), D_y = ∇y g, D_v = ∇²yy g · v + ∇y f, D_x = ∇²xy g · v + ∇x f (v ≈ −H⁻¹∇y f, SOBA's sign),
each a mean of per-sample terms replaced by its SAGA estimate over a memory of every sample's last term;
constant steps y −= ρ D_y, v −= ρ D_v, x −= γ D_x. The state carries the memory: one table per level (g's
samples: ∇y g_i, H_i v, J_i v side by side; f's: ∇y f_i, ∇x f_i), (n, width) per run, (K, n, width) in a
stack, and each table's running mean. `memory_init: full` fills the tables at the start point (the
per-run object fills them at its first step, at the same point: the same numbers); `zero` starts them at 0.

Minibatches (`batch_size` b): each step draws b distinct indices of g's samples, then b of f's, from the run's
stream in the state (`definition.choose`): on the NumPy engines the generator `algorithms.run` gives the run's
SABA for its seed, so per run and stacked draw the very indices it draws (none at the first step under
`memory_init: full`, which fills the tables instead), and the iterates are equal; the JAX engine's keys are
its own stream (equal in distribution). Only the drawn rows of a table change: NumPy writes them in place
(the state owns its tables), JAX by a functional update. `batch_size: null` refreshes every sample each step,
drawing nothing.
"""
from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

from algorithms.base import AlgorithmConfig
from algorithms.explicit.definition import Definition, choose, define
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


def terms(oracles: Any, x: Any, y: Any, v: Any, xp: Any, idx_g: Any = None, idx_f: Any = None) -> tuple[Any, Any]:
    """The samples' terms at (x, y, v) (all of them, or idx_g's of g and idx_f's of f), side by side per level
    as SABA's tables hold them."""
    g = xp.concatenate((oracles.grad_y_g_samples(x, y, idx_g), oracles.hvp_yy_g_samples(x, y, v, idx_g),
                        oracles.cross_xy_g_samples(x, y, v, idx_g)), axis=-1)
    gx, gy = oracles.grad_f_samples(x, y, idx_f)
    f = xp.concatenate((gy, xp.broadcast_to(gx, gy.shape[:-1] + gx.shape[-1:])), axis=-1)
    return g, f


def check_memory(oracles: Any, config: AlgorithmConfig, dim_x: int, dim_y: int) -> None:
    """The run's tables within `memory_limit_gb`, as `algorithms.variance_reduced.SABA` refuses them (one line)."""
    n_g, n_f = oracles.sample_counts()
    if config.batch_size is not None and config.batch_size > min(n_g, n_f):
        raise ParameterError(f"algorithm 'saba': 'batch_size' must be at most {min(n_g, n_f)} (the smaller sample "
                             f"set; indices are distinct), got {config.batch_size}")
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


def saga(table: Any, mean: Any, fresh: Any, idx: Any, xp: Any) -> tuple[Any, Any, Any]:
    """(estimate, new mean, new table) of SAGA over the distinct indices idx (None: every sample), as
    `algorithms.variance_reduced.saga`: mean + avg_k(fresh_k − table[idx_k]); mean += Σ_k(...)/n; table[idx] = fresh."""
    old = table if idx is None else xp.take_along_axis(table, idx[..., None], axis=-2)
    total = (fresh - old).sum(axis=-2)
    n, b = table.shape[-2], fresh.shape[-2]
    return mean + total / b, mean + total / n, fresh if idx is None else _written(table, idx, fresh)


def _written(table: Any, idx: Any, fresh: Any) -> Any:
    """`table` with rows idx set to `fresh`: in place on NumPy (the state owns its tables), else a JAX update."""
    if hasattr(table, "at"):
        return table.at[idx].set(fresh)  # one run's table under vmap: idx (b,)
    np.put_along_axis(table, np.broadcast_to(idx[..., None], fresh.shape), fresh, axis=-2)
    return table


def step(state: SABAState, oracles: Any, hyper: Any, config: AlgorithmConfig, xp: Any) -> SABAState:
    x, y, v, key, b = state.x, state.y, state.v, state.key, config.batch_size
    idx_g = idx_f = None
    if b is not None:  # the per-run SABA fills its tables without drawing at a full start's first step
        n_g, n_f = oracles.sample_counts()
        first = (state.t == 0) if config.memory_init == "full" else None
        key, idx_g = choose(key, n_g, b, xp, first)
        key, idx_f = choose(key, n_f, b, xp, first)
    fresh_g, fresh_f = terms(oracles, x, y, v, xp, idx_g, idx_f)
    est_g, mean_g, table_g = saga(state.memory_g, state.mean_g, fresh_g, idx_g, xp)
    est_f, mean_f, table_f = saga(state.memory_f, state.mean_f, fresh_f, idx_f, xp)
    dy = y.shape[-1]
    d_y, d_v, d_x = est_g[..., :dy], est_g[..., dy:2 * dy] + est_f[..., :dy], est_g[..., 2 * dy:] + est_f[..., dy:]
    return SABAState(oracles.project_x(x - hyper.gamma * d_x), y - hyper.rho * d_y, v - hyper.rho * d_v,
                     table_g, table_f, mean_g, mean_f, state.t + 1, key)


def diagnostics(state: SABAState, hyper: Any, config: AlgorithmConfig, xp: Any) -> dict[str, Any]:
    return {"rho": hyper.rho, "gamma": hyper.gamma}


SABA = define(Definition("saba", init, step, diagnostics, oracles_of=pure_finite_sum, draws=True))
