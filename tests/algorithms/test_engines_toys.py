"""The explicit engines on the closed-form toys (problems/toys.py: nonunique_toy, minimax_toy): their pure forms
(problems/pure.py) equal the problems' own oracles, ground truth and the run loop's metrics, and every definition
gives the run loop's records on them, per run and stacked, to 1e-10 (relative where a number grows: BOME's λ
on the non-unique toy, F2SA's λ); JAX gives the stacked engine's."""
import numpy as np
import pytest

import algorithms
import problems
from algorithms import explicit
from algorithms.run import Run
from problems.pure import PureMinimax, PureNonunique, pure
from tests.algorithms.test_engines import CONFIGS, DIVERGING, NOT_NUMBERS, needs_jax

EXACT = 1e-10
ITERATIONS, N_EVALS = 200, 8
TOYS = ("nonunique_toy", "minimax_toy")
#: (toy, algorithm) pairs whose run-loop records are rounding noise, not compared with the engines' (per run and
#: stacked still are against each other). The non-unique toy's ∇²yy g = diag(1, 0) is singular, so AID-CG's linear
#: system has no solution: exact CG breaks down at its second iteration (its direction is conjugate to the first,
#: so the curvature along it is 0), and there the run loop's `r @ r` (BLAS, fused multiply-add) and the engines'
#: sums round one ulp apart, leaving a curvature of ~1e-33 where the engines have 0, then a step of ~1e31 (x at 1e77
#: at iteration 2 for CONFIGS' first config); with one CG iteration the warm-started v grows along the null
#: direction (to ~1e5) until the runs part the same way.
ILL_POSED = {("nonunique_toy", "aid_cg")}


@pytest.fixture(scope="module", params=TOYS)
def toy(request):
    return problems.make(request.param, seed=0)


def configs_for(algorithm: str) -> list[dict]:
    """CONFIGS' configs and, last, the diverging one (test_engines.py)."""
    return CONFIGS[algorithm] + ([DIVERGING[algorithm]] if algorithm in DIVERGING else [])


def relative(a: float, b: float) -> float:
    return abs(a - b) / max(1.0, abs(b))


def points(toy) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """(x, y, v) at which to compare: random ones and, for the minimax toy, x = 0, x on the box's edge, y outside."""
    rng = np.random.default_rng(3)
    out = [(rng.standard_normal(toy.dim_x) * 3, rng.standard_normal(toy.dim_y) * 3, rng.standard_normal(toy.dim_y))
           for _ in range(4)]
    if toy.name == "minimax_toy":
        out += [(np.array([0.0]), np.array([2.0]), np.array([1.0])), (np.array([-10.0]), np.array([-13.0]),
                                                                       np.array([-2.0])),
                (np.array([3.0]), np.array([11.5]), np.array([0.5]))]
    return out


def run_loop_metrics(toy, x, y) -> dict[str, float]:
    """What the run loop records at (x, y) (algorithms/run.py `_point_metrics` and the gap), from the problem."""
    ys, gF = toy.y_star(x), toy.grad_F(x)
    out = {"F": toy.F(x), "grad_F_sq": float(gF @ gF), "y_err_sq": float((y - ys) @ (y - ys)),
           "F_gap": toy.F(x) - toy.F(toy.x_opt()), **toy.metrics(x, y)}
    if toy.constraints is not None:
        out["constraint_violation"] = toy.constraints.violation(x, y)
    return out


def test_pure_dispatches_on_the_toys_class():
    assert type(pure(problems.make("nonunique_toy", seed=0))) is PureNonunique
    q = pure(problems.make("minimax_toy", seed=0, bound=3.0, x_start=-1.0, y_start=2.5))  # its params, not defaults
    assert type(q) is PureMinimax
    x, y = q.initial_point(np.zeros)
    assert x.tolist() == [-1.0] and y.tolist() == [2.5] and q.project_y(np.array([5.0])).tolist() == [3.0]


def test_pure_oracles_and_ground_truth_equal_the_problems_own(toy):
    q = pure(toy)
    x0, y0 = q.initial_point(np.zeros)
    start_x, start_y = toy.initial_point()
    np.testing.assert_array_equal(x0, start_x)
    np.testing.assert_array_equal(y0, start_y)
    record = list(algorithms.run("soba", toy, {}, 0, {"iterations": 4}, 2))[-1]
    for x, y, v in points(toy):
        gx, gy = toy.grad_g(x, y)
        fx, fy = toy.grad_f(x, y)
        pairs = [(q.g(x, y), [toy.g(x, y)]), (q.f(x, y), [toy.f(x, y)]), (q.grad_y_g(x, y), gy),
                 (q.grad_x_g(x, y), gx), (q.grad_x_f(x, y), fx), (q.grad_y_f(x, y), fy),
                 (q.hvp_yy_g(x, y, v), toy.hvp_yy_g(x, y, v)), (q.cross_xy_g(x, y, v), toy.cross_xy_g(x, y, v)),
                 (q.project_x(x), toy.project_x(x)), (q.project_y(y), toy.project_y(y)), (q.y_star(x), toy.y_star(x))]
        for mine, theirs in pairs:
            np.testing.assert_allclose(mine, theirs, rtol=EXACT, atol=1e-14)
        mine, theirs = q.metrics(x, y), run_loop_metrics(toy, x, y)
        assert mine.keys() == theirs.keys() == {n for n in record if n in theirs}  # the run loop's metrics, no other
        assert {n for n in record if not n.startswith(("calls/", "samples/", "diag/"))} - set(mine) == \
            {"iteration", "time", "cpu_time", "eval_time", "status"}
        for name, value in theirs.items():
            assert float(mine[name]) == pytest.approx(value, rel=EXACT, abs=1e-14), name
    X, Y = np.stack([p[0] for p in points(toy)]), np.stack([p[1] for p in points(toy)])
    stacked = q.metrics(X, Y)  # a stack of runs: row by row the same numbers, per-run numbers as (K, 1) columns
    assert q.g(X, Y).shape == (len(X), 1)
    for k in range(len(X)):
        for name, value in run_loop_metrics(toy, X[k], Y[k]).items():
            assert stacked[name][k] == pytest.approx(value, rel=EXACT, abs=1e-14), name
        np.testing.assert_allclose(q.grad_y_f(X, Y)[k], toy.grad_f(X[k], Y[k])[1], rtol=EXACT)


def test_the_pure_oracles_are_the_derivatives_of_g_and_f(toy):
    """Central differences (exact to rounding: f and g are quadratic in (x, y) on both toys)."""
    q, h = pure(toy), 1e-4

    def diff(fun, at, direction):
        return (fun(at + h * direction) - fun(at - h * direction)) / (2 * h)

    for x, y, v in points(toy):
        ex, ey = np.eye(toy.dim_x), np.eye(toy.dim_y)
        for level, (grad_x, grad_y) in ((q.g, (q.grad_x_g, q.grad_y_g)), (q.f, (q.grad_x_f, q.grad_y_f))):
            np.testing.assert_allclose(grad_x(x, y), [diff(lambda s: level(s, y)[0], x, e) for e in ex], atol=1e-7)
            np.testing.assert_allclose(grad_y(x, y), [diff(lambda s: level(x, s)[0], y, e) for e in ey], atol=1e-7)
        np.testing.assert_allclose(q.hvp_yy_g(x, y, v), diff(lambda s: q.grad_y_g(x, s), y, v), atol=1e-7)
        np.testing.assert_allclose(q.cross_xy_g(x, y, v), diff(lambda s: q.grad_x_g(x, s), y, v), atol=1e-7)
        grad_F = toy.grad_F(x)
        if toy.name == "nonunique_toy" or x[0] != 0:  # F(x) = b|x| has no derivative at 0
            F = lambda s: q.metrics(s, q.y_star(s))["F"]  # noqa: E731
            np.testing.assert_allclose(grad_F, [diff(F, x, e) for e in np.eye(toy.dim_x)], atol=1e-7)


@pytest.mark.parametrize("algorithm", sorted(CONFIGS))
def test_per_run_and_stacked_equal_the_run_loop_on_the_toys(toy, algorithm):
    configs = configs_for(algorithm)
    per_run = explicit.run(algorithm, toy, configs, ITERATIONS, N_EVALS, engine="per_run")
    stacked = explicit.run(algorithm, toy, configs, ITERATIONS, N_EVALS, engine="stacked")
    np.testing.assert_array_equal(per_run.failed, stacked.failed)
    for name, values in per_run.values.items():
        np.testing.assert_allclose(values, stacked.values[name], rtol=EXACT, atol=EXACT)
    if (toy.name, algorithm) in ILL_POSED:  # per run = stacked is what holds there (checked above)
        return
    for k, config in enumerate(configs):
        run = Run(algorithm, toy, config, 0, {"iterations": ITERATIONS}, N_EVALS)
        records = list(run.records())
        mine = [rec for j, rec in stacked.records() if j == k]
        assert [(r["iteration"], r["status"], r.get("diverged_at"), r.get("diverged_metric")) for r in mine] == \
            [(r["iteration"], r["status"], r.get("diverged_at"), r.get("diverged_metric")) for r in records]
        if records[-1]["status"] == "finished":
            for name in ("x", "y") + tuple(f for f in stacked.state._fields if f in run.algorithm.state):
                today = np.atleast_1d(getattr(run.algorithm, name))
                np.testing.assert_allclose(stacked.state._asdict()[name][k], today, rtol=EXACT, atol=EXACT, err_msg=name)
        for ours, theirs in zip(mine, records):
            assert set(ours) - {"time_mode"} == set(theirs)
            skip = (*NOT_NUMBERS, "diverged_at", "diverged_metric")
            assert max(relative(ours[n], theirs[n]) for n in ours if n not in skip) < EXACT


def test_the_toys_runs_move_and_some_diverge():
    """The comparisons above are not of runs standing still: every toy's runs move, the diverging configs end."""
    for name in TOYS:
        toy = problems.make(name, seed=0)
        r = explicit.run("soba", toy, configs_for("soba"), ITERATIONS, N_EVALS, engine="stacked")
        assert np.all(np.abs(r.values["opt_dist"][-1, :-1] - r.values["opt_dist"][0, :-1]) > 1e-2)
    toy = problems.make("nonunique_toy", seed=0)
    r = explicit.run("bome", toy, configs_for("bome"), ITERATIONS, N_EVALS)
    assert r.diverged_at[-1] is not None and r.diverged_at[0] is None


@needs_jax
@pytest.mark.parametrize("name, algorithm", [("minimax_toy", "bome"), ("minimax_toy", "f2sa"),
                                             ("nonunique_toy", "itd"), ("nonunique_toy", "soba")])
def test_jax_equals_stacked_on_the_toys(name, algorithm):
    toy = problems.make(name, seed=0)
    configs = configs_for(algorithm)
    stacked = explicit.run(algorithm, toy, configs, ITERATIONS, N_EVALS, engine="stacked")
    compiled = explicit.run(algorithm, toy, configs, ITERATIONS, N_EVALS, engine="jax")
    finite = slice(0, len(CONFIGS[algorithm]))  # the diverging run's values after its end are not compared
    assert compiled.values.keys() == stacked.values.keys()
    for n, values in compiled.values.items():
        np.testing.assert_allclose(values[:, finite], stacked.values[n][:, finite], rtol=EXACT, atol=EXACT, err_msg=n)
    np.testing.assert_allclose(compiled.state.x[finite], stacked.state.x[finite], rtol=EXACT, atol=EXACT)
    np.testing.assert_allclose(compiled.state.y[finite], stacked.state.y[finite], rtol=EXACT, atol=EXACT)
    assert compiled.diverged_at == stacked.diverged_at and compiled.failed.tolist() == stacked.failed.tolist()
    assert [(k, r["iteration"], r["status"]) for k, r in compiled.records()] == \
        [(k, r["iteration"], r["status"]) for k, r in stacked.records()]
