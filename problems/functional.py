"""Bilevel problems from two JAX functions: autodiff oracles, minibatches and numerical ground truth.

    import jax.numpy as jnp
    import problems
    p = problems.from_functions(f, g, x0, y0, data={"X": X, "t": t})

`f(x, y, batch)` and `g(x, y, batch)` return scalars. `batch` is the data pytree restricted to the rows
of an algorithm's minibatch (every row for the full-batch oracle; None when the problem has no data), so
both should average over the rows. With `outer_data`, g sees rows of `data` and f rows of `outer_data`
(two sample sets, as problems.sampling describes). x and y are flat float64 vectors.

Oracles run in float64 under JAX's thread-local x64 switch, so the rest of the process keeps JAX's
defaults: values and gradients by jax.grad, ∇²yy g·v forward-over-reverse (a JVP of ∇y g), ∇²xy g·v a
VJP of ∇y g in x. Each transform is jit-compiled once per function and argument shapes (a minibatch
size is a shape): module-level f and g compile once per process, closures once per instance. Ground
truth (y*, F, ∇F, with a flag where g is not strongly convex) comes from problems.implicit.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping
from functools import partial, wraps
from typing import Any

import numpy as np

try:
    import jax
    import jax.numpy as jnp
except ImportError as exc:  # the core install is NumPy/SciPy only
    raise ImportError("problems.functional needs JAX: pip install 'bilevel-sweep[jax]'") from exc

from problems.base import Array, Batch, BilevelProblem
from problems.implicit import ImplicitGroundTruth
from problems.sampling import TwoSetFiniteSum, inner_index, outer_index
from problems.shared.errors import ParameterError

Loss = Callable[[Any, Any, Any], Any]
Metrics = Callable[[Array, Array], Mapping[str, float]]


# ---------------------------------------------------------------- compiled transforms (f or g static)
def _take(data: Any, idx: Any) -> Any:
    """The rows `idx` of every leaf (all of `data` when idx is None)."""
    if data is None or idx is None:
        return data
    return jax.tree_util.tree_map(lambda a: jnp.take(a, idx, axis=0), data)


@partial(jax.jit, static_argnums=0)
def _value(fn: Loss, x, y, data, idx):
    return fn(x, y, _take(data, idx))


@partial(jax.jit, static_argnums=0)
def _grad_xy(fn: Loss, x, y, data, idx):
    return jax.grad(fn, argnums=(0, 1))(x, y, _take(data, idx))


@partial(jax.jit, static_argnums=0)
def _grad_y(fn: Loss, x, y, data, idx):
    return jax.grad(fn, argnums=1)(x, y, _take(data, idx))


@partial(jax.jit, static_argnums=0)
def _hvp_yy(fn: Loss, x, y, v, data, idx):
    batch = _take(data, idx)
    return jax.jvp(lambda w: jax.grad(fn, argnums=1)(x, w, batch), (y,), (v,))[1]


@partial(jax.jit, static_argnums=0)
def _cross_xy(fn: Loss, x, y, v, data, idx):
    batch = _take(data, idx)
    return jax.vjp(lambda u: jax.grad(fn, argnums=1)(u, y, batch), x)[1](v)[0]


@partial(jax.jit, static_argnums=0)
def _hessian_yy(fn: Loss, x, y, data, idx):
    return jax.jacfwd(jax.grad(fn, argnums=1), argnums=1)(x, y, _take(data, idx))


@partial(jax.jit, static_argnums=0)
def _jacobian_xy(fn: Loss, x, y, data, idx):
    return jax.jacfwd(jax.grad(fn, argnums=1), argnums=0)(x, y, _take(data, idx)).T


def _x64(method: Callable) -> Callable:
    """Run `method` with JAX's 64-bit mode switched on for this thread only."""
    @wraps(method)
    def call(*args, **kwargs):
        with jax.enable_x64(True):
            return method(*args, **kwargs)
    return call


def _vec(a: Any) -> Array:
    return np.array(a, dtype=np.float64)  # a writable NumPy copy, as the hand-written oracles return


# ---------------------------------------------------------------- the problem
class FunctionalProblem(BilevelProblem):
    """A BilevelProblem whose oracles are JAX transforms of f and g (see the module docstring)."""

    def __init__(self, f: Loss, g: Loss, x0: Array, y0: Array, data: Any, n_samples: int | None,
                 bounds: tuple[Array, Array] | None, metrics: Metrics | None, name: str,
                 inner_tol: float, cg_tol: float, warm_start: bool) -> None:
        self._f, self._g = f, g
        self._x0, self._y0 = x0, y0
        self.dim_x, self.dim_y = x0.size, y0.size
        self._data = data
        self.n_samples, self.stochastic = n_samples, n_samples is not None
        self._box = bounds
        self._user_metrics = metrics
        self.name = name
        # Private: the counting view passes public attributes through to algorithms.
        self._truth = ImplicitGroundTruth(self, inner_tol, cg_tol, warm_start)

    # Where each level's rows come from; TwoSetFunctional overrides both.
    def _f_rows(self, batch: Batch) -> tuple[Any, Any]:
        return self._data, batch

    def _g_rows(self, batch: Batch) -> tuple[Any, Any]:
        return self._data, batch

    # ---- oracles ----
    @_x64
    def f(self, x: Array, y: Array, batch: Batch = None) -> float:
        return float(_value(self._f, x, y, *self._f_rows(batch)))

    @_x64
    def g(self, x: Array, y: Array, batch: Batch = None) -> float:
        return float(_value(self._g, x, y, *self._g_rows(batch)))

    @_x64
    def grad_f(self, x: Array, y: Array, batch: Batch = None) -> tuple[Array, Array]:
        gx, gy = _grad_xy(self._f, x, y, *self._f_rows(batch))
        return _vec(gx), _vec(gy)

    @_x64
    def grad_g(self, x: Array, y: Array, batch: Batch = None) -> tuple[Array, Array]:
        gx, gy = _grad_xy(self._g, x, y, *self._g_rows(batch))
        return _vec(gx), _vec(gy)

    @_x64
    def grad_y_f(self, x: Array, y: Array, batch: Batch = None) -> Array:
        return _vec(_grad_y(self._f, x, y, *self._f_rows(batch)))

    @_x64
    def grad_y_g(self, x: Array, y: Array, batch: Batch = None) -> Array:
        return _vec(_grad_y(self._g, x, y, *self._g_rows(batch)))

    @_x64
    def hvp_yy_g(self, x: Array, y: Array, v: Array, batch: Batch = None) -> Array:
        return _vec(_hvp_yy(self._g, x, y, v, *self._g_rows(batch)))

    @_x64
    def cross_xy_g(self, x: Array, y: Array, v: Array, batch: Batch = None) -> Array:
        return _vec(_cross_xy(self._g, x, y, v, *self._g_rows(batch)))

    @_x64
    def hessian_yy_g(self, x: Array, y: Array, batch: Batch = None) -> Array:
        return _vec(_hessian_yy(self._g, x, y, *self._g_rows(batch)))

    @_x64
    def jacobian_xy_g(self, x: Array, y: Array, batch: Batch = None) -> Array:
        return _vec(_jacobian_xy(self._g, x, y, *self._g_rows(batch)))

    # ---- sets and start ----
    def project_x(self, x: Array) -> Array:
        """Clip onto the box X (identity without bounds)."""
        return x if self._box is None else np.clip(x, *self._box)

    def initial_point(self) -> tuple[Array, Array]:
        return self._x0.copy(), self._y0.copy()

    # ---- ground truth (problems.implicit) ----
    def y_star(self, x: Array) -> Array:
        return self._truth.at(x).y.copy()

    def F(self, x: Array) -> float:
        return self._truth.at(x).F

    def grad_F(self, x: Array) -> Array:
        return self._truth.at(x).grad_F.copy()

    def metrics(self, x: Array, y: Array) -> dict[str, float]:
        """The ground-truth certificate at x (accuracy reached, not-strongly-convex flag) and user metrics."""
        out = self._truth.at(x).metrics()
        if self._user_metrics is not None:
            out.update({k: float(v) for k, v in self._user_metrics(x, y).items()})
        return out


class TwoSetFunctional(FunctionalProblem, TwoSetFiniteSum):
    """g over the rows of `data`, f over the rows of `outer_data`; batches are TwoSetBatch."""

    def __init__(self, f: Loss, g: Loss, x0: Array, y0: Array, data: Any, outer_data: Any, n_inner: int,
                 n_outer: int, **kwargs: Any) -> None:
        super().__init__(f, g, x0, y0, data, None, **kwargs)
        self._outer = outer_data
        self._set_sizes(n_inner, n_outer)
        self.stochastic = True

    def _f_rows(self, batch: Batch) -> tuple[Any, Any]:
        return self._outer, outer_index(batch)

    def _g_rows(self, batch: Batch) -> tuple[Any, Any]:
        return self._data, inner_index(batch)


# ---------------------------------------------------------------- the constructor
def from_functions(f: Loss, g: Loss, x0: Any, y0: Any, data: Any = None, *, outer_data: Any = None,
                   bounds: tuple[Any, Any] | None = None, metrics: Metrics | None = None,
                   name: str = "functional", inner_tol: float = 1e-10, cg_tol: float = 1e-10,
                   warm_start: bool = False) -> FunctionalProblem:
    """A BilevelProblem from JAX functions f(x, y, batch), g(x, y, batch) (see the module docstring).

    data: pytree of arrays sharing a leading sample axis (n_samples), or None for a deterministic problem.
    outer_data: f's own samples (then g uses `data`). bounds: (lo, hi) of the box X (numbers, vectors or
    None for no bound on that side). metrics(x, y): further evaluation metrics (e.g. test accuracy).
    inner_tol, cg_tol: ground-truth tolerances on ‖∇y g‖ (relative to max(1, ‖∇y g(x, y0)‖)) and on the
    implicit system's relative residual. warm_start: start each inner solve from the latest y* instead of y0
    (for a nonconvex g: follow one local minimiser along the evaluated points; see problems.implicit).
    """
    for label, fn in (("f", f), ("g", g)):
        if not callable(fn):
            _fail(label, "a function f(x, y, batch) -> scalar", repr(fn))
    x0, y0 = _start("x0", x0), _start("y0", y0)
    for label, tol in (("inner_tol", inner_tol), ("cg_tol", cg_tol)):
        if not (isinstance(tol, (int, float)) and 0 < tol < 1):
            _fail(label, "a number in (0, 1)", repr(tol))
    box = _box(bounds, x0)
    with jax.enable_x64(True):
        inner, n = _rows("data", data)
        outer, m = _rows("outer_data", outer_data)
        if outer is not None and inner is None:
            _fail("outer_data", "given together with data (g's samples)", "outer_data without data")
        for label, fn, rows in (("f", f, outer if outer is not None else inner), ("g", g, inner)):
            _check_scalar(label, fn, x0, y0, rows)
        common = dict(bounds=box, metrics=metrics, name=name, inner_tol=float(inner_tol), cg_tol=float(cg_tol),
                      warm_start=bool(warm_start))
        if outer is not None:
            return TwoSetFunctional(f, g, x0, y0, inner, outer, n, m, **common)
        return FunctionalProblem(f, g, x0, y0, inner, n, **common)


def _fail(field: str, allowed: str, value: Any) -> None:
    shown = value if isinstance(value, str) else repr(value)
    raise ParameterError(f"from_functions: '{field}' must be {allowed}, got {shown}")


def _start(field: str, value: Any) -> Array:
    try:
        a = np.array(value, dtype=np.float64)
    except (TypeError, ValueError):
        _fail(field, "a flat vector of finite numbers", type(value).__name__)
    if a.ndim != 1 or a.size == 0 or not np.all(np.isfinite(a)):
        _fail(field, "a non-empty flat vector of finite numbers", f"shape {a.shape}")
    return a


def _box(bounds: Any, x0: Array) -> tuple[Array, Array] | None:
    if bounds is None:
        return None
    if not isinstance(bounds, (tuple, list)) or len(bounds) != 2:
        _fail("bounds", "a pair (lo, hi) of numbers, vectors or None", type(bounds).__name__)
    lo = np.broadcast_to(np.array(-np.inf if bounds[0] is None else bounds[0], dtype=np.float64), x0.shape)
    hi = np.broadcast_to(np.array(np.inf if bounds[1] is None else bounds[1], dtype=np.float64), x0.shape)
    if np.any(lo > hi):
        _fail("bounds", "a pair with lo ≤ hi in every coordinate", "lo > hi")
    if np.any(x0 < lo) or np.any(x0 > hi):
        _fail("x0", "inside bounds", "a point outside the box")
    return lo.copy(), hi.copy()


def _rows(field: str, data: Any) -> tuple[Any, int | None]:
    """The data as a pytree of JAX arrays (floats in float64) and its number of rows."""
    if data is None:
        return None, None
    leaves = jax.tree_util.tree_leaves(data)
    if not leaves:
        _fail(field, "a pytree of arrays with a leading sample axis, or None", "an empty pytree")
    arrays = jax.tree_util.tree_map(_as_array, data)
    sizes = {a.shape[0] if a.ndim else None for a in jax.tree_util.tree_leaves(arrays)}
    if None in sizes or len(sizes) != 1:
        found = f"leading lengths {sorted(s for s in sizes if s is not None)}"
        _fail(field, "a pytree of arrays sharing their leading (sample) axis length",
              found + (" and a scalar" if None in sizes else ""))
    n = sizes.pop()
    if n == 0:
        _fail(field, "arrays with at least one row", "0 rows")
    return arrays, int(n)


def _as_array(leaf: Any) -> Any:
    a = np.asarray(leaf)
    return jnp.asarray(a.astype(np.float64) if np.issubdtype(a.dtype, np.floating) else a)


def _check_scalar(label: str, fn: Loss, x0: Array, y0: Array, rows: Any) -> None:
    """f and g must map (x0, y0, full data) to a real scalar (checked by tracing, without compiling)."""
    out = jax.eval_shape(fn, x0, y0, rows)
    shape, dtype = getattr(out, "shape", None), getattr(out, "dtype", None)
    if shape != () or dtype is None or not jnp.issubdtype(dtype, jnp.floating):
        _fail(label, "a function returning a real scalar", f"output {shape} {dtype}")
