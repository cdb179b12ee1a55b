"""Every explicit definition besides SABA (SOBA, F2SA, S-TFBO, D-TFBO, ITD, TTSA, BOME, FSLA, MRBO and the
double loops AmIGO, StocBiO, AID-FP, AID-CG) with minibatches of a finite sum: per run and stacked draw each
run's minibatches from the generator `algorithms.run` gives it, in its order, so their records equal the run
loop's (to rounding: the minibatch oracles are means of per-sample terms, the problem's own are sums divided
once); the JAX engine draws from its own keys (deterministic per seed, other samples)."""
import numpy as np
import pytest

import problems
from algorithms import explicit
from algorithms.run import Run
from problems.pure import pure_finite_sum
from tests.algorithms.test_engines import NOT_NUMBERS, needs_jax

ITERATIONS, N_EVALS, RTOL = 120, 6, 1e-10
CONFIGS = {"soba": [{"batch_size": 2, "rho": 0.1, "gamma": 0.05}, {"batch_size": 2, "rho": 0.3, "gamma": 0.02},
                    {"batch_size": 2, "rho": 0.05, "gamma": 0.1, "rho_decay": 0.0}],
           "stfbo": [{"batch_size": 2}, {"batch_size": 2, "alpha0": 1.5, "beta0": 2.0},
                     {"batch_size": 2, "alpha0": 3.0, "gamma0": 0.5}],
           "amigo": [{"batch_size": 2, "inner_steps": 3, "v_steps": 2}, {"batch_size": 2, "inner_steps": 3,
                                                                          "v_steps": 2, "eta": 0.05, "alpha": 0.2}],
           "stocbio": [{"batch_size": 2, "inner_steps": 2, "neumann_terms": 3},
                       {"batch_size": 2, "inner_steps": 2, "neumann_terms": 3, "gamma": 0.05}],
           "aid_fp": [{"batch_size": 2, "inner_steps": 2, "fp_steps": 3, "warm_start": False},
                      {"batch_size": 2, "inner_steps": 2, "fp_steps": 3, "warm_start": False, "eta": 0.2}],
           "dtfbo": [{"batch_size": 2, "sub_loops": "fixed", "y_steps": 3, "v_steps": 2},
                     {"batch_size": 2, "sub_loops": "fixed", "y_steps": 3, "v_steps": 2, "beta0": 2.0}],
           "ttsa": [{"batch_size": 2, "hia_mode": "expected", "hia_terms": 4},
                    {"batch_size": 2, "hia_mode": "expected", "hia_terms": 4, "eta": 0.2, "alpha": 0.05}],
           "bome": [{"batch_size": 2, "T": 3}, {"batch_size": 2, "T": 3, "xi": 0.05, "alpha": 0.2}],
           "fsla": [{"batch_size": 2}, {"batch_size": 2, "alpha": 0.05, "gamma": 0.05}],
           "mrbo": [{"batch_size": 2, "neumann_terms": 3}, {"batch_size": 2, "neumann_terms": 3, "eta": 0.2}],
           "f2sa": [{"batch_size": 2, "inner_steps": 3}, {"batch_size": 2, "inner_steps": 3, "beta": 0.2, "gamma": 0.05}],
           "itd": [{"batch_size": 2, "inner_steps": 4, "truncate": 2},  # two steps untaped, two taped
                   {"batch_size": 2, "inner_steps": 4, "truncate": 2, "alpha": 0.2, "gamma": 0.05}],
           "aid_cg": [{"batch_size": 2, "inner_steps": 2, "cg_steps": 3}, {"batch_size": 2, "inner_steps": 2,
                                                                           "cg_steps": 3, "alpha": 0.05}]}
SEEDS = [0, 7, 123]


@pytest.fixture(scope="module")
def finite_sum():
    """Six samples of rank 2: minibatches of 2 differ from the full batch."""
    return problems.make("quadratic", seed=2, dim_x=4, dim_y=5, n_samples=6, rank=2)


def close(a, b):
    return abs(a - b) <= RTOL * max(1.0, abs(b))


@pytest.mark.parametrize("algorithm", sorted(CONFIGS))
@pytest.mark.parametrize("engine", ["per_run", "stacked"])
def test_minibatched_runs_equal_the_run_loop_seed_by_seed(finite_sum, engine, algorithm):
    check_equal(finite_sum, algorithm, CONFIGS[algorithm], engine)


@pytest.mark.parametrize("algorithm, variant", [("itd", {"truncate": None}), ("itd", {"warm_start": False}),
                                                ("ttsa", {"reuse_y_batch": True}), ("ttsa", {"hia_terms": 1}),
                                                ("bome", {"phi": "value"}), ("bome", {"track_q": True}),
                                                ("fsla", {"momentum": 1.0, "momentum_decay": 0.0}),
                                                ("mrbo", {"momentum": 1.0, "momentum_decay": 0.0}),
                                                ("f2sa", {"shared_batch": False})])
def test_the_other_draw_orders_equal_the_run_loop(finite_sum, algorithm, variant):
    """ITD taping every step or cold-started; TTSA's cross term on y's minibatch, or an HIA of no factor; BOME's
    φ = η q̂ (the minibatch's g at y and ŷ), or q̂ recorded; FSLA and MRBO without momentum (their plain estimates:
    the previous point's terms computed and dropped, the same draws)."""
    check_equal(finite_sum, algorithm, [{**c, **variant} for c in CONFIGS[algorithm]], "stacked")


def check_equal(finite_sum, algorithm, configs, engine):
    """Each run's records (every number, to RTOL) and final x equal the run loop's for its seed."""
    seeds = SEEDS[:len(configs)]
    got = explicit.run(algorithm, finite_sum, configs, ITERATIONS, N_EVALS, engine=engine, seeds=seeds)
    for k, (config, seed) in enumerate(zip(configs, seeds)):
        run = Run(algorithm, finite_sum, config, seed, {"iterations": ITERATIONS}, N_EVALS)
        theirs = list(run.records())
        mine = [r for j, r in got.records() if j == k]
        assert [(r["iteration"], r["status"]) for r in mine] == [(r["iteration"], r["status"]) for r in theirs]
        for ours, want in zip(mine, theirs):
            assert set(ours) - {"time_mode"} == set(want)
            for name in set(want) - set(NOT_NUMBERS):
                assert close(ours[name], want[name]), (k, ours["iteration"], name, ours[name], want[name])
        np.testing.assert_allclose(np.atleast_2d(got.state.x)[k], run.algorithm.x, rtol=RTOL, atol=RTOL)


@pytest.mark.parametrize("algorithm", sorted(CONFIGS))
def test_the_minibatches_matter_and_follow_the_seed(finite_sum, algorithm):
    configs = CONFIGS[algorithm]
    full = explicit.run(algorithm, finite_sum, [{**c, "batch_size": None} for c in configs], ITERATIONS, N_EVALS)
    drawn = explicit.run(algorithm, finite_sum, configs, ITERATIONS, N_EVALS, seeds=SEEDS[:len(configs)])
    other = explicit.run(algorithm, finite_sum, configs, ITERATIONS, N_EVALS, seeds=[1, 2, 3][:len(configs)])
    assert np.all(np.abs(drawn.values["F"][-1] - full.values["F"][-1]) > 1e-6)
    assert np.all(np.abs(drawn.values["F"][-1] - other.values["F"][-1]) > 1e-6)
    run = list(Run(algorithm, finite_sum, {**configs[0], "batch_size": None}, 0, {"iterations": ITERATIONS},
                   N_EVALS).records())  # the full batch of the finite sum: its mean, the run loop's too
    assert close(full.values["F"][-1, 0], run[-1]["F"])
    assert list(drawn.records())[-1][1]["samples/total"] == run[-1]["samples/total"] // 3  # 2 of 6 per oracle


@needs_jax
@pytest.mark.parametrize("algorithm", ["soba", "stocbio", "aid_cg", "itd"])
def test_jax_draws_its_own_minibatches_deterministically_per_seed(finite_sum, algorithm):
    configs, seeds = CONFIGS[algorithm], SEEDS[:len(CONFIGS[algorithm])]
    first = explicit.run(algorithm, finite_sum, configs, ITERATIONS, N_EVALS, engine="jax", seeds=seeds)
    again = explicit.run(algorithm, finite_sum, configs, ITERATIONS, N_EVALS, engine="jax", seeds=seeds)
    numpy = explicit.run(algorithm, finite_sum, configs, ITERATIONS, N_EVALS, seeds=seeds)
    np.testing.assert_array_equal(first.values["F"], again.values["F"])
    assert np.all(np.isfinite(first.values["F"])) and not np.allclose(first.values["F"], numpy.values["F"])
    if algorithm == "soba":  # it optimises, as the NumPy runs do (StocBiO's and AID-CG's 2-of-6 minibatches are
        assert first.values["F"][-1].max() < first.values["F"][0].min()  # noisy enough to rise, on NumPy too)


def test_the_per_sample_g_and_its_x_gradient_are_the_problems_and_its_derivative(finite_sum):
    q = pure_finite_sum(finite_sum)
    rng = np.random.default_rng(5)
    x, y, idx = rng.standard_normal(4), rng.standard_normal(5), np.array([0, 3, 3, 5])
    assert q.g_samples(x, y, idx).mean(axis=-2)[0] == pytest.approx(finite_sum.g(x, y, idx), rel=1e-13)
    np.testing.assert_allclose(q.grad_x_g_samples(x, y, idx).mean(axis=-2), finite_sum.grad_g(x, y, idx)[0],
                               rtol=1e-13)
    h = 1e-5  # g_i is quadratic: central differences are exact to rounding
    for i in range(len(idx)):
        for j, e in enumerate(np.eye(4)):
            fd = (q.g_samples(x + h * e, y, idx)[i, 0] - q.g_samples(x - h * e, y, idx)[i, 0]) / (2 * h)
            assert fd == pytest.approx(q.grad_x_g_samples(x, y, idx)[i, j], abs=1e-8)
        np.testing.assert_allclose([(q.g_samples(x, y + h * e, idx)[i, 0] - q.g_samples(x, y - h * e, idx)[i, 0])
                                    / (2 * h) for e in np.eye(5)], q.grad_y_g_samples(x, y, idx)[i], atol=1e-8)
