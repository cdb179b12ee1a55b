"""Online problems: oracles vs finite differences per t, exact ground truth, V_T and H_{2,T} from eq. 5."""
import numpy as np
import pytest

import problems
from problems.shared.errors import ParameterError
from tests.oracle_checks import (check_ground_truth_stationarity, check_grad_F_fd, check_minibatch_mean,
                                 check_oracles)


# ---- oscillating_toy ----
@pytest.mark.parametrize("t", [1, 2, 7, 50])
def test_toy_oracles_match_finite_differences(t):
    p = problems.make("oscillating_toy", T=50, c=0.7, mu_g=2.5)
    inst = p.at(t)
    rng = np.random.default_rng(t)
    for _ in range(3):
        x, y = rng.uniform(-1, 1, 1), rng.uniform(-2, 2, 1)
        check_oracles(inst, x, y, rng)
        check_ground_truth_stationarity(inst, x, atol=1e-14)
        check_grad_F_fd(inst, x, rtol=1e-7)


def test_toy_ground_truth_is_the_closed_form():
    c, mu = 0.7, 2.5
    p = problems.make("oscillating_toy", T=10, c=c, mu_g=mu)
    x = np.array([0.37])
    for t in (3, 4):
        inst = p.at(t)
        assert inst.y_star(x)[0] == pytest.approx((-1) ** t * 0.37, abs=0)
        assert inst.F(x) == pytest.approx(c * np.exp(-0.37 ** 2), rel=1e-15)
        assert inst.grad_F(x)[0] == pytest.approx(-2 * c * 0.37 * np.exp(-0.37 ** 2), rel=1e-15)
        # ∇F = ∇x f − J H⁻¹ ∇y f at y*, from the oracles (independent of grad_F's formula).
        ys = inst.y_star(x)
        implicit = inst.grad_f(x, ys)[0] - inst.cross_xy_g(x, ys, inst.grad_y_f(x, ys) / mu)
        assert implicit[0] == pytest.approx(inst.grad_F(x)[0], rel=1e-14)
    assert p.project_x(np.array([1.7]))[0] == 1.0 and p.project_x(np.array([-3.0]))[0] == -1.0


@pytest.mark.parametrize("T", [1, 2, 5, 100, 1600])
def test_toy_variation_matches_the_paper_and_the_definition(T):
    p = problems.make("oscillating_toy", T=T)
    v = p.variation()
    assert v["V_T"] == 0.0
    assert v["H_2T"] == pytest.approx(4 * T - 4, abs=1e-12)
    if T <= 100:
        # Independently, from the instances: sup over a grid of X of ‖y*_{t−1} − y*_t‖² and |F_{t−1} − F_t|.
        xs = np.linspace(-1, 1, 41)
        H = sum(max(float((p.at(t - 1).y_star(np.array([x])) - p.at(t).y_star(np.array([x])))[0] ** 2)
                    for x in xs) for t in range(2, T + 1))
        V = sum(max(abs(p.at(t - 1).F(np.array([x])) - p.at(t).F(np.array([x]))) for x in xs)
                for t in range(2, T + 1))
        assert H == pytest.approx(v["H_2T"], abs=1e-12) and V == 0.0


def test_toy_alternates_and_rejects_times_outside_the_horizon():
    p = problems.make("oscillating_toy", T=4)
    assert p.at(1).s == -1.0 and p.at(2).s == 1.0 and p.at(3).s == -1.0
    assert p.regret_gamma == 0.1 and p.horizon == 4
    x0, y0 = p.initial_point()
    assert x0.tolist() == [0.5] and y0.tolist() == [0.0]
    with pytest.raises(ValueError, match=r"t must be in 1\.\.4"):
        p.at(5)
    with pytest.raises(ValueError, match=r"t must be in 1\.\.4"):
        p.at(0)


# ---- drifting_quadratic ----
@pytest.mark.parametrize("params", [{}, {"dim_x": 4, "dim_y": 6, "target_drift": 0.1, "outer_curvature": -0.02},
                                    {"dim_x": 3, "dim_y": 5, "n_samples": 10, "rank": 1, "drift": 0.2}])
def test_drifting_oracles_match_finite_differences(params):
    p = problems.make("drifting_quadratic", seed=2, T=40, **params)
    rng = np.random.default_rng(0)
    for t in (1, 17, 40):
        inst = p.at(t)
        x, y = rng.standard_normal(p.dim_x), rng.standard_normal(p.dim_y)
        check_oracles(inst, x, y, rng)
        check_ground_truth_stationarity(inst, x, atol=1e-9)
        check_grad_F_fd(inst, x)
        if inst.n_samples:
            check_oracles(inst, x, y, rng, batch=inst.sample_batch(rng, 3))
            check_minibatch_mean(inst, x, y, rng)


def test_drifting_instances_move_only_the_linear_terms():
    p = problems.make("drifting_quadratic", seed=4, T=30, dim_x=5, dim_y=7, drift=0.3, target_drift=0.2)
    a, b = p.at(1), p.at(30)
    assert np.array_equal(a.A, b.A) and np.array_equal(a.C, b.C) and np.array_equal(a.P, b.P)
    assert not np.array_equal(a.a, b.a) and not np.array_equal(a.e, b.e)
    rng = np.random.default_rng(1)
    x = rng.standard_normal(5)
    for t in (2, 11, 30):
        prev, cur = p.at(t - 1), p.at(t)
        # y*_t − y*_{t−1} = −A⁻¹(a_t − a_{t−1}) has norm `drift`; e moves by `target_drift`.
        shift = np.linalg.solve(cur.A, cur.C @ x - cur.a) - np.linalg.solve(prev.A, prev.C @ x - prev.a)
        assert np.linalg.norm(shift) == pytest.approx(0.3, rel=1e-10)
        assert np.linalg.norm(cur.e - prev.e) == pytest.approx(0.2, rel=1e-12)
        np.testing.assert_allclose(cur.y_star(x) - prev.y_star(x), shift, atol=1e-12)
    # The instances are views: the base stays at a_1.
    assert np.array_equal(p.at(1).a, p.a_path[0])


def test_drifting_variation_against_brute_force_sup_over_the_ball():
    R = 2.0
    p = problems.make("drifting_quadratic", seed=3, T=12, dim_x=2, dim_y=3, drift=0.05,
                      target_drift=0.04, radius=R)
    v = p.variation()
    # Brute force: |F_{t−1} − F_t| is affine in x, so its sup over the disc is on the circle.
    angles = np.linspace(0, 2 * np.pi, 20001)
    circle = R * np.stack([np.cos(angles), np.sin(angles)], axis=1)
    V = H = 0.0
    for t in range(2, 13):
        prev, cur = p.at(t - 1), p.at(t)
        diffs = [abs(prev.F(x) - cur.F(x)) for x in circle[::50]]
        # refine around the best coarse angle
        k = int(np.argmax(diffs)) * 50
        fine = circle[max(k - 60, 0):k + 60]
        V += max(max(diffs), max(abs(prev.F(x) - cur.F(x)) for x in fine))
        H += max(float(np.sum((prev.y_star(x) - cur.y_star(x)) ** 2)) for x in circle[::500])
    assert v["V_T"] == pytest.approx(V, rel=1e-6)
    assert v["H_2T"] == pytest.approx(H, rel=1e-10)
    assert v["H_2T"] == pytest.approx(0.05 ** 2 * 11, rel=1e-10)


def test_drifting_projection_and_static_limit():
    p = problems.make("drifting_quadratic", seed=0, T=5, dim_x=3, dim_y=3, drift=0.0, radius=2.0)
    assert p.variation() == {"V_T": 0.0, "H_2T": 0.0}
    x = np.array([3.0, 4.0, 0.0])
    np.testing.assert_allclose(p.project_x(x), [1.2, 1.6, 0.0], rtol=1e-15)
    np.testing.assert_array_equal(p.project_x(np.array([0.1, 0.2, 0.3])), [0.1, 0.2, 0.3])
    np.testing.assert_allclose(p.at(3).project_x(x), [1.2, 1.6, 0.0], rtol=1e-15)


def test_seeded_online_problems_are_bit_identical_and_seed_dependent():
    a = problems.make("drifting_quadratic", seed=7, T=20, target_drift=0.1)
    b = problems.make("drifting_quadratic", seed=7, T=20, target_drift=0.1)
    c = problems.make("drifting_quadratic", seed=8, T=20, target_drift=0.1)
    assert np.array_equal(a.a_path, b.a_path) and np.array_equal(a.e_path, b.e_path)
    assert np.array_equal(a.at(9).A, b.at(9).A)
    assert not np.array_equal(a.a_path, c.a_path)
    assert a.variation() == b.variation()


@pytest.mark.parametrize("name, params, field", [
    ("oscillating_toy", {"T": 0}, "'T' must be a positive integer"),
    ("oscillating_toy", {"c": -1.0}, "'c' must be a positive number"),
    ("oscillating_toy", {"mu_g": 0}, "'mu_g' must be a positive number"),
    ("oscillating_toy", {"x1": 1.5}, "'x1' must be in \\[-1, 1\\]"),
    ("oscillating_toy", {"regret_gamma": 0}, "'regret_gamma' must be a positive number"),
    ("drifting_quadratic", {"drift": -0.1}, "'drift' must be a non-negative number"),
    ("drifting_quadratic", {"radius": 0}, "'radius' must be a positive number"),
    ("drifting_quadratic", {"mu": 2.0, "L": 1.0}, "'L' must be at least mu"),
    ("drifting_quadratic", {"horizon": 5}, "unknown parameter 'horizon'"),
])
def test_bad_parameters_give_one_clear_error(name, params, field):
    with pytest.raises(ParameterError, match=field) as err:
        problems.make(name, **params)
    assert "\n" not in str(err.value) and f"problem '{name}'" in str(err.value)


def test_registry_marks_them_online():
    listing = problems.available()
    assert listing["oscillating_toy"]["online"] and listing["drifting_quadratic"]["online"]
    assert isinstance(problems.make("oscillating_toy"), problems.OnlineProblem)
