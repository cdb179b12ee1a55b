"""moving_quadratic: oracles vs finite differences per t, the path in closed form (step lengths, speeds, the
stationary point inside X), V_T and H_{2,T} against eq. 5 by brute force."""
import numpy as np
import pytest

import problems
from problems.moving import phases
from problems.shared.errors import ParameterError
from tests.oracle_checks import check_ground_truth_stationarity, check_grad_F_fd, check_oracles


@pytest.mark.parametrize("params", [{}, {"dim_x": 4, "dim_y": 6, "drift": 0.2, "speed_variation": 0.5}])
def test_moving_oracles_match_finite_differences(params):
    p = problems.make("moving_quadratic", seed=2, T=60, **params)
    rng = np.random.default_rng(0)
    for t in (1, 23, 60):
        inst = p.at(t)
        x, y = rng.standard_normal(p.dim_x), rng.standard_normal(p.dim_y)
        check_oracles(inst, x, y, rng)
        check_ground_truth_stationarity(inst, x, atol=1e-9)
        check_grad_F_fd(inst, x)


def test_stationary_path_is_exact_and_inside_the_ball():
    p = problems.make("moving_quadratic", seed=5, T=300, dim_x=6, dim_y=8, drift=0.05, center=2.0)
    xs = p.x_path()
    for t in (1, 77, 150, 300):
        inst = p.at(t)
        assert np.linalg.norm(inst.grad_F(xs[t - 1])) <= 1e-10
        np.testing.assert_allclose(inst.x_opt(), xs[t - 1], atol=1e-10)  # the instance's own minimiser
        np.testing.assert_allclose(p.project_x(xs[t - 1]), xs[t - 1], rtol=0, atol=0)  # strictly inside X
    assert np.linalg.norm(xs[0]) == pytest.approx(2.0, rel=1e-10)
    assert np.max(np.linalg.norm(xs, axis=1)) < 0.5 * p.radius
    # The stationary point really moves (by more than 0.1 over the horizon) and comes from the y* path.
    assert np.max(np.linalg.norm(xs - xs[0], axis=1)) > 0.1


def test_inner_solution_moves_by_the_chord_of_each_phase_step():
    T, drift, rho, v, period = 120, 0.03, 0.5, 0.8, 40
    p = problems.make("moving_quadratic", seed=1, T=T, dim_x=3, dim_y=5, drift=drift, path_radius=rho,
                      speed_variation=v, speed_period=period)
    x = np.random.default_rng(3).standard_normal(3)
    ys = np.array([p.at(t).y_star(x) for t in range(1, T + 1)])
    steps = np.linalg.norm(np.diff(ys, axis=0), axis=1)
    t = np.arange(2, T + 1)
    dphi = (drift / rho) * (1 + v * np.sin(2 * np.pi * t / period))
    np.testing.assert_allclose(steps, 2 * rho * np.sin(dphi / 2), rtol=1e-9)
    assert steps.max() / steps.min() == pytest.approx((1 + v) / (1 - v), rel=0.02)  # the speed varies
    assert np.linalg.norm(ys - ys[0], axis=1).max() <= 2 * rho + 1e-12  # on a circle of radius ρ through y*_1
    assert np.mean(steps) == pytest.approx(drift, rel=0.02)
    np.testing.assert_allclose(phases(p_params(T, drift, rho, v, period))[1:], np.cumsum(dphi), rtol=1e-12)


def p_params(T, drift, rho, v, period):
    from problems.moving import MovingQuadraticParams
    return MovingQuadraticParams(T=T, drift=drift, path_radius=rho, speed_variation=v, speed_period=period)


def test_variation_against_brute_force_sup_over_the_ball():
    R = 2.0
    p = problems.make("moving_quadratic", seed=3, T=12, dim_x=2, dim_y=3, drift=0.2, radius=R, center=0.5)
    v = p.variation()
    angles = np.linspace(0, 2 * np.pi, 40001)
    circle = R * np.stack([np.cos(angles), np.sin(angles)], axis=1)
    V = H = 0.0
    for t in range(2, 13):
        prev, cur = p.at(t - 1), p.at(t)
        # F_{t−1} − F_t is affine in x (only a_t moves): its sup of |·| over the disc is on the circle.
        V += max(abs(prev.F(x) - cur.F(x)) for x in circle[::20])
        H += max(float(np.sum((prev.y_star(x) - cur.y_star(x)) ** 2)) for x in circle[::4000])
    assert v["V_T"] == pytest.approx(V, rel=1e-6)
    assert v["H_2T"] == pytest.approx(H, rel=1e-10)
    steps = np.linalg.norm(np.diff(p.u_path, axis=0), axis=1)
    assert v["H_2T"] == pytest.approx(float(np.sum(steps ** 2)), rel=1e-10)


def test_static_limit_and_seeds():
    p = problems.make("moving_quadratic", seed=0, T=5, drift=0.0)
    assert p.variation() == {"V_T": 0.0, "H_2T": 0.0}
    a, b = problems.make("moving_quadratic", seed=7, T=20), problems.make("moving_quadratic", seed=7, T=20)
    c = problems.make("moving_quadratic", seed=8, T=20)
    assert np.array_equal(a.a_path, b.a_path) and not np.array_equal(a.a_path, c.a_path)
    assert problems.available()["moving_quadratic"]["online"]


@pytest.mark.parametrize("params, field", [({"speed_variation": 1.0}, "speed_variation"),
                                           ({"outer_curvature": 0.0}, "outer_curvature"),
                                           ({"dim_y": 1}, "dim_y"), ({"center": 10.0}, "center")])
def test_bad_parameters_give_one_clear_error(params, field):
    with pytest.raises(ParameterError, match=f"'{field}' must be"):
        problems.make("moving_quadratic", seed=0, **params)
