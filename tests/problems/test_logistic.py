"""regularization_selection and hyper_cleaning: oracles, minibatch means, ground truth, metrics, errors."""
import numpy as np
import pytest
from sklearn.linear_model import LogisticRegression

import problems
from problems.datasets import DataParams, prepare
from problems.logistic_cleaning import auc
from problems.newton import conjugate_gradient
from problems.shared.errors import ParameterError
from tests.oracle_checks import (check_grad_F_fd, check_ground_truth_stationarity, check_minibatch_mean,
                                 check_oracles)

CASES = [
    ("regularization_selection", {"max_samples": 200}),
    ("regularization_selection", {"dataset": "iris"}),
    ("hyper_cleaning", {"max_samples": 120}),  # digits: 10 classes, 64 features
    ("hyper_cleaning", {"dataset": "breast_cancer", "max_samples": 120, "corruption": 0.3}),
]


def point(p, rng):
    return rng.normal(-1.0, 0.7, p.dim_x), rng.normal(0.0, 0.3, p.dim_y)


@pytest.mark.parametrize("name, params", CASES)
def test_oracles_match_finite_differences(name, params):
    p = problems.make(name, seed=1, **params)
    rng = np.random.default_rng(0)
    x, y = point(p, rng)
    check_oracles(p, x, y, rng)
    check_oracles(p, x, y, rng, batch=p.sample_batch(rng, 9))


@pytest.mark.parametrize("name, params", CASES)
def test_minibatch_mean_over_a_full_pass_equals_full_batch(name, params):
    p = problems.make(name, seed=2, **params)
    rng = np.random.default_rng(2)
    x, y = point(p, rng)
    check_minibatch_mean(p, x, y, rng, full_pass=p.full_pass(), single=p.single)


def test_values_match_their_definitions():
    rng = np.random.default_rng(3)
    r = problems.make("regularization_selection", seed=0, max_samples=150)
    x, y = point(r, rng)
    b = np.where(r.b > 0, 1, -1)
    g = np.mean(np.log1p(np.exp(-b * (r.D @ y)))) + 0.5 * np.sum(np.exp(x) * y**2)
    assert r.g(x, y) == pytest.approx(g, rel=1e-13)
    assert r.f(x, y) == pytest.approx(np.mean(np.log1p(np.exp(-r.bv * (r.Dv @ y)))), rel=1e-13)
    h = problems.make("hyper_cleaning", seed=0, max_samples=150, reg=0.05)
    x, y = point(h, rng)
    Z = h.D @ y.reshape(h.p, h.K)
    logp = np.log(np.exp(Z) / np.exp(Z).sum(axis=1, keepdims=True))
    ce = -logp[np.arange(len(h.c)), h.c]
    g = np.mean(ce / (1 + np.exp(-x))) + 0.05 * np.sum(y**2)
    assert h.g(x, y) == pytest.approx(g, rel=1e-13)
    assert h.dim_y == 64 * 10 and h.dim_x == len(h.c) == 90


@pytest.mark.parametrize("name, params", [("regularization_selection", {"max_samples": 250}),
                                          ("hyper_cleaning", {"dataset": "wine", "max_samples": 90}),
                                          ("hyper_cleaning", {"max_samples": 60, "reg": 0.01})])
def test_ground_truth_is_stationary_and_grad_F_matches_finite_differences(name, params):
    p = problems.make(name, seed=4, **params)
    x = np.random.default_rng(4).normal(-1.0, 0.7, p.dim_x)
    check_ground_truth_stationarity(p, x, atol=1e-9)
    assert p.last_inner_residual <= 1e-12
    check_grad_F_fd(p, x, rtol=1e-5)


def test_inner_solution_matches_scikit_learn_at_uniform_weights():
    # With equal strengths/weights, g is (up to a factor) scikit-learn's penalised logistic objective.
    r = problems.make("regularization_selection", seed=0, max_samples=300)
    c = -1.5
    n = r.n_inner
    ref = LogisticRegression(C=1 / (n * np.exp(c)), fit_intercept=False, tol=1e-12, max_iter=10_000)
    ref.fit(r.D, r.b)
    ys = r.y_star(np.full(r.dim_x, c))
    np.testing.assert_allclose(ys, ref.coef_.ravel(), rtol=1e-5, atol=1e-7)
    h = problems.make("hyper_cleaning", seed=0, dataset="wine", reg=0.05)
    s = 1 / (1 + np.exp(-0.5))
    ref = LogisticRegression(C=s / (2 * h.n_inner * 0.05), fit_intercept=False, tol=1e-12, max_iter=10_000)
    ref.fit(h.D, h.c)
    W = h.y_star(np.full(h.dim_x, 0.5)).reshape(h.p, h.K)
    np.testing.assert_allclose(W.T, ref.coef_, rtol=1e-5, atol=1e-7)


def test_cached_warm_start_stays_exact():
    rng = np.random.default_rng(6)
    a = problems.make("hyper_cleaning", seed=3, dataset="wine", max_samples=90)
    b = problems.make("hyper_cleaning", seed=3, dataset="wine", max_samples=90)
    x1, x2 = rng.normal(-1, 1, a.dim_x), rng.normal(1, 1, a.dim_x)
    a.y_star(x1)
    a.grad_F(x1)
    ya, ga = a.y_star(x2), a.grad_F(x2)  # warm-started from x1's solution
    yb, gb = b.y_star(x2), b.grad_F(x2)  # cold start
    np.testing.assert_allclose(ya, yb, rtol=0, atol=1e-12)
    np.testing.assert_allclose(ga, gb, rtol=1e-10, atol=1e-14)
    ya[:] = 0  # returned arrays are copies, the memo is untouched
    assert np.linalg.norm(a.y_star(x2) - yb) < 1e-12


def test_conjugate_gradient_solves_spd_systems():
    rng = np.random.default_rng(0)
    Q = np.linalg.qr(rng.standard_normal((40, 40)))[0]
    H = (Q * np.geomspace(1e-3, 1.0, 40)) @ Q.T
    b = rng.standard_normal(40)
    z = conjugate_gradient(lambda v: H @ v, b)
    np.testing.assert_allclose(z, np.linalg.solve(H, b), rtol=1e-9)
    assert np.all(conjugate_gradient(lambda v: H @ v, np.zeros(40)) == 0)


def test_metrics_follow_their_definitions():
    h = problems.make("hyper_cleaning", seed=5, max_samples=400, corruption=0.5)
    rng = np.random.default_rng(5)
    y = rng.standard_normal(h.dim_y)
    m = h.metrics(np.zeros(h.dim_x), y)
    W = y.reshape(h.p, h.K)
    assert m["test_accuracy"] == pytest.approx(np.mean(np.argmax(h.Dt @ W, axis=1) == h.ct))
    assert m["val_accuracy"] == pytest.approx(np.mean(np.argmax(h.Dv @ W, axis=1) == h.cv))
    assert m["corruption_auc"] == pytest.approx(0.5)  # equal weights separate nothing
    perfect = np.where(h.corrupted, -3.0, 3.0)
    assert h.metrics(perfect, y)["corruption_auc"] == pytest.approx(1.0)
    assert h.metrics(-perfect, y)["corruption_auc"] == pytest.approx(0.0)
    # AUC against the pairwise (Mann–Whitney) definition, with ties.
    scores = np.round(rng.standard_normal(60), 1)
    pos = rng.random(60) < 0.3
    diff = scores[pos][:, None] - scores[~pos][None, :]
    assert auc(scores, pos) == pytest.approx(np.mean((diff > 0) + 0.5 * (diff == 0)), rel=1e-12)
    r = problems.make("regularization_selection", seed=0, max_samples=200)
    yr = rng.standard_normal(r.dim_y)
    mr = r.metrics(np.zeros(r.dim_x), yr)
    assert mr["test_accuracy"] == pytest.approx(np.mean(np.where(r.Dt @ yr >= 0, 1, -1) == r.bt))
    assert mr["test_loss"] == pytest.approx(np.mean(np.log1p(np.exp(-r.bt * (r.Dt @ yr)))), rel=1e-12)
    assert "corruption_auc" not in problems.make("hyper_cleaning", seed=0, max_samples=100, corruption=0.0).metrics(
        np.zeros(60), np.zeros(640))


def test_corruption_hits_only_training_labels_at_the_requested_rate():
    h = problems.make("hyper_cleaning", seed=8, corruption=0.5)  # all of digits
    clean = prepare(DataParams.from_dict({"dataset": "digits"}), np.random.default_rng(8))
    np.testing.assert_array_equal(h.cv, clean.y_val)
    np.testing.assert_array_equal(h.ct, clean.y_test)
    np.testing.assert_array_equal(h.corrupted, h.c != clean.y_train)
    # A replaced label changes with probability (K − 1)/K: expected share 0.5 · 0.9 = 0.45.
    assert abs(h.corrupted.mean() - 0.45) < 4 * np.sqrt(0.45 * 0.55 / h.n_inner)


def test_binary_targets_for_multiclass_data():
    r = problems.make("regularization_selection", seed=0, dataset="iris")
    clean = prepare(DataParams.from_dict({"dataset": "iris"}), np.random.default_rng(0))
    np.testing.assert_array_equal(r.b, np.where(clean.y_train == 2, 1.0, -1.0))


def test_counts_validation_samples_for_f():
    p = problems.make("regularization_selection", seed=0, max_samples=100)
    view = problems.counted(p)
    x, y = p.initial_point()
    view.grad_f(x, y)
    view.grad_g(x, y)
    view.grad_g(x, y, view.sample_batch(np.random.default_rng(0), 8))
    assert (view.counter.samples["grad_f"], view.counter.samples["grad_g"]) == (20, 60 + 8)


@pytest.mark.parametrize("name", ["regularization_selection", "hyper_cleaning"])
def test_seeded_instances_are_bit_identical_and_seed_dependent(name):
    a, b, c = (problems.make(name, seed=s, max_samples=150) for s in (7, 7, 8))
    for attr in ("D", "Dv", "Dt"):
        assert np.array_equal(getattr(a, attr), getattr(b, attr))
    assert not np.array_equal(a.D, c.D)
    if name == "hyper_cleaning":
        assert np.array_equal(a.c, b.c) and np.array_equal(a.corrupted, b.corrupted)


@pytest.mark.parametrize("name, params, match", [
    ("hyper_cleaning", {"corruption": 1.5}, "problem 'hyper_cleaning': 'corruption' must be a probability"),
    ("hyper_cleaning", {"reg": -1.0}, "'reg' must be a positive number"),
    ("regularization_selection", {"dataset": "cifar"}, "'dataset' must be one of 'breast_cancer'"),
    ("hyper_cleaning", {"dataset": "mnist", "data_home": "/nonexistent/sklearn"},
     r"'dataset' must be cached \(nothing is downloaded here\): run sklearn.datasets.fetch_openml\(data_id=554"),
    ("regularization_selection", {"dataset": "svmlight", "data_path": "/nonexistent/covtype.bz2"},
     "'data_path' must be an existing path; put a LIBSVM"),
    ("regularization_selection", {"x_init": float("nan")}, "'x_init' must be a finite number"),
])
def test_bad_parameters_give_one_clear_error(name, params, match):
    with pytest.raises(ParameterError, match=match) as err:
        problems.make(name, **params)
    assert "\n" not in str(err.value)


def test_malformed_file_through_make(tmp_path):
    bad = tmp_path / "covtype.libsvm"
    bad.write_text("not a libsvm line\n")
    with pytest.raises(ParameterError, match="problem 'regularization_selection': 'data_path' .* is not a LIBSVM"):
        problems.make("regularization_selection", dataset="svmlight", data_path=str(bad))


def test_regularization_selection_reuses_its_margins_at_one_y_with_the_same_numbers():
    """The full-batch gradient and Hessian-vector products at one y share b ⊙ Dy and its sigmoids (computed once
    per y): equal bit for bit to the formulas, and made afresh when y changes, in place too."""
    from scipy.special import expit

    p = problems.make("regularization_selection", seed=1, max_samples=200)
    rng = np.random.default_rng(3)
    x, y = point(p, rng)
    v = rng.normal(size=p.dim_y)

    def by_formula(y):
        z = p.b * (p.D @ y)
        grad = p.D.T @ (-p.b * expit(-p.b * (p.D @ y))) / len(p.b) + np.exp(x) * y
        return grad, p.D.T @ ((expit(z) * expit(-z)) * (p.D @ v)) / len(p.b) + np.exp(x) * v

    for _ in range(2):
        for fresh in (True, False):  # the first call at y fills the memo, the second reads it
            grad, hvp = p.grad_y_g(x, y), p.hvp_yy_g(x, y, v)
            assert all(np.array_equal(a, b) for a, b in zip((grad, hvp), by_formula(y))), fresh
        y += 0.1  # in place: the same array, other numbers
