"""`fn_quadratic`: the built-in quadratic problem rebuilt from two JAX functions.

The instance (A, C, P, a, e, c and, for the finite sum, the per-sample factors U_i, V_i, S_i, a_i) is the
hand-written `problems.make("quadratic", ...)` one with the same parameters and seed; only the oracles
and the ground truth come from `from_functions`, which makes it a check of both.
"""
from __future__ import annotations

from dataclasses import dataclass

import jax.numpy as jnp
import numpy as np

from problems.functional import FunctionalProblem, from_functions
from problems.quadratic import Quadratic, QuadraticParams
from problems.registry import register


@dataclass(frozen=True)
class FnQuadraticParams(QuadraticParams):
    """The quadratic family's parameters (a subclass: the registry names its own owner in messages)."""


def functions(q: Quadratic):
    """(f, g, data) of a hand-written quadratic instance: full matrices, or per-sample factors."""
    m, c, e, mu0, p0 = q.m, q.c, q.e, getattr(q, "mu0", 0.0), getattr(q, "p0", 0.0)

    def outer_x(x):
        return 0.5 * m * x @ x + c @ x

    if q.n_samples is None:
        A, C, P, a = q.A, q.C, q.P, q.a

        def g(x, y, batch):
            return 0.5 * y @ A @ y - y @ C @ x + a @ y

        def f(x, y, batch):
            return 0.5 * (y - e) @ P @ (y - e) + outer_x(x)

        return f, g, None

    def g(x, y, batch):
        uy = jnp.einsum("brd,d->br", batch["U"], y)
        vx = jnp.einsum("brx,x->br", batch["V"], x)
        per = 0.5 * jnp.sum(uy * uy, axis=1) - jnp.sum(uy * vx, axis=1) + batch["a"] @ y
        return 0.5 * mu0 * y @ y + jnp.mean(per)

    def f(x, y, batch):
        s = jnp.einsum("brd,d->br", batch["S"], y - e)
        return 0.5 * p0 * (y - e) @ (y - e) + 0.5 * jnp.mean(jnp.sum(s * s, axis=1)) + outer_x(x)

    return f, g, {"U": q.U, "V": q.V, "S": q.S, "a": q.a_i}


@register("fn_quadratic", FnQuadraticParams)
def build_fn_quadratic(p: FnQuadraticParams, seed: int) -> FunctionalProblem:
    """The quadratic problem with JAX oracles and numerical ground truth (example of from_functions)."""
    q = Quadratic(p, seed)
    f, g, data = functions(q)
    return from_functions(f, g, np.zeros(q.dim_x), np.zeros(q.dim_y), data)
