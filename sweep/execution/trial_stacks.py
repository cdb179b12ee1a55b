"""The runs of one batch through the stacked engines of the explicit definitions (algorithms/explicit): the NumPy
stack (`NumpyStack`, a study's default `backend: numpy`) or compiled JAX programs (`CompiledStack`, `backend: jax`,
sweep/study/backend.py).

The batch's runs are split into stacks whose configs share every field that may not vary (loop counts, flags),
and each stack runs through the engine. On JAX: one `vmap`-ed, `jit`-compiled program per stack shape (compiled
once per process and reused by later trials of the same shape, and kept in JAX's persistent compilation cache for
later processes, sweep/execution/jax_cache.py; a stack is padded to a few sizes (at most 25 % more rows) so that
there are few shapes). A stack is computed a window of evaluation points at a time, each window as long as the time
to the next checkpoint (`checkpoint_seconds`; `report_seconds` when that is 0), as the previous window's speed
predicts; after a window its records are sent (each run's end with its share of the stack's wall time) and, when
one is due, a checkpoint holds each going run's state (the engine's `saved`). A trial resumed from it rebuilds the
stacks of those runs and goes on from there, with the same iterates and random streams, sending no record twice.
Should a stack raise, its unfinished runs run again one after another on the NumPy run loop (their records already
sent are not sent again), so that a run that fails fails alone; a run that draws from JAX's streams and sent records
already fails instead, saying why (NumPy's samples would follow JAX's under one run key). The NumPy stack's streams
are the run loop's: its runs go on there with the same draws.

The NumPy stack takes a batch with an iteration or an oracle-call budget on an offline problem (under a call budget,
the whole steps it pays for, then each run's cut step on the run loop: algorithms/explicit/call_budget.py); JAX
an iteration budget; any other batch (configs the engines refuse) runs one run after another.
"""
from __future__ import annotations

import time
from typing import Any

import numpy as np

from algorithms import explicit
from algorithms.base import get
from algorithms.explicit import call_budget
from algorithms.explicit.call_budget import CallPlan
from algorithms.explicit.jax_engine import CompiledStack
from algorithms.explicit.numpy_engines import NumpyStack, saved_by
from algorithms.explicit.problem_oracles import numpy_oracles
from algorithms.run_settings import Budget, Divergence
from algorithms.stacked import group_key
from problems.base import OnlineProblem
from problems.shared.errors import ParameterError
from sweep.execution.jax_cache import use_compilation_cache
from sweep.execution.trial_runs import Body, make_run
from sweep.study.model import RunSpec

#: The statuses that end a run's records.
ENDS = ("finished", "diverged")
#: The first window of a stack whose speed is not known yet: this fraction of its iterations (at least one stretch).
FIRST_WINDOW = 1 / 16
#: The shortest window aimed at (seconds): shorter ones would spend more on the host than on the device.
MIN_WINDOW_SECONDS = 0.05
#: The share of a NumPy stack's runs ended (diverged) from which its going runs go on, after the window, as a stack
#: without them (rebuilt from their saved states: a few ms). A JAX stack keeps its rows (a new shape compiles).
COMPACT_AT = 0.25

#: A run of a stack: (its index in the trial, its spec, its parsed config, its saved engine state or None).
Member = tuple[int, RunSpec, Any, "dict[str, Any] | None"]


def run_stacks(body: Body, todo: list[tuple[int, RunSpec]], problem: Any, engine: str = "jax") -> bool:
    """Run `todo` (one batch: none started, or some resumed from `engine`'s states) stack by stack on `engine`
    ("numpy" or "jax"); False when it cannot take them (nothing was sent: they run one after another)."""
    first = todo[0][1]
    budget = {k for k, v in first.budget.items() if v is not None}
    takes = [{"iterations"}] if engine == "jax" else [{"iterations"}, {"oracle_calls"}, {"iterations", "oracle_calls"}]
    if first.algorithm not in explicit.defined() or isinstance(problem, OnlineProblem) or budget not in takes:
        return False
    if engine == "jax":
        use_compilation_cache()  # before the process's first compile
    defn = explicit.definition(first.algorithm)
    try:
        explicit.jax_form(defn, problem) if engine == "jax" else numpy_oracles(defn.oracles_of, problem)
        stacks = [(stack, configs, _course(defn, problem, configs[0], first))
                  for stack in _stacks(body, engine, todo) for configs in [defn.configs([m[2] for m in stack])]]
    except ParameterError:  # a config the engine refuses (validation names it): the runs go one after another
        return False
    for stack, configs, course in stacks:
        run_stack(body, defn, problem, stack, configs, engine, course)
    return True


def _course(defn: Any, problem: Any, config: Any, spec: RunSpec) -> CallPlan | None:
    """A stack's course under its oracle-call budget (call_budget.py), or None under an iteration budget."""
    budget = Budget.from_dict({k: v for k, v in spec.budget.items() if v is not None})
    return call_budget.course(defn, problem, config, budget, spec.n_evals)


def run_stack(body: Body, defn: Any, problem: Any, stack: list[Member], configs: list[Any],
              engine: str = "jax", course: CallPlan | None = None) -> None:
    """One stack window by window to its end, its records sent and its going runs checkpointed after each window
    (under an oracle-call budget, `course`, on the NumPy stack only)."""
    first, saved = stack[0][1], [m[3] for m in stack]
    size = padded(len(stack)) if engine == "jax" else len(stack)
    sent = [0 if s is None else s["point"] + 1 for s in saved]  # each run's records sent (a resumed one's before)
    started, clock = time.time(), time.monotonic()
    rule = Divergence.from_dict(first.divergence)  # a run spec's rule is plain data (None: the default)
    try:
        points = course.points if course else explicit.points(first.budget["iterations"], first.n_evals)
        make = CompiledStack if engine == "jax" else NumpyStack  # looked up now: a test may replace one
        compiled = make(defn, problem, _pad(configs, size), points, _pad([m[1].seed for m in stack], size), rule,
                        _pad(saved, size) if saved[0] is not None else None, **({"calls": course} if course else {}))
    except Exception as exc:  # noqa: BLE001  (a compile, the device) its runs alone, one that raises fails alone
        return _on_numpy(body, defn, stack, configs, sent, exc, engine)
    since, per_iteration = sent[0], None
    while since < len(compiled.points):
        window, at = time.monotonic(), compiled.points[compiled.done]
        to = window_end(compiled, per_iteration, _window_seconds(body, window))
        try:
            compiled.advance(to)
        except Exception as exc:  # noqa: BLE001  its unfinished runs alone (their records sent not sent again)
            return _on_numpy(body, defn, stack, configs, sent, exc, engine)
        per_iteration = (time.monotonic() - window) / (compiled.points[to] - at)
        _send(body, stack, compiled, since, size, started, clock, sent)
        _checkpoint(body, stack, compiled)
        since = to + 1
        if engine == "numpy" and since < len(compiled.points):
            stack, configs, sent, compiled = _without_ended(body, defn, problem, rule, stack, configs, sent, compiled,
                                                            course)
            size = len(stack)
    return None


def _without_ended(body: Body, defn: Any, problem: Any, rule: Divergence, stack: list[Member], configs: list[Any],
                   sent: list[int], compiled: NumpyStack, course: CallPlan | None = None
                   ) -> tuple[list[Member], list[Any], list[int], NumpyStack]:
    """The stack's going runs as a new NumPy stack from their saved states once `COMPACT_AT` of its runs have ended
    (diverged: a diverged run's row is computed on to the stack's end, unrecorded), else the stack as it is."""
    going = [k for k, m in enumerate(stack) if m[1].run_key not in body.state["done"]]
    if not going or len(going) > (1.0 - COMPACT_AT) * len(stack):
        return stack, configs, sent, compiled
    saved = compiled.saved()
    stack, configs, sent = ([items[k] for k in going] for items in (stack, configs, sent))
    return stack, configs, sent, NumpyStack(defn, problem, configs, compiled.points, [m[1].seed for m in stack], rule,
                                            [saved[k] for k in going], course)


def _on_numpy(body: Body, defn: Any, stack: list[Member], configs: list[Any], sent: list[int],
              why: BaseException, engine: str) -> None:
    """The stack's unfinished runs one after another on the NumPy run loop (`on_numpy`; the NumPy stack's streams
    are the run loop's)."""
    for k, (index, spec, _, _) in enumerate(stack):
        if spec.run_key not in body.state["done"]:
            on_numpy(body, index, spec, sent[k], engine == "jax" and defn.draws_for(configs[k]), why)


def draws(spec: RunSpec) -> bool:
    """Whether the run draws from a random stream on the JAX engine (its definition's `draws_for` its config)."""
    return explicit.definition(spec.algorithm).draws_for(get(spec.algorithm).Config.from_dict(spec.algorithm_params))


def on_numpy(body: Body, index: int, spec: RunSpec, sent: int, draws: bool, why: BaseException | None = None) -> None:
    """A run of a stack again from its start on the NumPy run loop, its first `sent` records (sent already from the
    stack) not sent again; a run that draws from JAX's streams (`draws`) and sent some cannot (NumPy's samples would
    follow JAX's under one run key): it fails, saying so."""
    if sent and draws:
        cause = why or "its state cannot be resumed here"
        raise RuntimeError(f"{spec.run_key}: the JAX engine stopped after {sent} of its records ({cause}); the run "
                           "draws from JAX's random streams, which the NumPy run loop cannot continue") from why
    body.run_one(index, spec, make_run(spec, body.instances), replayed=sent)


def window_end(compiled: CompiledStack | NumpyStack, per_iteration: float | None, seconds: float) -> int:
    """The last point of the next window: as far as `seconds` go at `per_iteration` seconds an iteration (the first
    window, whose speed is unknown: `FIRST_WINDOW` of the iterations left), at least one stretch."""
    points, done = compiled.points, compiled.done
    reach = (points[-1] - points[done]) * FIRST_WINDOW if per_iteration is None else seconds / max(per_iteration, 1e-12)
    return max(done + 1, int(np.searchsorted(points, points[done] + reach, side="right")) - 1)


def _window_seconds(body: Body, now: float) -> float:
    """The time a window may take: to the next checkpoint (every report's time when each report carries one)."""
    every = float(body.config.checkpoint_seconds) or float(body.config.report_seconds)
    return max(body.last_save + every - now if body.config.checkpoint_seconds else every, MIN_WINDOW_SECONDS)


def _send(body: Body, stack: list[Member], compiled: CompiledStack | NumpyStack, since: int, size: int, started: float,
          clock: float, sent: list[int]) -> None:
    """The records of the points from `since` on, each run's end with its share of the stack's wall time."""
    share, result = (time.monotonic() - clock) / len(stack), compiled.result()
    if size != len(stack):  # the program's seconds among the stack's runs, not its rows (a JAX stack: no `ends`)
        result.clock = {**result.clock, **{n: result.clock[n] * (size / len(stack)) for n in ("time", "cpu_time")}}
    ended = []
    for k, record in result.records(since):
        if k >= len(stack):  # a padding row
            continue
        index, spec, _, _ = stack[k]
        end = record["status"] in ENDS
        body.out.add(index, spec, record, [started, time.time()] if end else None, share if end else None)
        sent[k] += 1
        if end:
            ended.append(spec.run_key)
    body.ended(ended)


def _checkpoint(body: Body, stack: list[Member], compiled: CompiledStack | NumpyStack) -> None:
    """Send what was gathered, with a checkpoint of the stack's going runs' states when one is due (the midway
    states of runs of other stacks, a resumed trial's, are kept); at a stack's end too, so that a trial killed before
    its next checkpoint does not run the stack's ended runs again."""
    now = time.monotonic()
    checkpoint = None
    if body.checkpoint_due(now):
        done = set(body.state["done"])
        going = {} if compiled.done == len(compiled.points) - 1 else \
            {m[1].run_key: row for m, row in zip(stack, compiled.saved()) if m[1].run_key not in done}
        batch = {**{k: v for k, v in (body.state.get("batch") or {}).items() if k not in done}, **going}
        body.state = {"done": body.state["done"], "current": None, **({"batch": batch} if batch else {})}
        checkpoint = body.saved(now)
    if checkpoint is not None or body.out.due(now):  # the rest at the trial's end (a stack a shard: 2.5 ms each)
        body.out.send(checkpoint)


def padded(k: int) -> int:
    """The rows a stack of k runs is computed in: k rounded up to one of four sizes per doubling (8, 10, 12, 14,
    16, 20, ...), so that trials of varying sizes share a few compiled programs (one is compiled per stack size,
    ~0.4 s on 2 cores) for at most 25 % more rows (copies of the last run, whose records are dropped)."""
    step = 1 << max(k.bit_length() - 3, 0)
    return -(-k // step) * step


def _pad(items: list[Any], size: int) -> list[Any]:
    """`items` filled up to `size` with copies of the last one (a stack's padding rows)."""
    return items + items[-1:] * (size - len(items))


def _stacks(body: Body, engine: str, todo: list[tuple[int, RunSpec]]) -> list[list[Member]]:
    """The batch's runs, each with its parsed config and `engine`'s saved state, by the fields a stack shares and the
    point their states were saved at (in the order they first appear)."""
    cls = get(todo[0][1].algorithm)
    out: dict[tuple, list[Member]] = {}
    for index, spec in todo:
        config = cls.Config.from_dict(spec.algorithm_params)
        saved = body.start_state(spec.run_key)
        saved = saved if saved_by(saved) == engine else None
        out.setdefault((group_key(cls, config), saved and saved["point"]), []).append((index, spec, config, saved))
    return list(out.values())
