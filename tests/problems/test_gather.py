"""RowCache: a minibatch's rows are gathered once, equal plain indexing, and are never stale."""
import numpy as np
import pytest

import problems
from problems.gather import BUFFER_BYTES, CACHE_BYTES, RowCache, frozen_indices

RNG = np.random.default_rng(0)
SMALL = RNG.standard_normal((50, 3))  # 8 rows are 192 B: copied afresh, never remembered
MEDIUM = RNG.standard_normal((50, 600))  # 8 rows are 38 KB: remembered
LARGE = RNG.standard_normal((50, 2, 2000))  # 8 rows are 256 KB: remembered in a reused buffer


def test_sampled_batches_are_read_only():
    quad = problems.make("quadratic", seed=0, n_samples=30)
    sim = problems.make("simulated", seed=0, dim_x=4, dim_y=4, n_samples_inner=16, n_samples_outer=12)
    rng = np.random.default_rng(1)
    b, tb = quad.sample_batch(rng, 5), sim.sample_batch(rng, 5)
    for idx in (b, tb.inner, tb.outer):
        assert not idx.flags.writeable and (idx.base is None or not idx.base.flags.writeable)
        with pytest.raises(ValueError, match="read-only"):
            idx[0] = 1


def test_block_sizes_take_the_paths_they_are_named_for():
    assert 8 * SMALL[0].nbytes < CACHE_BYTES <= 8 * MEDIUM[0].nbytes < BUFFER_BYTES <= 8 * LARGE[0].nbytes


def test_small_blocks_are_copied_afresh():
    cache = RowCache()
    idx = frozen_indices(np.array([3, 3, 0, 49, 7, 1, 2, 10]))
    first = cache.rows("a", SMALL, idx)
    again = cache.rows("a", SMALL, idx)
    assert np.array_equal(first, SMALL[idx]) and np.array_equal(again, SMALL[idx]) and again is not first


@pytest.mark.parametrize("array", [MEDIUM, LARGE], ids=["remembered", "buffered"])
def test_rows_equal_indexing_and_are_shared_while_the_batch_is_the_same(array):
    cache = RowCache()
    idx = frozen_indices(np.array([3, 3, 0, 49, 7, 1, 2, 10]))
    first = cache.rows("a", array, idx)
    assert np.array_equal(first, array[idx]) and not first.flags.writeable
    assert cache.rows("a", array, idx) is first
    other = frozen_indices(np.array([5, 4, 3, 2, 1, 0, 9, 8]))
    assert np.array_equal(cache.rows("a", array, other), array[other])
    assert cache.rows("a", array, idx) is not first  # a new batch replaced it, and is gathered afresh
    assert np.array_equal(cache.rows("a", array, idx), array[idx])


def test_names_are_cached_separately():
    cache = RowCache()
    idx = frozen_indices(np.arange(8))
    assert np.array_equal(cache.rows("a", MEDIUM, idx), MEDIUM[idx])
    assert np.array_equal(cache.rows("b", 2 * MEDIUM, idx), 2 * MEDIUM[idx])
    assert np.array_equal(cache.rows("a", MEDIUM, idx), MEDIUM[idx])


def test_indices_that_may_change_are_gathered_every_time():
    cache = RowCache()
    writable = np.arange(1, 9)
    assert np.array_equal(cache.rows("a", MEDIUM, writable), MEDIUM[1:9])
    writable[0] = 20  # the same array object, new contents: the rows follow
    assert np.array_equal(cache.rows("a", MEDIUM, writable), MEDIUM[[20, 2, 3, 4, 5, 6, 7, 8]])
    base = np.arange(8)
    view = base[:]
    view.setflags(write=False)  # read-only, but its base can still change
    cache.rows("a", MEDIUM, view)
    base[0] = 30
    assert np.array_equal(cache.rows("a", MEDIUM, view), MEDIUM[[30, 1, 2, 3, 4, 5, 6, 7]])
    frozen_base = frozen_indices(np.arange(16))
    half = frozen_base[8:]  # a view of a read-only array: remembered
    assert cache.rows("a", MEDIUM, half) is cache.rows("a", MEDIUM, half)
    assert np.array_equal(cache.rows("a", MEDIUM, list(range(8))), MEDIUM[:8])
    mask = np.zeros(50, bool)
    mask[:9] = True
    assert np.array_equal(cache.rows("a", MEDIUM, frozen_indices(mask)), MEDIUM[:9])


@pytest.mark.parametrize("array", [SMALL, MEDIUM, LARGE], ids=["small", "remembered", "buffered"])
def test_out_of_range_and_negative_indices_behave_as_indexing(array):
    cache = RowCache()
    neg = frozen_indices(np.array([-1, 0, -50, 3, 4, 5, 6, 7]))
    assert np.array_equal(cache.rows("a", array, neg), array[np.array([-1, 0, -50, 3, 4, 5, 6, 7])])
    with pytest.raises(IndexError):
        cache.rows("a", array, frozen_indices(np.array([0, 1, 2, 3, 4, 5, 6, 50])))


def test_buffered_rows_of_an_old_batch_are_not_handed_out_again():
    cache = RowCache()
    a, b = (frozen_indices(np.arange(k, k + 8)) for k in (0, 10))
    rows_a = cache.rows("a", LARGE, a).copy()
    cache.rows("a", LARGE, b)
    assert np.array_equal(cache.rows("a", LARGE, a), rows_a)


def test_a_second_thread_gets_fresh_rows_and_copies_start_empty():
    import copy
    import pickle
    import threading

    cache = RowCache()
    a, b = (frozen_indices(np.arange(k, k + 8)) for k in (0, 10))
    mine = cache.rows("a", LARGE, a)
    seen = {}
    thread = threading.Thread(target=lambda: seen.setdefault("rows", cache.rows("a", LARGE, b)))
    thread.start()
    thread.join()
    assert np.array_equal(seen["rows"], LARGE[b]) and seen["rows"].flags.writeable  # gathered afresh
    assert cache.rows("a", LARGE, a) is mine  # the owner's rows were left alone
    for clone in (copy.deepcopy(cache), pickle.loads(pickle.dumps(cache))):
        got = [None]
        worker = threading.Thread(target=lambda: got.__setitem__(0, clone.rows("a", LARGE, b)))
        worker.start()
        worker.join()
        assert np.array_equal(got[0], LARGE[b]) and not got[0].flags.writeable  # a fresh, claimable cache
