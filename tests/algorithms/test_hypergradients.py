"""Every hypergradient estimator against its own closed form on a 2-D quadratic.

On g = ½yᵀAy − yᵀCx + aᵀy, f = ½(y−e)ᵀP(y−e) + ½m‖x‖² + cᵀx: H = A, J = −Cᵀ, ∇y g = Ay − Cx + a,
∇y f = P(y − e), so each estimator is a matrix polynomial or a solve, written out here with matrix
powers and np.linalg.solve, independently of the implementation.
"""
import numpy as np
import pytest

import algorithms
import problems
from algorithms.f2sa import penalty_hypergradient
from algorithms.hypergradient import cg_solve, fixed_point_solve, itd_reverse, neumann_series

TOL = 1e-10
P2 = problems.make("quadratic", seed=11, dim_x=2, dim_y=2, outer_curvature=0.3)
RNG = np.random.default_rng(0)
X, Y, V0 = RNG.standard_normal(2), RNG.standard_normal(2), RNG.standard_normal(2)


def close(a, b, tol=TOL):
    np.testing.assert_allclose(a, b, rtol=0, atol=tol * max(1.0, np.abs(b).max()))


def mpow(M, k):
    return np.linalg.matrix_power(M, k)


def gd_closed_form(p, x, y0, alpha, T):
    """y_T of T steps y ← y − α(Ay − Cx + a): (I−αA)^T y0 + α Σ_{j<T} (I−αA)^j (Cx − a)."""
    M = np.eye(p.dim_y) - alpha * p.A
    return mpow(M, T) @ y0 + alpha * sum(mpow(M, j) for j in range(T)) @ (p.C @ x - p.a)


def krylov_cg(A, b, v0, K):
    """The K-th CG iterate: the A-norm minimiser over v0 + span{r0, A r0, ..., A^{K−1} r0}."""
    r0 = b - A @ v0
    V = np.column_stack([mpow(A, j) @ r0 for j in range(K)])
    return v0 + V @ np.linalg.solve(V.T @ A @ V, V.T @ r0)


def counting_hvp(A):
    calls = []

    def hvp(v):
        calls.append(v.copy())
        return A @ v
    return hvp, calls


# ---- the estimators as pure functions ----

@pytest.mark.parametrize("K, warm", [(1, False), (1, True), (2, False), (2, True)])
def test_cg_is_the_krylov_minimiser(K, warm):
    b = P2.P @ (Y - P2.e)
    hvp, calls = counting_hvp(P2.A)
    v = cg_solve(hvp, b, K, V0 if warm else None)
    close(v, krylov_cg(P2.A, b, V0 if warm else np.zeros(2), K))
    assert len(calls) == K + warm  # a warm start costs one HVP for the initial residual
    if K == 2:
        close(v, np.linalg.solve(P2.A, b))  # CG is exact after dim_y iterations


def test_cg_on_a_larger_system_and_early_exit_returns_the_latest_iterate():
    p = problems.make("quadratic", seed=2, dim_x=3, dim_y=7)
    b = RNG.standard_normal(7)
    for K in (1, 3, 5):
        close(cg_solve(lambda v: p.A @ v, b, K), krylov_cg(p.A, b, np.zeros(7), K), 1e-9)
    # Asking for more iterations than needed stops at the exact solution, not at an earlier iterate.
    v = cg_solve(lambda v: p.A @ v, b, 50, tol=1e-13)
    close(v, np.linalg.solve(p.A, b), 1e-12)


def test_fixed_point_is_the_matrix_polynomial():
    eta, K = 0.7, 5
    b = P2.P @ (Y - P2.e)
    M = np.eye(2) - eta * P2.A
    expected = mpow(M, K) @ V0 + eta * sum(mpow(M, j) for j in range(K)) @ b
    hvp, calls = counting_hvp(P2.A)
    close(fixed_point_solve(hvp, b, eta, K, V0), expected)
    assert len(calls) == K


@pytest.mark.parametrize("Q", [0, 1, 6])
def test_neumann_series_is_stocbio_formula(Q):
    eta = 0.6
    b = P2.P @ (Y - P2.e)
    M = np.eye(2) - eta * P2.A
    hvp, calls = counting_hvp(P2.A)
    close(neumann_series(hvp, b, eta, Q), eta * sum(mpow(M, q) for q in range(Q + 1)) @ b)
    assert len(calls) == Q


def test_neumann_series_with_distinct_minibatch_hessians_follows_the_paper_order():
    # η Σ_{q=0}^{Q} Π_{j=Q−q+1}^{Q} (I − ηH_j) b: the q-th term applies H_Q first, then H_{Q−1}, ...
    Q, eta = 4, 0.3
    Hs = {j: (lambda G: G @ G.T + np.eye(3))(RNG.standard_normal((3, 3))) for j in range(1, Q + 1)}
    b = RNG.standard_normal(3)
    expected = np.zeros(3)
    for q in range(Q + 1):
        prod = np.eye(3)
        for j in range(Q - q + 1, Q + 1):  # left-to-right product Π_{j=Q−q+1}^{Q}
            prod = prod @ (np.eye(3) - eta * Hs[j])
        expected += prod @ b
    order = iter(range(Q, 0, -1))
    close(neumann_series(lambda v: Hs[next(order)] @ v, b, eta, Q), eta * expected)


@pytest.mark.parametrize("T, K", [(6, None), (6, 6), (6, 2), (9, 1)])
def test_itd_reverse_is_the_unrolled_derivative(T, K):
    p, alpha = P2, 0.4
    M = np.eye(2) - alpha * p.A
    yT = gd_closed_form(p, X, Y, alpha, T)
    b = p.P @ (yT - p.e)
    depth = T if K is None else K
    # d y_T / d x through the last K steps only: α Σ_{j<K} M^j C; J = −Cᵀ so −αJ = αCᵀ.
    expected = p.m * X + p.c + alpha * p.C.T @ sum(mpow(M, j) for j in range(depth)) @ b
    calls = {"grad": 0, "hvp": 0, "cross": 0}

    def tick(kind, value):
        calls[kind] += 1
        return value
    est, y_out = itd_reverse(
        lambda y, bt: tick("grad", p.grad_y_g(X, y)),
        lambda y, v, bt: tick("hvp", p.hvp_yy_g(X, y, v)),
        lambda y, v, bt: tick("cross", p.cross_xy_g(X, y, v)),
        lambda y: p.grad_f(X, y), Y, alpha, T, K)
    close(y_out, yT)
    close(est, expected)
    assert calls == {"grad": T, "hvp": depth, "cross": depth}
    if K is None:  # the full unroll is the exact gradient of x ↦ f(x, y_T(x)): check against differences
        FT = lambda z: p.f(z, gd_closed_form(p, z, Y, alpha, T))  # noqa: E731
        h = 1e-6
        fd = np.array([(FT(X + h * u) - FT(X - h * u)) / (2 * h) for u in np.eye(2)])
        np.testing.assert_allclose(est, fd, rtol=1e-7)


def penalty_closed_form(p, x, lam):
    """∇x f(y_λ) + λ(∇x g(y_λ) − ∇x g(y*)), y_λ = argmin f + λg, y* = argmin g; ∇x g(x, y) = −Cᵀy."""
    y_lam = np.linalg.solve(p.P + lam * p.A, p.P @ p.e + lam * (p.C @ x - p.a))
    y_star = np.linalg.solve(p.A, p.C @ x - p.a)
    return p.m * x + p.c + lam * (-p.C.T @ y_lam + p.C.T @ y_star), y_lam, y_star


@pytest.mark.parametrize("lam", [0.5, 3.0, 40.0])
def test_f2sa_penalty_hypergradient_with_exact_inner_solves(lam):
    p = P2
    expected, y_lam, y_star = penalty_closed_form(p, X, lam)
    # Gradient steps of size 1/L on each inner problem converge linearly; 3000 reach machine precision.
    L_y = np.linalg.eigvalsh(p.P + lam * p.A)[-1]
    est, y, z = penalty_hypergradient(
        lambda y: p.grad_y_f(X, y), lambda y: p.grad_f(X, y)[0],
        lambda y, b: p.grad_y_g(X, y, b), lambda y, b: p.grad_g(X, y, b)[0], lambda: None,
        Y, Y, lam, 1.0 / L_y, 1.0 / np.linalg.eigvalsh(p.A)[-1], 3000)
    close(y, y_lam)
    close(z, y_star)
    close(est, expected, 1e-9 if lam > 10 else TOL)  # λ multiplies the inner residual


def test_f2sa_penalty_bias_is_first_order_in_one_over_lambda():
    # λ(∇L*_λ − ∇F) → −Cᵀ A⁻¹ P A⁻¹ P (y* − e): the O(1/λ) bias the increasing λ removes.
    p = P2
    y_star = np.linalg.solve(p.A, p.C @ X - p.a)
    limit = -p.C.T @ np.linalg.solve(p.A, p.P @ np.linalg.solve(p.A, p.P @ (y_star - p.e)))
    for lam in (1e3, 1e4):
        est = penalty_closed_form(p, X, lam)[0]
        np.testing.assert_allclose(lam * (est - p.grad_F(X)), limit, rtol=50 / lam)


# ---- the same estimators inside one step of each algorithm ----

def one_step(name, cfg, p=P2):
    alg = algorithms.get(name)(problems.counted(p), algorithms.make_config(name, cfg), np.random.default_rng(0))
    x0, y0 = alg.x.copy(), alg.y.copy()
    alg.step()
    return alg, x0, y0


def test_aid_cg_step():
    T, K, alpha, gamma = 4, 1, 0.5, 0.3
    alg, x0, y0 = one_step("aid_cg", {"inner_steps": T, "cg_steps": K, "alpha": alpha, "gamma": gamma})
    yT = gd_closed_form(P2, x0, y0, alpha, T)
    v = krylov_cg(P2.A, P2.P @ (yT - P2.e), np.zeros(2), K)
    close(alg.y, yT)
    close(alg.v, v)
    close(alg.x, x0 - gamma * (P2.m * x0 + P2.c + P2.C.T @ v))


def test_aid_fp_step():
    T, K, alpha, eta, gamma = 3, 4, 0.5, 0.8, 0.3
    alg, x0, y0 = one_step("aid_fp", {"inner_steps": T, "fp_steps": K, "alpha": alpha, "eta": eta, "gamma": gamma})
    yT = gd_closed_form(P2, x0, y0, alpha, T)
    M = np.eye(2) - eta * P2.A
    v = eta * sum(mpow(M, j) for j in range(K)) @ P2.P @ (yT - P2.e)
    close(alg.v, v)
    close(alg.x, x0 - gamma * (P2.m * x0 + P2.c + P2.C.T @ v))


def test_itd_step_truncated():
    T, K, alpha, gamma = 7, 3, 0.4, 0.3
    alg, x0, y0 = one_step("itd", {"inner_steps": T, "truncate": K, "alpha": alpha, "gamma": gamma})
    yT = gd_closed_form(P2, x0, y0, alpha, T)
    M = np.eye(2) - alpha * P2.A
    est = P2.m * x0 + P2.c + alpha * P2.C.T @ sum(mpow(M, j) for j in range(K)) @ P2.P @ (yT - P2.e)
    close(alg.y, yT)
    close(alg.x, x0 - gamma * est)


def test_stocbio_step():
    T, Q, alpha, eta, gamma = 5, 6, 0.5, 0.7, 0.3
    alg, x0, y0 = one_step("stocbio", {"inner_steps": T, "neumann_terms": Q, "alpha": alpha, "eta": eta,
                                       "gamma": gamma})
    yT = gd_closed_form(P2, x0, y0, alpha, T)
    M = np.eye(2) - eta * P2.A
    v = eta * sum(mpow(M, q) for q in range(Q + 1)) @ P2.P @ (yT - P2.e)
    close(alg.x, x0 - gamma * (P2.m * x0 + P2.c + P2.C.T @ v))


def test_amigo_step():
    T, Kv, alpha, eta, gamma = 5, 3, 0.5, 0.7, 0.3
    alg, x0, y0 = one_step("amigo", {"inner_steps": T, "v_steps": Kv, "alpha": alpha, "eta": eta, "gamma": gamma})
    yT = gd_closed_form(P2, x0, y0, alpha, T)
    M = np.eye(2) - eta * P2.A
    v = eta * sum(mpow(M, j) for j in range(Kv)) @ P2.P @ (yT - P2.e)  # warm start from v = 0
    close(alg.x, x0 - gamma * (P2.m * x0 + P2.c + P2.C.T @ v))


def test_soba_step():
    rho, gamma = 0.5, 0.3
    p = P2
    alg = algorithms.get("soba")(problems.counted(p), algorithms.make_config("soba", {"rho": rho, "gamma": gamma}),
                                 np.random.default_rng(0))
    alg.x, alg.y, alg.v = X.copy(), Y.copy(), V0.copy()
    alg.step()
    close(alg.y, Y - rho * (p.A @ Y - p.C @ X + p.a))
    close(alg.v, V0 - rho * (p.A @ V0 + p.P @ (Y - p.e)))
    close(alg.x, X - gamma * (-p.C.T @ V0 + p.m * X + p.c))


def test_f2sa_step_with_long_inner_loops_uses_the_penalty_hypergradient():
    lam, gamma = 5.0, 0.3
    alg, x0, _ = one_step("f2sa", {"inner_steps": 4000, "alpha": 0.5, "beta": 0.5, "gamma": gamma,
                                   "lam0": lam, "lam_step": 2.0})
    expected, y_lam, y_star = penalty_closed_form(P2, x0, lam)
    close(alg.y, y_lam)
    close(alg.z, y_star)
    close(alg.x, x0 - gamma * expected, 1e-9)
    assert alg.lam == lam + 2.0


@pytest.mark.parametrize("warm", [True, False])
def test_aid_cg_second_step_starts_cg_from_the_previous_v_when_warm(warm):
    T, alpha, gamma = 2, 0.5, 0.3
    cfg = {"inner_steps": T, "cg_steps": 1, "alpha": alpha, "gamma": gamma, "warm_start": warm}
    alg, x0, y0 = one_step("aid_cg", cfg)
    x1, y1, v1 = alg.x.copy(), alg.y.copy(), alg.v.copy()
    alg.step()
    y2 = gd_closed_form(P2, x1, y1, alpha, T)
    v2 = krylov_cg(P2.A, P2.P @ (y2 - P2.e), v1 if warm else np.zeros(2), 1)
    close(alg.v, v2)
    close(alg.x, x1 - gamma * (P2.m * x1 + P2.c + P2.C.T @ v2))
