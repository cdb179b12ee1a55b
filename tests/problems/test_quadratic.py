"""Quadratic family: oracles vs finite differences, minibatch means, exact ground truth."""
import numpy as np
import pytest

import problems
from problems.shared.errors import ParameterError
from tests.oracle_checks import check_grad_F_fd, check_minibatch_mean, check_oracles


@pytest.mark.parametrize("params", [{}, {"dim_x": 7, "dim_y": 13, "outer_curvature": -0.05},
                                    {"dim_x": 5, "dim_y": 8, "n_samples": 16, "rank": 1}])
def test_oracles_match_finite_differences(params):
    p = problems.make("quadratic", seed=3, **params)
    rng = np.random.default_rng(0)
    for _ in range(3):
        x, y = rng.standard_normal(p.dim_x), rng.standard_normal(p.dim_y)
        check_oracles(p, x, y, rng)
        if p.n_samples:
            check_oracles(p, x, y, rng, batch=p.sample_batch(rng, 4))


def test_minibatch_mean_equals_full_batch():
    p = problems.make("quadratic", seed=1, dim_x=6, dim_y=9, n_samples=12, rank=2)
    rng = np.random.default_rng(1)
    check_minibatch_mean(p, rng.standard_normal(6), rng.standard_normal(9), rng)


def test_dense_matrices_are_the_mean_of_samples():
    p = problems.make("quadratic", seed=2, dim_x=4, dim_y=6, n_samples=8, rank=1)
    idx = np.arange(8)
    np.testing.assert_allclose(p.hessian_yy_g(None, None, idx), p.A, atol=1e-12)
    np.testing.assert_allclose(p.jacobian_xy_g(None, None, idx), -p.C.T, atol=1e-12)
    assert np.linalg.eigvalsh(p.A)[[0, -1]] == pytest.approx([0.2, 1.0], rel=1e-12)


def test_ground_truth_matches_independent_dense_solve():
    p = problems.make("quadratic", seed=5, dim_x=10, dim_y=12, outer_curvature=0.2)
    rng = np.random.default_rng(5)
    x = rng.standard_normal(10)
    # Independent: KKT of the inner problem and the implicit-function formula with np.linalg.inv.
    ys = np.linalg.inv(p.A) @ (p.C @ x - p.a)
    dy_dx = np.linalg.inv(p.A) @ p.C
    grad = 0.2 * x + p.c + dy_dx.T @ (p.P @ (ys - p.e))
    F = 0.5 * (ys - p.e) @ p.P @ (ys - p.e) + 0.1 * x @ x + p.c @ x
    np.testing.assert_allclose(p.y_star(x), ys, rtol=0, atol=1e-10 * max(1, np.abs(ys).max()))
    np.testing.assert_allclose(p.grad_F(x), grad, rtol=0, atol=1e-10 * max(1, np.abs(grad).max()))
    assert p.F(x) == pytest.approx(F, rel=1e-10)
    check_grad_F_fd(p, x)
    xo = p.x_opt()
    assert np.linalg.norm(p.grad_F(xo)) < 1e-10


def test_seeded_instances_are_bit_identical_and_seed_dependent():
    a = problems.make("quadratic", seed=7, n_samples=32)
    b = problems.make("quadratic", seed=7, n_samples=32)
    c = problems.make("quadratic", seed=8, n_samples=32)
    for name in ("A", "C", "P", "a", "e", "c", "U", "V", "S", "a_i"):
        assert np.array_equal(getattr(a, name), getattr(b, name))
    assert not np.array_equal(a.A, c.A)


@pytest.mark.parametrize("params, field", [
    ({"dim_x": -3}, "'dim_x' must be a positive integer"),
    ({"dim_y": 2.5}, "'dim_y' must be a positive integer"),
    ({"mu": 2.0, "L": 1.0}, "'L' must be at least mu"),
    ({"n_samples": 2, "dim_y": 10}, "'rank' must be at least"),
    ({"bogus": 1}, "unknown parameter 'bogus'"),
])
def test_bad_parameters_give_one_clear_error(params, field):
    with pytest.raises(ParameterError, match=field) as err:
        problems.make("quadratic", **params)
    assert "\n" not in str(err.value)


def test_unknown_problem_and_bad_seed():
    with pytest.raises(ParameterError, match="unknown name 'nope'; allowed: .*quadratic"):
        problems.make("nope")
    with pytest.raises(ParameterError, match="'seed' must be a non-negative integer"):
        problems.make("quadratic", seed=-1)


def test_counting_wrapper_counts_and_hides_ground_truth():
    p = problems.make("quadratic", seed=0, dim_x=3, dim_y=4, n_samples=8)
    view = problems.counted(p)
    x, y = p.initial_point()
    batch = view.sample_batch(np.random.default_rng(0), 5)
    view.grad_g(x, y, batch)
    view.grad_y_g(x, y)
    view.hvp_yy_g(x, y, y, batch)
    view.cross_xy_g(x, y, y)
    assert dict(view.counter.calls) == {"grad_g": 2, "hvp": 1, "cross": 1}
    assert view.counter.samples["grad_g"] == 5 + 8
    assert view.counter.total_samples == 5 + 8 + 5 + 8
    with pytest.raises(AttributeError, match="ground truth"):
        view.y_star(x)
    assert view.dim_x == 3


@pytest.mark.parametrize("rank", [1, 3])
def test_minibatch_oracles_match_dense_batch_matrices(rank):
    # Independent: A_b, C_b, P_b, a_b summed sample by sample from the definitions in the docstring.
    p = problems.make("quadratic", seed=6, dim_x=7, dim_y=9, n_samples=12, rank=rank)
    rng = np.random.default_rng(6)
    x, y, v = rng.standard_normal(7), rng.standard_normal(9), rng.standard_normal(9)
    batch = p.sample_batch(rng, 5)
    Ui = [p.U[i].T for i in batch]  # U_i ∈ R^{dy×r}
    A = p.mu0 * np.eye(9) + sum(U @ U.T for U in Ui) / 5
    C = sum(U @ p.V[i] for U, i in zip(Ui, batch)) / 5  # U_i V_iᵀ with V_i = V[i]ᵀ
    P = p.p0 * np.eye(9) + sum(p.S[i].T @ p.S[i] for i in batch) / 5
    a = np.mean([p.a_i[i] for i in batch], axis=0)
    tol = dict(rtol=1e-13, atol=1e-13)
    np.testing.assert_allclose(p.grad_y_g(x, y, batch), A @ y - C @ x + a, **tol)
    np.testing.assert_allclose(p.hvp_yy_g(x, y, v, batch), A @ v, **tol)
    np.testing.assert_allclose(p.cross_xy_g(x, y, v, batch), -C.T @ v, **tol)
    np.testing.assert_allclose(p.grad_y_f(x, y, batch), P @ (y - p.e), **tol)
    np.testing.assert_allclose(p.hessian_yy_g(x, y, batch), A, **tol)
    np.testing.assert_allclose(p.jacobian_xy_g(x, y, batch), -C.T, **tol)
    assert p.g(x, y, batch) == pytest.approx(0.5 * y @ A @ y - y @ C @ x + a @ y, rel=1e-13)
    r = y - p.e
    assert p.f(x, y, batch) == pytest.approx(0.5 * r @ P @ r + 0.05 * x @ x + p.c @ x, rel=1e-13)
    # The same batch again (rows now cached) gives the same bits.
    assert np.array_equal(p.grad_y_g(x, y, batch), p.grad_y_g(x, y, batch))
