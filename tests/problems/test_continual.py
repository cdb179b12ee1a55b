"""The task stream (Split-digits), the replay learner and the continual-learning metrics A_T, FGT_T."""
import numpy as np
import pytest
from sklearn.datasets import load_digits

from problems.continual import (Task, TaskStream, accuracy_matrix, average_accuracy, forgetting, smallest_task,
                                split_classes, split_digits, with_bias)

NAN = np.nan


@pytest.mark.parametrize("a, A_T, FGT_T", [
    # A_T = (0.6 + 0.5 + 0.95)/3; FGT_T = ((0.9 − 0.6) + (0.8 − 0.5) + 0)/3
    ([[0.9, NAN, NAN], [0.7, 0.8, NAN], [0.6, 0.5, 0.95]], 2.05 / 3, 0.6 / 3),
    # the max over j picks the best earlier accuracy (0.8 at j = 2), not the first: ((0.8 − 0.4) + (0.9 − 0.9))/3
    ([[0.5, NAN, NAN], [0.8, 0.9, NAN], [0.4, 0.9, 1.0]], 2.3 / 3, 0.4 / 3),
    # an accuracy that grew after its task counts negatively (backward transfer): (0.5 − 0.7)/2
    ([[0.5, NAN], [0.7, 0.9]], 0.8, -0.1),
    ([[0.75]], 0.75, 0.0),
])
def test_average_accuracy_and_forgetting_of_hand_computed_matrices(a, A_T, FGT_T):
    a = np.array(a)
    assert average_accuracy(a) == pytest.approx(A_T, abs=1e-15)
    assert forgetting(a) == pytest.approx(FGT_T, abs=1e-15)


def _line_stream() -> TaskStream:
    """Two tasks of two classes on a line: classes 0..3 at x = −3, −1, 1, 3 (3 samples each, bias last)."""
    def task(classes):
        xs = np.repeat([2.0 * c - 3 for c in classes], 3) + np.tile([-0.1, 0.0, 0.1], len(classes))
        X = with_bias(xs[:, None])
        labels = np.repeat(classes, 3)
        return Task(X, labels, X.copy(), labels.copy(), tuple(classes))
    return TaskStream((task([0, 1]), task([2, 3])), 4)


def test_the_replay_learner_forgets_a_task_it_cannot_replay_and_keeps_one_it_can():
    stream = _line_stream()
    # No memory: after task 2 the learner never saw classes 0, 1 again, so it predicts 2 or 3 everywhere.
    a = accuracy_matrix(stream, [np.array([], dtype=int), np.array([], dtype=int)], replay=1.0, reg=1e-2)
    np.testing.assert_array_equal(a, [[1.0, NAN], [0.0, 1.0]])
    assert (average_accuracy(a), forgetting(a)) == (0.5, 0.5)
    # One sample of each class of task 1 replayed: the four clusters stay separated.
    a = accuracy_matrix(stream, [np.array([1, 4]), np.array([], dtype=int)], replay=1.0, reg=1e-2)
    np.testing.assert_array_equal(a, [[1.0, NAN], [1.0, 1.0]])
    assert (average_accuracy(a), forgetting(a)) == (1.0, 0.0)


def test_split_digits_makes_tasks_of_consecutive_classes_with_seeded_train_test_splits():
    digits = load_digits()
    counts = np.bincount(digits.target)
    s = split_digits(np.random.default_rng(0), n_tasks=5, test_fraction=0.3)
    assert s.n_classes == 10 and s.n_features == 65
    assert [t.classes for t in s.tasks] == [(0, 1), (2, 3), (4, 5), (6, 7), (8, 9)]
    for t in s.tasks:
        for c in t.classes:
            n_test = int(round(0.3 * counts[c]))
            assert np.sum(t.y_test == c) == n_test and np.sum(t.y_train == c) == counts[c] - n_test
        assert set(t.y_train) == set(t.classes) and set(t.y_test) == set(t.classes)
    X = np.concatenate([np.concatenate([t.X_train, t.X_test]) for t in s.tasks])
    assert len(X) == len(digits.target) and np.all(X[:, -1] == 1.0)
    # Pixels / 16 / √64: every sample's row is one of the digits' rows so scaled (no statistic of the data).
    scaled = {tuple(r) for r in np.round(digits.data / 16 / 8, 12)}
    assert all(tuple(r) in scaled for r in np.round(X[:, :-1], 12))
    again = split_digits(np.random.default_rng(0))
    other = split_digits(np.random.default_rng(1))
    assert np.array_equal(again.tasks[2].X_test, s.tasks[2].X_test)
    assert not np.array_equal(other.tasks[2].X_test, s.tasks[2].X_test)


def test_the_imbalanced_stream_thins_one_class_per_task_and_keeps_test_sets_whole():
    X = with_bias(np.arange(200.0)[:, None])
    labels = np.repeat([0, 1, 2, 3], 50)
    s = split_classes(X, labels, np.random.default_rng(3), n_tasks=2, test_fraction=0.2, imbalance=0.25)
    for t in s.tasks:
        train = sorted(np.sum(t.y_train == c) for c in t.classes)
        assert train == [10, 40]  # 40 training samples per class, one class keeps 25% of them
        assert [np.sum(t.y_test == c) for c in t.classes] == [10, 10]
    assert smallest_task(labels, 2, 0.2, 0.25) == 50 and smallest_task(labels, 2, 0.2) == 80
    assert smallest_task(labels, 2, 0.2, 0.25, max_train=15) == 15
    capped = split_classes(X, labels, np.random.default_rng(3), n_tasks=2, test_fraction=0.2, max_train=15)
    assert [len(t.y_train) for t in capped.tasks] == [15, 15]
    assert all(set(t.y_train) <= set(t.classes) for t in capped.tasks)
