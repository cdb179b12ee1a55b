"""Explicit-state algorithms (algorithms.explicit): one definition run per run, stacked and compiled with JAX
gives the same iterates and records to 1e-10 on the deterministic quadratic (SABA: on the finite-sum one), and the same as
`algorithms.Run`; the pure oracles equal the problem's own; bad input is one
line before any work; the benchmark runs at its tiny size."""
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import algorithms
import problems
from algorithms import explicit
from algorithms.run import Run
from problems.pure import pure, pure_finite_sum

#: Record fields not compared as numbers: the seconds differ between any two runs (tests/algorithms/test_explicit_seconds.py).
NOT_NUMBERS = ("iteration", "status", "time", "cpu_time", "eval_time", "time_mode")
from problems.shared.errors import ParameterError

EXACT = 1e-10
ITERATIONS, N_EVALS = 40, 8
#: Per algorithm: configs that converge (one stack: they differ only in step sizes and decays).
CONFIGS = {
    "soba": [{"rho": 0.1, "gamma": 0.1}, {"rho": 0.05, "gamma": 0.2, "gamma_decay": 0.0},
             {"rho": 0.2, "rho_decay": 0.0}],
    "f2sa": [{"alpha": 0.1, "gamma": 0.1}, {"alpha": 0.05, "beta": 0.2, "gamma": 0.2},
             {"alpha": 0.2, "alpha_decay": 0.5}],
    "amigo": [{"alpha": 0.1, "gamma": 0.1}, {"alpha": 0.05, "eta": 0.2, "gamma": 0.2, "gamma_decay": 0.5}],
    "stocbio": [{"alpha": 0.1, "gamma": 0.1}, {"alpha": 0.05, "eta": 0.2, "gamma": 0.2}],
    "aid_cg": [{"alpha": 0.1, "gamma": 0.1}, {"alpha": 0.05, "gamma": 0.2, "gamma_decay": 0.5}],
    "fsla": [{"alpha": 0.1, "gamma": 0.1}, {"alpha": 0.05, "gamma": 0.2, "alpha_decay": 0.0}],
    "mrbo": [{"alpha": 0.1, "gamma": 0.1}, {"alpha": 0.05, "eta": 0.2, "gamma": 0.2}],
    "stfbo": [{}, {"alpha0": 2.0, "beta0": 3.0, "gamma0": 8.0}],
    "dtfbo": [{"sub_loops": "fixed"}, {"sub_loops": "fixed", "alpha0": 2.0, "beta0": 3.0, "gamma0": 8.0}],
    "bome": [{"xi": 0.05}, {"xi": 0.02, "alpha": 0.1}],
    "aid_fp": [{"alpha": 0.1, "gamma": 0.1, "warm_start": False}, {"alpha": 0.05, "eta": 0.2, "gamma": 0.2,
                                                                   "warm_start": False}],
    "itd": [{"alpha": 0.1, "gamma": 0.1}, {"alpha": 0.05, "gamma": 0.2, "gamma_decay": 0.5}],
    "ttsa": [{"hia_mode": "expected"}, {"hia_mode": "expected", "alpha": 0.05, "eta": 0.2, "gamma": 0.2}],
}
#: Definitions that step on a finite-sum problem's per-sample oracles (tested on FINITE_SUM below), with configs.
PER_SAMPLE = {"saba": [{"batch_size": None, "rho": 0.1, "gamma": 0.1},
                       {"batch_size": None, "rho": 0.05, "gamma": 0.2}, {"batch_size": None, "rho": 0.2}]}
#: A config per algorithm whose run overflows within ITERATIONS, in a stack with the algorithm's CONFIGS (S-TFBO's
#: adaptive steps have none: its η's are shared by a stack and its accumulators bound every step).
DIVERGING = {"soba": {"rho": 0.1, "gamma": 400.0}, "f2sa": {"alpha": 0.1, "gamma": 400.0},
             "amigo": {"alpha": 0.1, "gamma": 400.0}, "stocbio": {"alpha": 0.1, "gamma": 400.0},
             "aid_cg": {"alpha": 0.1, "gamma": 400.0}, "fsla": {"alpha": 0.1, "gamma": 400.0},
             "mrbo": {"alpha": 0.1, "gamma": 400.0}, "bome": {"xi": 400.0},
             "aid_fp": {"alpha": 0.1, "gamma": 400.0, "warm_start": False},
             "itd": {"alpha": 0.1, "gamma": 400.0}, "ttsa": {"hia_mode": "expected", "gamma": 400.0}}
ROOT = Path(__file__).resolve().parents[2]

try:
    import jax  # noqa: F401
    HAVE_JAX = True
except ImportError:
    HAVE_JAX = False
needs_jax = pytest.mark.skipif(not HAVE_JAX, reason="jax is not installed (the optional [jax] extra)")


@pytest.fixture(scope="module")
def problem():
    return problems.make("quadratic", seed=1, dim_x=5, dim_y=4)


def max_diff(a, b) -> float:
    return max(float(np.max(np.abs(np.asarray(a[n]) - np.asarray(b[n])))) for n in a if a[n] is not None)


def records_by_run(pairs):
    """(run index, record) pairs as each run's list of records."""
    out = {}
    for k, rec in pairs:
        out.setdefault(k, []).append(rec)
    return out


def by_run_and_iteration(pairs):
    return {(k, rec["iteration"]): rec for k, rec in pairs}


def test_pure_oracles_and_ground_truth_equal_the_problems_own(problem):
    q, rng = pure(problem), np.random.default_rng(0)
    x, y, v = rng.standard_normal(5), rng.standard_normal(4), rng.standard_normal(4)
    pairs = [(q.grad_y_g(x, y), problem.grad_y_g(x, y)), (q.hvp_yy_g(x, y, v), problem.hvp_yy_g(x, y, v)),
             (q.cross_xy_g(x, y, v), problem.cross_xy_g(x, y, v)), (q.grad_x_g(x, y), problem.grad_g(x, y)[0]),
             (q.grad_x_f(x, y), problem.grad_f(x, y)[0]), (q.grad_y_f(x, y), problem.grad_f(x, y)[1]),
             (q.y_star(x), problem.y_star(x)), (q.g(x, y), [problem.g(x, y)])]
    for mine, theirs in pairs:
        np.testing.assert_allclose(mine, theirs, rtol=EXACT, atol=1e-13)
    m = q.metrics(x, y)
    assert m["F"] == pytest.approx(problem.F(x), rel=EXACT)
    assert m["grad_F_sq"] == pytest.approx(float(problem.grad_F(x) @ problem.grad_F(x)), rel=EXACT)
    assert m["y_err_sq"] == pytest.approx(float(np.sum((y - problem.y_star(x)) ** 2)), rel=EXACT)
    assert m["F_gap"] == pytest.approx(problem.F(x) - problem.F(problem.x_opt()), rel=EXACT)
    X, Y = np.stack([x, 2 * x]), np.stack([y, -y])  # a stack of two runs: row by row the same numbers
    np.testing.assert_allclose(q.metrics(X, Y)["F"], [problem.F(x), problem.F(2 * x)], rtol=EXACT)


def test_the_soba_definition_is_the_recursion_in_matrix_algebra(problem):
    p, c = problem, algorithms.make_config("soba", {"rho": 0.1, "gamma": 0.05, "rho_decay": 0.5})
    r = explicit.run("soba", p, [c], iterations=6, n_evals=2, engine="per_run")
    x, y, v = np.zeros(5), np.zeros(4), np.zeros(4)
    for t in range(6):
        rho, gamma = 0.1 / (t + 1) ** 0.5, 0.05 / (t + 1) ** 0.6
        x, y, v = (x - gamma * (-p.C.T @ v + p.m * x + p.c), y - rho * (p.A @ y - p.C @ x + p.a),
                   v - rho * (p.A @ v + p.P @ (y - p.e)))
    np.testing.assert_allclose(r.state.x[0], x, rtol=EXACT)
    np.testing.assert_allclose(r.state.y[0], y, rtol=EXACT)
    np.testing.assert_allclose(r.state.v[0], v, rtol=EXACT)
    assert r.state.t[0, 0] == 6


@pytest.mark.parametrize("algorithm", sorted(CONFIGS))
def test_per_run_and_stacked_equal_todays_run_loop(problem, algorithm):
    configs = CONFIGS[algorithm]
    per_run = explicit.run(algorithm, problem, configs, ITERATIONS, N_EVALS, engine="per_run")
    stacked = explicit.run(algorithm, problem, configs, ITERATIONS, N_EVALS, engine="stacked")
    assert max_diff(per_run.values, stacked.values) < EXACT
    assert max_diff(per_run.state._asdict(), stacked.state._asdict()) < EXACT
    for k, config in enumerate(configs):
        run = Run(algorithm, problem, config, 0, {"iterations": ITERATIONS}, N_EVALS)
        records = list(run.records())
        for name in ("x", "y") + tuple(f for f in stacked.state._fields if f in run.algorithm.state):
            today = np.atleast_1d(getattr(run.algorithm, name))
            assert np.max(np.abs(today - stacked.state._asdict()[name][k])) < EXACT, name
        mine = [rec for j, rec in stacked.records() if j == k]
        assert [r["iteration"] for r in mine] == [r["iteration"] for r in records]
        assert [r["status"] for r in mine] == [r["status"] for r in records] and mine[-1]["status"] == "finished"
        for ours, theirs in zip(mine, records):
            assert set(ours) - {"time_mode"} == set(theirs)  # the same fields, seconds included (test_explicit_seconds)
            assert max(abs(ours[n] - theirs[n]) for n in ours if n not in NOT_NUMBERS) < EXACT


def test_every_definition_is_tested_here_and_a_tolerance_dtfbo_is_refused_naming_its_field():
    assert set(CONFIGS) | set(PER_SAMPLE) == set(explicit.defined())
    with pytest.raises(ParameterError, match=r"^configs\[1\]\.sub_loops: 'tolerance' .*; allowed: 'fixed'"):
        explicit.definition("dtfbo").configs([{"sub_loops": "fixed"}, {"sub_loops": "tolerance"}])
    assert len(explicit.definition("dtfbo").configs([{"sub_loops": "fixed"}] * 2)) == 2


@pytest.mark.parametrize("config", [{"warm_start": False, "inner_steps": 5, "truncate": 3},
                                    {"inner_steps": 5, "truncate": 5}, {"alpha_decay": 0.5, "truncate": 1}])
def test_itd_truncated_and_cold_started_equals_the_run_loop(problem, config):
    r = explicit.run("itd", problem, [config], 12, 4, engine="per_run")
    run = Run("itd", problem, config, 0, {"iterations": 12}, 4)
    list(run.records())
    assert np.max(np.abs(run.algorithm.x - r.state.x[0])) < EXACT
    assert np.max(np.abs(run.algorithm.y - r.state.y[0])) < EXACT
    assert np.max(np.abs(r.state.x[0])) > 1e-3  # it moved


def test_fsla_without_momentum_is_its_plain_direction_as_in_the_run_loop(problem):
    config = {"alpha": 0.05, "gamma": 0.2, "momentum": 1.0}  # ρ = 1 at t = 0 only (decay): both branches run
    stacked = explicit.run("fsla", problem, [config], ITERATIONS, N_EVALS, engine="stacked")
    run = Run("fsla", problem, config, 0, {"iterations": ITERATIONS}, N_EVALS)
    list(run.records())
    for name in ("x", "y", "v", "d", "x_prev"):
        assert np.max(np.abs(getattr(run.algorithm, name) - getattr(stacked.state, name)[0])) < EXACT, name


@needs_jax
@pytest.mark.parametrize("algorithm", sorted(CONFIGS))
def test_jax_equals_stacked_and_diverges_alike(problem, algorithm):
    diverging = [DIVERGING[algorithm]] if algorithm in DIVERGING else []
    configs = CONFIGS[algorithm] + diverging
    stacked = explicit.run(algorithm, problem, configs, ITERATIONS, N_EVALS, engine="stacked")
    compiled = explicit.run(algorithm, problem, configs, ITERATIONS, N_EVALS, engine="jax")
    finite = slice(0, len(CONFIGS[algorithm]))
    assert max_diff({n: v[:, finite] for n, v in compiled.values.items()},
                    {n: v[:, finite] for n, v in stacked.values.items()}) < EXACT
    assert np.max(np.abs(compiled.state.x[finite] - stacked.state.x[finite])) < EXACT
    assert compiled.state.t.shape == stacked.state.t.shape and (compiled.state.t == stacked.state.t).all()
    assert compiled.values["F"].dtype == np.float64 and compiled.engine == "jax"
    assert compiled.diverged_at == stacked.diverged_at and compiled.failed.tolist() == stacked.failed.tolist()
    if not diverging:
        return
    assert stacked.diverged_at[-1] is not None
    last = [rec for k, rec in compiled.records() if k == len(configs) - 1][-1]
    assert last["status"] == "diverged" and np.isfinite(last.get("F", 0.0))


@pytest.mark.parametrize("dims, axis", [((5, 4), -1), ((16, 16), -1), ((17, 4), 0), ((4, 17), 0)])
def test_the_quadratic_puts_its_runs_last_at_small_dimensions_with_the_same_products(dims, axis):
    """`runs_axis`: the JAX loop's runs on the last axis up to RUNS_LAST_UP_TO dimensions (problems/pure.py); its
    products taken from the left for one run's vector then, and a stack's rows give the same numbers."""
    q = pure(problems.make("quadratic", seed=2, dim_x=dims[0], dim_y=dims[1]))
    assert q.runs_axis == axis
    rng = np.random.default_rng(3)
    X, Y = rng.standard_normal((3, dims[0])), rng.standard_normal((3, dims[1]))
    for oracle in (q.grad_y_g, q.grad_x_g, q.grad_y_f, lambda x, y: q.hvp_yy_g(x, y, y),
                   lambda x, y: q.cross_xy_g(x, y, y), lambda x, y: q.metrics(x, y)["grad_F_sq"]):
        np.testing.assert_allclose(oracle(X, Y), np.stack([oracle(x, y) for x, y in zip(X, Y)]), rtol=1e-13,
                                   atol=1e-13)


@needs_jax
@pytest.mark.parametrize("dims", [(16, 16), (17, 4)])
def test_jax_equals_stacked_with_the_runs_last_or_first(dims):
    """Both sides of RUNS_LAST_UP_TO, a diverging run included: the compiled loop's layout changes no number."""
    p = problems.make("quadratic", seed=2, dim_x=dims[0], dim_y=dims[1])
    configs = CONFIGS["soba"] + [DIVERGING["soba"]]
    stacked = explicit.run("soba", p, configs, ITERATIONS, N_EVALS, engine="stacked")
    compiled = explicit.run("soba", p, configs, ITERATIONS, N_EVALS, engine="jax")
    going = slice(0, len(CONFIGS["soba"]))
    assert max_diff({n: v[:, going] for n, v in compiled.values.items()},
                    {n: v[:, going] for n, v in stacked.values.items()}) < EXACT
    assert np.max(np.abs(compiled.state.v[going] - stacked.state.v[going])) < EXACT
    assert compiled.diverged_at == stacked.diverged_at and stacked.diverged_at[-1] is not None


@needs_jax
@pytest.mark.parametrize("algorithm", ["soba", "ttsa"])
def test_jax_alone_or_with_every_hyperparameter_shared_equals_stacked(problem, algorithm):
    """A number the stack shares is one scalar in the compiled program, not a vector (the schedule computed once a
    step): one run alone, and two runs differing in nothing, give the stacked engine's iterates."""
    for configs in (CONFIGS[algorithm][:1], CONFIGS[algorithm][:1] * 2):
        stacked = explicit.run(algorithm, problem, configs, ITERATIONS, N_EVALS, engine="stacked")
        compiled = explicit.run(algorithm, problem, configs, ITERATIONS, N_EVALS, engine="jax")
        assert max_diff(compiled.values, stacked.values) < EXACT
        assert np.max(np.abs(compiled.state.x - stacked.state.x)) < EXACT


@pytest.mark.parametrize("algorithm", sorted(DIVERGING))
def test_a_diverging_run_ends_as_in_the_run_loop_and_the_others_go_on(problem, algorithm):
    configs = CONFIGS[algorithm][:1] + [DIVERGING[algorithm]]
    for engine in ("per_run", "stacked"):
        r = explicit.run(algorithm, problem, configs, ITERATIONS, N_EVALS, engine=engine)
        mine = by_run_and_iteration(r.records())
        ends = {k: rec for k, rec in r.records()}
        assert ends[0]["status"] == "finished" and ends[0]["iteration"] == ITERATIONS
        assert ends[1]["status"] == "diverged"
        for k, config in enumerate(configs):
            today = list(algorithms.run(algorithm, problem, config, 0, {"iterations": ITERATIONS}, N_EVALS))
            ours = [rec for (j, _), rec in mine.items() if j == k]
            assert [(r["iteration"], r["status"], r.get("diverged_at"), r.get("diverged_metric")) for r in ours] == \
                [(r["iteration"], r["status"], r.get("diverged_at"), r.get("diverged_metric")) for r in today]
            for a, b in zip(ours, today):
                skip = (*NOT_NUMBERS, "diverged_at", "diverged_metric")
                assert max(abs(a[n] - b[n]) / max(1.0, abs(b[n])) for n in a if n not in skip) < EXACT


@pytest.mark.parametrize("call, message", [
    (lambda p: explicit.run("soba", p, [{}], 10, engine="gpu"),
     "engine: unknown 'gpu'; allowed: per_run, stacked, jax"),
    (lambda p: explicit.run("srba", p, [{}], 10), "algorithm: 'srba' has no explicit-state definition yet"),
    (lambda p: explicit.run("saba", p, [{}], 10), "problem: 'quadratic' is not a finite sum"),
    (lambda p: explicit.run("saba", problems.make("quadratic", seed=0, dim_x=2, dim_y=2, n_samples=4, rank=1),
                            [{"batch_size": 8}], 10), "algorithm 'saba': 'batch_size' must be at most 4"),
    (lambda p: explicit.run("soba", p, [{}, {}], 10, seeds=[0]), "seeds: one non-negative integer per config (2)"),
    (lambda p: explicit.run("saba", problems.make("quadratic", seed=0, dim_x=2, dim_y=2, n_samples=4, rank=1),
                            [{"batch_size": None, "memory_limit_gb": 1e-9}], 10),
     "algorithm 'saba': per-sample memory needs 0.00 GiB per run, above 'memory_limit_gb' = 1e-09"),
    (lambda p: explicit.run("soba", p, [{}], 0), "iterations: a positive integer"),
    (lambda p: explicit.run("soba", p, [{}, {"batch_size": 8}], 10), "configs[1].batch_size: must equal configs[0]"),
    (lambda p: explicit.run("soba", p, [{"rho": -1.0}], 10), "rho"),
    (lambda p: pure(problems.make("quadratic", seed=0, dim_x=2, dim_y=2, n_samples=4, rank=1)),
     "problem: the stochastic quadratic's pure form is `pure_finite_sum` (per-sample oracles) or `pure_minibatched`; "
     "allowed here: the deterministic 'quadratic', 'nonunique_toy', 'minimax_toy'"),
    (lambda p: explicit.run("soba", problems.make("drifting_quadratic", seed=0, dim_x=2, dim_y=2, T=5), [{}],
                            10, engine="jax"),
     "problem: 'drifting_quadratic' has no pure-array form for the JAX engine; allowed: 'quadratic' (its finite sum "
     "too, with n_samples), 'nonunique_toy', 'minimax_toy', 'regularization_selection', 'hyper_cleaning', "
     "'simulated', 'coreset_selection', 'coreset_toy', 'constrained_quadratic' (the NumPy engines run every problem)"),
])
def test_bad_input_is_one_line_before_any_work(problem, call, message):
    with pytest.raises(ParameterError) as err:
        call(problem)
    assert message in str(err.value) and "\n" not in str(err.value)


def test_the_jax_engine_without_jax_says_how_to_install_it(problem, monkeypatch):
    monkeypatch.setitem(sys.modules, "jax", None)  # `import jax` raises ImportError
    monkeypatch.setitem(sys.modules, "jax.numpy", None)
    with pytest.raises(ParameterError, match=r"backend: 'jax' needs JAX .*pip install 'bilevel-sweep\[jax\]'"):
        explicit.run("soba", problem, [{}], 5, engine="jax")


@needs_jax
def test_the_benchmark_runs_at_its_tiny_size():
    out = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "bench_engines.py"), "--tiny"],
                         capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    rows = [line.split() for line in out.stdout.splitlines() if line.split()[:1] == ["jax"]]
    assert len(rows) == 1 and float(rows[0][4]) > 0, out.stdout  # configs·iterations per second
    side = [line.split() for line in out.stdout.splitlines() if line.split()[1:2] in (["today"], ["stacked"], ["jax"])]
    assert [r[1] for r in side] == ["stacked", "jax"] and all(float(r[3]) > 0 for r in side), out.stdout
    assert "float64 matmul" in out.stdout


def test_the_explicit_modules_stay_small():
    files = sorted((ROOT / "algorithms" / "explicit").glob("*.py")) + [ROOT / "problems" / "pure.py"]
    assert len(files) >= 8 and all(len(f.read_text().splitlines()) <= 400 for f in files)


def test_without_a_known_optimum_records_have_no_gap_as_in_the_run_loop():
    p = problems.make("quadratic", seed=0, dim_x=3, dim_y=3, outer_curvature=-5.0)  # ∇²F indefinite: no x_opt
    assert p.x_opt() is None
    mine = [rec for _, rec in explicit.run("soba", p, [{}], 5, 3, engine="stacked").records()]
    today = list(algorithms.run("soba", p, {}, 0, {"iterations": 5}, 3))
    assert set(mine[-1]) - {"time_mode"} == set(today[-1]) and "F_gap" not in mine[-1]
    assert mine[-1]["F"] == pytest.approx(today[-1]["F"], rel=EXACT)


@pytest.fixture(scope="module")
def finite_sum():
    """A finite-sum quadratic small enough for SABA's memory tables (n = 6 samples of rank 2)."""
    return problems.make("quadratic", seed=2, dim_x=4, dim_y=5, n_samples=6, rank=2)


def test_pure_per_sample_oracles_equal_the_problems_own_and_average_to_the_full_batch(finite_sum):
    p, q, rng = finite_sum, pure_finite_sum(finite_sum), np.random.default_rng(1)
    x, y, v, every = rng.standard_normal(4), rng.standard_normal(5), rng.standard_normal(5), np.arange(6)
    pairs = [(q.grad_y_g_samples(x, y), p.grad_y_g_samples(x, y, every), p.grad_y_g(x, y)),
             (q.hvp_yy_g_samples(x, y, v), p.hvp_yy_g_samples(x, y, v, every), p.hvp_yy_g(x, y, v)),
             (q.cross_xy_g_samples(x, y, v), p.cross_xy_g_samples(x, y, v, every), p.cross_xy_g(x, y, v)),
             (q.grad_f_samples(x, y)[1], p.grad_f_samples(x, y, every)[1], p.grad_f(x, y)[1])]
    for mine, theirs, full in pairs:
        np.testing.assert_allclose(mine, theirs, rtol=EXACT, atol=1e-13)
        np.testing.assert_allclose(mine.mean(axis=0), full, rtol=EXACT, atol=1e-13)
    np.testing.assert_allclose(q.grad_f_samples(x, y)[0][0], p.grad_f(x, y)[0], rtol=EXACT)
    idx = np.array([[0, 3], [5, 1]])  # a stack of two runs, each with its own samples
    rows = q.hvp_yy_g_samples(np.stack([x, x]), np.stack([y, y]), np.stack([v, 2 * v]), idx)
    np.testing.assert_allclose(rows[1], p.hvp_yy_g_samples(x, y, 2 * v, idx[1]), rtol=EXACT, atol=1e-13)
    assert q.metrics(x, y)["F"] == pytest.approx(p.F(x), rel=EXACT)


@pytest.mark.parametrize("memory_init, batch_size", [("full", None), ("zero", 2), ("full", 3)])
def test_saba_per_run_and_stacked_equal_the_run_loop_memory_included(finite_sum, memory_init, batch_size):
    """Minibatches too: the NumPy engines draw each run's indices from the generator of its seed, as the run loop."""
    configs = [{**c, "memory_init": memory_init, "batch_size": batch_size} for c in PER_SAMPLE["saba"]]
    seeds = [5, 0, 11]
    per_run = explicit.run("saba", finite_sum, configs, ITERATIONS, N_EVALS, engine="per_run", seeds=seeds)
    stacked = explicit.run("saba", finite_sum, configs, ITERATIONS, N_EVALS, engine="stacked", seeds=seeds)
    assert max_diff(per_run.values, stacked.values) < EXACT
    assert max_diff({n: v for n, v in per_run.state._asdict().items() if n != "key"},
                    {n: v for n, v in stacked.state._asdict().items() if n != "key"}) < EXACT
    s = stacked.state
    assert s.memory_g.shape == (3, 6, 2 * 5 + 4) and s.memory_f.shape == (3, 6, 5 + 4)
    np.testing.assert_allclose(s.mean_g, s.memory_g.mean(axis=1), atol=1e-12)  # SAGA's running mean is the table's
    for k, config in enumerate(configs):
        run = Run("saba", finite_sum, config, seeds[k], {"iterations": ITERATIONS}, N_EVALS)
        records = list(run.records())
        a = run.algorithm
        for mine, today in ((s.x[k], a.x), (s.y[k], a.y), (s.v[k], a.v), (s.memory_g[k], a.memory["g"]),
                            (s.memory_f[k], a.memory["f"]), (s.mean_g[k], a.memory_mean["g"])):
            assert np.max(np.abs(mine - today)) < EXACT
        mine = [rec for j, rec in stacked.records() if j == k]
        assert [(r["iteration"], r["status"]) for r in mine] == [(r["iteration"], r["status"]) for r in records]
        for ours, theirs in zip(mine, records):
            assert set(ours) - {"time_mode"} == set(theirs)  # the same fields, seconds included (test_explicit_seconds)
            assert max(abs(ours[n] - theirs[n]) for n in ours if n not in NOT_NUMBERS) < EXACT
    assert np.abs(s.x).min(axis=1).max() > 1e-3 and stacked.values["F"][-1].tolist() != stacked.values["F"][0].tolist()


@needs_jax
def test_saba_under_jax_equals_the_stacked_engine(finite_sum):
    """Under JAX a run's indices come from its own key: with b = n they are a permutation of every sample, so
    its iterates are the full batch's, which the NumPy stack gives drawing nothing."""
    configs = PER_SAMPLE["saba"] + [{"batch_size": None, "rho": 0.1, "gamma": 400.0}]  # the last one diverges
    stacked = explicit.run("saba", finite_sum, configs, ITERATIONS, N_EVALS, engine="stacked")
    compiled = explicit.run("saba", finite_sum, [{**c, "batch_size": 6} for c in configs], ITERATIONS, N_EVALS,
                            engine="jax")
    finite = slice(0, 3)
    assert max_diff({n: v[:, finite] for n, v in compiled.values.items()},
                    {n: v[:, finite] for n, v in stacked.values.items()}) < EXACT
    assert np.max(np.abs(compiled.state.memory_g[finite] - stacked.state.memory_g[finite])) < EXACT
    assert compiled.diverged_at == stacked.diverged_at and stacked.diverged_at[-1] is not None
