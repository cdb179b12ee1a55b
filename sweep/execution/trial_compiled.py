"""The runs of one batch as compiled JAX programs (a study's `backend: jax`, sweep/study/backend.py).

The batch's runs are split into stacks whose configs share every field that may not vary (loop counts, flags),
and each stack runs whole through `algorithms.explicit`'s JAX engine: one `vmap`-ed, `jit`-compiled program per
stack shape (compiled once per process and reused by later trials of the same shape; a stack is padded to a
few sizes (at most 25 % more rows) so that there are few shapes). Its records are sent
as the NumPy batch sends them, each run's end with its share of the stack's wall time; nothing is checkpointed
midway, so a trial stopped during a stack runs that stack again. Should a stack's program raise, its runs run one
after another on the NumPy run loop, so that a run that fails fails alone.
"""
from __future__ import annotations

import time
from typing import Any

from algorithms import explicit
from algorithms.base import get
from algorithms.stacked import group_key
from problems.shared.errors import ParameterError
from sweep.execution.trial_runs import Body
from sweep.study.model import RunSpec

#: The statuses that end a run's records.
ENDS = ("finished", "diverged")


def run_compiled(body: Body, todo: list[tuple[int, RunSpec]], problem: Any) -> bool:
    """Run `todo` (one batch, none started) stack by stack on the JAX engine; False when it cannot take them
    (nothing was sent: the NumPy engine runs them)."""
    first = todo[0][1]
    if first.algorithm not in explicit.defined() or explicit.definition(first.algorithm).draws:
        return False
    cls, defn = get(first.algorithm), explicit.definition(first.algorithm)
    stacks = _stacks(cls, todo)
    try:
        defn.oracles_of(problem)  # the problem's arrays for the engine (the deterministic quadratic)
        for stack in stacks.values():
            defn.configs([s.algorithm_params for _, s in stack])
    except ParameterError:  # a config the engine refuses (validation names it): the NumPy engine runs the batch
        return False
    for stack in stacks.values():
        started, clock = time.time(), time.monotonic()
        size = padded(len(stack))
        runs = [s for _, s in stack] + [stack[-1][1]] * (size - len(stack))
        try:
            result = explicit.run(first.algorithm, problem, [s.algorithm_params for s in runs],
                                  first.budget["iterations"], first.n_evals, engine="jax",
                                  seeds=[s.seed for s in runs])
        except Exception:  # noqa: BLE001  (nothing of the stack was sent) its runs one after another: one that
            for index, spec in stack:  # raises fails alone, as when a NumPy batch raises
                body.run_one(index, spec)
            continue
        share = (time.monotonic() - clock) / len(stack)  # the stack's wall time, divided among its runs
        ended = []
        for k, record in result.records():
            if k >= len(stack):  # a padding row
                continue
            index, spec = stack[k]
            for name in ("time", "cpu_time"):  # the program's seconds among the stack's runs, not its rows
                record[name] *= size / len(stack)
            end = record["status"] in ENDS
            body.out.add(index, spec, record, [started, time.time()] if end else None, share if end else None)
            if end:
                ended.append(spec.run_key)
        body.ended(ended)
        body.out.send()
    return True


def padded(k: int) -> int:
    """The rows a stack of k runs is computed in: k rounded up to one of four sizes per doubling (8, 10, 12, 14,
    16, 20, ...), so that trials of varying sizes share a few compiled programs (one is compiled per stack size,
    ~0.4 s on 2 cores) for at most 25 % more rows (copies of the last run, whose records are dropped)."""
    step = 1 << max(k.bit_length() - 3, 0)
    return -(-k // step) * step


def _stacks(cls: type, todo: list[tuple[int, RunSpec]]) -> dict[tuple, list[tuple[int, RunSpec]]]:
    """The batch's runs by the fields a stack shares (in the order they first appear)."""
    out: dict[tuple, list[tuple[int, RunSpec]]] = {}
    for index, spec in todo:
        out.setdefault(group_key(cls, cls.Config.from_dict(spec.algorithm_params)), []).append((index, spec))
    return out
