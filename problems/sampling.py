"""Minibatches for finite sums whose f and g run over different sample sets.

The lower level g averages n_inner samples (e.g. training data) and the upper level f averages
n_outer samples (e.g. validation data). A batch carries one index array for each, of equal size, so an
algorithm that passes the same batch to f and g oracles draws independently at both levels.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from problems.base import Array, Batch, BilevelProblem
from problems.gather import frozen_indices

#: Oracle kinds that evaluate the upper level f (the rest touch g's samples).
OUTER_KINDS = frozenset({"f", "grad_f"})


@dataclass(frozen=True, eq=False)
class TwoSetBatch:
    """Indices into g's samples (`inner`) and into f's samples (`outer`)."""

    inner: Array
    outer: Array

    def __len__(self) -> int:
        return int(len(self.inner))


class TwoSetFiniteSum(BilevelProblem):
    """Sampling and accounting for f = mean over n_outer samples, g = mean over n_inner samples."""

    n_inner: int
    n_outer: int
    stochastic = True

    def _set_sizes(self, n_inner: int, n_outer: int) -> None:
        self.n_inner, self.n_outer = int(n_inner), int(n_outer)
        self.n_samples = self.n_inner  # the finite sum of the lower level, as base code expects
        self._bounds_by_size: dict[tuple[int, int], Array] = {}

    def sample_batch(self, rng: np.random.Generator, size: int) -> TwoSetBatch:
        """`size` uniform indices (with replacement) into each sample set, read-only (see problems.gather)."""
        return self.sample_batches(rng, size, 1)[0]

    def sample_batches(self, rng: np.random.Generator, size: int, count: int) -> list[TwoSetBatch]:
        """`count` minibatches from one draw: the same batches, and end state, as `count` sample_batch calls.

        Each batch's inner indices are drawn first, then its outer ones. A generator hands out its
        numbers in sequence across calls, and an array of bounds draws element by element with the same
        method, so one draw of 2·size·count (bounds n_inner, n_outer, n_inner, …, size each) is the same
        stream, ending in the same state, as the per-level draws (tests/problems/test_sampling.py). A
        draw has a fixed cost (~6 µs, ~15 µs with an array of bounds), so a single minibatch of unequal
        sets is drawn level by level, and more than one in one draw.
        """
        if self.n_inner == self.n_outer:
            drawn = frozen_indices(rng.integers(0, self.n_inner, size=2 * size * count))
        elif count == 1:  # an array of bounds costs ~15 µs of checks, two draws ~6 µs each
            inner, outer = rng.integers(0, self.n_inner, size=size), rng.integers(0, self.n_outer, size=size)
            return [TwoSetBatch(frozen_indices(inner), frozen_indices(outer))]
        else:
            drawn = frozen_indices(rng.integers(0, self._bounds(size, count)))
        starts = range(0, 2 * size * count, 2 * size)
        return [TwoSetBatch(drawn[k:k + size], drawn[k + size:k + 2 * size]) for k in starts]  # read-only views

    def index_bounds(self) -> tuple[int, ...] | None:
        """A minibatch's inner indices, then its outer ones (None for a subclass with its own sample_batch)."""
        if type(self).sample_batch is not TwoSetFiniteSum.sample_batch:
            return None
        return self.n_inner, self.n_outer

    def batch_of(self, *indices: Array) -> TwoSetBatch:
        """The minibatch of inner and outer index arrays."""
        return TwoSetBatch(*indices)

    def _bounds(self, size: int, count: int) -> Array:
        """([n_inner] · size + [n_outer] · size) · count (kept per size and count)."""
        bounds = self._bounds_by_size.get((size, count))
        if bounds is None:
            pair = np.repeat(np.array([self.n_inner, self.n_outer], dtype=np.int64), size)
            bounds = self._bounds_by_size[size, count] = np.tile(pair, count)
        return bounds

    def batch_size(self, batch: Batch) -> int:
        """Samples per level: the batch length, or n_inner for the full batch."""
        return self.n_inner if batch is None else len(_checked(batch))

    def samples_touched(self, kind: str, batch: Batch) -> int:
        """Upper-level oracles touch f's samples, the others g's."""
        if type(batch) is TwoSetBatch:  # the common case first: this runs on every counted oracle call
            return len(batch.inner)
        if batch is None:
            return self.n_outer if kind in OUTER_KINDS else self.n_inner
        return len(_checked(batch))

    def sample_counts(self) -> tuple[int, int]:
        """(n_inner, n_outer): g's and f's sample sets."""
        return self.n_inner, self.n_outer

    def full_pass(self) -> TwoSetBatch:
        """Every sample of both sets once (equal lengths are not required here)."""
        return TwoSetBatch(np.arange(self.n_inner), np.arange(self.n_outer))

    def single(self, i: int) -> TwoSetBatch:
        """The batch of inner sample i (and outer sample i mod n_outer)."""
        return TwoSetBatch(np.array([i]), np.array([i % self.n_outer]))


def _checked(batch: Batch) -> TwoSetBatch:
    if not isinstance(batch, TwoSetBatch):
        raise TypeError(f"expected a batch from sample_batch() (TwoSetBatch) or None, got {type(batch).__name__}")
    return batch


def inner_index(batch: Batch) -> Array | None:
    """g's sample indices of a batch (None for the full batch)."""
    return None if batch is None else _checked(batch).inner


def outer_index(batch: Batch) -> Array | None:
    """f's sample indices of a batch (None for the full batch)."""
    return None if batch is None else _checked(batch).outer
