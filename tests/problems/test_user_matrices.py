"""Problems from your own matrices: quadratic and constrained_quadratic against closed forms, the seeded
stream of what is not given, one-line errors for bad matrices, and `problems.ground_truth` at a point."""
import numpy as np
import pytest

import problems
from problems.counting import counted
from problems.shared.errors import ParameterError
from sweep.study import spec
from tests.oracle_checks import check_grad_F_fd, check_minibatch_mean, check_oracles


def _spd(rng, d, lo):
    G = rng.standard_normal((d, d))
    return G @ G.T / d + lo * np.eye(d)


@pytest.fixture()
def given():
    rng = np.random.default_rng(42)
    dx, dy = 3, 4
    return {"A": _spd(rng, dy, 0.5), "C": rng.standard_normal((dy, dx)), "P": _spd(rng, dy, 0.3),
            "a": rng.standard_normal(dy), "e": rng.standard_normal(dy), "c": rng.standard_normal(dx)}


def _closed_form(m, x, outer_curvature):
    """y*, ∇F, F of g = ½yᵀAy − yᵀCx + aᵀy, f = ½(y − e)ᵀP(y − e) + ½m‖x‖² + cᵀx, by dense solves."""
    ys = np.linalg.solve(m["A"], m["C"] @ x - m["a"])
    grad = outer_curvature * x + m["c"] + (np.linalg.solve(m["A"], m["C"])).T @ (m["P"] @ (ys - m["e"]))
    F = 0.5 * (ys - m["e"]) @ m["P"] @ (ys - m["e"]) + 0.5 * outer_curvature * x @ x + m["c"] @ x
    return ys, grad, F


def test_quadratic_from_given_matrices_matches_the_closed_form(given):
    p = problems.make("quadratic", outer_curvature=0.3, **given)  # NumPy arrays in, dimensions implied
    assert (p.dim_x, p.dim_y) == (3, 4) and (p.params.dim_x, p.params.dim_y) == (3, 4)
    for name, value in given.items():
        np.testing.assert_array_equal(getattr(p, name), value)  # SPD inputs are exactly symmetric already
    rng = np.random.default_rng(0)
    for _ in range(3):
        x, y = rng.standard_normal(3), rng.standard_normal(4)
        ys, grad, F = _closed_form(given, x, 0.3)
        gt = problems.ground_truth(p, x)
        np.testing.assert_allclose(gt.y_star, ys, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(gt.grad_F, grad, rtol=1e-11, atol=1e-12)
        assert gt.F == pytest.approx(F, rel=1e-12) and gt.lambda_star is None
        np.testing.assert_allclose(p.grad_y_g(x, y), given["A"] @ y - given["C"] @ x + given["a"], rtol=1e-13)
        check_oracles(p, x, y, rng)
        check_grad_F_fd(p, x)


def test_quadratic_finite_sum_from_given_matrices(given):
    p = problems.make("quadratic", n_samples=6, rank=1, **given)
    lam_A, lam_P = np.linalg.eigvalsh(given["A"])[0], np.linalg.eigvalsh(given["P"])[0]
    assert p.mu0 == pytest.approx(lam_A / 2, rel=1e-12) and p.p0 == pytest.approx(lam_P / 2, rel=1e-12)
    idx = np.arange(6)  # the samples average to the given matrices exactly (to rounding)
    np.testing.assert_allclose(p.hessian_yy_g(None, None, idx), given["A"], atol=1e-12)
    np.testing.assert_allclose(p.jacobian_xy_g(None, None, idx), -given["C"].T, atol=1e-12)
    rng = np.random.default_rng(1)
    x, y = rng.standard_normal(3), rng.standard_normal(4)
    check_minibatch_mean(p, x, y, rng)
    np.testing.assert_allclose(p.grad_F(x), _closed_form(given, x, 0.1)[1], rtol=1e-11, atol=1e-12)


def test_what_is_not_given_is_drawn_from_the_same_stream():
    base = problems.make("quadratic", seed=5, dim_x=3, dim_y=4)
    C = np.arange(12.0).reshape(4, 3)
    mine = problems.make("quadratic", seed=5, C=C)
    np.testing.assert_array_equal(mine.C, C)
    for name in ("A", "P", "a", "e", "c"):
        np.testing.assert_array_equal(getattr(mine, name), getattr(base, name))
    # Every cache follows the given matrix: y* uses the factor of the given A, not the drawn one.
    A = np.diag([1.0, 2.0, 4.0, 8.0])
    q = problems.make("quadratic", seed=5, dim_x=3, A=A)
    x = np.array([1.0, -1.0, 0.5])
    np.testing.assert_allclose(q.y_star(x), (base.C @ x - base.a) / np.diag(A), rtol=1e-13)


def test_slightly_asymmetric_input_is_symmetrised():
    A = np.array([[2.0, 1.0], [1.0 + 1e-13, 3.0]])
    p = problems.make("quadratic", A=A, dim_x=1)
    np.testing.assert_array_equal(p.A, p.A.T)
    assert np.max(np.abs(p.A - A)) <= 1e-13


@pytest.mark.parametrize("params, message", [
    ({"A": [[1.0, 2.0], [0.0, 1.0]]}, "'A' must be a symmetric matrix, got a 2 × 2 matrix with max |A − Aᵀ| = 2"),
    ({"A": [[1.0, 0.0], [0.0, -1.0]]}, "'A' must be positive definite (g strongly convex in y), got a 2 × 2 matrix "
                                       "with smallest eigenvalue -1"),
    ({"A": np.eye(2), "dim_y": 3}, "'A' must be a 3 × 3 matrix (dim_x = 20, dim_y = 3), got a 2 × 2 matrix"),
    ({"C": [[1.0, 2.0], [3.0]]}, "'C' must be a matrix (a list of equally long rows of finite numbers) or null, "
                                 "got rows of different lengths"),
    ({"C": np.ones((2, 2)), "a": [1.0, 2.0, 3.0]}, "'a' must be a vector of length 2 (dim_x = 2, dim_y = 2), "
                                                   "got a vector of length 3"),
    ({"a": [1.0, float("nan")]}, "'a' must be a list of finite numbers or null, got a vector of length 2 with "
                                 "non-finite entries"),
    ({"A": np.eye(2), "P": [[1.0, 0.0], [0.0, 0.0]], "n_samples": 4}, "'P' must be positive definite (the finite-sum"),
    # a large matrix is described, never printed
    ({"A": np.triu(np.ones((300, 300)))}, "'A' must be a symmetric matrix, got a 300 × 300 matrix with max |A − Aᵀ| = 1"),
])
def test_bad_matrices_give_one_line_errors(params, message):
    with pytest.raises(ParameterError) as err:
        problems.make("quadratic", **params)
    text = str(err.value)
    assert "\n" not in text and text.startswith("problem 'quadratic': ") and message in text, text
    assert len(text) < 200


# ---------------------------------------------------------------- constrained_quadratic
def _constrained_given(rng, d, rows):
    return {"Q_u": _spd(rng, d, 2.0), "c_u": rng.standard_normal(d), "P": _spd(rng, d, 0.5),
            "Q_l": _spd(rng, d, 1.0), "c_l": rng.standard_normal(d), "A": rng.standard_normal((rows, d)),
            "B": rng.standard_normal((rows, d)), "b": np.full(rows, 0.1)}


def test_constrained_quadratic_from_given_matrices_matches_kkt_by_hand():
    rng = np.random.default_rng(7)
    m = _constrained_given(rng, 5, 1)
    p = problems.make("constrained_quadratic", noise=0.0, **m)
    assert (p.dim_x, p.constraints.A.shape) == (5, (1, 5))
    Q, B, A, b = m["Q_l"], m["B"][0], m["A"][0], m["b"][0]
    checked = {"active": 0, "inactive": 0}
    for _ in range(40):
        x = 2.0 * rng.standard_normal(5)
        q = m["c_l"] + x
        free = -np.linalg.solve(Q, q)  # the unconstrained minimiser of ½yᵀQy + qᵀy
        if A @ x - B @ free - b <= 0:
            ys, lam = free, 0.0
            dy = -np.linalg.inv(Q)
            checked["inactive"] += 1
        else:  # one active row: Qy + q − λB = 0 and A x − B y − b = 0
            Qi = np.linalg.inv(Q)
            lam = (A @ x - b + B @ Qi @ q) / (B @ Qi @ B)
            ys = Qi @ (lam * B - q)
            dlam = (A + B @ Qi) / (B @ Qi @ B)  # dλ/dx, then dy/dx = Q⁻¹(B dλ/dxᵀ − I)
            dy = Qi @ (np.outer(B, dlam) - np.eye(5))
            checked["active"] += 1
        gt = problems.ground_truth(p, x)
        np.testing.assert_allclose(gt.y_star, ys, rtol=1e-10, atol=1e-11)
        np.testing.assert_allclose(gt.lambda_star, [lam], rtol=1e-9, atol=1e-11)
        gx = m["Q_u"] @ x + m["c_u"] + m["P"] @ ys
        gy = m["P"] @ (x + ys)
        np.testing.assert_allclose(gt.grad_F, gx + dy.T @ gy, rtol=1e-9, atol=1e-10)
    assert min(checked.values()) >= 5, checked  # both pieces of F were exercised


def test_constrained_defaults_unchanged_and_q_u_shift_follows_the_given_p():
    rng = np.random.default_rng(3)
    P = _spd(rng, 6, 0.5)
    base = problems.make("constrained_quadratic", seed=2, d=6, p=3)
    mine = problems.make("constrained_quadratic", seed=2, p=3, P=P)
    np.testing.assert_array_equal(mine.Q_l, base.Q_l)
    np.testing.assert_array_equal(mine.constraints.B, base.constraints.B)
    # Q_u = (drawn GGᵀ/d) + (λmax(P) + mu) I with the given P: the same draw, another shift.
    shift = np.linalg.eigvalsh(P)[-1] - np.linalg.eigvalsh(base.P)[-1]
    np.testing.assert_allclose(mine.Q_u - base.Q_u, shift * np.eye(6), atol=1e-12)


@pytest.mark.parametrize("params, message", [
    ({"Q_l": [[1.0, 0.0], [0.0, 0.0]]}, "'Q_l' must be positive definite (g strongly convex in y), got a 2 × 2 matrix "
                                        "with smallest eigenvalue 0"),
    ({"d": 2, "B": [[1.0, 1.0], [2.0, 2.0]]}, "'B' must be a matrix of full row rank (the feasible set is non-empty "
                                              "for every x and LICQ holds), got a 2 × 2 matrix of rank 1"),
    ({"d": 3, "constraints": "box", "b": [1.0]}, "'constraints' must be 'linear' when b is given, got 'box'"),
    ({"d": 3, "B": np.eye(3), "b": [1.0, 2.0]}, "'b' must be a vector of length 3 (p = 3 rows, d = 3), got a vector "
                                                "of length 2"),
])
def test_bad_constrained_matrices_give_one_line_errors(params, message):
    with pytest.raises(ParameterError) as err:
        problems.make("constrained_quadratic", **params)
    assert "\n" not in str(err.value) and message in str(err.value), str(err.value)


# ---------------------------------------------------------------- ground_truth and studies
def test_ground_truth_refuses_what_it_cannot_answer():
    p = problems.make("quadratic", dim_x=2, dim_y=2)
    with pytest.raises(ParameterError, match=r"^x: must be a vector of 2 finite numbers \(dim_x\), got shape \(3,\)$"):
        problems.ground_truth(p, [1.0, 2.0, 3.0])
    with pytest.raises(ParameterError, match="counting view"):
        problems.ground_truth(counted(p), [1.0, 2.0])
    online = problems.make("drifting_quadratic", dim_x=2, dim_y=2, T=5)
    with pytest.raises(ParameterError, match=r"^t: problem 'drifting_quadratic' is online; give the time step t in 1..5$"):
        problems.ground_truth(online, [0.0, 0.0])
    at3 = online.at(3)
    gt = problems.ground_truth(online, [0.5, -0.5], t=3)
    np.testing.assert_allclose(gt.grad_F, at3.grad_F(np.array([0.5, -0.5])), rtol=1e-14)


def test_a_study_takes_matrices_and_grids_of_them():
    A1, A2 = [[2.0, 0.0], [0.0, 1.0]], [[1.0, 0.5], [0.5, 1.0]]
    st = spec.validate({"name": "m", "problems": [{"name": "quadratic", "params": {"A": [A1, A2], "C": [[1.0], [0.0]]}}],
                        "algorithms": ["soba"], "budget": {"iterations": 5}, "seeds": 1})
    assert [pt.problem_params["A"] for pt in st.points] == [A1, A2]  # a list of matrices is a grid
    assert {(pt.problem_params["dim_x"], pt.problem_params["dim_y"]) for pt in st.points} == {(1, 2)}
    one = spec.validate({"name": "m", "problems": [{"name": "quadratic", "params": {"A": A1, "dim_x": 1}}],
                         "algorithms": ["soba"], "budget": {"iterations": 5}, "seeds": 1})
    assert len(one.points) == 1 and one.points[0].problem_params["A"] == A1  # one matrix is one value
    with pytest.raises(ParameterError, match=r"^problems\[0\]\.params\.A: must be positive definite"):
        spec.validate({"name": "m", "problems": [{"name": "quadratic", "params": {"A": [[1.0, 0.0], [0.0, -1.0]], "dim_x": 1}}],
                       "algorithms": ["soba"], "budget": {"iterations": 5}, "seeds": 1})
