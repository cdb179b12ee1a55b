"""BOME: the paper's toys reach their optima, λ against its formula, a quadratic, the stochastic form."""
import numpy as np
import pytest

import algorithms
import problems
from algorithms.bome import BOME, bome_lambda
from problems.shared.errors import ParameterError


def run(problem, config=None, iterations=100, seed=0):
    """Drive BOME through the run loop; return the run (algorithm state) and its last record."""
    r = algorithms.Run("bome", problem, config or {}, seed=seed, budget={"iterations": iterations})
    records = list(r.records())
    assert records[-1]["status"] == "finished"
    return r, records[-1]


def one_step(problem, config, x, y):
    """A BOME instance on `problem` placed at (x, y), after one step."""
    alg = BOME(problems.counted(problem), BOME.Config.from_dict(config), np.random.default_rng(0))
    alg.x, alg.y = np.array(x, float), np.array(y, float)
    alg.step()
    return alg


# ---- the paper's toys, paper defaults (η 0.5, T 10, ξ = α = 0.05; 0.5 on the non-unique toy) ----

@pytest.mark.parametrize("start", [1, 2, 3])
def test_coreset_reaches_the_hull_projection_from_each_start(start):
    p = problems.make("coreset_toy", start=start)
    r, rec = run(p, iterations=5000)  # the paper's iteration count
    # Measured at 5000: ‖y − y_opt‖ 0.0245-0.0246, ‖y*(x) − y_opt‖ 0.0138-0.0141, F − F_inf 0.0064-0.0065.
    assert rec["y_opt_dist"] < 0.03
    assert rec["y_star_opt_dist"] < 0.02
    assert 0 < rec["F_gap"] < 0.01
    assert 0 <= rec["diag/q_hat"] < 2e-3  # the lower-level proxy q̂ is driven (near) zero
    start_gap = problems.make("coreset_toy", start=start).metrics(*p.initial_point())["y_opt_dist"]
    assert start_gap > 1.5  # from ≥ 1.5 away (start 3: 1.62)


def test_minimax_reaches_the_origin():
    p = problems.make("minimax_toy")
    r, rec = run(p, iterations=500)
    # Measured: |x| 1.5e-5, |y| 6.4e-6 after 500 steps from (4, 4); F = 10|x|.
    assert abs(r.algorithm.x[0]) < 1e-4 and abs(r.algorithm.y[0]) < 1e-4
    assert rec["F"] < 1e-3


def test_nonunique_reaches_the_optimum_with_the_papers_steps():
    p = problems.make("nonunique_toy")
    r, rec = run(p, {"xi": 0.5, "alpha": 0.5}, iterations=200)
    # Measured: exact to machine precision after ~200 steps.
    assert abs(r.algorithm.x[0] - 1) < 1e-8
    assert np.linalg.norm(r.algorithm.y - p.y_opt) < 1e-8
    assert rec["F"] < 1e-16


@pytest.mark.parametrize("name, config", [("coreset_toy", {}), ("minimax_toy", {}),
                                          ("nonunique_toy", {"xi": 0.5, "alpha": 0.5}),
                                          ("quadratic", {"T": 3, "phi": "value"})])
def test_first_order_and_oracle_counts_per_step(name, config):
    K, T = 7, config.get("T", 10)
    _, rec = run(problems.make(name), config, iterations=K)
    assert rec["calls/hvp"] == rec["calls/cross"] == rec["calls/hessian"] == 0
    assert rec["calls/grad_g"] == K * (T + 2)  # T inner steps, ∇g at (x, y) and at (x, ŷ)
    assert rec["calls/grad_f"] == K
    assert rec["calls/g"] == 2 * K  # q̂ = g(x, y) − g(x, ŷ)
    assert rec["calls/f"] == 0


def test_value_calls_are_skipped_when_q_is_not_needed():
    _, rec = run(problems.make("coreset_toy"), {"track_q": False}, iterations=5)
    assert rec["calls/g"] == 0 and "diag/q_hat" not in rec and "diag/lambda" in rec


# ---- λ on hand-built states ----

def _expected_step(p, x, y, T, alpha, eta, phi="grad_norm", eps=0.0):
    """Independent computation of ŷ, ∇q̂, φ, λ and the update direction from the raw oracles."""
    y_hat = y.copy()
    for _ in range(T):
        y_hat = y_hat - alpha * p.grad_g(x, y_hat)[1]
    fx, fy = p.grad_f(x, y)
    gx, gy = p.grad_g(x, y)
    dq = np.concatenate([gx - p.grad_g(x, y_hat)[0], gy])
    df = np.concatenate([fx, fy])
    q = p.g(x, y) - p.g(x, y_hat)
    ph = eta * (dq @ dq if phi == "grad_norm" else q)
    raw = (ph - df @ dq) / (dq @ dq + eps)
    return max(raw, 0.0), raw, df + max(raw, 0.0) * dq, q


@pytest.mark.parametrize("config", [{}, {"eta": 0.9, "T": 3, "alpha": 0.2}, {"phi": "value"}, {"eps": 1e-4}])
def test_lambda_equals_its_formula_on_a_hand_built_state(config):
    p = problems.make("coreset_toy")
    rng = np.random.default_rng(3)
    x, y = rng.standard_normal(4), 2 * rng.standard_normal(2)
    c = BOME.Config.from_dict(config)
    lam, raw, d, q = _expected_step(p, x, y, c.T, c.alpha, c.eta, c.phi, c.eps)
    alg = one_step(p, config, x, y)
    assert raw > 0 and alg.lam == pytest.approx(lam, rel=1e-12)
    assert alg.q_hat == pytest.approx(q, rel=1e-12)
    np.testing.assert_allclose(alg.x, x - c.xi * d[:4], rtol=1e-13)
    np.testing.assert_allclose(alg.y, y - c.xi * d[4:], rtol=1e-13)


def test_separate_outer_and_inner_steps():
    p = problems.make("coreset_toy")
    x, y = np.array([0.3, -0.2, 0.1, 0.5]), np.array([1.0, 2.0])
    lam, _, d, _ = _expected_step(p, x, y, 10, 0.05, 0.5)
    alg = one_step(p, {"xi_x": 0.3, "xi_y": 0.01}, x, y)
    np.testing.assert_allclose(alg.x, x - 0.3 * d[:4], rtol=1e-13)
    np.testing.assert_allclose(alg.y, y - 0.01 * d[4:], rtol=1e-13)


def test_lambda_is_clipped_at_zero():
    # Non-unique toy at x = 0, y = (0.1, 5): ⟨∇f, ∇q̂⟩ ≈ 0.41 exceeds φ = η‖∇q̂‖² ≈ 0.01.
    p = problems.make("nonunique_toy")
    x, y = np.array([0.0]), np.array([0.1, 5.0])
    lam, raw, d, _ = _expected_step(p, x, y, 10, 0.5, 0.5)
    assert raw < -10 and lam == 0
    alg = one_step(p, {"xi": 0.5, "alpha": 0.5}, x, y)
    assert alg.lam == 0 and alg.grad_q_norm > 0.1
    fx, fy = p.grad_f(x, y)
    np.testing.assert_allclose(np.concatenate([alg.x, alg.y]), np.concatenate([x - 0.5 * fx, y - 0.5 * fy]), rtol=1e-15)


def test_lambda_is_zero_when_grad_q_vanishes():
    # y₁ = x makes ∇y g = 0, so ŷ = y and ∇q̂ = 0: the step is plain gradient descent on f.
    p = problems.make("nonunique_toy")
    x, y = np.array([0.4]), np.array([0.4, 3.0])
    alg = one_step(p, {"xi": 0.5, "alpha": 0.5}, x, y)
    assert alg.lam == 0 and alg.grad_q_norm == 0 and alg.q_hat == 0
    fx, fy = p.grad_f(x, y)
    np.testing.assert_array_equal(alg.x, x - 0.5 * fx)
    np.testing.assert_array_equal(alg.y, y - 0.5 * fy)
    assert bome_lambda(np.ones(3), np.zeros(3), 0.0, eps=1e-4) == 0.0
    assert bome_lambda(np.array([1.0, 0.0]), np.array([0.0, 2.0]), 0.5 * 4) == pytest.approx(0.5)


# ---- a well-conditioned quadratic ----

def test_quadratic_approaches_its_optimum_with_a_step_size_bias():
    p = problems.make("quadratic", dim_x=5, dim_y=5, mu=0.5)
    x_opt = p.x_opt()
    F_opt, F0 = p.F(x_opt), p.F(np.zeros(5))
    # α = 1/L (L = 1, the inner Hessian's largest eigenvalue), ξ 0.05, T 10, η 0.5.
    r, rec = run(p, {"alpha": 1.0}, iterations=2000)
    d05 = np.linalg.norm(r.algorithm.x - x_opt)
    # Measured: F − F* 0.0044 (from 4.97), ‖x − x_opt‖ 0.170, ‖y − y*(x)‖ 0.114.
    assert F0 - F_opt > 4.9
    assert rec["F"] - F_opt < 0.01
    assert d05 < 0.25
    # The end point is a fixed-step equilibrium: its distance to x_opt scales with ξ (0.332 at ξ = 0.1).
    r2, _ = run(p, {"alpha": 1.0, "xi": 0.1}, iterations=1500)
    ratio = np.linalg.norm(r2.algorithm.x - x_opt) / d05
    assert 1.8 < ratio < 2.2


def test_quadratic_with_alpha_equal_xi_stalls_on_inexact_inner_points():
    # With α = ξ = 0.05 the T = 10 inner steps contract the slowest inner direction only by
    # (1 − αμ)^T = 0.78, so ŷ is far from y*(x) and q̂ misjudges feasibility: measured F − F* 1.91.
    p = problems.make("quadratic", dim_x=5, dim_y=5, mu=0.5)
    _, rec = run(p, iterations=1000)
    assert 1.5 < rec["F"] - p.F(p.x_opt()) < 2.5


# ---- stochastic form ----

def test_stochastic_form_uses_minibatches_and_is_seeded():
    p = problems.make("quadratic", seed=0, dim_x=5, dim_y=5, mu=0.5, n_samples=64)
    cfg = {"alpha": 0.3, "batch_size": 16}
    K = 2000
    r, rec = run(p, cfg, iterations=K, seed=1)
    assert rec["samples/grad_g"] == 16 * K * 12 and rec["samples/grad_f"] == 16 * K
    assert rec["samples/g"] == 16 * K * 2 and rec["calls/hvp"] == 0
    # Measured F − F*: 1.04 from 4.97 (seed 1); the noisy ∇q̂ leaves a bias (full batch: 0.025).
    gap = rec["F"] - p.F(p.x_opt())
    assert gap < 1.5
    r_same, _ = run(p, cfg, iterations=50, seed=1)
    r_again, _ = run(p, cfg, iterations=50, seed=1)
    r_other, _ = run(p, cfg, iterations=50, seed=2)
    assert np.array_equal(r_same.algorithm.x, r_again.algorithm.x)
    assert not np.array_equal(r_same.algorithm.x, r_other.algorithm.x)
    # Full batch on the finite sum reproduces the deterministic problem's trajectory.
    r_full, _ = run(p, {"alpha": 0.3}, iterations=50)
    r_det, _ = run(problems.make("quadratic", seed=0, dim_x=5, dim_y=5, mu=0.5), {"alpha": 0.3}, iterations=50)
    np.testing.assert_allclose(r_full.algorithm.x, r_det.algorithm.x, rtol=1e-10)


# ---- contract ----

def test_declarations_and_bad_config():
    d = algorithms.available()["bome"]
    assert d["first_order"] and d["stochastic"] and d["step_sizes"] == ["xi", "alpha"]
    assert d["params"]["eta"]["default"] == 0.5 and d["params"]["T"]["default"] == 10
    assert d["params"]["eps"]["default"] == 0.0
    for bad, msg in [({"xi": 0}, "'xi' must be a positive number"), ({"T": 0}, "'T' must be a positive integer"),
                     ({"phi": "q"}, "'phi' must be one of 'grad_norm', 'value'"),
                     ({"eps": -1.0}, "'eps' must be a non-negative number")]:
        with pytest.raises(ParameterError, match=msg) as err:
            algorithms.Run("bome", problems.make("coreset_toy"), bad)
        assert "\n" not in str(err.value) and "algorithm 'bome'" in str(err.value)


def test_checkpoint_resumes_bit_identically():
    p = problems.make("coreset_toy", start=2)
    a = algorithms.Run("bome", p, {}, budget={"iterations": 60})
    for _ in range(3):
        a.advance()
    state = a.state_dict()
    b = algorithms.Run("bome", p, {}, budget={"iterations": 60})
    b.load_state_dict(state)
    list(a.records()), list(b.records())
    assert np.array_equal(a.algorithm.x, b.algorithm.x) and np.array_equal(a.algorithm.y, b.algorithm.y)
    assert a.algorithm.iteration == b.algorithm.iteration == 60
