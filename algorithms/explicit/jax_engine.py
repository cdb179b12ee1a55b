"""The JAX engine of an explicit definition: `jax.vmap` over the K runs, the whole run one `jax.jit` program.

The program takes the stacked initial state, the problem's arrays and the (K,) hyperparameter vectors; a
`lax.scan` over the stretches between evaluation points runs each stretch's steps in a `lax.fori_loop`
(its length an argument, so one compiled program serves any points) and evaluates at its end, on the
device, so the host sees the values once, at the end. Float64 throughout (`jax.enable_x64`, a context:
the rest of the process keeps JAX's default). The device is JAX's default (`JAX_PLATFORMS` chooses it).
JAX is an optional extra: this module imports it only when an engine runs, and says so in one line when
it is not installed.
"""
from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from algorithms.base import AlgorithmConfig, get
from algorithms.explicit.counts import run_counts
from algorithms.explicit.definition import Definition
from algorithms.explicit.divergence import DEFAULT, NEVER, iterate_limits, watch_iterates
from algorithms.explicit.problem_oracles import ProblemOracles
from algorithms.explicit.result import UNITS, Result, shared_clock
from algorithms.run_settings import Divergence
from algorithms.stacked import group_key
from problems.pure import as_arrays, pure_minibatched
from problems.pure_data import NAMES, data_form
from problems.shared.errors import ParameterError

#: Compiled programs by (algorithm, the stack's shared config fields, K, the problem's pure form and its arrays'
#: shapes, stretches, which hyperparameters the stack shares, device).
_COMPILED: dict[tuple, Any] = {}


def jax_modules() -> tuple[Any, Any]:
    """(jax, jax.numpy), or one line saying how to install them."""
    try:
        import jax
        import jax.numpy as jnp
    except ImportError as exc:
        raise ParameterError(f"backend: 'jax' needs JAX ({exc}); pip install 'bilevel-sweep[jax]' "
                             "or use backend 'numpy'") from None
    return jax, jnp


def device() -> str:
    """The platform JAX runs on here (cpu, gpu, tpu), as `JAX_PLATFORMS` chose it."""
    jax, _ = jax_modules()
    return jax.default_backend()


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


def _program(defn: Definition, config: AlgorithmConfig, rule: Divergence) -> Any:
    """The whole run as a function of (oracles, hyper, lengths), for jax.jit: init, steps and evaluations (a form
    without ground truth gives the iterates at the points instead, for the host to evaluate)."""
    jax, jnp = jax_modules()

    def program(oracles: Any, hyper: Any, lengths: Any, seeds: Any) -> tuple[Any, Any, Any, Any]:
        def start(h: Any, seed: Any) -> Any:  # a run's key from its seed, when the definition draws
            return defn.init(oracles, h, config, jax.random.PRNGKey(seed) if defn.draws_for(config) else None,
                             jnp)

        # Not mapped: the iteration count t (the stack's runs step together) and a hyperparameter the whole stack
        # shares (a scalar here), so that a schedule's (t + 1)^e is computed once a step, not once per run.
        h_axes = type(hyper)(*(None if v.ndim == 0 else 0 for v in hyper))
        shape = jax.eval_shape(start, jax.tree_util.tree_map(lambda v: v[0] if v.ndim else v, hyper), seeds[0])
        axes = type(shape)(*(None if name == "t" else 0 for name in shape._fields))
        state = jax.vmap(start, in_axes=(h_axes, 0), out_axes=axes)(hyper, seeds)

        def one(s: Any, failed: Any, h: Any, limits: Any) -> tuple[Any, Any]:
            s = defn.step(s, oracles, h, config, jnp)
            return s, watch_iterates(s, *failed, limits, jnp)

        step = jax.vmap(one, in_axes=(axes, 0, h_axes, 0), out_axes=(axes, 0))
        limits = jax.vmap(lambda s: iterate_limits(s, jnp, rule), in_axes=(axes,))(state)

        def evaluate(s: Any) -> dict[str, Any]:
            diag = jax.vmap(lambda s1, h: defn.diagnostics(s1, h, config, jnp), in_axes=(axes, h_axes))(s, hyper)
            values = jax.vmap(oracles.metrics)(s.x, s.y) if hasattr(oracles, "metrics") else {"x": s.x, "y": s.y}
            units = {UNITS: s.hvp_calls} if defn.counted(config) is not None else {}
            return {**values, **{f"diag/{n}": v for n, v in diag.items()}, **units}

        def stretch(carry: tuple[Any, Any], n: Any) -> tuple[tuple[Any, Any], dict[str, Any]]:
            carry = jax.lax.fori_loop(0, n, lambda _, c: step(c[0], c[1], hyper, limits), carry)
            return carry, evaluate(carry[0])

        failed = (jnp.full((state.x.shape[0], 1), NEVER), jnp.zeros((state.x.shape[0], 1)))  # (iteration, reason)
        (final, failed), later = jax.lax.scan(stretch, (state, failed), lengths)
        return final, failed, evaluate(state), later

    return program


def run_jax(defn: Definition, problem: Any, configs: Sequence[AlgorithmConfig], points: Sequence[int],
            seeds: Sequence[int] | None = None, divergence: Divergence = DEFAULT) -> Result:
    """The K runs vmapped and compiled; the compile time is `compile_seconds`, apart from `seconds`. A run's
    draws come from `jax.random.PRNGKey(seeds[k])`: its own stream, not the NumPy generator of its seed."""
    jax, _ = jax_modules()
    config = configs[0]
    with jax.enable_x64(True):
        # NumPy arrays go to the compiled program as they are (it moves them to the device): no jnp copies here.
        oracles = as_arrays(jax_form(defn, problem), np.asarray)
        check_minibatches(problem, oracles, config)
        hyper = defn.hyper_columns(configs, shape=(-1,))
        hyper = type(hyper)(*(v[0] if np.all(v == v[0]) else v for v in hyper))  # shared by the stack: a scalar
        lengths = np.diff(np.asarray(points, dtype=np.int64))
        seeds = np.arange(len(configs)) if seeds is None else np.asarray(seeds, dtype=np.int64)
        key = (defn.name, group_key(get(defn.name), config), len(configs), type(oracles),
               tuple(np.shape(a) for a in jax.tree_util.tree_leaves(oracles)), len(lengths),
               tuple(np.ndim(v) for v in hyper), device(), divergence.factor, "iterates" in divergence.metrics)
        compile_seconds = 0.0
        if key not in _COMPILED:
            start = time.perf_counter()
            _COMPILED[key] = jax.jit(_program(defn, config, divergence)).lower(oracles, hyper, lengths, seeds).compile()
            compile_seconds = time.perf_counter() - start
        start, cpu_start = time.perf_counter(), time.process_time()
        final, failed, first, later = jax.block_until_ready(_COMPILED[key](oracles, hyper, lengths, seeds))
        wall, cpu = time.perf_counter() - start, time.process_time() - cpu_start
        if not hasattr(oracles, "metrics"):  # the problem's own ground truth, at each point's iterates
            first, later = _host_metrics(problem, first, later)
        values = {n: np.concatenate([np.asarray(first[n]).reshape(1, -1),
                                     np.asarray(later[n]).reshape(len(lengths), -1)]) for n in first}
        final = type(final)(*(None if v is None or n == "key" else np.asarray(v) for n, v in zip(final._fields, final)))
        if "t" in final._fields:  # one iteration count for the stack (every run steps together): a column again
            final = final._replace(t=np.broadcast_to(final.t, (len(configs), 1)).copy())
        seconds = time.perf_counter() - start
    # One program makes every point: its seconds are shared out by steps done (evaluations included in `time`).
    share = np.asarray(points, dtype=float) / max(points[-1], 1)
    base, unit = run_counts(defn, problem, configs[0])
    return Result(defn.name, list(configs), tuple(points), values, final, "jax", seconds, compile_seconds,
                  failed=np.asarray(failed[0]).ravel(), failed_reason=np.asarray(failed[1]).ravel(),
                  counts=base, unit_counts=unit,
                  clock=shared_clock(wall * share, cpu * share, np.zeros_like(share), len(configs)),
                  time_mode="compiled",
                  divergence=divergence)


def _host_metrics(problem: Any, first: dict[str, Any], later: dict[str, Any]
                  ) -> tuple[dict[str, Any], dict[str, Any]]:
    """The values at the first point and the later ones with the iterates (x, y) replaced by the run loop's metrics
    there (algorithms/explicit/problem_oracles.py), in the NumPy engines' order: metrics, then diagnostics."""
    truth = ProblemOracles(problem)

    def at(x: Any, y: Any) -> dict[str, np.ndarray]:
        return truth.metrics(np.asarray(x, dtype=float), np.asarray(y, dtype=float))

    def replaced(values: dict[str, Any], metrics: dict[str, Any]) -> dict[str, Any]:
        return {**metrics, **{n: v for n, v in values.items() if n not in ("x", "y")}}

    points = [at(later["x"][i], later["y"][i]) for i in range(len(later["x"]))]
    stacked = {n: np.stack([p[n] for p in points]) for n in points[0]} if points else {}
    return replaced(first, at(first["x"], first["y"])), replaced(later, stacked)
