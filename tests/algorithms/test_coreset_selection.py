"""BCSR, uniform sampling, k-means features and greedy coreset on coreset_selection, each against an independent
computation."""
import numpy as np
import pytest

import algorithms
import problems
from problems.continual import Task, TaskStream, with_bias
from problems.coreset import CoresetSelection, project_simplex
from problems.shared.errors import ParameterError
from tests.oracle_checks import fd_gradient


@pytest.fixture(scope="module")
def small():
    return problems.make("coreset_selection", seed=4, n_tasks=2, pool_size=10, coreset_size=3, test_fraction=0.5)


def test_bcsr_steps_match_dense_linear_algebra(small):
    cfg = {"lr_inner": 0.7, "lr_outer": 0.05, "inner_steps": 2, "neumann_terms": 3}
    run = algorithms.Run("bcsr", small, cfg, seed=0, budget={"iterations": 2}, n_evals=2)
    x, y = small.initial_point()
    for _ in range(2):
        # Independently: inner gradient steps, the Neumann sum with the dense Hessian, J v by differencing
        # λ ↦ ⟨∇y g(λ, y), v⟩ (linear in λ, so the central difference is exact up to rounding).
        for _ in range(2):
            y = y - 0.7 * small.grad_y_g(x, y)
        gx, gy = small.grad_f(x, y)
        M = np.eye(small.dim_y) - 0.7 * small.hessian_yy_g(x, y)
        v = sum(np.linalg.matrix_power(M, q) @ gy for q in range(4))
        Jv = fd_gradient(lambda lam: small.grad_y_g(lam, y) @ v, x, h=1e-4)
        step = x - 0.05 * (gx - Jv)
        x = np.concatenate([project_simplex(step[b]) for b in small.blocks])
        run.algorithm.step()
        run.algorithm.iteration += 1
        # y of the second step is computed from this test's x, whose J v came from finite differences (x agrees to
        # ~1e-10 relative): y agrees to rounding of that, not to machine precision (3e-14 seen on a 0.02 entry).
        np.testing.assert_allclose(run.algorithm.y, y, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(run.algorithm.x, x, rtol=1e-7, atol=1e-10)
    assert np.abs(x - 0.1).max() > 0.01  # the weights moved away from uniform (1/10)


def test_uniform_puts_weight_one_over_k_on_k_samples_drawn_without_replacement(small):
    run = algorithms.Run("uniform", small, {}, seed=11, budget={"iterations": 3}, n_evals=3)
    records = list(run.records())
    x = run.algorithm.x
    rng = np.random.default_rng(11)  # the run's generator, drawn block by block
    for b in small.blocks:
        chosen = rng.choice(b.stop - b.start, size=3, replace=False)
        expected = np.zeros(b.stop - b.start)
        expected[chosen] = 1 / 3
        np.testing.assert_array_equal(x[b], expected)
    assert records[-1]["memory_mass"] == 1.0
    assert records[1]["A_T"] == records[-1]["A_T"]  # later steps keep the choice


def clustered_problem() -> CoresetSelection:
    """One task of 3 tight clusters of 5 points each (a point at each cluster's mean), K = 3."""
    centres = np.array([[0.0, 0.0], [5.0, 0.0], [0.0, 5.0]])
    offsets = np.array([[0, 0], [0.1, 0], [-0.1, 0], [0, 0.1], [0, -0.1]])
    X = with_bias(np.concatenate([c + offsets for c in centres]))
    labels = np.array([0] * 10 + [1] * 5)
    task = Task(X, labels, X.copy(), labels.copy(), (0, 1))
    return CoresetSelection(TaskStream((task,), 2), coreset_size=3, reg=0.1, delta=1e-3, mu=0.1, draws=4,
                            rng=np.random.default_rng(0))


def test_kmeans_features_picks_the_sample_at_the_centre_of_each_cluster():
    p = clustered_problem()
    run = algorithms.Run("kmeans_features", p, {}, seed=5, budget={"iterations": 1}, n_evals=2)
    list(run.records())
    expected = np.zeros(15)
    expected[[0, 5, 10]] = 1 / 3  # the points at the three cluster means
    np.testing.assert_array_equal(run.algorithm.x, expected)


def test_greedy_coreset_adds_the_sample_whose_weight_most_decreases_the_outer_loss(small):
    run = algorithms.Run("greedy_coreset", small, {}, seed=0, budget={"iterations": 5}, n_evals=5)
    alg = run.algorithm
    # First pick, by hand: nothing selected, so θ* = 0 (g is the ridge alone), softmax is uniform (1/m), and
    # v = ∇y f(0)/μ with ∇θ l_i(0) = d_i (1/m − e_{c_i})ᵀ in sample i's task block.
    m, T = small.m, small.n_tasks
    grads = [np.outer(small.D[i], np.full(m, 1 / m) - np.eye(m)[small.c[i]]) for i in range(small.n_samples)]
    V = np.zeros((T, small.p, m))
    for i, G in enumerate(grads):
        V[small.task_of[i]] += small.w_outer[i] * G / small.mu
    gain = np.array([-np.sum(G * V[small.task_of[i]]) for i, G in enumerate(grads)])
    first = [b.start + int(np.argmin(gain[b])) for b in small.blocks]
    alg.step()
    assert np.flatnonzero(alg.x).tolist() == first and np.all(alg.x[first] == 1.0)
    # Second pick from the ground truth θ*(λ) at the first coreset.
    ys = small.y_star(alg.x)
    v = np.linalg.solve(small.hessian_yy_g(alg.x, ys), small.grad_y_f(alg.x, ys))
    gain = -small.cross_xy_g(alg.x, ys, v)
    gain[first] = np.inf
    second = [b.start + int(np.argmin(gain[b])) for b in small.blocks]
    alg.step()
    np.testing.assert_allclose(alg.y, ys, atol=1e-10)  # its Newton solve reached θ*
    assert np.flatnonzero(alg.x).tolist() == sorted(first + second) and np.all(alg.x[first + second] == 0.5)
    for _ in range(3):
        alg.step()
    assert [np.count_nonzero(alg.x[b]) for b in small.blocks] == [3, 3]  # K = 3: complete, then kept
    np.testing.assert_allclose(alg.x[alg.x > 0], 1 / 3)


@pytest.mark.parametrize("name", ["bcsr", "uniform", "kmeans_features", "greedy_coreset"])
def test_coreset_algorithms_refuse_a_problem_without_tasks(name):
    assert algorithms.available()[name]["coreset"]
    with pytest.raises(ParameterError, match=rf"algorithm '{name}' needs a coreset-selection problem"):
        algorithms.Run(name, problems.make("quadratic", seed=0), {}, budget={"iterations": 1})
