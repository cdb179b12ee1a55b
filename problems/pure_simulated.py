"""The simulated benchmark quadratic's arrays and oracles in pure form, for the compiled engine (problems/simulated.py).

Each level is a mean of rank-one sample quadratics h_i(x, y) = ½(a_i·y)² + ½(b_i·x)² + (c_i·x)(e_i·y) + l_i·y + m_i·x;
the full batch uses the levels' dense means (H_yy, H_xx, C, l̄, m̄), a minibatch the rows it names, as the problem
does. As problems/pure_logistic.py: operators only, the oracles only (the ground truth stays the problem's own, on
the host), a minibatch 2b indices (g's samples, then f's).
"""
from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

from problems.simulated import Simulated
from problems.simulated_draw import SampleQuadratics


class PureLevel(NamedTuple):
    """One level's per-sample vectors (n rows each) and their dense means."""

    a: Any
    b: Any
    c: Any
    e: Any
    l: Any  # noqa: E741  (the module docstring's name)
    m: Any
    H_yy: Any
    H_xx: Any
    C: Any  # (dx, dy): mean c_i e_iᵀ
    l_mean: Any
    m_mean: Any

    def value(self, x: Any, y: Any, idx: Any) -> Any:
        """The level's mean of h_i over samples idx (every sample: None), a (1,) number."""
        if idx is None:
            quad = 0.5 * ((y @ self.H_yy) * y).sum(-1) + 0.5 * ((x @ self.H_xx) * x).sum(-1) \
                + ((x @ self.C) * y).sum(-1)
            return (quad + (self.l_mean * y).sum(-1) + (self.m_mean * x).sum(-1))[..., None]
        a, b, c, e, l, m = (rows[idx] for rows in (self.a, self.b, self.c, self.e, self.l, self.m))
        ay, bx = a @ y, b @ x
        return (0.5 * ay * ay + 0.5 * bx * bx + (c @ x) * (e @ y) + l @ y + m @ x).mean(-1, keepdims=True)

    def grad_y(self, x: Any, y: Any, idx: Any) -> Any:
        if idx is None:
            return y @ self.H_yy + x @ self.C + self.l_mean
        a, c, e, l = self.a[idx], self.c[idx], self.e[idx], self.l[idx]
        return ((a @ y) @ a + (c @ x) @ e) / idx.shape[-1] + l.sum(0) / idx.shape[-1]

    def grad_x(self, x: Any, y: Any, idx: Any) -> Any:
        if idx is None:
            return x @ self.H_xx + y @ self.C.T + self.m_mean
        b, c, e, m = self.b[idx], self.c[idx], self.e[idx], self.m[idx]
        return ((b @ x) @ b + (e @ y) @ c) / idx.shape[-1] + m.sum(0) / idx.shape[-1]

    def hvp(self, v: Any, idx: Any) -> Any:
        if idx is None:
            return v @ self.H_yy
        a = self.a[idx]
        return (a @ v) @ a / idx.shape[-1]

    def rows(self, idx: Any) -> tuple[Any, ...]:
        """(a, b, c, e, l, m) of samples idx (every sample: None)."""
        every = (self.a, self.b, self.c, self.e, self.l, self.m)
        return every if idx is None else tuple(r[idx] for r in every)

    def grad_y_samples(self, x: Any, y: Any, idx: Any) -> Any:
        """∇y h_i per sample: a_i (a_i·y) + e_i (c_i·x) + l_i."""
        a, _, c, e, l, _ = self.rows(idx)
        return (a @ y)[..., None] * a + (c @ x)[..., None] * e + l

    def grad_x_samples(self, x: Any, y: Any, idx: Any) -> Any:
        """∇x h_i per sample: b_i (b_i·x) + c_i (e_i·y) + m_i."""
        _, b, c, e, _, m = self.rows(idx)
        return (b @ x)[..., None] * b + (e @ y)[..., None] * c + m

    def cross(self, v: Any, idx: Any) -> Any:
        """∇²xy h · v: the mean of c_i (e_i·v)."""
        if idx is None:
            return v @ self.C.T
        return (self.e[idx] @ v) @ self.c[idx] / idx.shape[-1]


class PureSimulated(NamedTuple):
    """g's level (`inner`), f's level (`outer`), the start's x coordinate."""

    inner: PureLevel
    outer: PureLevel
    x_init: Any

    #: A config's `batch_size` gives minibatches here (algorithms/explicit/minibatch.py).
    takes_minibatches = True

    def initial_point(self, zeros: Any) -> tuple[Any, Any]:
        return zeros(self.inner.b.shape[1]) + self.x_init, zeros(self.inner.a.shape[1])

    def index_bounds(self) -> tuple[int, int]:
        return self.inner.a.shape[0], self.outer.a.shape[0]

    def sample_counts(self) -> tuple[int, int]:
        """(samples of g, samples of f)."""
        return self.index_bounds()

    # ---- per-sample oracles (SABA's memory): one row per sample idx of its level (every sample: idx None) ----
    def grad_y_g_samples(self, x: Any, y: Any, idx: Any = None) -> Any:
        return self.inner.grad_y_samples(x, y, idx)

    def hvp_yy_g_samples(self, x: Any, y: Any, v: Any, idx: Any = None) -> Any:
        a = self.inner.rows(idx)[0]
        return (a @ v)[..., None] * a

    def cross_xy_g_samples(self, x: Any, y: Any, v: Any, idx: Any = None) -> Any:
        _, _, c, e, _, _ = self.inner.rows(idx)
        return (e @ v)[..., None] * c

    def grad_f_samples(self, x: Any, y: Any, idx: Any = None) -> tuple[Any, Any]:
        return self.outer.grad_x_samples(x, y, idx), self.outer.grad_y_samples(x, y, idx)

    def g(self, x: Any, y: Any) -> Any:
        return self.on_batch("g", None, x, y)

    def grad_y_g(self, x: Any, y: Any) -> Any:
        return self.inner.grad_y(x, y, None)

    def grad_x_g(self, x: Any, y: Any) -> Any:
        return self.inner.grad_x(x, y, None)

    def hvp_yy_g(self, x: Any, y: Any, v: Any) -> Any:
        return self.inner.hvp(v, None)

    def cross_xy_g(self, x: Any, y: Any, v: Any) -> Any:
        return self.inner.cross(v, None)

    def grad_x_f(self, x: Any, y: Any) -> Any:
        return self.outer.grad_x(x, y, None)

    def grad_y_f(self, x: Any, y: Any) -> Any:
        return self.outer.grad_y(x, y, None)

    def project_x(self, x: Any) -> Any:
        return x

    def project_y(self, y: Any) -> Any:
        return y

    def on_batch(self, name: str, idx: Any, x: Any, y: Any, *v: Any) -> Any:
        """Oracle `name` on minibatch idx (None: the full batch); `grad_f` the pair (∇x f, ∇y f), g a (1,) number."""
        inner = outer = None
        if idx is not None:
            half = idx.shape[-1] // 2
            inner, outer = idx[..., :half], idx[..., half:]
        if name == "grad_f":
            return self.outer.grad_x(x, y, outer), self.outer.grad_y(x, y, outer)
        return {"g": lambda: self.inner.value(x, y, inner), "grad_y_g": lambda: self.inner.grad_y(x, y, inner),
                "grad_x_g": lambda: self.inner.grad_x(x, y, inner), "hvp_yy_g": lambda: self.inner.hvp(v[0], inner),
                "cross_xy_g": lambda: self.inner.cross(v[0], inner)}[name]()


def _level(q: SampleQuadratics) -> PureLevel:
    return PureLevel(*(np.asarray(getattr(q, f), dtype=float) for f in PureLevel._fields))


def pure_simulated(problem: Simulated) -> PureSimulated:
    """The pure form of a simulated instance (NumPy float64 arrays, whatever its `sample_dtype`)."""
    return PureSimulated(_level(problem.inner), _level(problem.outer), float(problem.x_init))
