"""The two NumPy engines of an explicit definition: one run after another, and K runs as one stack."""
from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from algorithms.base import AlgorithmConfig
from algorithms.explicit.call_budget import CallPlan, hand_over
from algorithms.explicit.counts import run_counts
from algorithms.explicit.definition import Definition
from algorithms.explicit.divergence import DEFAULT, NEVER, NumpyWatch, iterate_limits
from algorithms.explicit.jax_engine import SAVED_ENGINE as JAX_SAVED_ENGINE  # JAX is imported only when it runs
from algorithms.explicit.problem_oracles import numpy_oracles
from algorithms.explicit.result import CLOCKS, UNITS, Result, collect, shared_clock
from algorithms.run_settings import Divergence, generator

#: What a saved run state of the NumPy stack is (`NumpyStack.saved`): its `engine`.
SAVED_ENGINE = "numpy"


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


def _stretches(defn: Definition, oracles: Any, state: Any, failed: Any, hyper: Any, config: AlgorithmConfig,
               points: Sequence[int], watch: NumpyWatch) -> tuple[Any, Any, list[dict[str, Any]], np.ndarray]:
    """From `points[0]` on, the steps to each later point followed by the evaluation there: (state, (failed, its
    reason), values per later point, (its steps' wall and thread CPU seconds, its evaluation's wall seconds) per
    later point)."""
    values, seconds = [], []
    for a, b in zip(points, points[1:]):
        wall, cpu = time.perf_counter(), time.thread_time()
        state, failed = _steps(defn, state, failed, oracles, hyper, config, b - a, watch)
        wall, cpu, evaluation = time.perf_counter() - wall, time.thread_time() - cpu, time.perf_counter()
        values.append(_evaluate(defn, oracles, state, hyper, config))
        seconds.append((wall, cpu, time.perf_counter() - evaluation))
    return state, failed, values, np.asarray(seconds, dtype=float).reshape(-1, len(CLOCKS))


def _run(defn: Definition, oracles: Any, state: Any, hyper: Any, config: AlgorithmConfig,
         points: Sequence[int], rule: Divergence) -> tuple[Any, Any, list[dict[str, Any]], np.ndarray]:
    """(final state, (failed, its reason), values per point, seconds per point) of one run: the seconds as the run
    loop counts them, a (len(points), 3) array of the cumulative steps' wall and thread CPU seconds and
    evaluations' wall seconds (the first point's evaluation included)."""
    failed = (np.full(np.shape(state.t), NEVER), np.zeros(np.shape(state.t)))
    start = time.perf_counter()
    first = _evaluate(defn, oracles, state, hyper, config)
    seconds = np.array([[0.0, 0.0, time.perf_counter() - start]])
    state, failed, values, later = _stretches(defn, oracles, state, failed, hyper, config, points,
                                              NumpyWatch(state, iterate_limits(state, np, rule)))
    return state, failed, [first, *values], np.cumsum(np.concatenate([seconds, later]), axis=0)


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
    own = {n: np.stack([c[:, j] for c in clocks], axis=1) for j, n in enumerate(CLOCKS)}  # each run's seconds
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
    from its own generator (`NumpyStack` in one window)."""
    stack = NumpyStack(defn, problem, configs, points, seeds, divergence)
    if len(stack.points) > 1:
        stack.advance(len(stack.points) - 1)
    return stack.result()


class NumpyStack:
    """K runs of one definition as one NumPy stack, advanced a window of evaluation points at a time, with the JAX
    engine's `CompiledStack` interface (a trial sends records and checkpoints as it goes: sweep/execution/
    trial_stacks.py): `advance(to)` computes up to point `to`, `result()` gives the records so far, `saved()` each
    run's state, from which a new stack (of any of those runs, in any order) goes on exactly as the first would have,
    its random stream included (a generator's state is saved with its run).

    The seconds are `run_stacked`'s: the stack's cumulative step and evaluation seconds divided among its K runs;
    a resumed run's go on from its own.

    Under an oracle-call budget (`calls`, call_budget.py: `points` are its `points`), the runs still going at its
    last point take the run loop's cut step there, whose records end them (`Result.ends`)."""

    compile_seconds = 0.0

    def __init__(self, defn: Definition, problem: Any, configs: Sequence[AlgorithmConfig], points: Sequence[int],
                 seeds: Sequence[int] | None = None, divergence: Divergence = DEFAULT,
                 saved: Sequence[dict[str, Any]] | None = None, calls: CallPlan | None = None) -> None:
        start = time.perf_counter()
        self.defn, self.problem, self.configs = defn, problem, list(configs)
        self.points, self.divergence, self.calls = tuple(points), divergence, calls
        if calls is not None and self.points != calls.points:
            raise ValueError(f"points: the call budget's {calls.points}, got {self.points}")
        self.seeds = list(range(len(self.configs)) if seeds is None else seeds)
        self._ends: dict[int, list[dict[str, Any]]] | None = None
        self.oracles = numpy_oracles(defn.oracles_of, problem)
        self.hyper, self.config = defn.hyper_columns(self.configs), self.configs[0]
        self._counts: tuple[Any, Any] | None = None
        k = len(self.configs)
        if saved:
            self._restore(saved, seeds)
        else:
            self.state = stack_states([defn.init(self.oracles, defn.hyper(c), c, key, np)
                                       for c, key in zip(self.configs, keys(defn, self.config, seeds, k))])
            self.limits = iterate_limits(self.state, np, divergence)
            self.failed = (np.full(np.shape(self.state.t), NEVER), np.zeros(np.shape(self.state.t)))
            clock = time.perf_counter()
            self.values = collect([_evaluate(defn, self.oracles, self.state, self.hyper, self.config)], k)
            self.clock = shared_clock([0.0], [0.0], [time.perf_counter() - clock], k)
        self.watch = NumpyWatch(self.state, self.limits, self.failed[0])
        self.seconds = time.perf_counter() - start

    @property
    def done(self) -> int:
        """The last point evaluated (its index in `points`)."""
        return len(self.values["F"]) - 1

    def advance(self, to: int) -> None:
        """Compute the points after `done` up to `to` (an index in `points`)."""
        if not self.done < to < len(self.points):
            raise ValueError(f"to: a point after {self.done} and before {len(self.points)}, got {to}")
        start, k = time.perf_counter(), len(self.configs)
        self.state, self.failed, rows, seconds = _stretches(self.defn, self.oracles, self.state, self.failed,
                                                            self.hyper, self.config, self.points[self.done:to + 1],
                                                            self.watch)
        # Each run's seconds go on from its own last ones, by the stack's seconds divided among its k runs.
        added = np.cumsum(seconds / k, axis=0)
        self.clock = {n: np.concatenate([c, c[-1:] + added[:, [j]]]) for j, (n, c) in enumerate(self.clock.items())}
        new = collect(rows, k)
        self.values = {n: np.concatenate([v, new[n]]) for n, v in self.values.items()}
        self.seconds += time.perf_counter() - start

    def saved(self) -> list[dict[str, Any]]:
        """Each run's state now (a tree a checkpoint stores: arrays, and a generator's state as its numbers): its
        iterates and stream, divergence watch, values and seconds at the points so far."""
        def row(v: Any, k: int) -> Any:
            if v is None:
                return None
            return v[k].bit_generator.state if isinstance(v, tuple) else v[k]  # a tuple: the runs' generators

        return [{"engine": SAVED_ENGINE, "algorithm": self.defn.name, "point": self.done,
                 "state": {n: row(v, k) for n, v in zip(self.state._fields, self.state)},
                 "failed": np.array([self.failed[0][k, 0], self.failed[1][k, 0]]),
                 "limits": [lim[k] for lim in self.limits],
                 "values": {n: v[:, k] for n, v in self.values.items()},
                 "clock": {n: c[:, k] for n, c in self.clock.items()}}
                for k in range(len(self.configs))]

    def _restore(self, saved: Sequence[dict[str, Any]], seeds: Sequence[int] | None) -> None:
        """The stack's state, limits, values and seconds from its runs' saved states (`saved`)."""
        if len(saved) != len(self.configs) or len({s["point"] for s in saved}) != 1:
            raise ValueError("saved: one state per config, all saved at the same point")
        if any(s["engine"] != SAVED_ENGINE or s["algorithm"] != self.defn.name for s in saved):
            raise ValueError(f"saved: states of '{self.defn.name}' on the NumPy stack only")
        key = keys(self.defn, self.config, seeds, 1)[0]
        template = self.defn.init(self.oracles, self.defn.hyper(self.config), self.config, key, np)  # its fields

        def field(name: str) -> Any:
            rows = [s["state"][name] for s in saved]
            if rows[0] is None:
                return None
            if isinstance(rows[0], dict):  # each run's generator, where it was
                return tuple(_generator(r) for r in rows)
            return np.stack([np.asarray(r, dtype=float) for r in rows])

        self.state = type(template)(*(field(n) for n in template._fields))
        self.failed = tuple(np.array([float(s["failed"][j]) for s in saved]).reshape(-1, 1) for j in range(2))
        self.limits = tuple(np.stack([np.asarray(s["limits"][j], dtype=float) for s in saved]) for j in range(2))
        self.values = {n: np.stack([s["values"][n] for s in saved], axis=1) for n in saved[0]["values"]}
        self.clock = {n: np.stack([s["clock"][n] for s in saved], axis=1) for n in CLOCKS}

    def result(self) -> Result:
        """The runs' values and records up to `done` (`Result.records` ends a run as the run loop would)."""
        if self._counts is None:
            self._counts = run_counts(self.defn, self.problem, self.config)
        base, unit = self._counts
        result = Result(self.defn.name, list(self.configs), self.points, dict(self.values), self.state, "stacked",
                        self.seconds, failed=self.failed[0].ravel(), failed_reason=self.failed[1].ravel(), counts=base,
                        unit_counts=unit, clock=dict(self.clock), time_mode="batched", divergence=self.divergence)
        if self.calls is not None and self.calls.cut and self.done == len(self.points) - 1:
            if self._ends is None:
                self._ends = self._cut_steps(result)
            result.ends = self._ends
        return result

    def _cut_steps(self, result: Result) -> dict[int, list[dict[str, Any]]]:
        """The records that end each run still going at the last point: the run loop's cut step there
        (call_budget.py), after the point's record when it is one of the run loop's points. The cut points'
        metrics are computed for all runs at once."""
        course, last = self.calls, len(self.points) - 1
        before: dict[int, dict[str, Any]] = {}
        ends: dict[int, list[dict[str, Any]]] = {}
        cut: dict[int, Any] = {}  # the runs whose cut step ended where their records wait for the metrics
        f_opt = None
        for k, rec in result.records(since=max(last - 1, 0)):
            if rec["iteration"] < self.points[last] or rec["status"] != "finished":
                before[k] = rec
                continue
            rec = {**rec, "status": "running"}
            row = {n: (v if v is None else v[k]) for n, v in zip(self.state._fields, self.state)}
            counted = {n: rec[n] for n in result.counts.names}
            run = hand_over(self.defn.name, self.problem, self.configs[k], self.seeds[k], course, self.divergence,
                            row, counted, {n: rec[n] for n in CLOCKS}, rec if course.natural else before[k],
                            {n: v[0, k] for n, v in self.values.items()}, f_opt)
            f_opt = run.f_opt()  # once for the stack's runs (one problem instance)
            ends[k] = [rec] * course.natural
            end = run.after_steps(run.step())
            if end is None and not run.budget_left():
                cut[k] = run
            else:  # diverged in the cut step, or calls the counts did not foresee: the run loop goes on alone
                ends[k] += [end] * (end is not None) + list(run.records())
        for k, metrics in zip(cut, self._metrics_of([run.algorithm for run in cut.values()], f_opt)):
            ends[k].append(cut[k].finish(metrics))
        return ends

    def _metrics_of(self, algorithms: list[Any], f_opt: float | None) -> list[dict[str, float]]:
        """The run loop's metrics (`Run._metrics`) at each algorithm's point, computed as one stack."""
        if not algorithms:
            return []
        with np.errstate(all="ignore"):
            columns = self.oracles.metrics(np.stack([a.x for a in algorithms]), np.stack([a.y for a in algorithms]))
        if (f_opt is None or not np.isfinite(f_opt)) and np.isnan(columns.get("F_gap", 0.0)).all():
            columns.pop("F_gap", None)  # the run loop records a gap against a known optimum (or the problem's own)
        return [{n: float(v[j]) for n, v in columns.items()} for j in range(len(algorithms))]


def saved_by(state: Any) -> str | None:
    """The engine whose saved state a run's midway state is ("numpy": `NumpyStack.saved`, "jax": the JAX engine's
    `CompiledStack.saved`), or None (a `Run`'s state, or none)."""
    engine = state.get("engine") if isinstance(state, dict) else None
    return engine if engine in (SAVED_ENGINE, JAX_SAVED_ENGINE) else None


def _generator(state: dict[str, Any]) -> np.random.Generator:
    """A run's generator at a saved state (the bit generator its seed gives, `generator`; NumPy refuses another)."""
    rng = generator(0)
    rng.bit_generator.state = state
    return rng
