"""The seeded draw of one level of the simulated problem (problems.simulated): n rank-one sample quadratics as
benchopt's benchmark_bilevel generates them (its gen_matrices), with their exact means, in float64 or rounded
to float32 row block by row block from the same random stream."""
from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from problems.base import Array


@dataclass(frozen=True)
class SampleQuadratics:
    """Per-sample vectors of one level and their exact means as dense matrices."""

    a: Array  # (n, dy)
    b: Array  # (n, dx)
    c: Array  # (n, dx)
    e: Array  # (n, dy)
    l: Array  # (n, dy) linear term in y
    m: Array  # (n, dx) linear term in x
    H_yy: Array  # mean a_i a_iᵀ
    H_xx: Array  # mean b_i b_iᵀ
    C: Array  # mean c_i e_iᵀ (dx × dy): the cross block ∇²xy
    l_mean: Array
    m_mean: Array


def _sqrt_psd(rng: np.random.Generator, d: int, eigs: Array) -> Array:
    """Q diag(√eigs) Qᵀ with Q the full left singular basis of a Gaussian vector."""
    q = np.linalg.svd(rng.standard_normal((d, 1)))[0]
    return (q * np.sqrt(eigs)) @ q.T


def draw_level(rng: np.random.Generator, n: int, dx: int, dy: int, mu: float, L_yy: float,
               L_xx: float, L_cross: float, dtype: str = "float64") -> SampleQuadratics:
    """One level's n rank-one sample quadratics (the benchmark's gen_matrices), stored as `dtype`.

    Each n × d draw is released once used (z before l and m are drawn), so building a level holds at
    most its six sample arrays: with both levels at n = 32768, d = 100 that is 315 MB of samples.
    """
    if dtype != "float64":
        return _draw_level_rounded(rng, n, dx, dy, mu, L_yy, L_xx, L_cross, np.dtype(dtype))
    S_y = _sqrt_psd(rng, dy, np.geomspace(mu, L_yy, dy))
    a = rng.standard_normal((n, dy)) @ S_y
    # The outer block keeps one zero eigenvalue, as in the benchmark.
    S_x = _sqrt_psd(rng, dx, np.r_[0.0, np.geomspace(mu, L_xx, dx - 1)])
    b = rng.standard_normal((n, dx)) @ S_x
    U, _, Vh = np.linalg.svd(rng.standard_normal((dx, dy)))
    k = min(dx, dy)
    UD = U[:, :k] * np.geomspace(mu, L_cross, k)
    z = rng.standard_normal((n, dy))
    c = z[:, :k] @ UD.T  # (U D z)ᵀ with D's zero columns dropped
    e = z @ Vh.T  # (Vᵀ z)ᵀ, V = Vhᵀ; E c_i e_iᵀ = U D V
    del z
    l = rng.standard_normal((n, dy))
    m = rng.standard_normal((n, dx))
    return SampleQuadratics(a, b, c, e, l, m, a.T @ a / n, b.T @ b / n, c.T @ e / n, l.mean(0), m.mean(0))


#: Rows drawn at a time by the rounded (float32) generator: its float64 temporaries stay a few MB.
CHUNK_ROWS = 4096


def _draw_level_rounded(rng: np.random.Generator, n: int, dx: int, dy: int, mu: float, L_yy: float,
                        L_xx: float, L_cross: float, dtype: np.dtype) -> SampleQuadratics:
    """draw_level's samples rounded to `dtype`, drawn in blocks of rows from the same random stream.

    A normal matrix fills row by row, so drawing it in blocks of rows gives the same numbers; each block
    is transformed in float64 and rounded, and the means are accumulated in float64 from the rounded rows.
    """
    def fill(d: int, *maps: tuple[Array, object]) -> None:
        for start in range(0, n, CHUNK_ROWS):
            block = rng.standard_normal((min(CHUNK_ROWS, n - start), d))
            for out, transform in maps:
                out[start:start + len(block)] = transform(block)

    new = lambda d: np.empty((n, d), dtype)  # noqa: E731
    a, b, c, e, l, m = new(dy), new(dx), new(dx), new(dy), new(dy), new(dx)
    S_y = _sqrt_psd(rng, dy, np.geomspace(mu, L_yy, dy))
    fill(dy, (a, lambda z: z @ S_y))
    S_x = _sqrt_psd(rng, dx, np.r_[0.0, np.geomspace(mu, L_xx, dx - 1)])
    fill(dx, (b, lambda z: z @ S_x))
    U, _, Vh = np.linalg.svd(rng.standard_normal((dx, dy)))
    k = min(dx, dy)
    UD = U[:, :k] * np.geomspace(mu, L_cross, k)
    fill(dy, (c, lambda z: z[:, :k] @ UD.T), (e, lambda z: z @ Vh.T))
    fill(dy, (l, lambda z: z))
    fill(dx, (m, lambda z: z))
    return SampleQuadratics(a, b, c, e, l, m, _mean_outer(a, a), _mean_outer(b, b), _mean_outer(c, e),
                            _mean_rows(l), _mean_rows(m))


def _blocks(u: Array) -> Iterator[Array]:
    """u's rows in float64 blocks of CHUNK_ROWS."""
    for start in range(0, len(u), CHUNK_ROWS):
        yield u[start:start + CHUNK_ROWS].astype(np.float64)


def _mean_outer(u: Array, v: Array) -> Array:
    """mean_i u_i v_iᵀ in float64, accumulated over blocks of rows."""
    return sum(bu.T @ bv for bu, bv in zip(_blocks(u), _blocks(v))) / len(u)


def _mean_rows(u: Array) -> Array:
    """mean_i u_i in float64."""
    return u.sum(0, dtype=np.float64) / len(u)
