"""`fn_hyper_cleaning_mlp`: data hyper-cleaning of a one-hidden-layer network (a nonconvex upper level).

Training labels are corrupted with probability `corruption` (problems.logistic_cleaning.corrupt_labels); x holds
one log-odds weight per training sample and y the network's weights (W1 ∈ R^{p×h}, b1, W2 ∈ R^{h×K}, b2,
flattened):
    g(x, y) = (1/n) Σ_train σ(x_i) CE(net_y(d_i), c_i) + reg ‖y‖²,   f(x, y) = (1/m) Σ_val CE(net_y(d_j), c_j),
net_y(d) = tanh(d W1 + b1) W2 + b2. The sample index travels in the data (`rows["i"]`), so a minibatch
picks its own weights x_i. g is not convex in y (hidden units permute, for a start): solves from a
fixed y0 can land in different local minima for nearby x, so the ground truth is warm-started and
follows one local minimiser along the points evaluated (from_functions' warm_start); the
not-strongly-convex flag reports any point where that minimiser stops being strict.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np

from problems.datasets import DataParams, SOURCES, prepare
from problems.functional import FunctionalProblem, from_functions
from problems.logistic_cleaning import auc, corrupt_labels
from problems.registry import register
from problems.validation import param


@dataclass(frozen=True)
class MLPCleaningParams(DataParams):
    """Data, corruption and network size of fn_hyper_cleaning_mlp."""

    dataset: str = param("digits", "str", "data source", choices=SOURCES)
    max_samples: int | None = param(300, "optional_positive_int", "seeded random subset kept before splitting")
    corruption: float = param(0.3, "probability", "probability that a training label is replaced")
    hidden: int = param(8, "positive_int", "hidden units h")
    reg: float = param(0.01, "positive", "reg in reg‖y‖²")
    x_init: float = param(0.0, "real", "every sample's starting log-odds weight")
    init_scale: float = param(0.3, "positive", "standard deviation of the seeded starting weights y0")


def unflatten(y, p: int, h: int, k: int):
    """(W1, b1, W2, b2) from the flat weight vector."""
    W1 = y[: p * h].reshape(p, h)
    b1 = y[p * h: p * h + h]
    W2 = y[p * h + h: p * h + h + h * k].reshape(h, k)
    return W1, b1, W2, y[p * h + h + h * k:]


def logits(y, D, h: int, k: int):
    """Network outputs for the rows D."""
    W1, b1, W2, b2 = unflatten(y, D.shape[1], h, k)
    return jnp.tanh(D @ W1 + b1) @ W2 + b2


def cross_entropy(y, rows, h: int, k: int):
    """Per-row cross-entropy of the network on rows {D, c}."""
    Z = logits(y, rows["D"], h, k)
    return jax.nn.logsumexp(Z, axis=1) - jnp.take_along_axis(Z, rows["c"][:, None], axis=1)[:, 0]


@functools.lru_cache(maxsize=None)
def make_functions(h: int, k: int, reg: float):
    """(f, g) of a network with h hidden units and k classes; the same objects for the same arguments,
    so every instance with these sizes reuses one compilation."""

    def g(x, y, rows):
        weights = jax.nn.sigmoid(x[rows["i"]])
        return jnp.mean(weights * cross_entropy(y, rows, h, k)) + reg * y @ y

    def f(x, y, rows):
        return jnp.mean(cross_entropy(y, rows, h, k))

    return f, g


@register("fn_hyper_cleaning_mlp", MLPCleaningParams)
def build_fn_hyper_cleaning_mlp(p: MLPCleaningParams, seed: int) -> FunctionalProblem:
    """Per-sample weights cleaning corrupted labels for a one-hidden-layer network (example of from_functions)."""
    rng = np.random.default_rng(seed)
    data = prepare(p, rng)
    noisy, corrupted = corrupt_labels(rng, data.y_train, data.n_classes, p.corruption)
    n, d, k, h = len(noisy), data.n_features, data.n_classes, p.hidden
    f, g = make_functions(h, k, p.reg)
    train = {"D": data.X_train, "c": noisy, "i": np.arange(n)}
    val = {"D": data.X_val, "c": data.y_val}
    y0 = p.init_scale * rng.standard_normal(d * h + h + h * k + k)

    def metrics(x, y):
        with jax.enable_x64(True):
            pred = np.asarray(jnp.argmax(logits(y, data.X_test, h, k), axis=1))
        out = {"test_accuracy": float(np.mean(pred == data.y_test))}
        if 0 < corrupted.sum() < n:
            out["corruption_auc"] = auc(-x, corrupted)  # low weight should flag a corrupted label
        return out

    return from_functions(f, g, np.full(n, p.x_init), y0, train, outer_data=val, metrics=metrics, warm_start=True)
