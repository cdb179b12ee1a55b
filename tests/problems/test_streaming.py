"""Streaming logistic problems: per-window oracles and ground truth, rotating teacher, seeding, errors."""
import numpy as np
import pytest
from scipy.special import expit

import problems
from problems.shared.errors import ParameterError
from problems.streaming import rotation
from tests.oracle_checks import (check_grad_F_fd, check_ground_truth_stationarity, check_minibatch_mean,
                                 check_oracles)

SMALL = {"T": 20, "window": 40, "val_window": 30, "test_window": 50, "n_features": 6}
NAMES = ["streaming_regularization", "streaming_hyper_cleaning"]


@pytest.mark.parametrize("name", NAMES)
def test_window_oracles_and_ground_truth(name):
    P = problems.make(name, seed=1, **SMALL)
    rng = np.random.default_rng(1)
    for t in (1, 13):
        p = P.at(t)
        assert (p.dim_x, p.dim_y) == (P.dim_x, P.dim_y)
        x, y = rng.normal(-1.0, 0.7, p.dim_x), rng.normal(0.0, 0.3, p.dim_y)
        check_oracles(p, x, y, rng)
        check_oracles(p, x, y, rng, batch=p.sample_batch(rng, 7))
        check_minibatch_mean(p, x, y, rng, full_pass=p.full_pass(), single=p.single)
        check_ground_truth_stationarity(p, x, atol=1e-9)
        check_grad_F_fd(p, x, rtol=1e-5)


def test_rotation_turns_every_vector_by_the_same_angle():
    Q = np.linalg.qr(np.random.default_rng(0).standard_normal((6, 6)))[0]
    R = rotation(Q, 0.3)
    np.testing.assert_allclose(R @ R.T, np.eye(6), atol=1e-14)
    assert np.linalg.det(R) == pytest.approx(1.0)
    v = np.random.default_rng(1).standard_normal((6, 20))
    cos = np.sum(v * (R @ v), axis=0) / np.sum(v * v, axis=0)
    np.testing.assert_allclose(cos, np.cos(0.3), rtol=1e-12)
    np.testing.assert_allclose(rotation(Q, 0.1) @ rotation(Q, 0.2), R, atol=1e-14)


@pytest.mark.parametrize("name", NAMES)
def test_teacher_rotates_by_drift_per_step(name):
    P = problems.make(name, seed=2, **{**SMALL, "drift": 0.05})
    W1, W9 = P.stream.teacher(1), P.stream.teacher(9)
    for k in range(W1.shape[1]):
        cos = W1[:, k] @ W9[:, k] / (np.linalg.norm(W1[:, k]) * np.linalg.norm(W9[:, k]))
        assert np.arccos(np.clip(cos, -1, 1)) == pytest.approx(0.4, rel=1e-9)
    still = problems.make(name, seed=2, **{**SMALL, "drift": 0.0})
    assert np.array_equal(still.stream.teacher(1), still.stream.teacher(20))


def test_labels_follow_the_logistic_teacher():
    P = problems.make("streaming_regularization", seed=3, T=30, window=40000, val_window=10, test_window=10,
                      n_features=4, drift=0.1, signal=3.0)
    t = 25
    data = P.stream.window(t)[0]
    W = P.stream.teacher(t)
    prob = expit(3.0 * data.X_train @ (W[:, 1] - W[:, 0]))  # P(label 1 | d) of the teacher at t
    bins = np.digitize(prob, [0.2, 0.4, 0.6, 0.8])
    for k in range(5):
        sel = bins == k
        assert abs(data.y_train[sel].mean() - prob[sel].mean()) < 4 * 0.5 / np.sqrt(sel.sum())
    # The drifted boundary matters: the first window's teacher predicts window t worse than its own.
    W1 = P.stream.teacher(1)
    acc = lambda V: np.mean((data.X_train @ (V[:, 1] - V[:, 0]) > 0) == data.y_train)  # noqa: E731
    assert acc(W) - acc(W1) > 0.2


def test_hyper_cleaning_windows_corrupt_training_labels_only():
    P = problems.make("streaming_hyper_cleaning", seed=4, T=5, window=20000, val_window=50, test_window=50,
                      n_features=4, n_classes=4, corruption=0.4)
    p = P.at(3)
    clean = P.stream.window(3)[0]
    np.testing.assert_array_equal(p.cv, clean.y_val)
    np.testing.assert_array_equal(p.corrupted, p.c != clean.y_train)
    expected = 0.4 * 3 / 4
    assert abs(p.corrupted.mean() - expected) < 4 * np.sqrt(expected * (1 - expected) / 20000)
    assert P.dim_x == 20000 and P.dim_y == 16


@pytest.mark.parametrize("name", NAMES)
def test_windows_are_seeded_and_independent_of_call_order(name):
    a, b, c = (problems.make(name, seed=s, **SMALL) for s in (5, 5, 6))
    for t in (1, 2, 3, 4, 5, 6):
        a.at(t)
    pa, pb, pc = a.at(7), b.at(7), c.at(7)
    for attr in ("D", "Dv", "Dt"):
        assert np.array_equal(getattr(pa, attr), getattr(pb, attr))
    assert not np.array_equal(pa.D, pc.D)
    assert not np.array_equal(pa.D, a.at(8).D)  # a fresh window per step
    x = np.full(a.dim_x, -0.5)
    np.testing.assert_allclose(pa.y_star(x), pb.y_star(x), rtol=0, atol=1e-12)  # warm start stays exact
    assert a.at(7) is pa  # cached
    np.testing.assert_array_equal(a.initial_point()[0], np.full(a.dim_x, -2.0))


def test_time_steps_outside_the_horizon_are_rejected():
    P = problems.make("streaming_regularization", seed=0, **SMALL)
    for t in (0, 21, 2.5):
        with pytest.raises(ValueError, match="time step t must be an integer in 1..20"):
            P.at(t)


def test_counted_stream_shares_one_counter():
    P = problems.make("streaming_hyper_cleaning", seed=0, **SMALL)
    view = problems.counted(P)
    x, y = view.initial_point()
    view.at(1).grad_g(x, y)
    view.at(2).grad_f(x, y)
    assert view.counter.samples["grad_g"] == 40 and view.counter.samples["grad_f"] == 30
    with pytest.raises(AttributeError, match="ground truth"):
        view.at(1).y_star(x)
    assert P.regret_gamma == 0.1


@pytest.mark.parametrize("name, params, match", [
    ("streaming_regularization", {"T": 0}, "problem 'streaming_regularization': 'T' must be a positive integer"),
    ("streaming_regularization", {"drift": -0.1}, "'drift' must be a non-negative number"),
    ("streaming_hyper_cleaning", {"corruption": 2.0}, "'corruption' must be a probability"),
    ("streaming_hyper_cleaning", {"n_classes": 1}, "'n_classes' must be at least 2"),
    ("streaming_hyper_cleaning", {"window": -5}, "'window' must be a positive integer"),
])
def test_bad_parameters_give_one_clear_error(name, params, match):
    with pytest.raises(ParameterError, match=match) as err:
        problems.make(name, **params)
    assert "\n" not in str(err.value)
