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
from sweep.study.backend import jax_algorithms
from sweep.study.model import RunSpec

#: The statuses that end a run's records.
ENDS = ("finished", "diverged")


def run_compiled(body: Body, todo: list[tuple[int, RunSpec]], problem: Any) -> bool:
    """Run `todo` (one batch, none started) stack by stack on the JAX engine; False when it cannot take them
    (nothing was sent: the NumPy engine runs them)."""
    first = todo[0][1]
    if first.algorithm not in jax_algorithms():
        return False
    defn = explicit.definition(first.algorithm)
    try:
        explicit.jax_form(defn, problem)  # the problem's arrays for the engine
        stacks = [(stack, defn.configs([c for _, _, c in stack])) for stack in _stacks(first.algorithm, todo)]
    except ParameterError:  # a config the engine refuses (validation names it): the NumPy engine runs the batch
        return False
    for stack, configs in stacks:
        started, clock = time.time(), time.monotonic()
        size = padded(len(stack))
        seeds = [spec.seed for _, spec, _ in stack]
        try:
            result = explicit.run(first.algorithm, problem, configs + configs[-1:] * (size - len(stack)),
                                  first.budget["iterations"], first.n_evals, engine="jax",
                                  seeds=seeds + seeds[-1:] * (size - len(stack)), divergence=first.divergence)
        except Exception:  # noqa: BLE001  (nothing of the stack was sent) its runs one after another: one that
            for index, spec, _ in stack:  # raises fails alone, as when a NumPy batch raises
                body.run_one(index, spec)
            continue
        share = (time.monotonic() - clock) / len(stack)  # the stack's wall time, divided among its runs
        ended = []
        for k, record in result.records():
            if k >= len(stack):  # a padding row
                continue
            index, spec, _ = stack[k]
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


def _stacks(algorithm: str, todo: list[tuple[int, RunSpec]]) -> list[list[tuple[int, RunSpec, Any]]]:
    """The batch's runs, each with its parsed config, by the fields a stack shares (in the order they first
    appear)."""
    cls = get(algorithm)
    out: dict[tuple, list[tuple[int, RunSpec, Any]]] = {}
    for index, spec in todo:
        config = cls.Config.from_dict(spec.algorithm_params)
        out.setdefault(group_key(cls, config), []).append((index, spec, config))
    return list(out.values())
