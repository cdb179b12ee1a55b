"""coreset_selection: oracles against finite differences, a two-sample case solved by hand, the smoothed top-K
regularizer against its closed form, the simplex projection, and D-TFBO / S-TFBO running on it."""
import numpy as np
import pytest
from scipy.optimize import brentq
from scipy.special import expit
from scipy.stats import norm

import algorithms
import problems
from problems.continual import Task, TaskStream
from problems.coreset import CoresetSelection, project_simplex, top_k
from problems.shared.errors import ParameterError
from tests.oracle_checks import (check_grad_F_fd, check_ground_truth_stationarity, check_minibatch_mean,
                                 check_oracles, fd_gradient)

SMALL = dict(n_tasks=2, pool_size=8, coreset_size=3, test_fraction=0.5)


def interior_point(p, rng):
    """A point of the product of simplices with every weight positive, and a random y."""
    x = np.concatenate([rng.dirichlet(np.ones(b.stop - b.start)) for b in p.blocks])
    return x, 0.5 * rng.standard_normal(p.dim_y)


@pytest.fixture(scope="module")
def small():
    return problems.make("coreset_selection", seed=2, reg=0.0, **SMALL)


def test_every_oracle_matches_finite_differences_full_batch_and_minibatch(small):
    rng = np.random.default_rng(0)
    x, y = interior_point(small, rng)
    check_oracles(small, x, y, rng)
    batch = small.sample_batch(rng, 5)
    check_oracles(small, x, y, rng, batch=batch)
    check_minibatch_mean(small, x, y, rng)
    v = rng.standard_normal(small.dim_y)
    np.testing.assert_allclose(small.hessian_yy_g(x, y) @ v, small.hvp_yy_g(x, y, v), rtol=1e-12, atol=1e-14)


def test_a_minibatch_is_unbiased_for_both_levels(small):
    rng = np.random.default_rng(1)
    x, y = interior_point(small, rng)
    N = small.n_samples
    # Every index once as a batch of one, averaged: the full-batch value (the N/B scale makes each unbiased).
    for oracle in (small.f, small.g):
        mean = np.mean([oracle(x, y, np.array([i])) for i in range(N)])
        assert mean == pytest.approx(oracle(x, y), rel=1e-12)
    gx = np.mean([small.grad_g(x, y, np.array([i]))[0] for i in range(N)], axis=0)
    np.testing.assert_allclose(gx, small.grad_g(x, y)[0], rtol=1e-12)


def test_the_regularizer_gradient_is_exact_on_its_linear_pieces():
    rng = np.random.default_rng(3)
    p = problems.make("coreset_selection", seed=2, reg=0.3, **SMALL)
    x, y = interior_point(p, rng)
    # R is piecewise linear in λ: central differences with a step far below the gaps are exact.
    fd = fd_gradient(lambda z: p.f(z, y), x, h=1e-9)
    np.testing.assert_allclose(p.grad_f(x, y)[0], fd, atol=1e-6)
    reg = p.regularizers[0]
    lam = x[p.blocks[0]]
    P = lam + reg.delta * reg.Z
    by_hand = -np.mean([np.sort(row)[::-1][:3].sum() for row in P])  # top-3 sum per draw, averaged
    assert reg.value(lam) == pytest.approx(by_hand, rel=1e-14)
    assert p.grad_f(x, y)[0][p.blocks[0]].sum() == pytest.approx(-0.3 * 3, rel=1e-14)  # K ones per draw


def test_ground_truth_is_stationary_and_its_hypergradient_matches_finite_differences(small):
    x, _ = interior_point(small, np.random.default_rng(4))
    check_ground_truth_stationarity(small, x, atol=1e-9)
    check_grad_F_fd(small, x, rtol=1e-6, h=1e-6)


def two_sample_problem(reg: float, draws: int = 1) -> CoresetSelection:
    """One task, two samples with no feature but the bias, labels 0 and 1, K = 1."""
    X = np.array([[0.0, 1.0], [0.0, 1.0]])
    task = Task(X, np.array([0, 1]), X.copy(), np.array([0, 1]), (0, 1))
    return CoresetSelection(TaskStream((task,), 2), coreset_size=1, reg=reg, delta=0.05, mu=0.3, draws=draws,
                            rng=np.random.default_rng(0))


def test_two_samples_solved_by_hand():
    # With only the bias, θ* = [[0, 0], [a, −a]] where (λ1 + λ2) σ(2a) − λ1 + μ a = 0 (the class sums
    # of the CE gradient cancel, so the ridge makes the two biases opposite); F = ½[softplus(−2a) + softplus(2a)].
    p, mu = two_sample_problem(reg=0.0), 0.3
    lam = np.array([0.7, 0.3])
    s = lam.sum()
    a = brentq(lambda a: s * expit(2 * a) - lam[0] + mu * a, -10, 10, xtol=1e-15)
    np.testing.assert_allclose(p.y_star(lam), [0.0, 0.0, a, -a], atol=1e-12)
    F = 0.5 * (np.logaddexp(0, -2 * a) + np.logaddexp(0, 2 * a))
    assert p.F(lam) == pytest.approx(F, rel=1e-12)
    # Implicit differentiation of the scalar equation: ∂a/∂λ1 = (1 − σ(2a))/(2sσ'(2a) + μ), ∂a/∂λ2 = −σ(2a)/(…).
    sig = expit(2 * a)
    denom = 2 * s * sig * (1 - sig) + mu
    dF_da = 2 * sig - 1
    np.testing.assert_allclose(p.grad_F(lam), dF_da * np.array([1 - sig, -sig]) / denom, rtol=1e-10)


def test_the_smoothed_top_1_of_two_weights_matches_its_closed_form():
    # E max(λ1 + δz1, λ2 + δz2) = λ2 + d Φ(d/σ) + σ φ(d/σ), d = λ1 − λ2, σ = δ√2; its λ1-derivative is Φ(d/σ).
    S = 200_000
    p = two_sample_problem(reg=1.0, draws=S)
    lam = np.array([0.52, 0.48])
    d, sigma = lam[0] - lam[1], 0.05 * np.sqrt(2)
    expected = lam[1] + d * norm.cdf(d / sigma) + sigma * norm.pdf(d / sigma)
    reg = p.regularizers[0]
    # Standard errors: ~δ/√S = 1.1e-4 for the value, ~0.5/√S = 1.1e-3 for the gradient (4 of them allowed).
    assert -reg.value(lam) == pytest.approx(expected, abs=4 * 0.05 / np.sqrt(S))
    np.testing.assert_allclose(-reg.grad(lam), [norm.cdf(d / sigma), norm.cdf(-d / sigma)], atol=4 * 0.5 / np.sqrt(S))


def test_simplex_projection_against_its_threshold_found_by_root_finding():
    rng = np.random.default_rng(5)
    for v in (rng.standard_normal(7), rng.standard_normal(30) * 5, np.full(4, 0.25), np.array([3.0])):
        w = project_simplex(v)
        # Independently: w = max(v − τ, 0) with τ the root of Σ max(v − τ, 0) = 1.
        tau = brentq(lambda t: np.maximum(v - t, 0).sum() - 1, v.min() - 2, v.max(), xtol=1e-15)
        np.testing.assert_allclose(w, np.maximum(v - tau, 0), atol=1e-12)
        assert w.sum() == pytest.approx(1.0, abs=1e-12) and w.min() >= 0
    assert top_k(np.array([0.2, 0.5, 0.2, 0.1]), 2).tolist() == [1, 0]  # ties: the lower index first


def test_the_registered_problem_validates_its_parameters():
    with pytest.raises(ParameterError, match=r"'n_tasks' must be 1, 2 or 5"):
        problems.make("coreset_selection", n_tasks=3)
    with pytest.raises(ParameterError, match=r"'coreset_size' must be below the smallest task's number of training "
                                             r"samples \(12\), got 12"):
        problems.make("coreset_selection", seed=0, n_tasks=2, pool_size=12, coreset_size=12)
    # Imbalanced, 5 tasks: classes of ~180 samples keep 126 for training, the thinned one round(0.2 · 126) = 25.
    fewest = min(len(t.y_train) for s in range(5) for t in problems.make(
        "coreset_selection", seed=s, scenario="imbalanced", coreset_size=2).stream.tasks)
    with pytest.raises(ParameterError, match=r"smallest task's number of training samples \((\d+)\)") as err:
        problems.make("coreset_selection", scenario="imbalanced", coreset_size=500)
    bound = int(str(err.value).split("(")[1].split(")")[0])
    assert bound <= fewest and 140 <= bound <= 160
    with pytest.raises(ParameterError, match=r"'scenario' must be one of"):
        problems.make("coreset_selection", scenario="skewed")


@pytest.mark.parametrize("name, cfg", [("dtfbo", {"sub_loops": "fixed", "y_steps": 5, "v_steps": 3}), ("stfbo", {})])
def test_tfbo_runs_on_it_and_keeps_each_block_on_the_simplex(name, cfg):
    p = problems.make("coreset_selection", seed=1, n_tasks=2, pool_size=40, coreset_size=4)
    run = algorithms.Run(name, p, cfg, seed=0, budget={"iterations": 20}, n_evals=3)
    records = list(run.records())
    x = run.algorithm.x
    assert records[-1]["status"] == "finished" and records[-1]["iteration"] == 20
    assert x.min() >= 0
    np.testing.assert_allclose([x[b].sum() for b in p.blocks], 1.0, atol=1e-12)
    last = records[-1]
    A, fgt = p.continual(x)
    assert (last["A_T"], last["FGT_T"]) == (A, fgt) and 0 <= A <= 1 and -1 <= fgt <= 1
    mass = np.mean([np.sort(x[b])[::-1][:4].sum() for b in p.blocks])
    assert last["memory_mass"] == pytest.approx(mass, rel=1e-12)
    assert last["memory_mass"] > records[0]["memory_mass"] == pytest.approx(4 / 40, rel=1e-12)  # K of 40 at the start
