"""Index minibatches and bounded integers drawn ahead as raw 32-bit words, decoded as NumPy decodes them.

`algorithms.minibatch_stream` draws whole minibatches ahead, which serves an algorithm that draws nothing
else. An HIA's length p is drawn between minibatches (TTSA, SUSTAIN, BSA) and the number of minibatches
after it depends on p, so those cannot be drawn ahead as minibatches. They can as numbers:
`Generator.integers(0, n)` (n ≤ 2³²−1, any size, scalar or array bounds) takes one 32-bit word per draw
from the bit generator and maps it by Lemire's method (word · n, top half; a word whose low half falls
under (2³² − n) mod n is rejected and the next one taken; n = 1 takes no word). So words drawn ahead
(`integers(0, 2³², dtype=uint32)`, one word each) and decoded here with each draw's own bound give the
numbers, and leave the generator in the state, that the draws themselves would.
`tests/algorithms/test_index_stream.py` checks that against NumPy's draws, rejections included.

Each block of words is decoded at once for every bound a minibatch uses (one index draw per sample set):
a word's value depends only on the word and the bound, so a minibatch at any position is a slice, and
only where a rejection may fall (rare: probability below n / 2³² per word) is a minibatch decoded word by
word. A lone integer (`integer`) is decoded word by word. As in `minibatch_stream`, `rng_state` and
`settle` give the generator's state as if only the words used had been drawn (replayed from the block's
start), and blocks start small and double. An algorithm takes its draws from here only from its first
`random_integer` on (`Algorithm.random_integer`): taking minibatches costs 1–2 µs more here than whole ones.
"""
from __future__ import annotations

import functools
import operator
import sys
from typing import Any

import numpy as np

from algorithms.minibatch_stream import DrawnAhead
from problems.gather import frozen_indices

#: Minibatches whose words the first block holds; each further block doubles, up to MAX_AHEAD_WORDS words.
FIRST_BLOCK = 4
#: Most words drawn ahead in one block: 32,768 (128 KiB; their decoded values 256 KiB per bound).
MAX_AHEAD_WORDS = 1 << 15
_WORD = 1 << 32
_NO_REJECTION = sys.maxsize  # `_next_rejectable` when no word ahead in the block may be rejected


def decodable(bound: int) -> bool:
    """Whether draws below `bound` are decoded here (one word each, Lemire's method): 2 ≤ bound < 2³²."""
    return 2 <= bound < _WORD


@functools.cache
def numpy_draws_as_decoded() -> bool:
    """Whether this NumPy draws bounded integers as decoded here (checked once, on rejection-heavy bounds):
    where it does not, nothing is decoded, and minibatches are drawn ahead whole or not at all."""
    bounds = np.array([2, 3, 1000, 3_000_000_000, 2**32 - 1] * 20, dtype=np.int64)
    drawn, words = np.random.default_rng(0), np.random.default_rng(0)
    want = drawn.integers(0, bounds)
    stream = IndexStream(_Decoding(), 1, (2,))
    got = [stream.integer(words, int(b)) for b in bounds]
    return got == want.tolist() and stream.rng_state(words) == drawn.bit_generator.state


class _Decoding:
    """A stand-in problem for `numpy_draws_as_decoded` (its minibatches are never taken)."""

    def batch_of(self, *indices: np.ndarray) -> Any:
        return indices


def _scaled(words: np.ndarray, bound: int) -> np.ndarray:
    """Each word's draw below `bound` (the top half of word · bound), read-only int64 (problems.gather)."""
    wide = words.astype(np.uint64)
    wide *= np.uint64(bound)
    wide >>= np.uint64(32)
    wide.setflags(write=False)
    return wide.view(np.int64)  # < 2**32: the same bits; a view of a read-only array that owns its data


def _threshold(bound: int) -> int:
    """Low halves under this are rejected (NumPy's (2³² − 1 − (bound − 1)) mod bound)."""
    return (_WORD - bound) % bound


class IndexStream(DrawnAhead):
    """The index minibatches of one size, and lone bounded integers, of a generator, decoded from words
    drawn ahead.

    `bounds` are the index draws that make one minibatch, in order (`size` indices below each), and
    `batch_of(*indices)` makes the minibatch from them (the problem's `index_bounds` and `batch_of`).
    Every call passes the same generator until `reset`.
    """

    __slots__ = ("_batch_of", "_size", "_bounds", "_per_batch", "_max_words", "_block", "_words", "_segments",
                 "_rejectable", "_next_rejectable", "_pos", "_start")

    def __init__(self, problem: Any, size: int, bounds: tuple[int, ...]) -> None:
        if not all(decodable(b) for b in bounds):
            raise ValueError(f"index bounds {bounds}: each must be in [2, 2**32)")
        # Python ints: a word times a NumPy int64 bound would overflow.
        self._batch_of, self._size, self._bounds = problem.batch_of, size, tuple(operator.index(b) for b in bounds)
        self._per_batch = size * len(bounds)
        self._max_words = max(MAX_AHEAD_WORDS, self._per_batch)
        self.reset()

    def reset(self) -> None:
        """Forget what was drawn ahead (the generator's state was set from outside)."""
        self._block = FIRST_BLOCK * self._per_batch
        self._words = np.empty(0, dtype=np.uint32)
        self._segments: list[tuple[np.ndarray, int]] = []  # per index draw: its bound's values, its offset
        self._rejectable = np.empty(0, dtype=np.intp)  # positions where some bound's draw may reject
        self._next_rejectable = _NO_REJECTION
        self._pos = 0  # words handed out since `_start`
        self._start: dict[str, Any] | None = None  # the generator's state before the block

    def take(self, rng: np.random.Generator, count: int) -> list[Any]:
        """The next `count` minibatches of `rng`."""
        need = count * self._per_batch
        if self._pos + need > len(self._words):
            self._refill(rng, need)
        pos, size = self._pos, self._size
        if self._next_rejectable < pos + need:  # a rejection may fall in these words
            return [self._exact_batch(rng) for _ in range(count)]
        self._pos = pos + need
        segments, batch_of, starts = self._segments, self._batch_of, range(pos, pos + need, self._per_batch)
        if len(segments) == 1:  # one or two sample sets spelled out: ~0.5 µs less per minibatch
            v = segments[0][0]
            return [batch_of(v[q:q + size]) for q in starts]
        if len(segments) == 2:
            v, w = segments[0][0], segments[1][0]
            return [batch_of(v[q:q + size], w[q + size:q + 2 * size]) for q in starts]
        return [batch_of(*[v[q + at:q + at + size] for v, at in segments]) for q in starts]

    def integer(self, rng: np.random.Generator, high: int) -> int:
        """int(rng.integers(high)): the next integer of `rng` in [0, high)."""
        high = operator.index(high)
        if high == 1:
            return 0  # NumPy draws nothing for a single value
        if not decodable(high):  # not one word: drawn by NumPy from the generator's exact state
            self.settle(rng)
            return int(rng.integers(high))
        return self._next(rng, high)

    def _ahead(self) -> bool:
        return self._pos < len(self._words)

    def _replay(self, rng: np.random.Generator) -> None:
        rng.bit_generator.state = self._start
        rng.integers(0, _WORD, size=self._pos, dtype=np.uint32)

    def _refill(self, rng: np.random.Generator, need: int) -> None:
        """A new block of at least `need` words, drawn from where the words handed out leave `rng`."""
        block = max(need, self._block)
        self.settle(rng)
        self._block = min(2 * block, self._max_words)
        self._start = rng.bit_generator.state
        words = self._words = rng.integers(0, _WORD, size=block, dtype=np.uint32)
        rejectable, values = np.zeros(block, dtype=bool), {}
        for bound in set(self._bounds):
            values[bound] = _scaled(words, bound)
            if _threshold(bound):  # 0 for a power of two: nothing is rejected
                rejectable |= words * np.uint32(bound) < np.uint32(_threshold(bound))  # the product's low half
        self._segments = [(values[b], k * self._size) for k, b in enumerate(self._bounds)]
        self._rejectable = np.flatnonzero(rejectable)
        self._next_rejectable = int(self._rejectable[0]) if len(self._rejectable) else _NO_REJECTION

    def _next(self, rng: np.random.Generator, bound: int) -> int:
        """The next draw below `bound`, decoded word by word (rejected words skipped)."""
        threshold = _threshold(bound)
        while True:
            if self._pos == len(self._words):
                self._refill(rng, 1)
            scaled = int(self._words[self._pos]) * bound
            self._pos += 1
            if scaled & (_WORD - 1) >= threshold:
                break
        if self._next_rejectable < self._pos:
            at = int(np.searchsorted(self._rejectable, self._pos))
            self._next_rejectable = int(self._rejectable[at]) if at < len(self._rejectable) else _NO_REJECTION
        return scaled >> 32

    def _exact_batch(self, rng: np.random.Generator) -> Any:
        """The next minibatch decoded word by word."""
        return self._batch_of(*(frozen_indices(np.array([self._next(rng, b) for _ in range(self._size)],
                                                        dtype=np.int64)) for b in self._bounds))
