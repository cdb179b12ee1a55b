"""SSIGD and DS-BLO: the active-set implicit gradient against the exact ∇F and finite differences, and
the update rules of both methods against independent computations."""
import numpy as np
import pytest

import algorithms
import problems
from algorithms.implicit_constrained import DSBLO, SSIGD, DSBLOConfig, SSIGDConfig
from problems.counting import counted
from problems.shared.errors import ParameterError
from tests.oracle_checks import fd_gradient, rel_err


def _ssigd(p, **cfg):
    return SSIGD(counted(p), SSIGDConfig(**cfg), np.random.default_rng(0))


@pytest.mark.parametrize("name", ["ssigd", "dsblo"])
@pytest.mark.parametrize("constraints", ["linear", "box"])
def test_implicit_gradient_equals_exact_grad_F_without_perturbation(constraints, name):
    p = problems.make("constrained_quadratic", seed=2, d=15, p=8, constraints=constraints, noise=0.0)
    cls = algorithms.get(name)
    alg = cls(counted(p), cls.Config(q_std=0.0, batch_size=None), np.random.default_rng(0))
    rng = np.random.default_rng(1)
    worst, actives = 0.0, set()
    for _ in range(6):
        x = 2.0 * rng.standard_normal(15)
        worst = max(worst, rel_err(alg.implicit_gradient(x, np.zeros(15)), p.grad_F(x)))
        actives.add(alg.n_active)
    assert worst <= 1e-8, worst  # measured ~2e-16
    assert len(actives) > 1 and max(actives) > 0


@pytest.mark.parametrize("constraints", ["linear", "box"])
def test_perturbed_implicit_gradient_matches_finite_differences(constraints):
    p = problems.make("constrained_quadratic", seed=3, d=8, p=4, constraints=constraints, noise=0.0)
    alg = _ssigd(p, batch_size=None)
    q = 0.3 * np.random.default_rng(2).standard_normal(8)
    c = p.constraints

    def F_q(x):  # f(x, y_q*(x)) with y_q* from the exact QP with the linear term shifted by q
        y = p.polyhedron.solve(p.Q_l, p.c_l + x + q, c.b - c.A @ x).y
        return p.f(x, y)

    x = np.random.default_rng(3).standard_normal(8)
    grad = alg.implicit_gradient(x, q)
    assert alg.n_active > 0
    assert rel_err(grad, fd_gradient(F_q, x, 1e-6)) <= 1e-6
    assert rel_err(grad, p.grad_F(x)) > 1e-4  # the perturbation really changes the gradient


@pytest.mark.parametrize("constraints", ["linear", "box"])
def test_primal_dual_lower_level_run_to_convergence_gives_the_exact_grad_F(constraints):
    # The F2CSA paper's lower-level solver (Remark 4.1) in place of the QP: run to a tight tolerance, its
    # multipliers pick the active rows and the implicit gradient is ∇F itself (measured ≤ 1.1e-11).
    p = problems.make("constrained_quadratic", seed=2, d=15, p=8, constraints=constraints, noise=0.0)
    for name in ("ssigd", "dsblo"):
        cls = algorithms.get(name)
        alg = cls(counted(p), cls.Config(q_std=0.0, batch_size=None, lower_solver="primal_dual", pd_max_iter=5000,
                                         pd_tol=1e-10), np.random.default_rng(0))
        rng = np.random.default_rng(1)
        for _ in range(3):
            x = 2.0 * rng.standard_normal(15)
            assert rel_err(alg.implicit_gradient(x, np.zeros(15)), p.grad_F(x)) <= 1e-9
            assert alg.n_active == np.sum(p.lambda_star(x) > 0) and 1 < alg.ll_iters < 5000


def test_primal_dual_lower_level_with_noise_runs_its_fixed_length():
    p = problems.make("constrained_quadratic", seed=6, d=12, constraints="box", noise=0.01, noise_model="dense")
    alg = SSIGD(counted(p), SSIGDConfig(lower_solver="primal_dual", pd_max_iter=35), np.random.default_rng(0))
    x = np.random.default_rng(1).standard_normal(12)
    grad = alg.implicit_gradient(x, np.zeros(12))
    calls = alg.problem.counter.calls
    assert alg.ll_iters == 35 and calls["grad_g"] == 35 and calls["hessian"] == 2 and calls["grad_f"] == 1
    # 35 noisy steps from y = 0 (the tail average of the last 17): within 5% of ∇F (measured 3.6%).
    assert rel_err(grad, p.grad_F(x)) < 0.05


def test_dense_oracles_are_what_is_counted():
    p = problems.make("constrained_quadratic", seed=4, d=6, p=3)
    alg = _ssigd(p, batch_size=4)
    alg.implicit_gradient(np.zeros(6), np.zeros(6))
    calls, samples = alg.problem.counter.calls, alg.problem.counter.samples
    assert calls["hessian"] == 2 and samples["hessian"] == 8  # ∇²yy g and ∇²xy g, one batch of 4
    assert calls["hvp"] == calls["cross"] == 0
    assert calls["grad_f"] == 1 and calls["grad_g"] == alg.ll_iters == 2  # one QP step, one confirmation


def test_ssigd_step_is_a_projected_diminishing_gradient_step():
    p = problems.make("constrained_quadratic", seed=5, d=10, p=5, noise=0.0)
    alg = _ssigd(p, q_std=0.0, batch_size=None, beta=0.05, beta_decay=0.5)
    q0 = alg.q.copy()
    x = alg.x.copy()
    for t in range(4):
        expected = x - 0.05 / np.sqrt(t + 1) * p.grad_F(x)
        alg.step()
        alg.iteration += 1
        np.testing.assert_allclose(alg.x, expected, rtol=1e-10, atol=1e-12)
        x = alg.x.copy()
    np.testing.assert_array_equal(alg.q, q0)  # one fixed perturbation
    assert _ssigd(p, q_std=0.5).q.std() > 0.1


def test_dsblo_update_rules():
    p = problems.make("constrained_quadratic", seed=6, d=10, p=5, noise=0.0)
    alg = DSBLO(counted(p), DSBLOConfig(batch_size=None, momentum=0.7, gamma1=2.0, gamma2=3.0, q_std=0.1),
                np.random.default_rng(0))
    calls = []
    original = alg.implicit_gradient
    alg.implicit_gradient = lambda x, q: calls.append((x.copy(), q.copy())) or original(x, q)
    x1 = alg.x.copy()
    alg.step()
    alg.iteration += 1
    (x_a, q_a), (x_b, q_b) = calls
    np.testing.assert_array_equal(x_a, x1)  # m_1 = ĝ(x_1)
    m1 = original(x_a, q_a)
    x2 = x1 - m1 / (2.0 * np.linalg.norm(m1) + 3.0)  # x_2 = x_1 − m_1/(γ1‖m_1‖ + γ2)
    np.testing.assert_allclose(alg.x, x2, rtol=1e-12)
    s = (x_b - x1) @ (x2 - x1) / ((x2 - x1) @ (x2 - x1))  # x̄_2 on the segment [x_1, x_2]
    assert 0.0 <= s <= 1.0 and np.allclose(x_b, x1 + s * (x2 - x1))
    assert not np.allclose(q_a, q_b)  # a fresh perturbation per gradient
    np.testing.assert_allclose(alg.m, 0.7 * m1 + 0.3 * original(x_b, q_b), rtol=1e-10)
    alg.step()
    assert len(calls) == 3  # after the first step, one implicit gradient per step


def test_registry_flags_and_bad_config():
    for name in ("ssigd", "dsblo"):
        cls = algorithms.get(name)
        assert cls.constrained and not cls.first_order and cls.stochastic
    with pytest.raises(ParameterError, match="'momentum' must be a probability") as err:
        algorithms.make_config("dsblo", {"momentum": 1.5})
    assert "\n" not in str(err.value)
    with pytest.raises(ParameterError, match="'q_std' must be a non-negative number"):
        algorithms.make_config("ssigd", {"q_std": -1})
    with pytest.raises(ParameterError, match="needs lower-level constraints"):
        algorithms.Run("dsblo", problems.make("quadratic", seed=0), budget={"iterations": 1})


def test_noisy_runs_stay_feasible_and_decrease_F():
    p = problems.make("constrained_quadratic", seed=7, d=20, p=6, constraints="box", noise=0.01)
    for name, cfg in (("ssigd", {"beta": 0.1}), ("dsblo", {})):
        recs = list(algorithms.run(name, p, cfg, seed=1, budget={"iterations": 60}, n_evals=4))
        assert recs[-1]["F"] < recs[0]["F"] - 1.0
        assert max(r["constraint_violation"] for r in recs[1:]) <= 1e-9  # y is the exact sampled-QP solution


#: ‖∇F‖² at iterations 0, 1, 4, 17, 72, 300 of noisy minibatch runs, printed by the code before the
#: primal–dual lower solver was added (commit 50643db): the default exact QP solve must draw the same
#: random stream (the solver's power-iteration vector is drawn only when that solver is chosen).
BEFORE_PRIMAL_DUAL = {
    "ssigd": ({"beta": 0.1, "batch_size": 16},
              [50.73950488724943, 7.528596945337555, 1.2032447468402814, 0.07268816927125152,
               0.0012886381475983942, 0.0004323653867456355]),
    "dsblo": ({"batch_size": 16},
              [50.73950488724943, 41.69984409026104, 20.908703888349937, 10.448188388329333,
               0.34225221220028557, 0.0007437691212469722]),
}


@pytest.mark.parametrize("name", sorted(BEFORE_PRIMAL_DUAL))
def test_the_default_qp_solve_keeps_the_random_stream_of_before(name):
    params, want = BEFORE_PRIMAL_DUAL[name]
    p = problems.make("constrained_quadratic", seed=1, d=20, p=5, noise=0.01)
    recs = list(algorithms.run(name, p, params, seed=1, budget={"iterations": 300}, n_evals=5))
    assert [r["iteration"] for r in recs] == [0, 1, 4, 17, 72, 300]
    # Summation order in the noise draws moved the last bits since (1e-12 relative at most); another random
    # stream would move them by percents.
    np.testing.assert_allclose([r["grad_F_sq"] for r in recs], want, rtol=1e-10)
