"""The runs of a trial that share an algorithm, a problem instance and a budget, stepped as one batch.

The explicit definitions' stacked engine (sweep/execution/trial_stacks.py: the NumPy stack, or JAX on `backend:
jax`) advances a batch with an iteration budget on an offline problem; `algorithms.batched.BatchedRuns`, the
batched run loop, the others (oracle-call and seconds budgets, online problems, algorithms or configs without an
explicit definition). Either way they advance together; every run keeps its own records, end, divergence
and checkpoint state, so the driver sees each run as it would alone (its chunks, its `ended.txt` line, its
MLflow child), and a checkpoint holds the state of every run still going (`batch`: run key -> state). A run
that ends or diverges leaves the batch; the others go on. Should the batch raise, its unfinished runs run
again one after another from where they started, without sending the records already sent, so the run that
raises fails alone and no other run loses what it measured.
"""
from __future__ import annotations

import time

from algorithms.batched import BatchedRuns, batchable
from algorithms.explicit.numpy_engines import saved_by
from sweep.execution.trial_stacks import draws, on_numpy, run_stacks
from sweep.execution.trial_runs import Body, make_run
from sweep.study.model import RunSpec


def run_batch(body: Body, todo: list[tuple[int, RunSpec]]) -> bool:
    """Run `todo` (runs of one batch key, not done yet) as one batch; False when they cannot be batched
    (the algorithm or the problem, e.g. `from_functions`, or configs the engine refuses): nothing ran."""
    first = todo[0][1]
    problem = body.instances.of(first)
    if not batchable(first.algorithm, problem):
        return False
    saved = [body.start_state(s.run_key) for _, s in todo]
    for engine in dict.fromkeys((body.config.backend, "numpy")):  # the study's engine, else the NumPy stack
        if all(s is None or saved_by(s) == engine for s in saved) and run_stacks(body, todo, problem, engine):
            return True
    if any(saved_by(s) for s in saved):  # midway on an engine that cannot take them now: one after another
        for (index, spec), state in zip(todo, saved):
            if saved_by(state):  # again from its start, its records sent not sent again
                on_numpy(body, index, spec, state["point"] + 1, saved_by(state) == "jax" and draws(spec))
            else:
                body.run_one(index, spec)
        return True
    try:
        batch = BatchedRuns(first.algorithm, problem, [s.algorithm_params for _, s in todo],
                            [s.seed for _, s in todo], first.budget, first.n_evals, first.divergence)
    except Exception:  # noqa: BLE001  a run that cannot start: one after another, it fails alone
        return False
    if not batch.batched:
        return False
    starts = saved
    for run, start in zip(batch.runs, starts):
        if start is not None:
            run.load_state_dict(start)
    sent = [0] * len(todo)
    try:
        _advance(body, todo, batch, sent)
    except Exception:  # noqa: BLE001  each unfinished run again alone: the one that raises fails by itself
        for k, (index, spec) in enumerate(todo):
            if spec.run_key not in body.state["done"]:  # its end was not sent
                run = make_run(spec, body.instances)
                if starts[k] is not None:
                    run.load_state_dict(starts[k])
                body.run_one(index, spec, run, replayed=sent[k])
    return True


def _advance(body: Body, todo: list[tuple[int, RunSpec]], batch: BatchedRuns, sent: list[int]) -> None:
    """Round by round to the end of every run: records gathered by run, checkpoints of the runs going on."""
    started, clock = time.time(), time.monotonic()
    while not batch.done:
        records = batch.advance()
        now = time.monotonic()
        last = {k: j for j, (k, _) in enumerate(records)}
        ended = []
        for j, (k, record) in enumerate(records):
            index, spec = todo[k]
            end = batch.runs[k].done and last[k] == j
            seconds = (now - clock) / len(todo)  # the batch's wall time, divided among its runs (for trial sizing)
            body.out.add(index, spec, record, [started, time.time()] if end else None, seconds if end else None)
            sent[k] += 1
            if end:
                ended.append(spec.run_key)
        if ended:
            body.ended(ended)
        checkpoint = None
        if body.checkpoint_due(now):
            going = {spec.run_key: batch.runs[k].state_dict() for k, (_, spec) in enumerate(todo)
                     if not batch.runs[k].done}
            body.state = {"done": body.state["done"], "current": None, **({"batch": going} if going else {})}
            checkpoint = body.saved(now)
        if checkpoint is not None or body.out.due(now):
            body.out.send(checkpoint)
