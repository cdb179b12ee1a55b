"""Minibatches drawn many iterations ahead, so that one draw's fixed cost is shared by many iterations.

A generator hands out its numbers in sequence, so k minibatches drawn in one call are the ones k calls
would draw in turn (a problem's `sample_batches`). For an algorithm whose generator serves nothing but
its minibatches (`Algorithm.draws_ahead`), on a problem whose minibatches are whole when drawn
(`batches_drawn_whole`: indices, not a generator kept for later), minibatches drawn blocks ahead are
therefore the ones drawn when used. A NumPy draw costs ~6–15 µs whatever its size: on
regularization_selection that was a quarter of a SOBA iteration.

The generator then stands ahead of what was used. `rng_state` gives its state as if only the
minibatches handed out had been drawn (replayed on a copy from the block's start), which is what a
checkpoint stores, so a run resumed from it continues exactly as before; `settle` puts the generator
itself there (the algorithm does whenever its `rng` is read, so whatever else is drawn from it is drawn as
before). Blocks start small and double, so a short run draws little more than it uses.
"""
from __future__ import annotations

import copy
from collections import deque
from typing import Any

import numpy as np

#: Minibatches in the first block drawn; each further block doubles, up to MAX_AHEAD_INDICES indices.
FIRST_BLOCK = 4
#: Most indices (per sample set) drawn ahead in one block: 16,384 (128 KiB of int64 per set).
MAX_AHEAD_INDICES = 1 << 14


class DrawnAhead:
    """What a stream of draws made ahead shares: the generator's state as if only what was handed out had
    been drawn, replayed from the start of the block in hand."""

    __slots__ = ()

    def reset(self) -> None:
        """Forget what was drawn ahead (the generator's state was set from outside)."""
        raise NotImplementedError

    def _ahead(self) -> bool:
        """Whether some of what was drawn is not handed out yet (the generator stands ahead of it)."""
        raise NotImplementedError

    def _replay(self, rng: np.random.Generator) -> None:
        """Set `rng` to the block's start and draw again what was handed out since."""
        raise NotImplementedError

    def settle(self, rng: np.random.Generator) -> None:
        """Put `rng` in the state what was handed out leaves it, dropping what was drawn ahead."""
        if self._ahead():
            self._replay(rng)
        self.reset()

    def rng_state(self, rng: np.random.Generator) -> dict[str, Any]:
        """`rng`'s state had it drawn only what was handed out."""
        if not self._ahead():  # the generator's own state is exact
            return copy.deepcopy(rng.bit_generator.state)
        replay = copy.deepcopy(rng)
        self._replay(replay)
        return replay.bit_generator.state


class MinibatchStream(DrawnAhead):
    """The minibatches of one size drawn from a generator, handed out in order, drawn ahead in blocks.

    Every call passes the same generator until `reset` (its owner resets the stream when it sets another
    generator or another state).
    """

    __slots__ = ("_problem", "_size", "_max_block", "_block", "_ready", "_start", "_served")

    def __init__(self, problem: Any, size: int) -> None:
        self._problem, self._size = problem, size
        self._max_block = max(1, MAX_AHEAD_INDICES // size)
        self.reset()

    def reset(self) -> None:
        """Forget what was drawn ahead (the generator's state was set from outside)."""
        self._ready: deque[Any] = deque()
        self._block = FIRST_BLOCK
        self._start: dict[str, Any] | None = None  # the generator's state before the unused draws' block
        self._served = 0  # minibatches handed out since `_start`

    def take(self, rng: np.random.Generator, count: int) -> list[Any]:
        """The next `count` minibatches of `rng`."""
        ready = self._ready
        while len(ready) < count:
            if not ready:  # everything drawn was handed out: the generator's own state is exact
                self._start, self._served = rng.bit_generator.state, 0
            ready.extend(self._problem.sample_batches(rng, self._size, self._block))
            self._block = min(2 * self._block, self._max_block)
        self._served += count
        return [ready.popleft() for _ in range(count)]

    def _ahead(self) -> bool:
        return bool(self._ready)

    def _replay(self, rng: np.random.Generator) -> None:
        rng.bit_generator.state = self._start
        if self._served:
            self._problem.sample_batches(rng, self._size, self._served)
