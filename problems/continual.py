"""Continual learning on a stream of classification tasks: the task stream, the replay learner, A_T and FGT_T.

- Split-digits (the offline stand-in for Split CIFAR-100 of TFBO §5.3): scikit-learn's 8×8 digits cut into
  `n_tasks` tasks of 10/n_tasks consecutive classes ({0, 1}, {2, 3}, … for 5 tasks), each split seeded into
  training and test samples. In the imbalanced scenario one seeded class of every task keeps only the
  fraction `imbalance` of its training samples (test sets stay balanced, so accuracy is not skewed).
  Features: pixels / 16 / √64 (a pixel's range is known, so no statistic of any task leaks into another) plus
  a constant bias feature 1, so every squared feature norm is at most 2.
- The learner (the stand-in for the paper's network): one multinomial logistic-regression head over all
  classes (class-incremental). After task j it is the exact minimiser of
      mean CE on task j's training data + replay · Σ_{i<j} mean CE on coreset i + (reg/2)‖W‖²,
  where coreset i is the memory kept from task i (replay = 1 weighs every task seen alike); it predicts the
  arg-max over the classes seen so far. a_{j,i} is its test accuracy on task i after task j (a fraction;
  NaN for i > j). "Exact" is L-BFGS to a gradient norm of 1e-8, far below what moves a prediction.
- Metrics (TFBO §5.3): A_T = (1/T) Σ_i a_{T,i} and FGT_T = (1/T) Σ_i max_{i ≤ j < T} (a_{j,i} − a_{T,i}); the
  i = T term has no earlier accuracy and is 0. (BCSR's code divides the same sum by T − 1.)
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy.special import logsumexp

from problems.base import Array
from problems.bundled_data import load_bundled
from problems.softmax import softmax

#: The digits' pixel range (0..16): features are scaled by it, not by a statistic of the data.
DIGITS_PIXEL_MAX = 16.0


@dataclass(frozen=True)
class Task:
    """One task: features (bias column last), global labels, and the classes it holds."""

    X_train: Array
    y_train: Array
    X_test: Array
    y_test: Array
    classes: tuple[int, ...]


@dataclass(frozen=True)
class TaskStream:
    """Tasks in the order they are learned, over `n_classes` global classes."""

    tasks: tuple[Task, ...]
    n_classes: int

    @property
    def n_features(self) -> int:
        """Columns of the feature matrices (the bias included)."""
        return int(self.tasks[0].X_train.shape[1])


def with_bias(X: Array) -> Array:
    """X with a constant column 1 appended (the model's bias)."""
    return np.column_stack([X, np.ones(len(X))])


def split_classes(X: Array, labels: Array, rng: np.random.Generator, n_tasks: int, test_fraction: float,
                  imbalance: float = 1.0, max_train: int | None = None) -> TaskStream:
    """Tasks of consecutive classes, each split seeded into train/test; `imbalance` < 1 thins one class per task;
    `max_train` keeps a seeded subset of at most that many training samples per task."""
    classes = np.unique(labels)
    groups = np.array_split(classes, n_tasks)
    tasks = []
    for group in groups:
        train, test = [], []
        minority = int(rng.integers(len(group)))
        for k, c in enumerate(group):
            idx = rng.permutation(np.flatnonzero(labels == c))
            n_test = int(round(test_fraction * len(idx)))
            kept = idx[n_test:]
            if imbalance < 1.0 and k == minority:
                kept = kept[:max(1, int(round(imbalance * len(kept))))]
            test.append(idx[:n_test])
            train.append(kept)
        tr = np.concatenate(train)
        if max_train is not None and len(tr) > max_train:
            tr = rng.choice(tr, size=max_train, replace=False)
        tr = np.sort(tr)
        te = np.sort(np.concatenate(test))
        tasks.append(Task(X[tr], labels[tr], X[te], labels[te], tuple(int(c) for c in group)))
    return TaskStream(tuple(tasks), int(len(classes)))


def smallest_task(labels: Array, n_tasks: int, test_fraction: float, imbalance: float = 1.0,
                  max_train: int | None = None) -> int:
    """The fewest training samples any task of `split_classes` can get, whichever class each task thins."""
    sizes = []
    for group in np.array_split(np.unique(labels), n_tasks):
        kept = [int(np.sum(labels == c)) - int(round(test_fraction * np.sum(labels == c))) for c in group]
        thinned = [max(1, int(round(imbalance * k))) if imbalance < 1.0 else k for k in kept]
        size = sum(kept) - max(k - t for k, t in zip(kept, thinned))
        sizes.append(size if max_train is None else min(size, max_train))
    return min(sizes)


def split_digits(rng: np.random.Generator, n_tasks: int = 5, test_fraction: float = 0.3,
                 imbalance: float = 1.0, max_train: int | None = None) -> TaskStream:
    """Split-digits: scikit-learn's digits as `n_tasks` tasks of consecutive classes (module docstring)."""
    X, labels = load_bundled("digits")
    X = with_bias(X / DIGITS_PIXEL_MAX / np.sqrt(X.shape[1]))
    return split_classes(X, labels.astype(np.int64), rng, n_tasks, test_fraction, imbalance, max_train)


# ---------------------------------------------------------------- the replay learner
def _objective(w: Array, parts: list[tuple[Array, Array, float]], shape: tuple[int, int],
               reg: float) -> tuple[float, Array]:
    """Σ_parts weight · mean CE + (reg/2)‖W‖², and its gradient (W flattened row-major)."""
    W = w.reshape(shape)
    value, grad = 0.5 * reg * float(w @ w), reg * W.copy()
    for X, labels, weight in parts:
        Z = X @ W
        rows = np.arange(len(labels))
        value += weight * float(np.mean(logsumexp(Z, axis=1) - Z[rows, labels]))
        R = softmax(Z, axis=1)
        R[rows, labels] -= 1.0
        grad += (weight / len(labels)) * (X.T @ R)
    return value, grad.ravel()


def fit_learner(parts: list[tuple[Array, Array, float]], n_features: int, n_classes: int, reg: float,
                start: Array | None = None) -> Array:
    """The minimiser W (n_features × n_classes) of Σ weight · mean CE + (reg/2)‖W‖² (L-BFGS to gtol 1e-8)."""
    shape = (n_features, n_classes)
    w0 = np.zeros(n_features * n_classes) if start is None else start.ravel()
    parts = [p for p in parts if len(p[1]) > 0]
    from scipy.optimize import minimize  # only here: its import costs every trial process ~0.4 s

    res = minimize(_objective, w0, args=(parts, shape, reg), jac=True, method="L-BFGS-B",
                   options={"gtol": 1e-8, "ftol": 0.0, "maxiter": 2000})
    return res.x.reshape(shape)


def accuracy(W: Array, X: Array, labels: Array, seen: Sequence[int]) -> float:
    """Share of samples whose arg-max over the `seen` classes is their label."""
    seen = np.asarray(seen)
    return float(np.mean(seen[np.argmax((X @ W)[:, seen], axis=1)] == labels))


def accuracy_matrix(stream: TaskStream, memories: Sequence[Array], replay: float, reg: float) -> Array:
    """a[j, i]: accuracy on task i's test set after learning task j with replay of the memories of tasks < j.

    `memories[t]` indexes task t's training samples (its coreset); NaN above the diagonal.
    """
    T = len(stream.tasks)
    a = np.full((T, T), np.nan)
    W, seen = None, []
    for j, task in enumerate(stream.tasks):
        seen += list(task.classes)
        parts = [(task.X_train, task.y_train, 1.0)]
        parts += [(stream.tasks[t].X_train[m], stream.tasks[t].y_train[m], replay) for t, m in enumerate(memories[:j])]
        W = fit_learner(parts, stream.n_features, stream.n_classes, reg, W)
        for i in range(j + 1):
            a[j, i] = accuracy(W, stream.tasks[i].X_test, stream.tasks[i].y_test, seen)
    return a


def average_accuracy(a: Array) -> float:
    """A_T = (1/T) Σ_i a_{T,i}: the mean accuracy over all tasks after the last one."""
    return float(np.mean(a[-1]))


def forgetting(a: Array) -> float:
    """FGT_T = (1/T) Σ_{i<T} max_{i ≤ j < T} (a_{j,i} − a_{T,i}) (TFBO §5.3; the i = T term is 0)."""
    T = a.shape[0]
    drops = [np.max(a[i:T - 1, i]) - a[T - 1, i] for i in range(T - 1)]
    return float(np.sum(drops) / T)
