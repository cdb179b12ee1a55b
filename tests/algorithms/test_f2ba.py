"""F2BA: exact when f is linear in y, the O(1/λ) fixed point x*_λ in closed form, F2SA with a constant
penalty, first-order oracle accounting, determinism."""
import numpy as np
import pytest

import algorithms
import problems
from problems.base import BilevelProblem
from tests.algorithms.stepping import build, trajectory

# Deterministic quadratic: inner spectrum [0.5, 1], ∇²F spectrum [1, 3.4].
QUAD = problems.make("quadratic", seed=0, dim_x=6, dim_y=8, mu=0.5, L=1.0, outer_curvature=1.0)
SUM = problems.make("quadratic", seed=1, dim_x=5, dim_y=6, mu=0.5, L=1.0, outer_curvature=1.0,
                    n_samples=48, rank=1)
# Paper ratios with L_g = 1: α = 1/L_g, λτ = 1/(2L_g); η below 2/L of ∇²L*_λ ≈ ∇²F.
STEPS = {"alpha": 1.0, "tau": 0.5, "eta": 0.3}


class LinearOuter(BilevelProblem):
    """g = ½yᵀHy + yᵀJx, f = bᵀy + (ρ/2)‖x‖²: y*(x) = −H⁻¹Jx, ∇F(x) = ρx − JᵀH⁻¹b (BASELINES.md §1)."""

    name = "linear_outer"

    def __init__(self, seed: int = 0, dx: int = 4, dy: int = 5, rho: float = 1.0) -> None:
        rng = np.random.default_rng(seed)
        q = np.linalg.qr(rng.standard_normal((dy, dy)))[0]
        self.H = (q * np.linspace(0.5, 1.0, dy)) @ q.T
        self.J = rng.standard_normal((dy, dx)) / np.sqrt(dy)
        self.b = rng.standard_normal(dy)
        self.rho, self.dim_x, self.dim_y = rho, dx, dy

    def f(self, x, y, batch=None):
        return float(self.b @ y + 0.5 * self.rho * x @ x)

    def g(self, x, y, batch=None):
        return float(0.5 * y @ self.H @ y + y @ self.J @ x)

    def grad_f(self, x, y, batch=None):
        return self.rho * x, self.b.copy()

    def grad_g(self, x, y, batch=None):
        return self.J.T @ y, self.H @ y + self.J @ x

    def hvp_yy_g(self, x, y, v, batch=None):
        return self.H @ v

    def cross_xy_g(self, x, y, v, batch=None):
        return self.J.T @ v

    def initial_point(self):
        return np.zeros(self.dim_x), np.zeros(self.dim_y)

    def y_star(self, x):
        return -np.linalg.solve(self.H, self.J @ x)

    def grad_F(self, x):
        return self.rho * x - self.J.T @ np.linalg.solve(self.H, self.b)

    def x_opt(self):
        return self.J.T @ np.linalg.solve(self.H, self.b) / self.rho


# ---------------------------------------------------------------------------- f linear in y: exact
@pytest.mark.parametrize("lam", [0.5, 10.0])
def test_one_step_is_an_exact_hypergradient_step_when_f_is_linear_in_y(lam):
    # y_λ − y* = −H⁻¹b/λ, so ∇x f + λ Jᵀ(y_λ − y*) = ρx − JᵀH⁻¹b = ∇F(x) for every λ.
    p = LinearOuter()
    alg = build("f2ba", p, {**STEPS, "lam": lam, "inner_steps": 3})
    x = np.random.default_rng(1).standard_normal(p.dim_x)
    alg.x, alg.z = x.copy(), p.y_star(x)
    alg.y = -np.linalg.solve(p.H, p.J @ x + p.b / lam)  # y_λ(x): the K steps leave both copies in place
    alg.step()
    np.testing.assert_allclose(alg.x, x - STEPS["eta"] * p.grad_F(x), rtol=0, atol=1e-13)


@pytest.mark.parametrize("lam", [0.5, 10.0])
def test_linear_outer_problem_converges_to_x_star_for_any_penalty(lam):
    p = LinearOuter()
    xs, _ = trajectory("f2ba", p, {**STEPS, "lam": lam}, 200)
    assert np.linalg.norm(xs[-1] - p.x_opt()) < 1e-12  # measured 1.1e-15 (λ = 0.5), 1.2e-14 (λ = 10)


# ---------------------------------------------------------------------------- the O(1/λ) fixed point
def x_star_lambda(p, lam):
    """Zero of ∇L*_λ(x) = m x + c − λCᵀ(y_λ(x) − y*(x)) on the quadratic family (∇x g = −Cᵀy), with
    y_λ(x) = (A + P/λ)⁻¹(Cx − a + Pe/λ) and y*(x) = A⁻¹(Cx − a); ∇L*_λ is affine: M x + r."""
    B, A_inv = np.linalg.inv(p.A + p.P / lam), np.linalg.inv(p.A)
    M = p.m * np.eye(p.dim_x) - lam * p.C.T @ (B - A_inv) @ p.C
    r = p.c - lam * p.C.T @ (B @ (p.P @ p.e / lam - p.a) + A_inv @ p.a)
    return -np.linalg.solve(M, r)


def test_fixed_point_is_x_star_lambda_and_its_bias_halves_when_lambda_doubles():
    x_star = QUAD.x_opt()
    lams = (10.0, 20.0, 40.0, 80.0)
    errors = []
    for lam in lams:
        xs, _ = trajectory("f2ba", QUAD, {**STEPS, "lam": lam}, 300)
        target = x_star_lambda(QUAD, lam)
        assert np.linalg.norm(xs[-1] - target) < 1e-11  # measured ≤ 1.7e-14
        errors.append(np.linalg.norm(target - x_star))
    ratios = np.array(errors[1:]) / np.array(errors[:-1])
    # Measured ‖x*_λ − x*‖ = 0.124, 0.065, 0.033, 0.017: ratios 0.523, 0.512, 0.506, tending to ½ (O(1/λ)).
    assert errors[0] > 0.1
    assert np.all((ratios > 0.49) & (ratios < 0.54)) and np.all(np.diff(ratios) < 0), ratios


# ---------------------------------------------------------------------------- F2SA with constant λ
@pytest.mark.parametrize("shared", [False, True])
def test_f2ba_is_f2sa_with_a_constant_penalty(shared):
    f2ba = {"lam": 7.0, "inner_steps": 4, "alpha": 0.6, "tau": 0.3, "eta": 0.2, "batch_size": 4,
            "shared_batch": shared}
    f2sa = {"lam0": 7.0, "lam_step": 0.0, "inner_steps": 4, "alpha": 0.3, "beta": 0.6, "gamma": 0.2,
            "batch_size": 4, "shared_batch": shared}
    a, alg_a = trajectory("f2ba", SUM, f2ba, 25, seed=3)
    b, alg_b = trajectory("f2sa", SUM, f2sa, 25, seed=3)
    np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(alg_a.z, alg_b.z)


def test_z_is_carried_over_not_reset_to_y():
    # Algorithm 1: z_0 = y_0 once, then z_{t+1} = z_t^K; after one outer step z ≠ y.
    _, alg = trajectory("f2ba", QUAD, {**STEPS, "inner_steps": 2}, 1)
    assert np.linalg.norm(alg.z - alg.y) > 1e-3
    z = alg.z.copy()
    for _ in range(2):  # the next step starts from z, as plain gradient descent on g(x, ·) would
        z = z - STEPS["alpha"] * QUAD.grad_y_g(alg.x, z)
    alg.step()
    np.testing.assert_allclose(alg.z, z, rtol=1e-14)


# ---------------------------------------------------------------------------- accounting, flags, determinism
@pytest.mark.parametrize("batch, per_call", [(None, 48), (4, 4)])
def test_first_order_oracles_only_2k_plus_2_of_g_and_k_plus_1_of_f(batch, per_call):
    alg = build("f2ba", SUM, {"inner_steps": 3, "batch_size": batch})
    for _ in range(5):
        before = alg.problem.counter.snapshot()
        alg.step()
        after = alg.problem.counter.snapshot()
        d = {k: after[f"calls/{k}"] - before[f"calls/{k}"] for k in ("grad_f", "grad_g", "hvp", "cross", "f", "g")}
        assert d == {"grad_f": 3 + 1, "grad_g": 2 * 3 + 2, "hvp": 0, "cross": 0, "f": 0, "g": 0}
        assert after["samples/total"] - before["samples/total"] == 12 * per_call


def test_flags_declared_step_sizes_and_defaults():
    d = algorithms.available()["f2ba"]
    assert (d["first_order"], d["stochastic"], d["loops"], d["finite_sum"]) == (True, True, "double", False)
    assert d["step_sizes"] == ["alpha", "tau", "eta"]
    defaults = {k: v["default"] for k, v in d["params"].items()}
    assert defaults == {"batch_size": None, "lam": 10.0, "inner_steps": 10, "alpha": 0.1, "tau": 0.05, "eta": 0.1,
                        "shared_batch": False}


def test_same_seed_same_iterates_other_seed_other_iterates():
    cfg = {"batch_size": 4, "inner_steps": 3}
    a, _ = trajectory("f2ba", SUM, cfg, 20, seed=2)
    b, _ = trajectory("f2ba", SUM, cfg, 20, seed=2)
    c, _ = trajectory("f2ba", SUM, cfg, 20, seed=3)
    np.testing.assert_array_equal(a, b)
    assert np.max(np.abs(a - c)) > 1e-4
