"""Minibatches of a finite sum in the explicit definitions, drawn in the per-run algorithms' order.

`values`: the five oracle values of a single-loop step (SOBA, S-TFBO) at (x, y, v): ∇y g, H v and J v at g's
minibatch, ∇x f and ∇y f at f's, as the per-run algorithms' `batches(2)` takes them. `chunks`: a step's
minibatches drawn together (a double loop's inner steps, f's, its solve's, J v's, as `batch_source` draws them),
one per leading index, and `at`, an oracle's value at one of them (or the full batch).

Full batch unless the config has a `batch_size` and the oracles are a finite sum's (`pure_finite_sum`, which has
per-sample oracles): then each step draws its minibatches' indices with replacement from the run's stream in the
state (`draw_integers`, the order of the problem's `sample_batches`), and each oracle is the mean of its
per-sample terms. On a problem without a pure form (NumPy engines: algorithms/explicit/problem_oracles.py) the
problem itself draws the minibatches (`draw_chunks`) and gives the oracle at one (`on_batch`). A definition
using it takes `oracles_of=pure_minibatched` and `draws=drawing`.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np

from algorithms.base import AlgorithmConfig
from algorithms.explicit.definition import draw_integers, repeat, scan
from algorithms.stacked import RunBatches
from problems.shared.errors import ParameterError


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


def minibatched(oracles: Any, config: AlgorithmConfig) -> bool:
    """Whether a step of `config` on these oracles takes minibatches (a batch size, and a finite sum's oracles)."""
    finite_sum = getattr(oracles, "takes_minibatches", hasattr(oracles, "grad_y_g_samples"))
    return config.batch_size is not None and finite_sum


def chunks(oracles: Any, key: Any, config: AlgorithmConfig, count: int, xp: Any) -> tuple[Any, Any]:
    """(key, `count` minibatches of `batch_size` indices drawn together from the run's stream, stacked on a new
    leading axis: (count, b) for a run, (count, K, b) for a stack; 2b wide for a two-set finite sum); a problem that
    draws its own (`draw_chunks`) gives a list of its minibatches."""
    b = config.batch_size
    if hasattr(oracles, "draw_chunks"):  # a problem's own minibatches (a list, one entry per minibatch)
        return key, oracles.draw_chunks(key, b, count)
    # One minibatch is b indices per index set (a two-set finite sum: g's samples, then f's, as its sample_batches).
    bounds = oracles.index_bounds() if hasattr(oracles, "index_bounds") else oracles.sample_counts()[:1]
    width = len(bounds) * b
    high = bounds[0] if len(bounds) == 1 else np.tile(np.repeat(np.asarray(bounds), b), count)
    key, idx = draw_integers(key, high, count * width, xp)
    return key, xp.moveaxis(idx.reshape(idx.shape[:-1] + (count, width)), -2, 0)


def chunks_each(oracles: Any, key: Any, config: AlgorithmConfig, counts: Any, width: int, pad: Any,
                xp: Any) -> tuple[Any, Any]:
    """(key, `width` minibatches per run, of which run k drew only its first counts[k] from its stream, as its
    per-run algorithm draws them (a count of its own: an HIA's length), the rest `pad` (its own minibatch `pad`,
    never used but computed on with). Under JAX every run draws `width` from its own keys."""
    if getattr(xp, "__name__", "").startswith("jax"):
        return chunks(oracles, key, config, width, xp)
    b, counts = config.batch_size, np.ravel(counts).astype(int)
    if hasattr(oracles, "draw_chunks"):  # the problem's own minibatches
        return key, oracles.draw_chunks(key, b, counts, width, pad)
    bounds = oracles.index_bounds() if hasattr(oracles, "index_bounds") else oracles.sample_counts()[:1]
    if len(bounds) != 1:
        raise ParameterError("problem: per-run minibatch counts need one index set here; allowed: a problem "
                             "without a pure form, or the finite-sum quadratic")
    generators = [key] if isinstance(key, np.random.Generator) else list(key)
    rows = [np.concatenate([g.integers(0, bounds[0], size=int(c) * b), np.zeros((width - int(c)) * b, dtype=int)])
            for g, c in zip(generators, counts)]
    idx = np.stack(rows).reshape(len(rows), width, b)
    return key, idx[0] if isinstance(key, np.random.Generator) else np.moveaxis(idx, 1, 0)


def pick(drawn: Any, which: Any) -> Any:
    """Run k's minibatch number which[k] of `chunks_each`' minibatches (one run: its which[0]-th)."""
    which = which.astype(int) if hasattr(which, "astype") else which
    if isinstance(drawn, list):
        if isinstance(drawn[0], RunBatches):
            return RunBatches(drawn[int(j)][k] for k, j in enumerate(np.ravel(which)))
        return drawn[int(np.ravel(which)[0])]
    if drawn.ndim == 3:  # a NumPy stack's (width, K, b)
        return np.take_along_axis(drawn, which.reshape(1, -1, 1), axis=0)[0]
    return drawn[which[0]]


def grouped(drawn: Any, per: int) -> Any:
    """`chunks`' minibatches in consecutive groups of `per` (one group per step of a loop): an array reshaped to
    (count / per, per, ...), or a problem's list of minibatches cut into lists."""
    if isinstance(drawn, list):
        return [drawn[i:i + per] for i in range(0, len(drawn), per)]
    return drawn.reshape((len(drawn) // per, per) + drawn.shape[1:])


def grad_f_at(oracles: Any, idx: Any, x: Any, y: Any) -> tuple[Any, Any]:
    """(∇x f, ∇y f) at f's minibatch `idx` (means of the per-sample terms), or the full batch when idx is None."""
    if hasattr(oracles, "on_batch"):  # a problem's own pair, made at once (full batch too)
        return oracles.on_batch("grad_f", idx, x, y)
    if idx is None:
        return oracles.grad_x_f(x, y), oracles.grad_y_f(x, y)
    gx, gy = oracles.grad_f_samples(x, y, idx)
    return gx.mean(axis=-2), gy.mean(axis=-2)


def at(oracles: Any, name: str, idx: Any, *args: Any) -> Any:
    """Oracle `name` at a minibatch: the mean of its per-sample terms (`<name>_samples`) at `idx`, or the full
    batch when idx is None."""
    if idx is None:
        return getattr(oracles, name)(*args)
    if hasattr(oracles, "on_batch"):
        return oracles.on_batch(name, idx, *args)
    return getattr(oracles, f"{name}_samples")(*args, idx).mean(axis=-2)


def values(oracles: Any, x: Any, y: Any, v: Any, key: Any, config: AlgorithmConfig, xp: Any) -> tuple[Any, Values]:
    """(the key after the step's draws, the oracle values at the step's minibatches or the full batch)."""
    idx_g = idx_f = None  # the full batch
    if minibatched(oracles, config):
        key, (idx_g, idx_f) = chunks(oracles, key, config, 2, xp)
    return key, Values(at(oracles, "grad_y_g", idx_g, x, y), at(oracles, "hvp_yy_g", idx_g, x, y, v),
                       at(oracles, "cross_xy_g", idx_g, x, y, v), *grad_f_at(oracles, idx_f, x, y))


def loop(n: int, body: Callable[[Any, Any], Any], carry: Any, batches: Any, xp: Any) -> Any:
    """`body(carry, minibatch)` n times: on the full batch (`batches` None, `repeat`), or once per minibatch of
    `batches` in turn (`scan`)."""
    if batches is None:
        return repeat(n, lambda c: body(c, None), carry, xp)
    return scan(lambda c, idx: (body(c, idx), None), carry, batches, xp)[0]
