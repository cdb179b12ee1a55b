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


def flat(batch):
    """A batch's numbers as one list: index arrays, two-set batches, noise arrays; None stays None."""
    if batch is None or isinstance(batch, np.ndarray):
        return None if batch is None else batch.tolist()
    if hasattr(batch, "inner"):
        return [batch.inner.tolist(), batch.outer.tolist()]
    return [id(m.rng) for m in batch.matrices]  # a lazy dense noise: nothing drawn yet, only its generator


@pytest.mark.parametrize("name, params", [
    ("quadratic", {"dim_x": 3, "dim_y": 3, "n_samples": 50}),  # one sample set: plain index arrays
    ("simulated", {"dim_x": 3, "dim_y": 3, "n_samples_inner": 16, "n_samples_outer": 16}),
    ("simulated", {"dim_x": 3, "dim_y": 3, "n_samples_inner": 16, "n_samples_outer": 12}),
    ("regularization_selection", {}),
    ("constrained_quadratic", {"d": 4, "p": 2, "noise": 0.1}),  # its own sample_batch: called in turn
    ("constrained_quadratic", {"d": 4, "p": 2, "noise": 0.1, "noise_model": "dense"}),
    ("quadratic", {"dim_x": 3, "dim_y": 3}),  # deterministic: None batches
], ids=lambda v: v if isinstance(v, str) else "-".join(f"{k}={x}" for k, x in v.items()))
def test_batches_drawn_together_are_the_batches_drawn_in_turn(name, params):
    p = problems.make(name, seed=0, **params)
    for count in (0, 1, 2, 3):
        for size in (1, 5):
            rng, ref = np.random.default_rng(count), np.random.default_rng(count)
            together = p.sample_batches(rng, size, count)
            in_turn = [p.sample_batch(ref, size) for _ in range(count)]
            assert len(together) == count
            if name == "constrained_quadratic" and params.get("noise_model") == "dense":
                assert all(flat(b) == [id(rng)] * 3 for b in together)  # drawn later, from the same generator
            else:
                assert [flat(b) for b in together] == [flat(b) for b in in_turn]
            assert same_state(rng, ref)


def test_batches_drawn_together_are_read_only_views():
    p = problems.make("regularization_selection", seed=0)
    b, c = p.sample_batches(np.random.default_rng(0), 8, 2)
    for idx in (b.inner, b.outer, c.inner, c.outer):
        assert len(idx) == 8 and not idx.flags.writeable
    assert np.all(b.inner < p.n_inner) and np.all(b.outer < p.n_outer) and np.all(c.outer < p.n_outer)
    q = problems.make("quadratic", seed=0, dim_x=3, dim_y=3, n_samples=50)
    for idx in q.sample_batches(np.random.default_rng(0), 8, 3):
        assert len(idx) == 8 and not idx.flags.writeable and np.all(idx < 50)
