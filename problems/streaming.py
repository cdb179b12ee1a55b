"""Online versions of the logistic problems: one window of a drifting data stream per time step.

Features are standard Gaussian in R^p; labels follow a softmax teacher s·dᵀW_t whose weights rotate:
W_t = R(θ t) W_0, where R(φ) = Q diag(rot(φ), rot(φ), …) Qᵀ turns every vector by the angle φ (one axis
stays fixed when p is odd). θ = `drift` radians per step, so the decision boundary of window t has
turned by θ(t − 1) from the first. Window t (training, validation and test samples, and for
hyper-cleaning the label corruption) is drawn from its own seeded stream, so `at(t)` does not depend on
the order of calls. Each window is a regularization_selection / hyper_cleaning instance with exact
ground truth (problems.logistic).
"""
from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

import numpy as np

from problems.base import Array, OnlineProblem
from problems.datasets import Split
from problems.logistic import LogisticBilevel, RegularizationSelection
from problems.logistic_cleaning import HyperCleaning, corrupt_labels
from problems.registry import register
from problems.validation import Params, param

#: Window instances kept (their ground-truth memo included): the current step and a few before it.
CACHE_SIZE = 4


@dataclass(frozen=True)
class StreamParams(Params):
    """Stream shape, drift and horizon shared by the streaming problems."""

    T: int = param(200, "positive_int", "horizon: number of time steps (windows)")
    window: int = param(200, "positive_int", "training samples per window")
    val_window: int = param(100, "positive_int", "validation samples per window")
    test_window: int = param(500, "positive_int", "test samples per window (metrics only)")
    n_features: int = param(10, "positive_int", "feature dimension p")
    drift: float = param(0.01, "nonnegative", "rotation of the decision boundary per step (radians)")
    signal: float = param(4.0, "positive", "scale s of the teacher's logits (larger: cleaner labels)")
    x_init: float = param(-2.0, "real", "every coordinate of the starting x")
    regret_gamma: float = param(0.1, "positive", "γ of the regret's gradient mapping (F2OBO eq. 3–4)")


def rotation(Q: Array, phi: float) -> Array:
    """R(φ) = Q diag(rot(φ), rot(φ), …[, 1]) Qᵀ: every vector turns by φ."""
    p = Q.shape[0]
    B = np.eye(p)
    c, s = np.cos(phi), np.sin(phi)
    for k in range(0, p - 1, 2):  # p/2 planes, not samples
        B[k:k + 2, k:k + 2] = [[c, -s], [s, c]]
    return Q @ B @ Q.T


class DriftingStream:
    """A rotating softmax teacher and the seeded windows it labels."""

    def __init__(self, p: StreamParams, n_classes: int, seed: int) -> None:
        self.p, self.K, self.seed = p, n_classes, seed
        rng = np.random.default_rng([seed, 0])
        self.Q = np.linalg.qr(rng.standard_normal((p.n_features, p.n_features)))[0]
        if n_classes == 2:
            u = rng.standard_normal(p.n_features)
            u /= np.linalg.norm(u)
            self.W0 = np.column_stack([-u / 2, u / 2])  # softmax of ∓uᵀd/2 = logistic in uᵀd
        else:
            self.W0 = rng.standard_normal((p.n_features, n_classes)) / np.sqrt(p.n_features)

    def teacher(self, t: int) -> Array:
        """W_t, the weights labelling window t."""
        return rotation(self.Q, self.p.drift * (t - 1)) @ self.W0

    def window(self, t: int) -> tuple[Split, np.random.Generator]:
        """Window t's clean samples, and its generator for anything else drawn at t."""
        rng = np.random.default_rng([self.seed, t])
        W = self.teacher(t)
        sizes = (self.p.window, self.p.val_window, self.p.test_window)
        parts = []
        for n in sizes:
            D = rng.standard_normal((n, self.p.n_features))
            # Gumbel-max: a draw from softmax(s · dᵀW_t) per sample.
            labels = np.argmax(self.p.signal * D @ W + rng.gumbel(size=(n, self.K)), axis=1)
            parts += [D, labels]
        return Split(*parts, n_classes=self.K), rng


class StreamingProblem(OnlineProblem):
    """Shared caching, start point and projection of the streaming problems."""

    def __init__(self, p: StreamParams, stream: DriftingStream) -> None:
        self.stream = stream
        self.horizon = p.T
        self.regret_gamma = p.regret_gamma
        self.x_init = p.x_init
        self.drift = p.drift
        self._cache: OrderedDict[int, LogisticBilevel] = OrderedDict()

    def _build(self, t: int) -> LogisticBilevel:
        raise NotImplementedError

    def at(self, t: int) -> LogisticBilevel:
        if isinstance(t, bool) or not isinstance(t, (int, np.integer)) or not 1 <= t <= self.horizon:
            raise ValueError(f"time step t must be an integer in 1..{self.horizon}, got {t!r}")
        t = int(t)
        if t not in self._cache:
            inst = self._build(t)
            inst.name = self.name
            previous = self._cache.get(t - 1)
            if previous is not None and previous._warm is not None:
                inst._warm = previous._warm.copy()  # consecutive windows have close inner solutions
            self._cache[t] = inst
            while len(self._cache) > CACHE_SIZE:
                self._cache.popitem(last=False)
        self._cache.move_to_end(t)
        return self._cache[t]

    def initial_point(self) -> tuple[Array, Array]:
        return np.full(self.dim_x, self.x_init), np.zeros(self.dim_y)


class StreamingRegularization(StreamingProblem):
    """regularization_selection on window t of a binary stream with a rotating boundary."""

    def __init__(self, p: StreamParams, seed: int) -> None:
        super().__init__(p, DriftingStream(p, 2, seed))
        self.dim_x = self.dim_y = p.n_features

    def _build(self, t: int) -> RegularizationSelection:
        return RegularizationSelection(self.stream.window(t)[0], self.x_init)


class StreamingHyperCleaning(StreamingProblem):
    """hyper_cleaning on window t of a multiclass stream; x weights the window's training samples."""

    def __init__(self, p: "StreamingHyperCleaningParams", seed: int) -> None:
        super().__init__(p, DriftingStream(p, p.n_classes, seed))
        self.dim_x, self.dim_y = p.window, p.n_features * p.n_classes
        self.corruption, self.reg = p.corruption, p.reg

    def _build(self, t: int) -> HyperCleaning:
        data, rng = self.stream.window(t)
        noisy, changed = corrupt_labels(rng, data.y_train, data.n_classes, self.corruption)
        return HyperCleaning(data, noisy, changed, self.reg, self.x_init)


@dataclass(frozen=True)
class StreamingHyperCleaningParams(StreamParams):
    """Stream parameters plus the classes, corruption and ridge constant of hyper-cleaning."""

    n_classes: int = param(3, "positive_int", "number of classes K")
    corruption: float = param(0.1, "probability", "probability that a training label is replaced")
    reg: float = param(0.2, "positive", "C in C‖W‖²")

    def validate(self) -> None:
        if self.n_classes < 2:
            self.fail("n_classes", "at least 2", self.n_classes)


@register("streaming_regularization", StreamParams, online=True)
def build_streaming_regularization(p: StreamParams, seed: int) -> StreamingRegularization:
    """Per-feature ridge strengths on a binary stream whose decision boundary rotates."""
    return StreamingRegularization(p, seed)


@register("streaming_hyper_cleaning", StreamingHyperCleaningParams, online=True)
def build_streaming_hyper_cleaning(p: StreamingHyperCleaningParams, seed: int) -> StreamingHyperCleaning:
    """Sample weights cleaning corrupted labels on a multiclass stream whose boundaries rotate."""
    return StreamingHyperCleaning(p, seed)
