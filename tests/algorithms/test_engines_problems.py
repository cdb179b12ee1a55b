"""The explicit NumPy engines on problems without a pure form (algorithms/explicit/problem_oracles.py): the real-
data logistic problems (two sample sets), the simulated benchmark quadratic and coreset selection (one set), full
batch and minibatches. Per run and stacked give each run the records `algorithms.run` gives it for its seed (every
number to 1e-10: the problem's own oracles, its own draws in the per-run order)."""
import functools

import numpy as np
import pytest

import problems
from algorithms import explicit
from algorithms.explicit.problem_oracles import ProblemOracles, numpy_oracles
from algorithms.run import Run
from problems.pure import pure_minibatched
from problems.shared.errors import ParameterError
from tests.algorithms.test_engines import NOT_NUMBERS, needs_jax

ITERATIONS, N_EVALS, RTOL, SEEDS = 12, 4, 1e-10, [0, 7]
#: Coreset selection's y*(x) is a damped Newton solve down to its rounding floor on an ill-conditioned g: iterates
#: that differ by rounding (a stacked product against a single one) move its F, ‖∇F‖² and ‖y − y*‖² by up to ~1e-9
#: relative (measured 1.2e-9 between run_batched and the run loop); every other number is held to RTOL.
GROUND_TRUTH_RTOL = {"coreset_selection": 1e-8}
GROUND_TRUTH = ("F", "F_gap", "grad_F_sq", "y_err_sq")
#: Hyper-cleaning on a small synthetic set (180 training samples, 3 classes; the same pure form and oracles as on
#: digits): its ground truth at a point is ~3 ms instead of ~38 on digits' 1,079 samples, and these tests evaluate it
#: hundreds of times. Regularization selection keeps a real dataset (breast_cancer).
PROBLEMS = {"regularization_selection": {},
            "hyper_cleaning": {"dataset": "synthetic", "n_samples": 300, "n_features": 10, "n_classes": 3},
            "simulated": {"dim_x": 6, "dim_y": 5, "n_samples_inner": 40, "n_samples_outer": 30},
            "coreset_selection": {"pool_size": 10, "coreset_size": 3, "n_tasks": 2}, "coreset_toy": {},
            "constrained_quadratic": {}}
#: Two configs per algorithm (differing where a stack may differ), without `batch_size`.
CONFIGS = {"soba": [{"rho": 0.1, "gamma": 0.05}, {"rho": 0.3, "gamma": 0.02}],
           "saba": [{"rho": 0.1, "gamma": 0.05}, {"rho": 0.05, "gamma": 0.1}],
           "stfbo": [{}, {"alpha0": 1.5, "beta0": 2.0}],
           "amigo": [{"inner_steps": 3, "v_steps": 2}, {"inner_steps": 3, "v_steps": 2, "eta": 0.05}],
           "stocbio": [{"inner_steps": 2, "neumann_terms": 3}, {"inner_steps": 2, "neumann_terms": 3, "gamma": 0.05}],
           "aid_fp": [{"inner_steps": 2, "fp_steps": 3}, {"inner_steps": 2, "fp_steps": 3, "eta": 0.2}],
           "aid_cg": [{"inner_steps": 2, "cg_steps": 3}, {"inner_steps": 2, "cg_steps": 3, "alpha": 0.05}],
           "dtfbo": [{"sub_loops": "fixed", "y_steps": 3, "v_steps": 2},
                     {"sub_loops": "fixed", "y_steps": 3, "v_steps": 2, "beta0": 2.0}],
           "ttsa": [{"hia_mode": "expected", "hia_terms": 3}, {"hia_mode": "expected", "hia_terms": 3, "eta": 0.2}],
           "bome": [{"T": 3}, {"T": 3, "xi": 0.05}],
           "fsla": [{}, {"alpha": 0.05, "gamma": 0.05}],
           "mrbo": [{"neumann_terms": 3}, {"neumann_terms": 3, "eta": 0.2}],
           "f2sa": [{"inner_steps": 3}, {"inner_steps": 3, "beta": 0.2, "gamma": 0.05}],
           "itd": [{"inner_steps": 4, "truncate": 2}, {"inner_steps": 4, "truncate": 2, "gamma": 0.05}]}


#: Coreset selection's ground truth (a Newton solve in 650 dimensions and its replay learner) costs ~0.1 s a point:
#: three algorithms of distinct shapes (single loop, a taped inner loop, sub-loops) and SABA's refusal there.
ON_CORESET = ("soba", "itd", "dtfbo", "saba")
CASES = [(name, a, b) for name in sorted(PROBLEMS) for a in sorted(CONFIGS) for b in (None, 4)
         if (a != "saba" or b is not None) and (name != "coreset_selection" or a in ON_CORESET)]


@functools.lru_cache(maxsize=None)
def made(name):
    return problems.make(name, seed=1, **PROBLEMS[name])


def configs_for(algorithm, batch_size):
    return [{**c, "batch_size": batch_size} for c in CONFIGS[algorithm]]


def close(a, b, rtol=RTOL):
    return abs(a - b) <= rtol * max(1.0, abs(b))


def assert_same_records(mine, theirs, where, truth_rtol=RTOL):
    assert [(r["iteration"], r["status"]) for r in mine] == [(r["iteration"], r["status"]) for r in theirs], where
    for ours, want in zip(mine, theirs):
        assert set(ours) - {"time_mode"} == set(want) - {"time_mode"}, where
        for name in set(want) - set(NOT_NUMBERS) - {"time_mode"}:
            rtol = truth_rtol if name in GROUND_TRUTH else RTOL
            assert close(ours[name], want[name], rtol), (where, ours["iteration"], name, ours[name], want[name])


@pytest.mark.parametrize("name, algorithm, batch_size", CASES)  # SABA: minibatches only
def test_per_run_and_stacked_equal_the_run_loop(name, algorithm, batch_size):
    problem = made(name)
    if algorithm == "saba" and problem.name != "coreset_selection" and problem.n_samples is None:
        with pytest.raises(ParameterError, match=f"^problem: '{problem.name}' is not a finite sum"):
            explicit.run(algorithm, problem, configs_for(algorithm, batch_size), ITERATIONS, N_EVALS)
        return
    if algorithm == "saba" and problem.name == "coreset_selection":
        with pytest.raises(ParameterError, match="^problem: 'coreset_selection' has no per-sample oracles"):
            explicit.run(algorithm, problem, configs_for(algorithm, batch_size), ITERATIONS, N_EVALS)
        return
    configs, truth_rtol = configs_for(algorithm, batch_size), GROUND_TRUTH_RTOL.get(problem.name, RTOL)
    for engine in ("per_run", "stacked"):
        got = explicit.run(algorithm, problem, configs, ITERATIONS, N_EVALS, engine=engine, seeds=SEEDS)
        for k, (config, seed) in enumerate(zip(configs, SEEDS)):
            run = Run(algorithm, problem, config, seed, {"iterations": ITERATIONS}, N_EVALS)
            mine = [r for j, r in got.records() if j == k]
            assert_same_records(mine, list(run.records()), (engine, k), truth_rtol)
            np.testing.assert_allclose(np.atleast_2d(got.state.x)[k], run.algorithm.x, rtol=RTOL, atol=RTOL)


def test_minibatches_follow_the_seed_and_differ_from_the_full_batch():
    p = problems.make("regularization_selection", seed=1)
    full = explicit.run("soba", p, configs_for("soba", None), ITERATIONS, N_EVALS, seeds=SEEDS)
    drawn = explicit.run("soba", p, configs_for("soba", 4), ITERATIONS, N_EVALS, seeds=SEEDS)
    other = explicit.run("soba", p, configs_for("soba", 4), ITERATIONS, N_EVALS, seeds=[1, 2])
    assert np.all(np.abs(drawn.values["F"][-1] - full.values["F"][-1]) > 1e-9)
    assert np.all(np.abs(drawn.values["F"][-1] - other.values["F"][-1]) > 1e-9)
    assert "val_accuracy" in dict(drawn.records())[0]  # the problem's own metrics are recorded


def test_the_pure_form_is_kept_where_there_is_one_and_the_problem_otherwise():
    assert type(numpy_oracles(pure_minibatched, problems.make("quadratic", seed=0))).__name__ == "PureQuadratic"
    assert isinstance(numpy_oracles(pure_minibatched, problems.make("hyper_cleaning", seed=0)), ProblemOracles)


def test_the_adapters_oracles_are_the_problems_on_a_run_and_on_rows():
    p = problems.make("simulated", seed=3, **PROBLEMS["simulated"])
    o, rng = ProblemOracles(p), np.random.default_rng(0)
    X, Y, V = rng.standard_normal((3, 6)), rng.standard_normal((3, 5)), rng.standard_normal((3, 5))
    for k in range(3):
        assert o.g(X, Y)[k, 0] == pytest.approx(p.g(X[k], Y[k]), rel=1e-13)
        assert o.g(X[k], Y[k]).shape == (1,)
        np.testing.assert_allclose(o.grad_x_g(X, Y)[k], p.grad_g(X[k], Y[k])[0], rtol=1e-13)
        np.testing.assert_allclose(o.grad_x_f(X[k], Y[k]), p.grad_f(X[k], Y[k])[0], rtol=1e-13)
        np.testing.assert_allclose(o.hvp_yy_g(X, Y, V)[k], p.hvp_yy_g(X[k], Y[k], V[k]), rtol=1e-13)
        np.testing.assert_allclose(o.cross_xy_g(X, Y, V)[k], p.cross_xy_g(X[k], Y[k], V[k]), rtol=1e-13)
    gens = [np.random.default_rng(s) for s in (1, 2, 3)]
    drawn = o.draw_chunks(tuple(gens), 4, 2)  # two minibatches per run, each run's from its own generator
    alone = [p.sample_batches(np.random.default_rng(s), 4, 2) for s in (1, 2, 3)]
    for j in range(2):
        for k in range(3):
            np.testing.assert_array_equal(drawn[j][k].inner, alone[k][j].inner)
            np.testing.assert_array_equal(drawn[j][k].outer, alone[k][j].outer)
            np.testing.assert_allclose(o.on_batch("grad_y_g", drawn[j], X, Y)[k],
                                       p.grad_y_g(X[k], Y[k], alone[k][j]), rtol=1e-13)
    metrics = o.metrics(X, Y)
    assert metrics["F"][1] == pytest.approx(p.F(X[1]), rel=1e-12)
    assert np.isnan(metrics["F_gap"]).all() == (p.x_opt() is None)


def test_what_the_problem_cannot_give_is_refused_in_one_line():
    coreset = made("coreset_selection")
    with pytest.raises(ParameterError, match="^problem: 'coreset_selection' has no per-sample oracles"):
        explicit.run("saba", coreset, configs_for("saba", 4), ITERATIONS, N_EVALS)
    with pytest.raises(ParameterError, match="^problem: 'quadratic' is not a finite sum"):
        ProblemOracles(problems.make("quadratic", seed=0)).sample_counts()
    with pytest.raises(ParameterError, match="^problem: 'drifting_quadratic' has no pure-array form for the JAX "
                                             "engine; allowed: .*'coreset_selection'.*'constrained_quadratic'"):
        explicit.run("soba", problems.make("drifting_quadratic", seed=1), configs_for("soba", None), ITERATIONS,
                     N_EVALS, engine="jax")
    with pytest.raises(ParameterError, match="^batch_size: the JAX engine has no minibatches of 'constrained_quadratic'"):
        explicit.run("soba", made("constrained_quadratic"), configs_for("soba", 4), ITERATIONS, N_EVALS, engine="jax")


#: The JAX engine against the NumPy stack: every algorithm but SABA on each problem with a pure data form (the
#: constrained quadratic's exact oracles with noise 0.01: no draw without a batch_size), and on
#: coreset selection (~3 s a case: its host ground truth) the algorithms of ON_CORESET.
JAX_CASES = [(name, a) for name in ("regularization_selection", "hyper_cleaning", "simulated", "coreset_toy",
                                    "coreset_selection", "constrained_quadratic")
             for a in sorted(set(CONFIGS) - {"saba"}) if name != "coreset_selection" or a in ON_CORESET]


@needs_jax
@pytest.mark.parametrize(("name", "algorithm"), JAX_CASES)
def test_jax_on_real_data_gives_the_numpy_engines_records(name, algorithm):
    """Full batch (deterministic): the compiled steps on the pure forms (problems/pure_logistic.py, pure_cleaning.py,
    pure_coreset.py, ...), the ground truth and the problem's own metrics on the host, every number of every record to
    1e-10 (coreset selection's ground truth to GROUND_TRUTH_RTOL)."""
    p, configs = made(name), configs_for(algorithm, None)
    jax_run = explicit.run(algorithm, p, configs, ITERATIONS, N_EVALS, engine="jax", seeds=SEEDS)
    numpy_run = explicit.run(algorithm, p, configs, ITERATIONS, N_EVALS, engine="stacked", seeds=SEEDS)
    mine, theirs = list(jax_run.records()), list(numpy_run.records())
    assert [k for k, _ in mine] == [k for k, _ in theirs]
    for (_, a), (_, b) in zip(mine, theirs):
        assert {n for n in a if n not in NOT_NUMBERS} == {n for n in b if n not in NOT_NUMBERS} and "F" in a
        for n in set(b) - set(NOT_NUMBERS) - {"time_mode"}:
            rtol = GROUND_TRUTH_RTOL.get(name, RTOL) if n in GROUND_TRUTH else RTOL
            assert close(a[n], b[n], rtol), (algorithm, a["iteration"], n, a[n], b[n])


@needs_jax
def test_jax_draws_two_set_minibatches_of_its_own_in_bounds_and_per_seed():
    import jax

    from algorithms.explicit.minibatch import chunks
    from problems.pure_logistic import pure_regularization

    p = made("regularization_selection")
    n, m = p.index_bounds()
    config = explicit.definition("soba").configs([{"batch_size": 50}])[0]
    with jax.enable_x64(True):
        _, drawn = chunks(pure_regularization(p), jax.random.PRNGKey(0), config, 40, jax.numpy)
    drawn = np.asarray(drawn)
    assert drawn.shape == (40, 100) and drawn.min() >= 0
    assert drawn[:, 50:].max() < m <= drawn[:, :50].max() < n  # g's from the training set, f's from validation
    configs = configs_for("soba", 4)
    first = explicit.run("soba", p, configs, ITERATIONS, N_EVALS, engine="jax", seeds=SEEDS)
    again = explicit.run("soba", p, configs, ITERATIONS, N_EVALS, engine="jax", seeds=SEEDS)
    full = explicit.run("soba", p, configs_for("soba", None), ITERATIONS, N_EVALS, engine="jax", seeds=SEEDS)
    np.testing.assert_array_equal(first.state.x, again.state.x)  # the same draws, the same iterates
    # (F to rounding only: the problem's Newton solve for y* starts from its previous solution)
    np.testing.assert_allclose(first.values["F"], again.values["F"], rtol=1e-13)
    assert np.all(np.abs(first.values["F"][-1] - full.values["F"][-1]) > 1e-9)


@needs_jax
def test_jaxs_minibatch_oracles_average_to_the_full_batch():
    """Unbiased: the mean over 4,000 of JAX's minibatches (drawn as a step draws them) of ∇y g and ∇y f is the full
    batch's (a wrong set or bound, e.g. f's rows from the training set, moves it by far more than the 3% allowed)."""
    import jax

    from algorithms.explicit.minibatch import at, chunks, grad_f_at
    from problems.pure import as_arrays
    from problems.pure_logistic import pure_regularization

    p = made("regularization_selection")
    form, rng = as_arrays(pure_regularization(p), jax.numpy.asarray), np.random.default_rng(4)
    x, y = rng.normal(-1.0, 0.5, p.dim_x), rng.standard_normal(p.dim_y)
    config = explicit.definition("soba").configs([{"batch_size": 8}])[0]
    with jax.enable_x64(True):
        _, drawn = chunks(form, jax.random.PRNGKey(3), config, 4000, jax.numpy)
        mean = jax.vmap(lambda i: (at(form, "grad_y_g", i, x, y), grad_f_at(form, i, x, y)[1]))(drawn)
    for got, want in zip(mean, (p.grad_y_g(x, y), p.grad_y_f(x, y))):
        assert np.linalg.norm(np.asarray(got).mean(0) - want) < 0.03 * np.linalg.norm(want)


@needs_jax
@pytest.mark.parametrize("name", ["regularization_selection", "simulated", "hyper_cleaning"])
def test_jax_runs_saba_on_the_pure_forms_per_sample_oracles(name):
    """SABA's memory on JAX from the data forms' per-sample oracles, its minibatches from its own keys: the same
    records for the same seeds, the NumPy engine's oracle counts (its calls do not depend on the draws), and a run
    that descends as the NumPy one does (F below its start)."""
    p, configs = made(name), configs_for("saba", 4)
    first = explicit.run("saba", p, configs, ITERATIONS, N_EVALS, engine="jax", seeds=SEEDS)
    again = explicit.run("saba", p, configs, ITERATIONS, N_EVALS, engine="jax", seeds=SEEDS)
    numpy = explicit.run("saba", p, configs, ITERATIONS, N_EVALS, seeds=SEEDS)
    np.testing.assert_array_equal(first.state.x, again.state.x)
    assert not np.allclose(first.state.x, numpy.state.x)  # other samples
    assert np.all(first.values["F"][-1] < first.values["F"][0])
    for (_, a), (_, b) in zip(first.records(), numpy.records()):
        assert {n: v for n, v in a.items() if n.startswith("calls/")} == \
            {n: v for n, v in b.items() if n.startswith("calls/")}


@needs_jax
@pytest.mark.parametrize("name", ["regularization_selection", "simulated", "hyper_cleaning"])
def test_saba_without_minibatches_draws_nothing_and_jax_gives_the_numpy_engines_records(name):
    """`batch_size: null`: every sample refreshed each step, no draw, so the JAX engine's records (its memory from the
    pure forms' per-sample oracles) are the NumPy stack's, every number to 1e-10."""
    p = made(name)
    configs = [{**c, "batch_size": None} for c in CONFIGS["saba"]]
    mine = list(explicit.run("saba", p, configs, ITERATIONS, N_EVALS, engine="jax", seeds=SEEDS).records())
    theirs = list(explicit.run("saba", p, configs, ITERATIONS, N_EVALS, engine="stacked", seeds=SEEDS).records())
    assert [k for k, _ in mine] == [k for k, _ in theirs]
    for (_, a), (_, b) in zip(mine, theirs):
        assert set(a) - {"time_mode"} == set(b) - {"time_mode"}
        for n in set(b) - set(NOT_NUMBERS) - {"time_mode"}:
            assert close(a[n], b[n]), (name, a["iteration"], n, a[n], b[n])
