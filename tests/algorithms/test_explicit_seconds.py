"""Seconds in the explicit engines' records (`time`, `cpu_time`, `eval_time`, as algorithms/run.py counts them):
the per-run engine gives each run its own, the stacked engine the stack's divided among its runs (`time_mode:
batched`, as `algorithms.run_batched`), the JAX engine its one program's shared out by steps (`time_mode:
compiled`); steps and evaluations are timed apart."""
import time

import numpy as np
import pytest

import problems
from algorithms import explicit
from algorithms.explicit import numpy_engines
from tests.algorithms.test_engines import needs_jax, records_by_run

ITERATIONS, N_EVALS = 40, 6
CLOCKS = ("time", "cpu_time", "eval_time")


@pytest.fixture(scope="module")
def quadratic():
    return problems.make("quadratic", seed=0, dim_x=5, dim_y=4)


def by_run(result):
    return records_by_run(result.records())


def column(records, name):
    return np.array([r[name] for r in records])


def test_per_run_seconds_are_each_runs_own_and_cumulative(quadratic):
    result = explicit.run("soba", quadratic, [{"rho": r} for r in (0.1, 0.05, 0.2)], ITERATIONS, N_EVALS,
                          engine="per_run")
    runs = by_run(result)
    for recs in runs.values():
        assert "time_mode" not in recs[-1]  # a run's own seconds, as algorithms.run's
        for name in CLOCKS:
            assert np.all(np.diff(column(recs, name)) >= 0), name
        assert recs[0]["time"] == recs[0]["cpu_time"] == 0.0 and recs[0]["eval_time"] > 0  # no step yet
        assert recs[-1]["time"] > 0
    spent = sum(recs[-1]["time"] + recs[-1]["eval_time"] for recs in runs.values())
    assert spent <= result.seconds  # parts of the engine's whole time


def test_stacked_seconds_are_the_stacks_divided_among_its_runs(quadratic):
    configs = [{"rho": r} for r in (0.1, 0.05, 0.2, 0.15)]
    result = explicit.run("soba", quadratic, configs, ITERATIONS, N_EVALS, engine="stacked")
    runs = by_run(result)
    for name in CLOCKS:
        columns = [column(recs, name) for recs in runs.values()]
        assert all(np.array_equal(c, columns[0]) for c in columns)  # one clock, shared alike
        assert np.all(np.diff(columns[0]) >= 0)
    last = runs[0][-1]
    assert last["time_mode"] == "batched" and last["time"] > 0
    assert len(configs) * (last["time"] + last["eval_time"]) <= result.seconds


def test_steps_and_evaluations_are_timed_apart(quadratic, monkeypatch):
    """An evaluation made 20 ms slower adds to `eval_time` only."""
    slow, evaluate = 0.02, numpy_engines._evaluate

    def slowed(*args):
        time.sleep(slow)
        return evaluate(*args)

    monkeypatch.setattr(numpy_engines, "_evaluate", slowed)
    for engine in ("per_run", "stacked"):
        result = explicit.run("soba", quadratic, [{}], ITERATIONS, N_EVALS, engine=engine)
        recs = by_run(result)[0]
        assert recs[-1]["eval_time"] >= slow * len(result.points), engine
        assert recs[-1]["time"] < slow and recs[-1]["cpu_time"] < slow, engine  # 40 steps of a 5-d SOBA: ~1 ms


@needs_jax
def test_jax_seconds_are_its_programs_shared_out_by_steps(quadratic):
    configs = [{"rho": r} for r in (0.1, 0.05)]
    result = explicit.run("soba", quadratic, configs, ITERATIONS, N_EVALS, engine="jax")
    runs = by_run(result)
    recs = runs[0]
    its, spent = column(recs, "iteration"), column(recs, "time")
    assert recs[-1]["time_mode"] == "compiled" and spent[-1] > 0
    np.testing.assert_allclose(spent, spent[-1] * its / its[-1], rtol=1e-12)  # by steps done
    assert np.all(column(recs, "eval_time") == 0.0)  # evaluations run inside the program, in `time`
    assert all(np.array_equal(column(r, "time"), spent) for r in runs.values())
    assert len(configs) * spent[-1] <= result.seconds
