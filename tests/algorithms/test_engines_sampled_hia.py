"""TTSA's sampled HIA (its papers' mode) on the explicit engines: each run draws its HIA length p from its own stream
after y's and f's minibatches, then its p factors' and the cross term's, as the per-run TTSA draws them, so per run and
stacked give each run the records `algorithms.run` gives it for its seed (every number to 1e-10, its own HVP calls
included); the JAX engine draws from its own keys."""
import numpy as np
import pytest

import algorithms
import problems
from algorithms import explicit
from tests.algorithms.test_engines import NOT_NUMBERS, needs_jax, records_by_run

ITERATIONS, N_EVALS, RTOL, SEEDS = 30, 6, 1e-10, [0, 7, 11]
CONFIGS = [{"hia_mode": "sampled", "hia_terms": 4}, {"hia_mode": "sampled", "hia_terms": 4, "eta": 0.2, "gamma": 0.05},
           {"hia_mode": "sampled", "hia_terms": 4, "alpha": 0.05}]
PROBLEMS = {"deterministic": ("quadratic", {"dim_x": 5, "dim_y": 4}, None),
            "finite sum": ("quadratic", {"dim_x": 4, "dim_y": 5, "n_samples": 6, "rank": 2}, 2),
            "real data": ("regularization_selection", {}, 4)}


def assert_same(mine, theirs, where):
    assert [(r["iteration"], r["status"]) for r in mine] == [(r["iteration"], r["status"]) for r in theirs], where
    for a, b in zip(mine, theirs):
        assert set(a) - {"time_mode"} == set(b) - {"time_mode"}, where
        for n in set(b) - set(NOT_NUMBERS):
            assert abs(a[n] - b[n]) <= RTOL * max(1.0, abs(b[n])), (where, a["iteration"], n, a[n], b[n])


@pytest.mark.parametrize("reuse", [False, True])
@pytest.mark.parametrize("case", sorted(PROBLEMS))
def test_each_run_draws_its_own_length_and_minibatches_as_the_run_loop(case, reuse):
    name, params, batch_size = PROBLEMS[case]
    problem = problems.make(name, seed=1, **params)
    configs = [{**c, "batch_size": batch_size, "reuse_y_batch": reuse} for c in CONFIGS]
    lengths = set()
    for engine in ("per_run", "stacked"):
        got = records_by_run(explicit.run("ttsa", problem, configs, ITERATIONS, N_EVALS, engine=engine, seeds=SEEDS)
                             .records())
        for k, (config, seed) in enumerate(zip(configs, SEEDS)):
            theirs = list(algorithms.run("ttsa", problem, config, seed, {"iterations": ITERATIONS}, N_EVALS))
            assert_same(got[k], theirs, (engine, k))
            lengths |= {r["diag/hia_length"] for r in theirs[1:]}
    assert lengths == {0.0, 1.0, 2.0, 3.0}  # p ~ U{0..3} was drawn, every value of it
    assert len({r[-1]["calls/hvp"] for r in got.values()}) == 3  # each run's HVP calls are its own


@needs_jax
def test_jax_draws_lengths_of_its_own_deterministically_and_counts_each_runs_calls():
    """One point per iteration: a run's HVP calls at the end are the sum of the lengths its records show."""
    problem = problems.make("quadratic", seed=1, dim_x=5, dim_y=4)
    first = explicit.run("ttsa", problem, CONFIGS, 12, 200, engine="jax", seeds=SEEDS)  # every iteration a point
    again = explicit.run("ttsa", problem, CONFIGS, 12, 200, engine="jax", seeds=SEEDS)
    np.testing.assert_array_equal(first.state.x, again.state.x)
    numpy = explicit.run("ttsa", problem, CONFIGS, 12, 200, seeds=SEEDS)
    assert not np.allclose(first.state.x, numpy.state.x)  # its own streams: other lengths
    for k, recs in records_by_run(first.records()).items():
        assert [r["iteration"] for r in recs] == list(range(13))
        assert recs[-1]["calls/hvp"] == sum(int(r["diag/hia_length"]) for r in recs[1:])
        assert set(r["diag/hia_length"] for r in recs[1:]) <= {0.0, 1.0, 2.0, 3.0}
