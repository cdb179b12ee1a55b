"""The runs of a trial that share an algorithm, a problem instance and a budget, stepped as one batch.

The explicit definitions' stacked engines (sweep/execution/trial_stacks.py: the NumPy stack, or JAX on `backend:
jax`) advance a batch with an iteration or (NumPy) an oracle-call budget on an offline problem; every other batch
(a seconds budget, an online problem, a config a definition refuses) runs one run after another. Every run keeps its
own records, end, divergence and checkpoint state, so the driver sees each run as it would alone (its chunks, its
`ended.txt` line, its MLflow child), and a checkpoint holds the state of every run still going (`batch`: run key ->
state). A run that ends or diverges leaves the batch; the others go on. Should the batch raise, its unfinished runs
run again one after another from where they started, without sending the records already sent, so the run that
raises fails alone and no other run loses what it measured.
"""
from __future__ import annotations

from algorithms.batched import batchable
from algorithms.explicit.numpy_engines import saved_by
from sweep.execution.trial_stacks import draws, on_numpy, run_stacks
from sweep.execution.trial_runs import Body
from sweep.study.model import RunSpec


def run_batch(body: Body, todo: list[tuple[int, RunSpec]]) -> bool:
    """Run `todo` (runs of one batch key, not done yet) as one batch; False when they cannot be batched (the
    algorithm, the problem, e.g. `from_functions`, the budget or configs the engines do not take, or runs resumed
    from a run loop's states): nothing ran, and they run one after another."""
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
    return False
