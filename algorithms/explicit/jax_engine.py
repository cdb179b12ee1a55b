"""The JAX engine of an explicit definition: `jax.vmap` over the K runs, compiled with `jax.jit`, advanced window by
window of evaluation points (jax_programs.py), with each run's state to resume from between two windows.

`run_jax` runs the stack in one window. `CompiledStack` is the same engine one window at a time, for a trial that
sends records and checkpoints as it goes (sweep/execution/trial_stacks.py): `advance(to)` computes up to point
`to`, `result()` gives the records so far, `saved()` each run's state, from which a new stack (of any of those runs,
in any order) goes on exactly as the first would have. The values stay on the device within a window. Float64
throughout (`jax.enable_x64`, a context: the rest of the process keeps JAX's default). The device is JAX's default
(`JAX_PLATFORMS` chooses it). JAX is an optional extra: it is imported only when an engine runs, and a missing JAX is
one line saying how to install it.
"""
from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from algorithms.base import AlgorithmConfig, get
from algorithms.explicit.counts import run_counts
from algorithms.explicit.definition import Definition
from algorithms.explicit.divergence import DEFAULT
from algorithms.explicit.jax_programs import device, jax_modules, programs
from algorithms.explicit.problem_oracles import ProblemOracles
from algorithms.explicit.result import CLOCKS, Result
from algorithms.run_settings import Divergence
from algorithms.stacked import group_key
from problems.pure import as_arrays, pure_minibatched
from problems.pure_data import NAMES, data_form
from problems.shared.errors import ParameterError

#: Compiled programs by (start or advance, algorithm, the stack's shared config fields, K, the problem's pure form
#: and its arrays' shapes, stretches, which hyperparameters the stack shares, device, divergence rule).
_COMPILED: dict[tuple, Any] = {}
#: What a saved run state is (`CompiledStack.saved`): its `engine`.
SAVED_ENGINE = "jax"
def jax_form(defn: Definition, problem: Any) -> Any:
    """The problem's arrays and oracles for the compiled steps: the definition's pure form, or a real-data problem's
    (problems/pure_data.py: oracles only, its ground truth evaluated on the host);
    one line naming the problems there are otherwise."""
    try:
        return defn.oracles_of(problem)
    except ParameterError as refused:
        try:
            form = data_form(problem)
        except ParameterError:
            if defn.oracles_of is not pure_minibatched:  # a definition that needs more (SABA's per-sample oracles)
                raise refused from None
            raise ParameterError(f"problem: '{problem.name}' has no pure-array form for the JAX engine; allowed: "
                                 "'quadratic' (its finite sum too, with n_samples), 'nonunique_toy', "
                                 f"'minimax_toy', {', '.join(map(repr, NAMES))} (the NumPy engines run every "
                                 "problem)") from None
        if defn.oracles_of is not pure_minibatched and not hasattr(form, "grad_y_g_samples"):
            raise refused from None  # a definition that needs per-sample oracles (SABA's memory) the form lacks
        return form


def check_minibatches(problem: Any, form: Any, config: AlgorithmConfig) -> None:
    """One line when `config` asks minibatches of a stochastic problem whose pure form takes none (the constrained
    quadratic's noise draws): the NumPy engines draw them, and a compiled run would silently take the full batch."""
    if getattr(config, "batch_size", None) is not None and getattr(problem, "stochastic", False) \
            and not getattr(form, "takes_minibatches", False) and not hasattr(form, "grad_y_g_samples"):
        raise ParameterError(f"batch_size: the JAX engine has no minibatches of '{problem.name}' (its samples are "
                             "the NumPy engines' draws); allowed: null (the full batch), or the NumPy engines")


class CompiledStack:
    """K runs of one definition as one compiled stack, advanced a window of evaluation points at a time.

    `saved`: each run's state from an earlier stack (`saved()`, all at the same point), to go on from there; the
    configs, seeds and points must be those runs'. A run's draws come from `jax.random.PRNGKey(seeds[k])`: its own
    stream, not the NumPy generator of its seed; a resumed run goes on with the key it had."""

    def __init__(self, defn: Definition, problem: Any, configs: Sequence[AlgorithmConfig], points: Sequence[int],
                 seeds: Sequence[int] | None = None, divergence: Divergence = DEFAULT,
                 saved: Sequence[dict[str, Any]] | None = None) -> None:
        jax, _ = jax_modules()
        self.defn, self.problem, self.configs = defn, problem, list(configs)
        self.points, self.divergence = tuple(points), divergence
        self.seconds = self.compile_seconds = 0.0
        with jax.enable_x64(True):
            # NumPy arrays go to the compiled programs as they are (they move them to the device): no jnp copies.
            self.oracles = as_arrays(jax_form(defn, problem), np.asarray)
            check_minibatches(problem, self.oracles, self.configs[0])
            hyper = defn.hyper_columns(self.configs, shape=(-1,))
            self.hyper = type(hyper)(*(v[0] if np.all(v == v[0]) else v for v in hyper))  # shared: a scalar
            self.lengths = np.diff(np.asarray(points, dtype=np.int64))
            seeds = np.arange(len(self.configs)) if seeds is None else np.asarray(seeds, dtype=np.int64)
            self._key = (defn.name, group_key(get(defn.name), self.configs[0]), len(self.configs), type(self.oracles),
                         tuple(np.shape(a) for a in jax.tree_util.tree_leaves(self.oracles)), len(self.lengths),
                         tuple(np.ndim(v) for v in self.hyper), device(), divergence.factor,
                         "iterates" in divergence.metrics)
            start, advance = programs(defn, self.configs[0], divergence)
            if saved:
                self._restore(jax, saved, jax.eval_shape(start, self.oracles, self.hyper, seeds)[0])
            else:
                begin = self._compiled("start", start, self.oracles, self.hyper, seeds)
                clock = time.perf_counter()
                self.state, self.failed, self.limits, first = jax.block_until_ready(
                    begin(self.oracles, self.hyper, seeds))
                self.values = {n: v.reshape(1, -1) for n, v in self._host_values(first).items()}
                self.clock = {n: np.zeros((1, len(self.configs))) for n in CLOCKS}
                self.seconds += time.perf_counter() - clock
            self._advance = self._compiled("advance", advance, self.oracles, self.hyper,
                                           self.lengths, self.state, self.failed, self.limits)

    @property
    def done(self) -> int:
        """The last point evaluated (its index in `points`)."""
        return next(iter(self.values.values())).shape[0] - 1

    def _compiled(self, name: str, program: Any, *args: Any) -> Any:
        """`program` compiled for these arguments' shapes, once per process (its seconds in `compile_seconds`)."""
        jax, _ = jax_modules()
        key = (name, *self._key)
        if key not in _COMPILED:
            clock = time.perf_counter()
            _COMPILED[key] = jax.jit(program).lower(*args).compile()
            self.compile_seconds += time.perf_counter() - clock
        return _COMPILED[key]

    def advance(self, to: int) -> None:
        """Compute the points after `done` up to `to` (an index in `points`), in one call."""
        jax, _ = jax_modules()
        if not self.done < to < len(self.points):
            raise ValueError(f"to: a point after {self.done} and before {len(self.points)}, got {to}")
        stretch = np.arange(len(self.lengths))
        lengths = np.where((stretch >= self.done) & (stretch < to), self.lengths, 0)
        with jax.enable_x64(True):
            clock, cpu = time.perf_counter(), time.process_time()
            self.state, self.failed, later = jax.block_until_ready(
                self._advance(self.oracles, self.hyper, lengths, self.state, self.failed, self.limits))
            wall, cpu = time.perf_counter() - clock, time.process_time() - cpu
            rows = self._host_values({n: np.asarray(v)[self.done:to] for n, v in later.items()}, axis=1)
        # One call makes the window's points: its seconds are shared out by steps done, and among the K runs.
        done = self.points[self.done]
        share = (np.asarray(self.points[self.done + 1:to + 1], dtype=float) - done) / (self.points[to] - done)
        step = {"time": wall, "cpu_time": cpu, "eval_time": 0.0}
        self.clock = {n: np.concatenate([c, c[-1:] + np.outer(share, np.full(c.shape[1], step[n] / c.shape[1]))])
                      for n, c in self.clock.items()}
        self.values = {n: np.concatenate([v, rows[n].reshape(to - self.done, -1)])
                       for n, v in self.values.items()}
        self.seconds += time.perf_counter() - clock

    def _host_values(self, values: dict[str, Any], axis: int = 0) -> dict[str, np.ndarray]:
        """The values as NumPy arrays, with the iterates (x, y) of a form without ground truth replaced by the run
        loop's metrics there (algorithms/explicit/problem_oracles.py), first, as the NumPy engines order them.
        `axis`: 1 when the values have a leading axis of points."""
        out = {n: np.asarray(v) for n, v in values.items()}
        if hasattr(self.oracles, "metrics"):
            return out
        truth = ProblemOracles(self.problem)
        x, y = (out.pop(n) if axis else out.pop(n)[None] for n in ("x", "y"))
        at = [truth.metrics(np.asarray(x[i], dtype=float), np.asarray(y[i], dtype=float)) for i in range(len(x))]
        metrics = {n: np.stack([p[n] for p in at]) if axis else at[0][n] for n in at[0]} if at else {}
        return {**metrics, **out}

    def _restore(self, jax: Any, saved: Sequence[dict[str, Any]], shape: Any) -> None:
        """The stack's state, limits, values and seconds from its runs' saved states (`saved`)."""
        if len(saved) != len(self.configs) or len({s["point"] for s in saved}) != 1:
            raise ValueError("saved: one state per config, all saved at the same point")
        fields = []
        for name, part in zip(shape._fields, shape):
            if part is None or name == "t":
                fields.append(None if part is None else np.asarray(saved[0]["t"], dtype=part.dtype))
                continue
            leaves = [np.stack([s["state"][name][i] for s in saved]) for i in range(len(saved[0]["state"][name]))]
            fields.append(jax.tree_util.tree_unflatten(jax.tree_util.tree_structure(part), leaves))
        self.state = type(shape)(*fields)
        self.failed = tuple(np.stack([s["failed"][j] for s in saved]).reshape(-1, 1) for j in range(2))
        self.limits = tuple(np.stack([s["limits"][j] for s in saved]) for j in range(2))
        self.values = {n: np.stack([s["values"][n] for s in saved], axis=1) for n in saved[0]["values"]}
        self.clock = {n: np.stack([s["clock"][n] for s in saved], axis=1) for n in CLOCKS}

    def saved(self) -> list[dict[str, Any]]:
        """Each run's state now (a tree of arrays that a checkpoint stores): its iterates and key, divergence watch,
        values and seconds at the points so far. The stack's padding rows are saved as any other."""
        jax, _ = jax_modules()
        state = {name: None if part is None else [np.asarray(leaf) for leaf in jax.tree_util.tree_leaves(part)]
                 for name, part in zip(self.state._fields, self.state) if name != "t"}
        failed, limits = [np.asarray(f) for f in self.failed], [np.asarray(v) for v in self.limits]
        return [{"engine": SAVED_ENGINE, "algorithm": self.defn.name, "point": self.done,
                 "t": np.asarray(self.state.t),
                 "state": {n: None if v is None else [leaf[k] for leaf in v] for n, v in state.items()},
                 "failed": np.array([failed[0][k, 0], failed[1][k, 0]]), "limits": [lim[k] for lim in limits],
                 "values": {n: v[:, k] for n, v in self.values.items()},
                 "clock": {n: c[:, k] for n, c in self.clock.items()}}
                for k in range(len(self.configs))]

    def result(self) -> Result:
        """The runs' values and records up to `done` (`Result.records` ends a run as the run loop would)."""
        final = type(self.state)(*(None if v is None or n == "key" else np.asarray(v)
                                   for n, v in zip(self.state._fields, self.state)))
        if "t" in final._fields:  # one iteration count for the stack (every run steps together): a column again
            final = final._replace(t=np.broadcast_to(final.t, (len(self.configs), 1)).copy())
        base, unit = run_counts(self.defn, self.problem, self.configs[0])
        return Result(self.defn.name, list(self.configs), self.points, dict(self.values), final, "jax", self.seconds,
                      self.compile_seconds, failed=np.asarray(self.failed[0]).ravel(),
                      failed_reason=np.asarray(self.failed[1]).ravel(), counts=base, unit_counts=unit,
                      clock=dict(self.clock), time_mode="compiled", divergence=self.divergence)


def run_jax(defn: Definition, problem: Any, configs: Sequence[AlgorithmConfig], points: Sequence[int],
            seeds: Sequence[int] | None = None, divergence: Divergence = DEFAULT) -> Result:
    """The K runs vmapped and compiled, in one window; the compile time is `compile_seconds`, apart from `seconds`.
    A run's draws come from `jax.random.PRNGKey(seeds[k])`: its own stream, not the NumPy generator of its seed."""
    stack = CompiledStack(defn, problem, configs, points, seeds, divergence)
    stack.advance(len(points) - 1)
    return stack.result()


__all__ = ["CompiledStack", "check_minibatches", "device", "jax_form", "jax_modules", "run_jax"]
