"""Numbers decoded from words drawn ahead (algorithms.index_stream) are NumPy's own draws, state included.

The reference draws every number with `Generator.integers` from its own generator of the same seed, in the
order the stream hands them out. Bounds near 2³² make rejections frequent ((2³² − 3·10⁹) mod 3·10⁹ is 30%
of the words), so the word-by-word path is exercised, not just the decoded blocks.
"""
import numpy as np
import pytest

import algorithms
import problems
from algorithms import index_stream
from algorithms.index_stream import IndexStream, decodable
from problems.gather import _frozen
from problems.sampling import TwoSetBatch

REJECTING = 3_000_000_000  # 30% of words rejected
BOUNDS = [2, 3, 10, 569, 1024, 32768, 2**31 + 1, REJECTING, 2**32 - 1]


class Indices:
    """A problem's minibatch recipe only: `index_bounds` and `batch_of`."""

    def __init__(self, *bounds):
        self.bounds = bounds

    def index_bounds(self):
        return self.bounds

    def batch_of(self, *indices):
        return TwoSetBatch(*indices) if len(indices) == 2 else indices[0]


def as_lists(batch):
    return (batch.inner.tolist(), batch.outer.tolist()) if hasattr(batch, "inner") else batch.tolist()


def reference_batch(problem, rng, size):
    drawn = [rng.integers(0, b, size=size) for b in problem.bounds]
    return problem.batch_of(*drawn)


@pytest.mark.parametrize("bounds", [(1024,), (20, 12), (REJECTING,), (REJECTING, 7), (2**32 - 1, 2)])
def test_minibatches_and_integers_in_any_order_are_numpys_draws(bounds, monkeypatch):
    monkeypatch.setattr(index_stream, "MAX_AHEAD_WORDS", 50)  # small blocks: many refills, some mid-minibatch
    problem, size = Indices(*bounds), 6
    stream, rng, ref = IndexStream(problem, size, bounds), np.random.default_rng(11), np.random.default_rng(11)
    order = np.random.default_rng(0)
    for _ in range(60):
        if order.random() < 0.5:
            count = int(order.integers(0, 4))
            got = [as_lists(b) for b in stream.take(rng, count)]
            assert got == [as_lists(reference_batch(problem, ref, size)) for _ in range(count)]
        else:
            high = int(order.choice(BOUNDS + [1]))
            assert stream.integer(rng, high) == int(ref.integers(high))
        assert stream.rng_state(rng) == ref.bit_generator.state
    ahead = stream._pos < len(stream._words)  # words drawn and not handed out
    assert (rng.bit_generator.state != ref.bit_generator.state) == ahead
    stream.settle(rng)
    assert rng.bit_generator.state == ref.bit_generator.state


def test_minibatches_are_read_only_int64_arrays_of_one_read_only_block():
    stream, rng = IndexStream(Indices(20, 12), 5, (20, 12)), np.random.default_rng(0)
    for batch in stream.take(rng, 3):
        for idx in (batch.inner, batch.outer):
            assert idx.dtype == np.int64 and _frozen(idx)  # a RowCache may remember their rows


def test_an_integer_of_more_than_one_word_is_drawn_from_the_settled_generator():
    stream, rng, ref = IndexStream(Indices(16), 4, (16,)), np.random.default_rng(2), np.random.default_rng(2)
    assert as_lists(stream.take(rng, 1)[0]) == ref.integers(0, 16, size=4).tolist()
    assert stream.integer(rng, 2**40) == int(ref.integers(2**40))  # 64-bit: NumPy draws it
    assert rng.bit_generator.state == ref.bit_generator.state  # nothing is left ahead
    assert stream.integer(rng, 9) == int(ref.integers(9))
    with pytest.raises(ValueError):
        stream.integer(rng, 0)


def test_numpy_integer_bounds_decode_as_python_ints():
    # A word times an int64 bound near 2**32 overflows in int64: the stream works in Python ints.
    bound = np.int64(REJECTING)
    stream, rng, ref = IndexStream(Indices(bound), 3, (bound,)), np.random.default_rng(6), np.random.default_rng(6)
    for _ in range(20):
        assert stream.integer(rng, bound) == int(ref.integers(bound))
        assert as_lists(stream.take(rng, 1)[0]) == ref.integers(0, bound, size=3).tolist()


def test_a_single_value_takes_no_word():
    stream, rng, ref = IndexStream(Indices(16), 4, (16,)), np.random.default_rng(3), np.random.default_rng(3)
    assert [stream.integer(rng, 1) for _ in range(5)] == [0] * 5
    assert stream.rng_state(rng) == ref.bit_generator.state
    assert stream.integer(rng, 16) == int(ref.integers(16))


def test_blocks_double_from_four_minibatches_up_to_the_cap(monkeypatch):
    monkeypatch.setattr(index_stream, "MAX_AHEAD_WORDS", 8 * 2 * 20)  # 20 minibatches of 2 x 8
    stream, rng, blocks = IndexStream(Indices(50, 30), 8, (50, 30)), np.random.default_rng(0), []
    for _ in range(60):
        stream.take(rng, 1)
        if not blocks or stream._pos == 16:  # a block was just drawn
            blocks.append(len(stream._words) // 16)
    assert blocks == [4, 8, 16, 20, 20]  # 68 minibatches drawn for 60 used


def test_bounds_decoded_are_those_of_one_word():
    assert [decodable(b) for b in (0, 1, 2, 2**32 - 1, 2**32)] == [False, False, True, True, False]
    with pytest.raises(ValueError, match="2\\*\\*32"):
        IndexStream(Indices(1), 4, (1,))


def test_hia_methods_draw_their_length_from_the_numbers_drawn_ahead():
    # TTSA draws two minibatches, then p, then p + 1 minibatches: one stream, no settling in between.
    p = problems.make("simulated", seed=0, dim_x=4, dim_y=3, n_samples_inner=20, n_samples_outer=12)
    alg = algorithms.get("ttsa")(p, algorithms.make_config("ttsa", {"batch_size": 5}), np.random.default_rng(4))
    ref = np.random.default_rng(4)
    for _ in range(5):
        alg.step()
        alg.iteration += 1
        for _ in range(2):  # y's and f's minibatches, then p, then the HIA's and the cross term's
            p.sample_batch(ref, 5)
        for _ in range(int(ref.integers(10)) + 1):
            p.sample_batch(ref, 5)
        assert alg.state_dict()["rng"] == ref.bit_generator.state
    assert type(alg._stream) is IndexStream and len(alg._stream._words) > alg._stream._pos  # still ahead


def test_this_numpy_draws_as_decoded_and_otherwise_nothing_is_decoded(monkeypatch):
    assert index_stream.numpy_draws_as_decoded()
    p = problems.make("quadratic", seed=0, dim_x=4, dim_y=3, n_samples=16, rank=1)
    cfg = algorithms.make_config("ttsa", {"batch_size": 4})
    alg = algorithms.get("ttsa")(p, cfg, np.random.default_rng(0))
    alg.step()
    assert type(alg._stream) is IndexStream
    monkeypatch.setattr(algorithms.base, "numpy_draws_as_decoded", lambda: False)
    alg = algorithms.get("ttsa")(p, cfg, np.random.default_rng(0))
    alg.step()
    assert alg._stream is None
