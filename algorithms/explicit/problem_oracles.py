"""The NumPy engines' oracles of any `BilevelProblem` that has no pure form (problems/pure.py): the real-data
and simulated finite sums, the coreset problems.

One run's 1-D iterates go to the problem's oracles, a stack's (K, d) rows to its `*_rows` oracles, exactly as the
per-run algorithm calls them. Minibatches: a step's minibatches are
drawn together by the problem's own `sample_batches` from each run's generator (the stream `algorithms.run` gives
the run, in the per-run algorithm's order), one batch per run of a stack (`RunBatches`), and an oracle at a
minibatch is the problem's minibatch oracle. Ground truth: the run loop's metrics (the problem's own among them),
F_gap against F at the problem's known minimiser. The JAX engine needs a pure form: these are NumPy only.
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from algorithms.run_settings import _NUMERIC_FAILURES
from algorithms.stacked import RunBatches
from problems.base import BilevelProblem
from problems.shared.errors import ParameterError

#: What a ground-truth solve at a diverging run's point may raise (a non-finite value inside it: SciPy's checks).
_FAILURES = (*_NUMERIC_FAILURES, ValueError)
#: Oracles whose value is one of a pair the problem computes together: (the pair's oracle, the pair's index).
_PAIRED = {"grad_x_f": ("grad_f", 0), "grad_x_g": ("grad_g", 0)}


class ProblemOracles:
    """The explicit definitions' oracle interface over a `BilevelProblem`, on a run (1-D) or a stack (2-D)."""

    def __init__(self, problem: BilevelProblem) -> None:
        self.problem = problem
        self._f_opt: float | None = None
        self._names: tuple[str, ...] = ("F", "grad_F_sq", "y_err_sq", "F_gap")  # `_columns` sets the problem's

    def _call(self, name: str, batch: Any, x: Any, *args: Any) -> Any:
        """Oracle `name` at one run's point or every row of a stack's, on `batch` (None: the full batch)."""
        pair, j = _PAIRED.get(name, (name, None))
        value = getattr(self.problem, pair if np.ndim(x) == 1 else f"{pair}_rows")(x, *args, batch)
        return value if j is None else value[j]

    # ---- oracles (what a definition sees) ----
    def initial_point(self, zeros: Any) -> tuple[Any, Any]:
        """The problem's starting point (fresh copies), whatever its values."""
        return self.problem.initial_point()

    def g(self, x: Any, y: Any) -> Any:
        """g, a per-run number of shape (1,) ((K, 1) for a stack)."""
        return self.on_batch("g", None, x, y)

    def grad_y_g(self, x: Any, y: Any) -> Any:
        return self._call("grad_y_g", None, x, y)

    def grad_x_g(self, x: Any, y: Any) -> Any:
        return self._call("grad_x_g", None, x, y)

    def hvp_yy_g(self, x: Any, y: Any, v: Any) -> Any:
        return self._call("hvp_yy_g", None, x, y, v)

    def cross_xy_g(self, x: Any, y: Any, v: Any) -> Any:
        return self._call("cross_xy_g", None, x, y, v)

    def grad_x_f(self, x: Any, y: Any) -> Any:
        return self._call("grad_x_f", None, x, y)

    def grad_y_f(self, x: Any, y: Any) -> Any:
        return self._call("grad_y_f", None, x, y)

    def project_x(self, x: Any) -> Any:
        return self.problem.project_x(x) if np.ndim(x) == 1 else self.problem.project_x_rows(x)

    def project_y(self, y: Any) -> Any:
        return self.problem.project_y(y) if np.ndim(y) == 1 else self.problem.project_y_rows(y)

    # ---- minibatches (algorithms/explicit/minibatch.py) ----
    @property
    def takes_minibatches(self) -> bool:
        """Whether a config's `batch_size` gives minibatches here (a stochastic problem; else the full batch)."""
        return bool(self.problem.stochastic)

    def draw_chunks(self, key: Any, size: int, count: Any, width: int | None = None, pad: Any = None) -> list[Any]:
        """`count` minibatches of `size` drawn together by the problem from each run's generator: a list of
        batches for a run (`key` its generator), of `RunBatches` (one batch per run) for a stack (a tuple). With
        `width`, run k draws count[k] and the list is filled to `width` with its `pad` (pad[k] in a stack)."""
        if not self.problem.batches_drawn_whole():  # its batches would draw again when used: not in step order
            raise ParameterError(f"problem: '{self.problem.name}' draws its minibatches when they are used; "
                                 "allowed on the explicit engines: problems whose minibatches are drawn whole "
                                 "(index minibatches of a finite sum)")
        one = isinstance(key, np.random.Generator)
        generators, counts = ([key], [count]) if one else (list(key), [count] * len(key))
        if width is not None:  # a count per run
            counts = [int(c) for c in np.ravel(count)]
        rows = [list(self.problem.sample_batches(g, size, int(c))) for g, c in zip(generators, counts)]
        if width is not None:
            pads = [pad] if one else pad
            rows = [row + [pads[k]] * (width - len(row)) for k, row in enumerate(rows)]
        return rows[0] if one else [RunBatches(batches) for batches in zip(*rows)]

    def on_batch(self, name: str, batch: Any, x: Any, *args: Any) -> Any:
        """Oracle `name` (`grad_f`: the pair (∇x f, ∇y f)) at minibatch `batch` (None: the full batch), as the
        per-run algorithm or the stacked view calls it; g as a (1,) or (K, 1) number."""
        value = self._call(name, batch, x, *args)
        if name == "g":
            return np.reshape(value, (1,)) if np.ndim(x) == 1 else np.asarray(value)[:, None]
        return value

    # ---- per-sample oracles of a finite sum (SABA's memory) ----
    def sample_counts(self) -> tuple[int, int]:
        """(samples of g, samples of f)."""
        if self.problem.n_samples is None:
            raise ParameterError(f"problem: '{self.problem.name}' is not a finite sum; allowed: a problem with "
                                 "n_samples (a finite sum's per-sample oracles)")
        return self.problem.sample_counts()

    def grad_f_samples(self, x: Any, y: Any, idx: Any) -> tuple[Any, Any]:
        return self._samples("grad_f_samples", x, y, idx)

    def grad_y_g_samples(self, x: Any, y: Any, idx: Any) -> Any:
        return self._samples("grad_y_g_samples", x, y, idx)

    def hvp_yy_g_samples(self, x: Any, y: Any, v: Any, idx: Any) -> Any:
        return self._samples("hvp_yy_g_samples", x, y, v, idx)

    def cross_xy_g_samples(self, x: Any, y: Any, v: Any, idx: Any) -> Any:
        return self._samples("cross_xy_g_samples", x, y, v, idx)

    def _samples(self, name: str, x: Any, *args: Any) -> Any:
        """Per-sample oracle `name` at samples idx (the last argument; None: every sample of its level)."""
        *rest, idx = args
        if getattr(type(self.problem), name) is getattr(BilevelProblem, name):
            raise ParameterError(f"problem: '{self.problem.name}' has no per-sample oracles; allowed for this "
                                 "algorithm: a finite sum with them (e.g. 'quadratic' with n_samples, 'simulated')")
        if idx is None:
            idx = np.arange(self.sample_counts()[1 if name == "grad_f_samples" else 0])
        return getattr(self.problem, name if np.ndim(x) == 1 else f"{name}_rows")(x, *rest, idx)

    # ---- ground truth (evaluation only) ----
    def f_opt(self) -> float:
        """F at the problem's known minimiser (NaN when none is known), as the run loop computes it, once."""
        if self._f_opt is None:
            x_opt = self.problem.x_opt()
            self._f_opt = self.problem.F(x_opt) if x_opt is not None else math.nan
        return self._f_opt

    def metrics(self, x: Any, y: Any) -> dict[str, Any]:
        """The run loop's metrics at (x, y): numbers for one run, (K,) columns for a stack; NaN for a row whose
        iterates are not finite or whose ground truth fails (a diverged run's, which the engines do not record)."""
        X, Y = np.atleast_2d(x), np.atleast_2d(y)
        rows = np.isfinite(X).all(axis=1) & np.isfinite(Y).all(axis=1)
        try:
            columns = self._columns(X, Y) if rows.all() else self._rows(X, Y, rows)
        except _FAILURES:  # one row's solve failed (a diverging run): each row alone
            alone = [self._rows(X[k:k + 1], Y[k:k + 1], rows[k:k + 1]) for k in range(len(X))]
            columns = {n: np.concatenate([a[n] for a in alone]) for n in self._names}
        return columns if np.ndim(x) == 2 else {n: v[0] for n, v in columns.items()}

    def _rows(self, X: np.ndarray, Y: np.ndarray, rows: np.ndarray) -> dict[str, np.ndarray]:
        """`_columns` of the rows marked (NaN in the others, and in a lone row whose evaluation fails)."""
        part = {n: np.empty(0) for n in self._names}
        if rows.any():
            try:
                part = self._columns(X[rows], Y[rows])
            except _FAILURES:
                if len(X) > 1:
                    raise
                rows = np.zeros_like(rows)
        out = {n: np.full(len(X), np.nan) for n in self._names}
        for n in self._names:
            out[n][rows] = part[n]
        return out

    def _columns(self, X: np.ndarray, Y: np.ndarray) -> dict[str, np.ndarray]:
        p, f_opt = self.problem, self.f_opt()
        with np.errstate(all="ignore"):
            Ys, G = _ground_truth(p, X)
            D = Y - Ys
            columns = {"F": np.asarray(p.f_rows(X, Ys), dtype=float), "grad_F_sq": np.einsum("ij,ij->i", G, G),
                       "y_err_sq": np.einsum("ij,ij->i", D, D)}
            if type(p).metrics is not BilevelProblem.metrics:  # the problem's own, its `not strongly convex` flag too
                extra = p.metrics_rows(X, Y)
                columns.update({n: np.array([float(e[n]) for e in extra]) for n in extra[0]})
            if math.isfinite(f_opt) or "F_gap" not in columns:  # else the problem's own gap (coreset selection)
                columns["F_gap"] = columns["F"] - f_opt  # NaN without an optimum: the records then have none
        if p.constraints is not None:
            columns["constraint_violation"] = np.array([p.constraints.violation(a, b) for a, b in zip(X, Y)])
        self._names = tuple(columns)  # a stack's first point is finite: every later point has these
        return columns


def _ground_truth(p: BilevelProblem, X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """y*(x) and ∇F(x) of each row: stacked where the family has a stacked ∇F, else row by row, y* then ∇F
    (a problem that keeps y* of its last x, as the logistic ones do, then solves once per row, as alone)."""
    if type(p).grad_F_rows is not BilevelProblem.grad_F_rows:
        Ys = p.y_star_rows(X)
        return Ys, p.grad_F_rows(X, Ys)
    pairs = [(p.y_star(x), p.grad_F(x)) for x in X]
    return np.array([ys for ys, _ in pairs]), np.array([g for _, g in pairs])


def numpy_oracles(pure_form: Any, problem: Any) -> Any:
    """`pure_form(problem)` (a definition's `oracles_of`), or the problem's own oracles where it has no pure form."""
    try:
        return pure_form(problem)
    except ParameterError:
        if not isinstance(problem, BilevelProblem):
            raise
        return ProblemOracles(problem)
