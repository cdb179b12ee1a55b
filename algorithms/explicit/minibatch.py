"""The five oracle values of a single-loop step (SOBA, S-TFBO) at (x, y, v): ∇y g, H v and J v at g's minibatch,
∇x f and ∇y f at f's, as the per-run algorithms' `batches(2)` takes them.

Full batch unless the config has a `batch_size` and the oracles are a finite sum's (`pure_finite_sum`, which has
per-sample oracles): then each step draws 2b indices with replacement from the run's stream in the state
(`draw_integers`, the order of the problem's `sample_batches`), the first b for g's oracles, the next b for f's,
and each oracle is the mean of its per-sample terms. A definition using it takes `oracles_of=pure_minibatched`
and `draws=drawing`.
"""
from __future__ import annotations

from typing import Any, NamedTuple

from algorithms.base import AlgorithmConfig
from algorithms.explicit.definition import draw_integers


class Values(NamedTuple):
    """∇y g, ∇²yy g · v, ∇²xy g · v, ∇x f, ∇y f."""

    grad_y_g: Any
    hvp: Any
    cross: Any
    grad_x_f: Any
    grad_y_f: Any


def drawing(config: AlgorithmConfig) -> bool:
    """Whether runs of `config` draw minibatches (on a finite sum; a deterministic problem takes no draw)."""
    return config.batch_size is not None


def values(oracles: Any, x: Any, y: Any, v: Any, key: Any, config: AlgorithmConfig, xp: Any) -> tuple[Any, Values]:
    """(the key after the step's draws, the oracle values at the step's minibatches or the full batch)."""
    b = config.batch_size
    if b is None or not hasattr(oracles, "grad_y_g_samples"):
        return key, Values(oracles.grad_y_g(x, y), oracles.hvp_yy_g(x, y, v), oracles.cross_xy_g(x, y, v),
                           oracles.grad_x_f(x, y), oracles.grad_y_f(x, y))
    key, idx = draw_integers(key, oracles.sample_counts()[0], 2 * b, xp)
    idx_g, idx_f = idx[..., :b], idx[..., b:]
    gx, gy = oracles.grad_f_samples(x, y, idx_f)
    return key, Values(oracles.grad_y_g_samples(x, y, idx_g).mean(axis=-2),
                       oracles.hvp_yy_g_samples(x, y, v, idx_g).mean(axis=-2),
                       oracles.cross_xy_g_samples(x, y, v, idx_g).mean(axis=-2), gx.mean(axis=-2), gy.mean(axis=-2))
