"""BOME toys: oracles vs finite differences, ground truth vs independent computations, validation."""
import numpy as np
import pytest
from scipy.optimize import minimize

import problems
from problems.shared.errors import ParameterError
from tests.oracle_checks import check_grad_F_fd, check_ground_truth_stationarity, check_oracles

TOYS = ["coreset_toy", "minimax_toy", "nonunique_toy"]


@pytest.mark.parametrize("name, params", [
    ("coreset_toy", {}),
    ("coreset_toy", {"vertices": [[0, 0], [2, 0], [0, 2], [2, 2], [1, 3]], "scale": 0.7}),
    ("minimax_toy", {}),
    ("nonunique_toy", {}),
])
def test_oracles_match_finite_differences(name, params):
    p = problems.make(name, **params)
    rng = np.random.default_rng(0)
    for _ in range(3):
        x, y = 2 * rng.standard_normal(p.dim_x), 2 * rng.standard_normal(p.dim_y)
        check_oracles(p, x, y, rng)


def test_dense_second_order_matches_products():
    rng = np.random.default_rng(1)
    for name in TOYS:
        p = problems.make(name)
        x, y, v = rng.standard_normal(p.dim_x), rng.standard_normal(p.dim_y), rng.standard_normal(p.dim_y)
        np.testing.assert_allclose(p.hessian_yy_g(x, y) @ v, p.hvp_yy_g(x, y, v), atol=1e-14)
        np.testing.assert_allclose(p.jacobian_xy_g(x, y) @ v, p.cross_xy_g(x, y, v), atol=1e-14)


# ---- coreset ----

def _hull_projection_qp(vertices: np.ndarray, target: np.ndarray) -> np.ndarray:
    """min_w ‖Xw − x0‖² on the simplex, by SLSQP (independent of the problem's exact 2-D geometry)."""
    m = len(vertices)
    res = minimize(lambda w: np.sum((vertices.T @ w - target) ** 2), np.full(m, 1 / m),
                   jac=lambda w: 2 * vertices @ (vertices.T @ w - target), method="SLSQP",
                   bounds=[(0, 1)] * m, constraints=[{"type": "eq", "fun": lambda w: w.sum() - 1}],
                   options={"ftol": 1e-15, "maxiter": 500})
    return vertices.T @ res.x


def test_coreset_optimum_is_the_projection_on_the_hull():
    p = problems.make("coreset_toy")
    V = np.array([[1, 3], [3, 1], [-2, 2], [-3, -2]], float)
    # Hand computation: x0 = (3, −2) projects on the edge (−3, −2)–(3, 1) at t = 0.8, i.e. (1.8, 0.4).
    np.testing.assert_allclose(p.y_opt, [1.8, 0.4], atol=1e-14)
    np.testing.assert_allclose(p.y_opt, _hull_projection_qp(V, np.array([3.0, -2.0])), atol=1e-6)
    assert p.F_inf == pytest.approx(0.1 * (1.2 ** 2 + 2.4 ** 2), rel=1e-14)
    assert p.x_opt() is None
    # The infimum is approached along softmax weights (0, 0.8, 0, 0.2): F(x_t) → F_inf.
    for t, tol in [(5.0, 1e-3), (12.0, 1e-9)]:
        x = np.array([-t, np.log(0.8) + t, -t, np.log(0.2) + t])
        assert 0 < p.F(x) - p.F_inf < tol


@pytest.mark.parametrize("target", [[0.0, 1.0], [5.0, 5.0], [-4.0, 0.5], [0.5, -3.0], [1.0, 2.5]])
def test_coreset_projection_matches_qp_for_other_targets(target):
    p = problems.make("coreset_toy", x0=target)
    V = np.array([[1, 3], [3, 1], [-2, 2], [-3, -2]], float)
    np.testing.assert_allclose(p.y_opt, _hull_projection_qp(V, np.array(target)), atol=1e-6)


def test_coreset_ground_truth_and_metrics():
    p = problems.make("coreset_toy")
    rng = np.random.default_rng(2)
    X = np.array([[1, 3], [3, 1], [-2, 2], [-3, -2]], float).T
    for _ in range(3):
        x, y = rng.standard_normal(4), rng.standard_normal(2)
        w = np.exp(x - x.max()) / np.exp(x - x.max()).sum()
        np.testing.assert_allclose(p.y_star(x), X @ w, atol=1e-14)
        check_ground_truth_stationarity(p, x, atol=1e-13)
        assert p.F(x) == pytest.approx(0.1 * np.sum((X @ w - [3, -2]) ** 2), rel=1e-13)
        check_grad_F_fd(p, x, rtol=1e-7)
        m = p.metrics(x, y)
        assert m["y_opt_dist"] == pytest.approx(np.hypot(*(y - [1.8, 0.4])), rel=1e-13)
        assert m["y_star_opt_dist"] == pytest.approx(np.hypot(*(X @ w - [1.8, 0.4])), rel=1e-13)
        assert m["F_gap"] == pytest.approx(p.F(x) - 0.72, rel=1e-12)
        assert m["F_gap"] > 0


@pytest.mark.parametrize("start, y0", [(1, [0, 3]), (2, [-3, 1]), (3, [3.5, -1])])
def test_coreset_start_points(start, y0):
    x, y = problems.make("coreset_toy", start=start).initial_point()
    assert np.array_equal(x, np.zeros(4)) and np.array_equal(y, y0)


# ---- minimax ----

def test_minimax_ground_truth():
    p = problems.make("minimax_toy")
    grid = np.linspace(-10, 10, 2001)
    for xv in [-3.0, -0.2, 0.7, 9.0]:
        x = np.array([xv])
        best = grid[np.argmin([p.g(x, np.array([t])) for t in grid])]
        np.testing.assert_allclose(p.y_star(x), [best], atol=0)
        assert p.F(x) == pytest.approx(10 * abs(xv), rel=1e-15)
        check_grad_F_fd(p, x, rtol=1e-9)
        # KKT of min −x·y s.t. h = (y − 10, −y − 10) ≤ 0 at y*: ∇y g + λᵀ ∂h/∂y = 0, λ ≥ 0, λ·h = 0.
        lam, h = p.lambda_star(x), p.constraints.h(x, p.y_star(x))
        assert -xv + lam[0] - lam[1] == pytest.approx(0, abs=1e-15)
        assert np.all(lam >= 0) and np.all(h <= 0) and lam @ h == pytest.approx(0, abs=1e-15)
    # At x = 0 every y is optimal and f(0, ·) ≡ 0: the selection 0 and F(0) = 0 = min F.
    assert p.y_star(np.zeros(1))[0] == 0 and p.F(np.zeros(1)) == 0
    assert np.array_equal(p.x_opt(), [0.0]) and np.array_equal(p.y_opt, [0.0])
    assert np.array_equal(p.project_x(np.array([12.0])), [10.0])
    assert np.array_equal(p.project_y(np.array([-11.0])), [-10.0])
    assert p.constraints.violation(np.zeros(1), np.array([10.5])) == pytest.approx(0.5)
    x, y = p.initial_point()
    assert x[0] == 4 and y[0] == 4


# ---- non-unique lower level ----

def test_nonunique_ground_truth_is_the_optimistic_selection():
    p = problems.make("nonunique_toy")
    for xv in [-1.5, 0.0, 0.3, 2.0]:
        x = np.array([xv])
        ys = p.y_star(x)
        check_ground_truth_stationarity(p, x, atol=0)
        # The whole line {(x, t)} minimises g(x, ·); f along it is smallest at t = x.
        ts = np.linspace(xv - 3, xv + 3, 601)
        vals = [p.f(x, np.array([xv, t])) for t in ts]
        assert ts[int(np.argmin(vals))] == pytest.approx(ys[1], abs=1e-12)
        assert p.g(x, np.array([xv, 7.0])) == p.g(x, ys)
        assert p.F(x) == pytest.approx(0.5 * (xv - 1) ** 2, rel=1e-15, abs=1e-15)
        check_grad_F_fd(p, x, rtol=1e-8)
    assert np.array_equal(p.x_opt(), [1.0]) and np.array_equal(p.y_opt, [1.0, 1.0])
    assert p.f(np.ones(1), np.ones(2)) == 0 and p.grad_F(np.ones(1))[0] == 0


# ---- common ----

@pytest.mark.parametrize("name", TOYS)
def test_instances_are_bit_identical(name):
    a, b, c = problems.make(name, seed=3), problems.make(name, seed=3), problems.make(name, seed=4)
    xa, ya = a.initial_point()
    for q in (b, c):  # deterministic toys: the seed does not change the instance
        xq, yq = q.initial_point()
        assert np.array_equal(xa, xq) and np.array_equal(ya, yq)
        assert np.array_equal(a.grad_g(xa + 0.3, ya - 0.2)[0], q.grad_g(xa + 0.3, ya - 0.2)[0])
        assert a.F(xa + 0.1) == q.F(xa + 0.1)


def test_counting_view_passes_projection_and_hides_ground_truth():
    view = problems.counted(problems.make("minimax_toy"))
    assert np.array_equal(view.project_y(np.array([20.0])), [10.0])
    assert view.counter.total_calls == 0
    with pytest.raises(AttributeError, match="ground truth"):
        view.y_star(np.zeros(1))
    # Unconstrained problems keep the identity projection of the base class.
    y = np.array([1e6, -1e6])
    assert problems.make("nonunique_toy").project_y(y) is y


@pytest.mark.parametrize("name, params, message", [
    ("coreset_toy", {"start": 4}, "'start' must be between 1 and 3"),
    ("coreset_toy", {"start": 0}, "'start' must be a positive integer"),
    ("coreset_toy", {"vertices": [[1, 2]]}, "'vertices' must be a list of at least 2 points"),
    ("coreset_toy", {"vertices": [[1, 2, 3], [0, 0]]}, "'vertices' must be a list of at least 2 points"),
    ("coreset_toy", {"vertices": "square"}, "'vertices' must be a list"),
    ("coreset_toy", {"x0": [1.0]}, "'x0' must be a 2-vector"),
    ("coreset_toy", {"x0": [1.0, float("nan")]}, "'x0' must be a list of finite numbers"),
    ("coreset_toy", {"scale": -0.1}, "'scale' must be a positive number"),
    ("coreset_toy", {"starts": [[0, 1, 2]]}, "'starts' must be a list of points"),
    ("minimax_toy", {"bound": 0}, "'bound' must be a positive number"),
    ("minimax_toy", {"x_start": 11}, "'x_start' must be within the box"),
    ("nonunique_toy", {"y_start": [1.0]}, "'y_start' must be a 2-vector"),
    ("nonunique_toy", {"z": 1}, "unknown parameter 'z'"),
])
def test_bad_parameters_give_one_clear_error(name, params, message):
    with pytest.raises(ParameterError, match=message) as err:
        problems.make(name, **params)
    assert "\n" not in str(err.value) and f"problem '{name}'" in str(err.value)


def test_minimax_and_nonunique_report_distance_to_their_optimum():
    mm, nu = problems.make("minimax_toy"), problems.make("nonunique_toy")
    assert mm.metrics(np.array([3.0]), np.array([-4.0]))["opt_dist"] == pytest.approx(5.0, rel=1e-15)
    assert mm.metrics(mm.x_opt(), np.zeros(1))["opt_dist"] == 0.0
    assert nu.metrics(np.array([3.0]), np.array([1.0, -1.0]))["opt_dist"] == pytest.approx(np.sqrt(8.0), rel=1e-15)
    assert nu.metrics(nu.x_opt(), np.ones(2))["opt_dist"] == 0.0


def test_coreset_points_as_the_paper_prints_them_and_as_the_authors_code_runs_them():
    # x0 = (3, −2). Code: the hull's edge (3, 1)–(−3, −2) is nearest, at t = (0, −3)·(−6, −3)/45 = 0.2 along it:
    # (3, 1) + 0.2 (−6, −3) = (1.8, 0.4). Paper (fourth vertex (−3, 2)): both edges at (3, 1) point away from
    # x0 (t < 0), so the vertex (3, 1) itself is the optimum.
    code, paper = problems.make("coreset_toy", start=3), problems.make("coreset_toy", points="paper", start=3)
    np.testing.assert_allclose(code.y_opt, [1.8, 0.4], atol=1e-12)
    np.testing.assert_allclose(paper.y_opt, [3.0, 1.0], atol=1e-12)
    np.testing.assert_array_equal(code.initial_point()[1], [3.5, -1.0])
    np.testing.assert_array_equal(paper.initial_point()[1], [3.5, 1.0])
    np.testing.assert_array_equal(paper.X[:, 3], [-3.0, 2.0])
    explicit = problems.make("coreset_toy", points="paper", vertices=[[0, 0], [1, 0], [0, 1]], start=1)
    assert explicit.X.shape == (2, 3)  # explicit vertices override the named set
