"""problems.from_functions: JAX oracles equal the hand-written problems', finite differences on the
nonconvex example, ground truth against closed forms and finite differences of F, the
not-strongly-convex flag (also in the run loop), accounting, compile-once, x64 locality, input errors."""
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import algorithms
import problems
import problems.examples.hyper_cleaning  # noqa: F401  registers fn_hyper_cleaning_mlp
import problems.examples.quadratic  # noqa: F401  registers fn_quadratic
import problems.examples.regularization  # noqa: F401  registers fn_regularization_selection
from problems.counting import counted
from problems.functional import from_functions
from problems.shared.errors import ParameterError
from tests.oracle_checks import check_grad_F_fd, check_minibatch_mean, check_oracles, rel_err

EXACT = 1e-10  # "equal to the hand-written problem": every oracle and ground truth to this relative error


def oracle_errors(p, q, x, y, v, batch):
    """Relative error of every oracle of p against q at (x, y), direction v, on `batch`."""
    pairs = {
        "f": (p.f(x, y, batch), q.f(x, y, batch)),
        "g": (p.g(x, y, batch), q.g(x, y, batch)),
        "grad_f": (np.concatenate(p.grad_f(x, y, batch)), np.concatenate(q.grad_f(x, y, batch))),
        "grad_g": (np.concatenate(p.grad_g(x, y, batch)), np.concatenate(q.grad_g(x, y, batch))),
        "grad_y_f": (p.grad_y_f(x, y, batch), q.grad_y_f(x, y, batch)),
        "grad_y_g": (p.grad_y_g(x, y, batch), q.grad_y_g(x, y, batch)),
        "hvp": (p.hvp_yy_g(x, y, v, batch), q.hvp_yy_g(x, y, v, batch)),
        "cross": (p.cross_xy_g(x, y, v, batch), q.cross_xy_g(x, y, v, batch)),
    }
    if batch is None:  # the dense forms once (each batch size is one more compilation)
        pairs["hessian"] = (p.hessian_yy_g(x, y), q.hessian_yy_g(x, y))
        pairs["jacobian"] = (p.jacobian_xy_g(x, y), q.jacobian_xy_g(x, y))
    return {k: rel_err(np.ravel(a), np.ravel(b)) for k, (a, b) in pairs.items()}


def assert_same_oracles(p, q, rng, batches):
    for batch in batches:
        x, y, v = rng.standard_normal(p.dim_x), rng.standard_normal(p.dim_y), rng.standard_normal(p.dim_y)
        errs = oracle_errors(p, q, x, y, v, batch)
        assert max(errs.values()) <= EXACT, errs


def assert_same_ground_truth(p, q, x):
    assert rel_err(p.y_star(x), q.y_star(x)) <= EXACT
    assert p.F(x) == pytest.approx(q.F(x), rel=EXACT)
    assert rel_err(p.grad_F(x), q.grad_F(x)) <= EXACT
    m = p.metrics(x, q.y_star(x))
    assert m["gt/not_strongly_convex"] == 0.0 and m["gt/cg_residual"] <= 1e-10


# ---------------------------------------------------------------- the core install stays JAX-free
def test_importing_problems_and_algorithms_does_not_import_jax():
    code = "import sys, problems, algorithms; assert 'jax' not in sys.modules, 'jax imported'; print('ok')"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr[-2000:]
    assert problems.from_functions is from_functions  # the lazy attribute of the package


# ---------------------------------------------------------------- the quadratic, rebuilt
QUAD_CASES = [{"dim_x": 5, "dim_y": 7, "outer_curvature": -0.05},
              {"dim_x": 4, "dim_y": 6, "n_samples": 12, "rank": 2}]


@pytest.fixture(scope="module", params=QUAD_CASES, ids=["deterministic", "finite_sum"])
def quad_pair(request):
    return problems.make("fn_quadratic", seed=3, **request.param), problems.make("quadratic", seed=3, **request.param)


def test_quadratic_oracles_equal_the_hand_written_ones(quad_pair):
    p, q = quad_pair
    rng = np.random.default_rng(0)
    batches = [None] if q.n_samples is None else [None, q.sample_batch(rng, 5)]
    assert_same_oracles(p, q, rng, batches)
    assert p.stochastic == q.stochastic and p.n_samples == q.n_samples
    for a, b in zip(p.initial_point(), q.initial_point()):
        assert np.array_equal(a, b)


def test_quadratic_ground_truth_equals_the_closed_form(quad_pair):
    p, q = quad_pair
    rng = np.random.default_rng(1)
    for _ in range(2):
        assert_same_ground_truth(p, q, rng.standard_normal(p.dim_x))
    check_grad_F_fd(p, rng.standard_normal(p.dim_x), rtol=1e-6)


# ---------------------------------------------------------------- logistic regularization selection, rebuilt
@pytest.fixture(scope="module")
def reg_pair():
    params = {"max_samples": 200}  # breast_cancer: 30 features, 120 training and 40 validation rows
    return (problems.make("fn_regularization_selection", seed=1, **params),
            problems.make("regularization_selection", seed=1, **params))


def test_regularization_oracles_and_ground_truth_equal_the_hand_written_ones(reg_pair):
    p, q = reg_pair
    rng = np.random.default_rng(2)
    assert (p.n_inner, p.n_outer, p.dim_x, p.dim_y) == (q.n_inner, q.n_outer, q.dim_x, q.dim_y)
    assert_same_oracles(p, q, rng, [None, q.sample_batch(rng, 9)])
    x = rng.normal(-1.0, 0.5, p.dim_x)
    assert_same_ground_truth(p, q, x)
    ys = q.y_star(x)
    assert p.metrics(x, ys)["test_accuracy"] == q.metrics(x, ys)["test_accuracy"]


def test_minibatch_rows_average_to_the_full_batch(reg_pair):
    p, _ = reg_pair
    rng = np.random.default_rng(8)
    check_minibatch_mean(p, rng.normal(-1.0, 0.5, p.dim_x), rng.normal(0.0, 0.3, p.dim_y), rng,
                         full_pass=p.full_pass(), single=p.single)


def test_regularization_grad_F_matches_finite_differences_of_F(reg_pair):
    p, _ = reg_pair
    x = np.random.default_rng(3).normal(-1.0, 0.5, p.dim_x)
    assert check_grad_F_fd(p, x, rtol=1e-6) <= 1e-6


def test_a_run_counts_and_moves_exactly_as_on_the_hand_written_problem(reg_pair):
    p, q = reg_pair
    cfg = {"batch_size": 8, "rho": 0.5, "gamma": 0.5}
    mine = list(algorithms.run("soba", p, cfg, seed=4, budget={"iterations": 15}, n_evals=4))
    ref = list(algorithms.run("soba", q, cfg, seed=4, budget={"iterations": 15}, n_evals=4))
    assert [r["iteration"] for r in mine] == [r["iteration"] for r in ref] == [0, 1, 2, 6, 15]
    for a, b in zip(mine, ref):
        assert {k: v for k, v in a.items() if k.startswith(("calls/", "samples/"))} == \
               {k: v for k, v in b.items() if k.startswith(("calls/", "samples/"))}
        assert a["F"] == pytest.approx(b["F"], rel=1e-9) and a["grad_F_sq"] == pytest.approx(b["grad_F_sq"], rel=1e-7)
    assert mine[-1]["samples/grad_f"] == 15 * 8 and mine[-1]["calls/hvp"] == 15  # SOBA: one of each per step


def test_the_counting_wrapper_counts_every_oracle_kind():
    p = problems.make("fn_quadratic", seed=0, dim_x=3, dim_y=4, n_samples=8, rank=1)
    view = counted(p)
    x, y = p.initial_point()
    b = p.sample_batch(np.random.default_rng(0), 5)
    view.f(x, y, b), view.g(x, y), view.grad_f(x, y, b), view.grad_g(x, y, b), view.grad_y_f(x, y)
    view.grad_y_g(x, y, b), view.hvp_yy_g(x, y, y, b), view.cross_xy_g(x, y, y, b), view.hessian_yy_g(x, y, b)
    snap = view.counter.snapshot()
    kinds = ("f", "g", "grad_f", "grad_g", "hvp", "cross", "hessian")
    assert [snap[f"calls/{k}"] for k in kinds] == [1, 1, 2, 2, 1, 1, 1]
    assert [snap[f"samples/{k}"] for k in ("f", "g", "grad_f", "grad_g")] == [5, 8, 5 + 8, 5 + 5]
    with pytest.raises(AttributeError, match="ground truth"):
        view.grad_F(x)


# ---------------------------------------------------------------- the nonconvex example
@pytest.fixture(scope="module")
def mlp():
    return problems.make("fn_hyper_cleaning_mlp", seed=0)  # digits, 180 training rows, 8 hidden units


def test_mlp_oracles_match_finite_differences(mlp):
    rng = np.random.default_rng(5)
    x = rng.normal(0.0, 1.0, mlp.dim_x)
    y = mlp.initial_point()[1] + 0.1 * rng.standard_normal(mlp.dim_y)
    assert (mlp.dim_x, mlp.dim_y) == (180, 64 * 8 + 8 + 8 * 10 + 10)
    check_oracles(mlp, x, y, rng, rtol=1e-6)
    check_oracles(mlp, x, y, rng, batch=mlp.sample_batch(rng, 7), rtol=1e-6)


def test_mlp_grad_F_matches_finite_differences_of_F(mlp):
    rng = np.random.default_rng(6)
    x = mlp.initial_point()[0] + 0.2 * rng.standard_normal(mlp.dim_x)
    grad = mlp.grad_F(x)
    assert mlp.metrics(x, mlp.y_star(x))["gt/not_strongly_convex"] == 0.0
    assert np.linalg.norm(mlp.grad_y_g(x, mlp.y_star(x))) <= 1e-12
    h = 1e-4
    for _ in range(2):
        v = rng.standard_normal(mlp.dim_x)
        fd = (mlp.F(x + h * v) - mlp.F(x - h * v)) / (2 * h)
        assert fd == pytest.approx(grad @ v, rel=1e-6)


MLP_RUNS = {
    "soba": {"rho": 1.0, "gamma": 30.0, "rho_decay": 0.0, "gamma_decay": 0.0},
    "amigo": {"gamma": 100.0, "inner_steps": 5, "v_steps": 5},
    "f2sa": {"gamma": 100.0, "inner_steps": 5, "lam0": 10.0},
}


@pytest.mark.parametrize("algorithm", sorted(MLP_RUNS))
def test_three_algorithms_decrease_F_on_the_mlp(algorithm):
    p = problems.make("fn_hyper_cleaning_mlp", seed=0)  # fresh: warm starts follow this run only
    recs = list(algorithms.run(algorithm, p, MLP_RUNS[algorithm], seed=0, budget={"iterations": 10}, n_evals=5))
    F = [r["F"] for r in recs]
    assert [r["iteration"] for r in recs] == [0, 1, 2, 3, 6, 10] and recs[-1]["status"] == "finished"
    assert all(b < a for a, b in zip(F[1:], F[2:])) and F[1] <= F[0]  # SOBA's first x step is zero (v0 = 0)
    assert F[-1] <= F[0] - 0.05  # measured: 0.086 (soba), 0.128 (amigo), 0.134 (f2sa)
    assert all(r["gt/not_strongly_convex"] == 0.0 and r["gt/cg_residual"] <= 1e-10 for r in recs)
    assert 0.0 <= recs[-1]["test_accuracy"] <= 1.0 and 0.0 <= recs[-1]["corruption_auc"] <= 1.0


# ---------------------------------------------------------------- the not-strongly-convex flag
def curved(x, y, batch):
    """g = ½ x₀ y₀² + ½ y₁² − y₀ − y₁: strongly convex in y iff x₀ > 0, then y* = (1/x₀, 1)."""
    return 0.5 * x[0] * y[0] ** 2 + 0.5 * y[1] ** 2 - y[0] - y[1]


def target(x, y, batch):
    return 0.5 * jnp.sum((y - 2.0) ** 2) + 0.5 * x @ x


def test_the_flag_replaces_ground_truth_where_g_is_not_strongly_convex():
    p = from_functions(target, curved, np.array([2.0]), np.zeros(2))
    x = np.array([2.0])
    ys = np.array([0.5, 1.0])
    assert rel_err(p.y_star(x), ys) <= 1e-12
    # F(x) = ½(1/x − 2)² + ½ + ½x², F'(x) = −(1/x − 2)/x² + x
    assert p.F(x) == pytest.approx(0.5 * 1.5**2 + 0.5 + 2.0, rel=1e-12)
    assert p.grad_F(x)[0] == pytest.approx(1.5 / 4 + 2.0, rel=1e-10)
    assert p.metrics(x, ys)["gt/not_strongly_convex"] == 0.0
    for bad in (0.0, -1.0):  # singular, then concave in y₀ (unbounded below)
        xb = np.array([bad])
        assert np.isnan(p.F(xb)) and np.all(np.isnan(p.grad_F(xb))) and np.all(np.isnan(p.y_star(xb)))
        assert p.metrics(xb, ys)["gt/not_strongly_convex"] == 1.0


def test_the_run_loop_records_flagged_points_instead_of_calling_them_divergence():
    # The non-unique toy: g = ½ y₀² − x y₀ is flat in y₁ everywhere.
    p = from_functions(lambda x, y, b: 0.5 * (x[0] - y[1]) ** 2 + 0.5 * (y[0] - 1) ** 2,
                       lambda x, y, b: 0.5 * y[0] ** 2 - x[0] * y[0], np.zeros(1), np.zeros(2))
    recs = list(algorithms.run("f2sa", p, {}, seed=0, budget={"iterations": 8}, n_evals=3))
    assert [r["iteration"] for r in recs] == [0, 1, 3, 8] and recs[-1]["status"] == "finished"
    assert all(r["gt/not_strongly_convex"] == 1.0 and np.isnan(r["F"]) and np.isnan(r["grad_F_sq"]) for r in recs)
    assert recs[-1]["calls/grad_g"] > 0 and np.isnan(recs[-1]["y_err_sq"])


# ---------------------------------------------------------------- sets, compilation, precision
def test_box_projection_onto_X():
    p = from_functions(target, curved, np.array([0.5]), np.zeros(2), bounds=(0.1, 1.0))
    assert p.project_x(np.array([3.0]))[0] == 1.0 and p.project_x(np.array([-3.0]))[0] == 0.1
    recs = list(algorithms.run("soba", p, {"gamma": 10.0}, seed=0, budget={"iterations": 5}, n_evals=2))
    assert all(0.1 <= r["F"] for r in recs)  # evaluated, and x stayed where g is strongly convex
    one_sided = from_functions(target, curved, np.array([0.5]), np.zeros(2), bounds=(0.1, None))
    assert one_sided.project_x(np.array([7.0]))[0] == 7.0 and one_sided.project_x(np.array([0.0]))[0] == 0.1


TRACES = []


def traced_g(x, y, rows):
    TRACES.append(len(rows["t"]))  # runs only while JAX traces (compiles), never on a compiled call
    return 0.5 * jnp.mean((rows["X"] @ y - rows["t"]) ** 2) + 0.5 * jnp.exp(x) @ (y * y)


def test_each_transform_compiles_once_per_shape_and_is_shared_by_instances():
    rng = np.random.default_rng(7)
    data = {"X": rng.standard_normal((20, 3)), "t": rng.standard_normal(20)}
    p = from_functions(traced_g, traced_g, np.zeros(3), np.zeros(3), data)
    x, y = rng.standard_normal(3), rng.standard_normal(3)
    TRACES.clear()
    for _ in range(4):
        p.grad_y_g(x + 1.0, y)
    assert TRACES == [20]
    q = from_functions(traced_g, traced_g, np.ones(3), np.ones(3), {k: v + 1.0 for k, v in data.items()})
    assert q.grad_y_g(x, y) is not None and TRACES == [20]  # same function and shapes: no new compilation
    for _ in range(3):
        p.grad_y_g(x, y, p.sample_batch(rng, 4))
    assert TRACES == [20, 4]  # a minibatch size is a new shape, compiled once
    p.hvp_yy_g(x, y, y)
    assert len(TRACES) == 3


def test_oracles_are_float64_while_jax_keeps_its_default_elsewhere():
    p = from_functions(target, curved, np.array([2.0]), np.zeros(2))
    out = p.grad_y_g(np.array([2.0]), np.array([0.1, 0.2]))
    assert out.dtype == np.float64 and out.flags.writeable
    # 1e-12 survives only in float64: float32 would round 1 + 1e-12 to 1
    assert p.g(np.array([2.0]), np.array([1.0 + 1e-12, 0.0])) - p.g(np.array([2.0]), np.array([1.0, 0.0])) != 0.0
    assert not jax.config.jax_enable_x64 and jnp.zeros(1).dtype == jnp.float32


# ---------------------------------------------------------------- bad input
def vector_f(x, y, b):
    return y


@pytest.mark.parametrize("kwargs, message", [
    ({"f": "nope"}, "'f' must be a function f(x, y, batch) -> scalar, got 'nope'"),
    ({"x0": np.zeros((2, 2))}, "'x0' must be a non-empty flat vector of finite numbers, got shape (2, 2)"),
    ({"y0": [1.0, np.nan]}, "'y0' must be a non-empty flat vector of finite numbers"),
    ({"f": vector_f}, "'f' must be a function returning a real scalar, got output (2,) float64"),
    ({"data": {"a": np.zeros((3, 2)), "b": np.zeros(4)}}, "'data' must be a pytree of arrays sharing their leading"),
    ({"outer_data": {"a": np.zeros(3)}}, "'outer_data' must be given together with data"),
    ({"bounds": (1.0, 0.0)}, "'bounds' must be a pair with lo ≤ hi in every coordinate"),
    ({"bounds": (0.5, 1.0)}, "'x0' must be inside bounds, got a point outside the box"),
    ({"cg_tol": 0.0}, "'cg_tol' must be a number in (0, 1), got 0.0"),
])
def test_bad_input_is_one_line_naming_the_field(kwargs, message):
    args = {"f": target, "g": curved, "x0": np.array([0.2]), "y0": np.zeros(2), **kwargs}
    with pytest.raises(ParameterError) as err:
        from_functions(args.pop("f"), args.pop("g"), args.pop("x0"), args.pop("y0"), **args)
    msg = str(err.value)
    assert msg.startswith("from_functions: ") and message in msg and "\n" not in msg, msg


@pytest.mark.parametrize("name, params, message", [
    ("fn_hyper_cleaning_mlp", {"hidden": 0},
     "problem 'fn_hyper_cleaning_mlp': 'hidden' must be a positive integer, got 0"),
    ("fn_quadratic", {"mu": 2.0, "L": 1.0}, "problem 'fn_quadratic': 'L' must be at least mu = 2.0, got 1.0"),
    ("fn_regularization_selection", {"dataset": "nope"},
     "problem 'fn_regularization_selection': 'dataset' must be one of"),
])
def test_registered_parameters_are_validated_like_the_built_ins(name, params, message):
    with pytest.raises(ParameterError) as err:
        problems.make(name, **params)
    assert str(err.value).startswith(message) and "\n" not in str(err.value)
    assert problems.available()[name]["params"]  # listed with every parameter, as `bisweep list problems` shows


def test_algorithms_cannot_reach_the_ground_truth_through_the_counting_view(reg_pair):
    view = counted(reg_pair[0])
    for name in ("y_star", "F", "grad_F", "metrics"):
        with pytest.raises(AttributeError, match="ground truth"):
            getattr(view, name)
    assert not [a for a in dir(reg_pair[0]) if "truth" in a and not a.startswith("_")]
