"""Two-set minibatches: one draw for both levels is exactly two draws, for every bit generator."""
import numpy as np
import pytest

import problems

GENERATORS = (np.random.PCG64, np.random.PCG64DXSM, np.random.MT19937, np.random.Philox, np.random.SFC64)


def same_state(a, b):
    """Bit-generator states compared field by field (some hold arrays)."""
    def flat(state):
        return {k: (flat(v) if isinstance(v, dict) else np.asarray(v).tolist()) for k, v in state.items()}
    return flat(a.bit_generator.state) == flat(b.bit_generator.state)


@pytest.mark.parametrize("bitgen", GENERATORS, ids=lambda g: g.__name__)
@pytest.mark.parametrize("n", [1, 5, 1024, 3**19, 2**33 + 7])
def test_one_draw_of_twice_the_size_is_two_draws(bitgen, n):
    for seed in range(20):
        for size in (1, 7, 64):
            one, two = np.random.Generator(bitgen(seed)), np.random.Generator(bitgen(seed))
            joint = one.integers(0, n, size=2 * size)
            first, second = two.integers(0, n, size=size), two.integers(0, n, size=size)
            assert np.array_equal(joint, np.concatenate([first, second]))
            assert same_state(one, two)


@pytest.mark.parametrize("bitgen", GENERATORS, ids=lambda g: g.__name__)
@pytest.mark.parametrize("bounds", [(5, 3), (1024, 455), (3**19, 7), (2**33 + 7, 1024), (2, 2**34)])
def test_one_draw_with_an_array_of_bounds_is_the_draws_bound_by_bound(bitgen, bounds):
    for seed in range(20):
        for size in (1, 7, 64):
            one, two = np.random.Generator(bitgen(seed)), np.random.Generator(bitgen(seed))
            joint = one.integers(0, np.repeat(np.array(bounds, dtype=np.int64), size))
            parts = [two.integers(0, n, size=size) for n in bounds]
            assert np.array_equal(joint, np.concatenate(parts))
            assert same_state(one, two)


@pytest.mark.parametrize("sizes", [(16, 16), (16, 12)])
def test_two_set_batches_are_the_per_level_draws(sizes):
    p = problems.make("simulated", seed=0, dim_x=3, dim_y=3, n_samples_inner=sizes[0], n_samples_outer=sizes[1])
    rng, ref = np.random.default_rng(5), np.random.default_rng(5)
    for _ in range(10):
        b = p.sample_batch(rng, 9)
        assert np.array_equal(b.inner, ref.integers(0, sizes[0], size=9))
        assert np.array_equal(b.outer, ref.integers(0, sizes[1], size=9))
        assert not b.inner.flags.writeable and not b.outer.flags.writeable
    assert same_state(rng, ref)
