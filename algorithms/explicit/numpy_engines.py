"""The two NumPy engines of an explicit definition: one run after another, and K runs as one stack."""
from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from algorithms.base import AlgorithmConfig
from algorithms.explicit.counts import run_counts
from algorithms.explicit.definition import Definition
from algorithms.explicit.divergence import DEFAULT, NEVER, NumpyWatch, iterate_limits
from algorithms.explicit.problem_oracles import numpy_oracles
from algorithms.explicit.result import CLOCKS, UNITS, Result, collect, shared_clock
from algorithms.run_settings import Divergence, generator


def stack_states(states: Sequence[Any]) -> Any:
    """K per-run states as one: vectors (d,) become (K, d), numbers ((1,) or ()) (K, 1) columns, None stays."""
    first = states[0]

    def leaf(values: list[Any]) -> Any:
        if values[0] is None:
            return None
        if isinstance(values[0], np.random.Generator):  # per-run streams: row k draws from run k's
            return tuple(values)
        out = np.stack([np.asarray(v, dtype=float) for v in values])
        return out.reshape(len(values), 1) if out.ndim == 1 else out

    return type(first)(*(leaf([s[i] for s in states]) for i in range(len(first))))


def _evaluate(defn: Definition, oracles: Any, state: Any, hyper: Any, config: AlgorithmConfig) -> dict[str, Any]:
    with np.errstate(all="ignore"):  # a diverged run's values are recorded as they are (non-finite)
        diag = defn.diagnostics(state, hyper, config, np)
        units = {UNITS: state.hvp_calls} if defn.counted(config) is not None else {}
        return {**oracles.metrics(state.x, state.y), **{f"diag/{n}": v for n, v in diag.items()}, **units}


def _steps(defn: Definition, state: Any, failed: Any, oracles: Any, hyper: Any, config: AlgorithmConfig, n: int,
           watch: NumpyWatch) -> tuple[Any, Any]:
    """n steps, each followed by the iterate check (divergence.watch_iterates, as `watch` does it on NumPy)."""
    with np.errstate(all="ignore"):  # an overflow makes the run non-finite, which the check sees
        for _ in range(n):
            state = defn.step(state, oracles, hyper, config, np)
            failed = watch(state, *failed)
    return state, failed


def _run(defn: Definition, oracles: Any, state: Any, hyper: Any, config: AlgorithmConfig,
         points: Sequence[int], rule: Divergence) -> tuple[Any, Any, list[dict[str, Any]], tuple[list[float], ...]]:
    """(final state, (failed, its reason), values per point, seconds per point) of one run or one stack: the seconds
    as the run loop counts them (cumulative steps' wall and thread CPU seconds, evaluations' wall seconds, this
    one's included)."""
    watch = NumpyWatch(state, iterate_limits(state, np, rule))
    failed = (np.full(np.shape(state.t), NEVER), np.zeros(np.shape(state.t)))
    step = cpu = 0.0
    start = time.perf_counter()
    values = [_evaluate(defn, oracles, state, hyper, config)]
    clock: tuple[list[float], ...] = ([0.0], [0.0], [time.perf_counter() - start])
    for a, b in zip(points, points[1:]):
        start, cpu_start = time.perf_counter(), time.thread_time()
        state, failed = _steps(defn, state, failed, oracles, hyper, config, b - a, watch)
        step, cpu = step + time.perf_counter() - start, cpu + time.thread_time() - cpu_start
        start = time.perf_counter()
        values.append(_evaluate(defn, oracles, state, hyper, config))
        for column, v in zip(clock, (step, cpu, clock[2][-1] + time.perf_counter() - start)):
            column.append(v)
    return state, failed, values, clock


def keys(defn: Definition, config: AlgorithmConfig, seeds: Sequence[int] | None, k: int) -> list[Any]:
    """Each run's random stream: the generator `algorithms.run` gives run k's algorithm for seeds[k] (the
    same draws), or None for a definition that draws nothing with the stack's `config`."""
    if not defn.draws_for(config):
        return [None] * k
    return [generator(s) for s in (range(k) if seeds is None else seeds)]


def run_per_run(defn: Definition, problem: Any, configs: Sequence[AlgorithmConfig], points: Sequence[int],
                seeds: Sequence[int] | None = None, divergence: Divergence = DEFAULT) -> Result:
    """Each run alone with 1-D iterates and Python-float step sizes, one after another."""
    oracles, start = numpy_oracles(defn.oracles_of, problem), time.perf_counter()
    finals, failures, per_run, clocks = [], [], [], []
    for config, key in zip(configs, keys(defn, configs[0], seeds, len(configs))):
        hyper = defn.hyper(config)
        state, failed, values, clock = _run(defn, oracles, defn.init(oracles, hyper, config, key, np), hyper, config,
                                            points, divergence)
        finals.append(state)
        failures.append(failed)  # (iteration, reason) of each run
        per_run.append(collect(values, 1))
        clocks.append(clock)
    values = {n: np.concatenate([r[n] for r in per_run], axis=1) for n in per_run[0]}
    own = {n: np.array([c[j] for c in clocks], dtype=float).T for j, n in enumerate(CLOCKS)}  # each run's seconds
    # The oracle counts (counts.py) after the run: outside its seconds, and after the definition's own checks
    # (SABA's memory limit), which the measuring per-run algorithm would otherwise report in its own words.
    seconds = time.perf_counter() - start
    base, unit = run_counts(defn, problem, configs[0])
    return Result(defn.name, list(configs), tuple(points), values, stack_states(finals), "per_run", seconds,
                  failed=np.concatenate([f for f, _ in failures]), counts=base, unit_counts=unit,
                  clock=own, divergence=divergence, failed_reason=np.concatenate([r for _, r in failures]).ravel())


def run_stacked(defn: Definition, problem: Any, configs: Sequence[AlgorithmConfig], points: Sequence[int],
                seeds: Sequence[int] | None = None, divergence: Divergence = DEFAULT) -> Result:
    """The K runs as one stack: (K, d) iterates, each varying hyperparameter a (K, 1) column, each run's draws
    from its own generator."""
    oracles, start = numpy_oracles(defn.oracles_of, problem), time.perf_counter()
    hyper, config = defn.hyper_columns(configs), configs[0]
    state = stack_states([defn.init(oracles, defn.hyper(c), c, key, np)
                          for c, key in zip(configs, keys(defn, configs[0], seeds, len(configs)))])
    state, failed, values, clock = _run(defn, oracles, state, hyper, config, points, divergence)
    seconds = time.perf_counter() - start
    base, unit = run_counts(defn, problem, configs[0])
    return Result(defn.name, list(configs), tuple(points), collect(values, len(configs)), state, "stacked", seconds,
                  failed=failed[0].ravel(), failed_reason=failed[1].ravel(), counts=base, unit_counts=unit,
                  clock=shared_clock(*clock, len(configs)), time_mode="batched", divergence=divergence)
