"""constrained_quadratic and the exact QP solver: KKT, scipy cross-checks, oracles, noise, ground truth."""
import numpy as np
import pytest
import scipy.linalg as sla
from scipy.optimize import LinearConstraint, lsq_linear, minimize, nnls

import problems
from problems.qp import Polyhedron, box_pattern, kkt_residuals
from problems.shared.errors import ParameterError
from tests.oracle_checks import check_grad_F_fd, check_oracles, fd_gradient, rel_err


def _spd(rng, d, mu=0.1):
    G = rng.standard_normal((d, d))
    return G @ G.T / d + mu * np.eye(d)


def _scipy_qp(H, c, G, h):
    """Independent exact reference from scipy.optimize's own active-set solvers.

    A box is bounded least squares: ½yᵀHy + cᵀy = ½‖Lᵀy + L⁻¹c‖² + const (lsq_linear, BVLS). General
    independent rows go through the dual, min_λ≥0 ½λᵀMλ + rᵀλ with M = G H⁻¹Gᵀ = RᵀR, which is the
    non-negative least-squares problem min ‖Rλ + R⁻ᵀr‖ (nnls); then y = −H⁻¹(c + Gᵀλ).
    """
    L = np.linalg.cholesky(H)
    if box_pattern(G) is not None:
        d = H.shape[0]
        lo, hi = -h[d:], h[:d]
        res = lsq_linear(L.T, -sla.solve_triangular(L, c, lower=True), bounds=(lo, hi), method="bvls", tol=1e-15)
        return res.x
    Hinv = np.linalg.inv(H)
    M = G @ Hinv @ G.T
    r = h + G @ Hinv @ c
    R = np.linalg.cholesky(M).T
    lam = nnls(R, -sla.solve_triangular(R, r, trans="T"))[0]
    return -Hinv @ (c + G.T @ lam)


def _slsqp(H, c, G, h):
    """A second, iterative reference (accurate to about 1e-6)."""
    res = minimize(lambda y: 0.5 * y @ H @ y + c @ y, np.zeros(len(c)), jac=lambda y: H @ y + c, method="SLSQP",
                   constraints=[{"type": "ineq", "fun": lambda y: h - G @ y, "jac": lambda y: -G}],
                   options={"ftol": 1e-12, "maxiter": 1000})
    return res.x


# ---- the QP solver ----
@pytest.mark.parametrize("kind", ["general", "box"])
def test_qp_kkt_and_scipy_agreement(kind):
    rng = np.random.default_rng(11 if kind == "general" else 12)
    worst, n_active = 0.0, []
    for _ in range(12):
        d = int(rng.integers(3, 25))
        H, c = _spd(rng, d), 2.0 * rng.standard_normal(d)
        if kind == "box":
            r = rng.uniform(0.2, 1.0)
            G, h = np.vstack([np.eye(d), -np.eye(d)]), np.full(2 * d, r)
        else:
            m = int(rng.integers(1, d + 1))  # independent rows (the nnls reference needs M ≻ 0)
            G, h = rng.standard_normal((m, d)), 0.5 * rng.standard_normal(m)
        poly = Polyhedron(G)
        assert poly.is_box == (kind == "box")
        sol = poly.solve(H, c, h)
        res = kkt_residuals(H, c, G, h, sol.y, sol.lam)
        worst = max(worst, *res.values())
        n_active.append(sol.active.size)
        np.testing.assert_allclose(sol.y, _scipy_qp(H, c, G, h), atol=1e-9)
        np.testing.assert_allclose(sol.y, _slsqp(H, c, G, h), atol=1e-5)
        assert np.array_equal(sol.active, np.flatnonzero(sol.lam > 0))
    assert worst <= 1e-9, worst
    assert max(n_active) > 0 and min(n_active) < max(n_active)  # instances exercise different active sets


def test_qp_box_path_equals_dual_path_and_scipy_bounds():
    rng = np.random.default_rng(3)
    d = 30
    H, c = _spd(rng, d), 3.0 * rng.standard_normal(d)
    G, h = np.vstack([np.eye(d), -np.eye(d)]), np.ones(2 * d)
    poly = Polyhedron(G)
    box = poly.solve(H, c, h)
    dual = poly._solve_dual(H, c, h, None, 1e-13, start=None)
    np.testing.assert_allclose(box.y, dual.y, atol=1e-12)
    np.testing.assert_allclose(box.lam, dual.lam, atol=1e-10)
    np.testing.assert_allclose(box.y, _scipy_qp(H, c, G, h), atol=1e-12)
    assert 0 < box.active.size < d


def test_projection_and_multiplier_recovery():
    rng = np.random.default_rng(4)
    d, m = 12, 5
    G, h = rng.standard_normal((m, d)), 0.3 * rng.standard_normal(m)
    poly = Polyhedron(G)
    for _ in range(5):
        z = 2.0 * rng.standard_normal(d)
        y = poly.project(z, h)
        ref = minimize(lambda v: 0.5 * (v - z) @ (v - z), np.zeros(d), jac=lambda v: v - z,
                       constraints=[LinearConstraint(G, -np.inf, h)], method="trust-constr",
                       options={"gtol": 1e-12, "xtol": 1e-14, "maxiter": 5000})
        np.testing.assert_allclose(y, ref.x, atol=1e-6)
        # Multipliers from the gradient alone reproduce the projection's KKT point exactly.
        lam = poly.multipliers(y, y - z, h)
        res = kkt_residuals(np.eye(d), -z, G, h, y, lam)
        assert max(res.values()) <= 1e-10
    box = Polyhedron(np.vstack([np.eye(4), -np.eye(4)]))
    np.testing.assert_array_equal(box.project(np.array([2.0, -3.0, 0.5, 1.0]), np.ones(8)), [1.0, -1.0, 0.5, 1.0])
    assert box_pattern(np.array([[1.0, 1.0]])) is None and box_pattern(np.eye(3)) is not None


# ---- the problem ----
@pytest.mark.parametrize("constraints", ["linear", "box"])
def test_oracles_match_finite_differences_exact_and_noisy(constraints):
    p = problems.make("constrained_quadratic", seed=3, d=9, p=4, constraints=constraints)
    rng = np.random.default_rng(0)
    for _ in range(2):
        x, y = rng.standard_normal(9), rng.standard_normal(9)
        check_oracles(p, x, y, rng)
        batch = p.sample_batch(rng, 5)
        check_oracles(p, x, y, rng, batch=batch)
        # The dense oracles are the matrices of the product oracles, on the same batch.
        H = p.hessian_yy_g(x, y, batch)
        np.testing.assert_allclose(H, np.column_stack([p.hvp_yy_g(x, y, e, batch) for e in np.eye(9)]), atol=1e-14)
        np.testing.assert_allclose(p.jacobian_xy_g(x, y, batch),
                                   np.column_stack([p.cross_xy_g(x, y, e, batch) for e in np.eye(9)]), atol=1e-14)
        assert np.linalg.eigvalsh(H)[0] > 0.9  # μ = 1 minus a tiny diagonal perturbation


def test_noise_is_mean_zero_with_the_stated_variance():
    p = problems.make("constrained_quadratic", seed=5, d=6, p=3, noise=0.3)
    rng = np.random.default_rng(1)
    x, y = rng.standard_normal(6), rng.standard_normal(6)
    n = 4000
    draws = np.array([np.concatenate(p.grad_f(x, y, p.sample_batch(rng, 1)) + p.grad_g(x, y, p.sample_batch(rng, 1)))
                      for _ in range(n)])
    exact = np.concatenate(p.grad_f(x, y) + p.grad_g(x, y))
    # Per-coordinate noise std from the model: σ|x_i| on Q_u x, σ|y_i| (∇x f), σ|x_i + y_i| (∇y f), σ|y_i| (∇y g).
    sd = 0.3 * np.concatenate([np.hypot(x, y), np.abs(x + y), np.zeros(6), np.abs(y)])
    z = (draws.mean(axis=0) - exact) / np.where(sd > 0, sd / np.sqrt(n), 1.0)
    assert np.max(np.abs(z)) < 5.0, z  # 24 coordinates: a false alarm has probability ~1e-5
    np.testing.assert_allclose(draws.std(axis=0), sd, rtol=0.1, atol=1e-12)
    np.testing.assert_array_equal(draws[:, 12:18], np.tile(y, (n, 1)))  # ∇x g = y carries no noise
    # A batch of m draws averages them: the variance falls by m.
    big = np.array([p.grad_y_g(x, y, p.sample_batch(rng, 25)) for _ in range(2000)])
    np.testing.assert_allclose(big.std(axis=0), 0.3 * np.abs(y) / 5.0, rtol=0.1)
    values = np.array([p.f(x, y, p.sample_batch(rng, 1)) for _ in range(n)])
    assert abs(values.mean() - p.f(x, y)) < 5 * values.std() / np.sqrt(n)
    assert p.sample_batch(rng, 3).shape == (3, 3, 6) and p.batch_size(p.sample_batch(rng, 3)) == 3
    assert problems.make("constrained_quadratic", d=4, p=2, noise=0.0).sample_batch(rng, 3) is None


def test_dense_noise_oracles_are_consistent_with_the_stated_variance():
    # Dense noise: each sample adds E (i.i.d. N(0, σ²) entries) to every quadratic term, so the gradient of
    # g sees S = (E + Eᵀ)/2 and Var((S y)_i) = σ²/2 (‖y‖² + y_i²) per sample; a batch of m divides it by m.
    sigma, d = 0.2, 6  # σ√(2d) = 0.69 < μ = 1
    p = problems.make("constrained_quadratic", seed=5, d=d, p=3, noise=sigma, noise_model="dense")
    rng = np.random.default_rng(4)
    x, y = rng.standard_normal(d), rng.standard_normal(d)
    for m in (1, 3):
        batch = p.sample_batch(rng, m)
        assert p.batch_size(batch) == m
        check_oracles(p, x, y, rng, batch=batch)  # one sampled function: FD of its values match its gradients
        H = p.hessian_yy_g(x, y, batch)
        np.testing.assert_allclose(H, np.column_stack([p.hvp_yy_g(x, y, e, batch) for e in np.eye(d)]), atol=1e-13)
        np.testing.assert_allclose(H @ y + p.c_l + x, p.grad_y_g(x, y, batch), atol=1e-13)
        off = H - p.Q_l
        assert np.count_nonzero(np.abs(off - np.diag(np.diag(off))) > 0) == d * (d - 1)  # every entry perturbed
    n = 6000
    exact = p.grad_y_g(x, y)
    for m in (1, 4):
        draws = np.array([p.grad_y_g(x, y, p.sample_batch(rng, m)) for _ in range(n)])
        sd = sigma * np.sqrt((y @ y + y * y) / (2 * m))
        np.testing.assert_allclose(draws.std(axis=0), sd, rtol=0.06)
        assert np.max(np.abs(draws.mean(axis=0) - exact) / (sd / np.sqrt(n))) < 5.0
    # Dense noise of norm σ√(2d) must stay below μ: the sampled lower level stays strongly convex.
    with pytest.raises(ParameterError, match=r"'noise' must be below μ/√\(2d\) = 0.01118"):
        problems.make("constrained_quadratic", d=4000, noise=0.0112, noise_model="dense")
    big = problems.make("constrained_quadratic", seed=0, d=400, constraints="box", noise=0.03, noise_model="dense")
    Hs = big.hessian_yy_g(np.zeros(400), np.zeros(400), big.sample_batch(rng, 1))
    # λmin ≥ μ − ‖S‖ with ‖S‖ ≈ σ√(2d) = 0.85 for a GOE matrix (semicircle edge), measured.
    assert np.linalg.eigvalsh(Hs)[0] > 0.0
    assert np.linalg.norm(Hs - big.Q_l, 2) == pytest.approx(0.03 * np.sqrt(800), rel=0.1)


@pytest.mark.parametrize("constraints", ["linear", "box"])
def test_ground_truth_kkt_scipy_and_implicit_gradient(constraints):
    p = problems.make("constrained_quadratic", seed=7, d=12, p=6, constraints=constraints, noise=0.0)
    c = p.constraints
    rng = np.random.default_rng(2)
    checked = 0
    for _ in range(20):
        x = 1.5 * rng.standard_normal(12)
        ys, lam = p.y_star(x), p.lambda_star(x)
        G, h = -c.B, c.b - c.A @ x
        res = kkt_residuals(p.Q_l, p.c_l + x, G, h, ys, lam)
        assert max(res.values()) <= 1e-9
        np.testing.assert_allclose(ys, _scipy_qp(p.Q_l, p.c_l + x, G, h), atol=1e-9)
        slack = c.h(x, ys)
        a = np.flatnonzero(lam > 0)
        # Only where the active set is locally constant: strict complementarity with margins.
        if np.any(lam[a] < 1e-3) or np.any((lam == 0) & (slack > -1e-3)):
            continue
        checked += 1
        # Independent ∇F: differentiate the active KKT system [[H, −B_aᵀ], [B_a, 0]] as one linear solve.
        na = a.size
        K = np.block([[p.Q_l, -c.B[a].T], [c.B[a], np.zeros((na, na))]])
        rhs = np.vstack([-np.eye(12), c.A[a]])  # H dy − B_aᵀ dλ = −J ᵀ (J = I); B_a dy = A_a
        dy = np.linalg.solve(K, rhs)[:12]
        gx, gy = p.grad_f(x, ys)
        np.testing.assert_allclose(p.grad_F(x), gx + dy.T @ gy, atol=1e-9 * max(1.0, np.abs(gx).max()))
        check_grad_F_fd(p, x, rtol=1e-6, h=1e-6)
        F = 0.5 * x @ p.Q_u @ x + p.c_u @ x + 0.5 * ys @ p.P @ ys + x @ p.P @ ys
        assert p.F(x) == pytest.approx(F, rel=1e-12)
    assert checked >= 5


def test_box_constraints_and_seeded_reproducibility():
    p = problems.make("constrained_quadratic", seed=9, d=5, constraints="box")
    c = p.constraints
    assert not c.A.any() and np.array_equal(c.b, np.ones(10))
    np.testing.assert_array_equal(c.B, np.vstack([-np.eye(5), np.eye(5)]))
    assert np.all(np.abs(p.y_star(10.0 * np.ones(5))) <= 1.0 + 1e-12)
    a = problems.make("constrained_quadratic", seed=4, d=8, p=5)
    b = problems.make("constrained_quadratic", seed=4, d=8, p=5)
    other = problems.make("constrained_quadratic", seed=5, d=8, p=5)
    for name in ("Q_u", "Q_l", "P", "c_u", "c_l"):
        assert np.array_equal(getattr(a, name), getattr(b, name))
    for name in ("A", "B", "b"):
        assert np.array_equal(getattr(a.constraints, name), getattr(b.constraints, name))
    assert not np.array_equal(a.Q_l, other.Q_l)
    rng_a, rng_b = np.random.default_rng(0), np.random.default_rng(0)
    assert np.array_equal(a.sample_batch(rng_a, 4), b.sample_batch(rng_b, 4))
    # Every piece of F is strongly convex by construction (Q_u ⪰ P + μI).
    assert np.linalg.eigvalsh(a.Q_u - a.P)[0] >= 1.0 - 1e-9
    assert np.linalg.eigvalsh(a.Q_l)[0] >= 1.0 - 1e-12


def test_constraint_rows_are_independent_and_the_set_is_never_empty():
    p = problems.make("constrained_quadratic", seed=1, d=10, p=10, noise=0.0)
    assert np.linalg.matrix_rank(p.constraints.B) == 10
    for x in (np.zeros(10), 50.0 * np.ones(10)):
        assert p.constraints.violation(x, p.y_star(x)) <= 1e-9


@pytest.mark.parametrize("params, message", [
    ({"d": 0}, "'d' must be a positive integer"),
    ({"d": 5, "p": 6}, "'p' must be at most d = 5"),
    ({"constraints": "ball"}, "'constraints' must be one of 'linear', 'box'"),
    ({"noise": -0.1}, "'noise' must be a non-negative number"),
    ({"mu": 0}, "'mu' must be a positive number"),
    ({"sigma": 1}, "unknown parameter 'sigma'"),
])
def test_bad_parameters_give_one_clear_error(params, message):
    with pytest.raises(ParameterError, match=message) as err:
        problems.make("constrained_quadratic", **params)
    assert "\n" not in str(err.value)


def test_counting_view_hides_ground_truth():
    p = problems.make("constrained_quadratic", seed=0, d=4, p=2)
    view = problems.counted(p)
    x, y = view.initial_point()
    view.hessian_yy_g(x, y, view.sample_batch(np.random.default_rng(0), 7))
    assert view.counter.samples["hessian"] == 7 and view.constraints is p.constraints
    for name in ("y_star", "lambda_star", "grad_F"):
        with pytest.raises(AttributeError, match="ground truth"):
            getattr(view, name)
    assert rel_err(fd_gradient(p.F, x), p.grad_F(x)) < 1e-6
