"""Minibatches drawn ahead (algorithms.minibatch_stream, algorithms.index_stream) are the ones drawn when used,
and a run is unchanged.

The reference for each check draws every minibatch with `sample_batch` from its own generator of the same
seed, one call per minibatch, or runs the algorithm on a view of the problem that offers neither
`index_bounds` nor `batches_drawn_whole` (so nothing is drawn ahead).
"""
import numpy as np
import pytest

import algorithms
import problems
from algorithms import index_stream, minibatch_stream
from algorithms.index_stream import IndexStream
from algorithms.minibatch_stream import MinibatchStream
from problems.counting import counted
from tests.algorithms.stepping import Hiding

PROBLEMS = {
    "simulated": dict(dim_x=4, dim_y=3, n_samples_inner=20, n_samples_outer=12),  # unequal sample sets
    "quadratic": dict(dim_x=4, dim_y=3, n_samples=16, rank=1),  # one sample set
    "regularization_selection": dict(dataset="breast_cancer"),
}
HIA_METHODS = {"ttsa", "sustain", "bsa"}  # they draw p with `random_integer`
FLAGGED = sorted(name for name in algorithms.available() if algorithms.get(name).__dict__.get("draws_ahead"))


def as_lists(batch):
    return (batch.inner.tolist(), batch.outer.tolist()) if hasattr(batch, "inner") else batch.tolist()


def no_drawing_ahead(problem):
    """The problem without `index_bounds` and `batches_drawn_whole`: an algorithm on it draws each minibatch
    when it asks."""
    return Hiding(problem, "index_bounds", "batches_drawn_whole")


@pytest.mark.parametrize("name", sorted(PROBLEMS))
def test_taken_in_any_counts_they_are_the_minibatches_drawn_one_by_one(name, monkeypatch):
    monkeypatch.setattr(minibatch_stream, "MAX_AHEAD_INDICES", 40)  # blocks of 4, then 5 at size 8: capped soon
    p = problems.make(name, seed=0, **PROBLEMS[name])
    stream, rng, ref = MinibatchStream(p, 8), np.random.default_rng(5), np.random.default_rng(5)
    for count in (1, 3, 0, 2, 7, 1, 1, 9, 4):
        got = stream.take(rng, count)
        want = [p.sample_batch(ref, 8) for _ in range(count)]
        assert [as_lists(b) for b in got] == [as_lists(b) for b in want]
        assert stream.rng_state(rng) == ref.bit_generator.state  # as if drawn one by one
    assert rng.bit_generator.state != ref.bit_generator.state  # the generator itself is ahead
    stream.settle(rng)
    assert rng.bit_generator.state == ref.bit_generator.state
    assert [as_lists(b) for b in stream.take(rng, 2)] == [as_lists(p.sample_batch(ref, 8)) for _ in range(2)]


def test_blocks_double_from_four_up_to_the_cap(monkeypatch):
    monkeypatch.setattr(minibatch_stream, "MAX_AHEAD_INDICES", 8 * 20)
    p = problems.make("quadratic", seed=0, **PROBLEMS["quadratic"])
    stream, rng, sizes = MinibatchStream(p, 8), np.random.default_rng(0), []
    draw = p.sample_batches

    def counting(rng, size, count):
        sizes.append(count)
        return draw(rng, size, count)

    monkeypatch.setattr(p, "sample_batches", counting)
    for _ in range(60):
        stream.take(rng, 1)
    assert sizes == [4, 8, 16, 20, 20]  # 68 drawn for 60 used


@pytest.mark.parametrize("numbers", [True, False], ids=["index-bounds", "no-index-bounds"])
@pytest.mark.parametrize("problem", sorted(PROBLEMS))
@pytest.mark.parametrize("name", FLAGGED)
def test_a_run_drawing_ahead_equals_one_drawing_each_minibatch_when_used(name, problem, numbers, monkeypatch):
    monkeypatch.setattr(minibatch_stream, "MAX_AHEAD_INDICES", 8 * 6)  # blocks of 4, then 6: many refills
    monkeypatch.setattr(index_stream, "MAX_AHEAD_WORDS", 8 * 2 * 6)
    p = problems.make(problem, seed=1, **PROBLEMS[problem])
    cfg = algorithms.make_config(name, {"batch_size": 8, **({"sub_loops": "fixed"} if name == "dtfbo" else {})})
    ahead = algorithms.get(name)(counted(p if numbers else Hiding(p, "index_bounds")), cfg, np.random.default_rng(3))
    plain = algorithms.get(name)(counted(no_drawing_ahead(p)), cfg, np.random.default_rng(3))
    assert type(ahead._stream) is MinibatchStream and plain._stream is None
    for _ in range(15):
        for alg in (ahead, plain):
            with np.errstate(all="ignore"):  # a step that overflows does so in both
                alg.step()
            alg.iteration += 1
        assert ahead.state_dict()["rng"] == plain.state_dict()["rng"]
        np.testing.assert_array_equal(ahead.x, plain.x)
        np.testing.assert_array_equal(ahead.y, plain.y)
    assert ahead.problem.counter.calls == plain.problem.counter.calls
    # An HIA method draws its length p: from then on numbers drawn ahead serve it, or, without index
    # minibatches, nothing is drawn ahead.
    assert type(ahead._stream) is (MinibatchStream if name not in HIA_METHODS else IndexStream if numbers
                                   else type(None))


@pytest.mark.parametrize("name", ["soba", "ttsa"])  # whole minibatches drawn ahead; numbers (after p)
def test_a_state_saved_mid_block_resumes_the_run_exactly(name):
    p = problems.make("simulated", seed=0, **PROBLEMS["simulated"])
    run = algorithms.Run(name, p, {"batch_size": 5}, seed=2, budget={"iterations": 40})
    full = algorithms.Run(name, p, {"batch_size": 5}, seed=2, budget={"iterations": 40})
    for _ in range(8):  # the start, then 7 steps; SOBA's: 14 minibatches used of 28 drawn (blocks of 4, 8, 16)
        run.advance()
    stream = run.algorithm._stream
    assert (len(stream._words) - stream._pos if name == "ttsa" else len(stream._ready)) > 0  # saved mid-block
    saved = run.state_dict()
    resumed = algorithms.Run(name, p, {"batch_size": 5}, seed=99, budget={"iterations": 40})
    resumed.load_state_dict(saved)
    strip = lambda rec: {k: v for k, v in rec.items() if k not in ("time", "cpu_time", "eval_time")}  # noqa: E731
    want = [strip(r) for r in full.records()][8:]
    assert [strip(r) for r in resumed.records()] == want
    assert [strip(r) for r in run.records()] == want  # saving did not disturb the run itself


def test_reading_rng_leaves_it_where_the_minibatches_used_leave_it():
    # Anything else drawn from `rng` (an algorithm outside `draws_ahead`, a caller) is drawn as before.
    p = problems.make("simulated", seed=0, **PROBLEMS["simulated"])
    alg = algorithms.get("soba")(p, algorithms.make_config("soba", {"batch_size": 5}), np.random.default_rng(4))
    ref = np.random.default_rng(4)
    used = [as_lists(b) for b in alg.batches(3)]
    assert used == [as_lists(p.sample_batch(ref, 5)) for _ in range(3)]
    assert alg.rng.standard_normal() == ref.standard_normal()
    assert as_lists(alg.batch()) == as_lists(p.sample_batch(ref, 5))
    alg.rng = np.random.default_rng(8)  # a generator set from outside: nothing of the old one is served
    assert as_lists(alg.batch()) == as_lists(p.sample_batch(np.random.default_rng(8), 5))


def test_lazily_drawn_noise_is_never_drawn_ahead():
    # The dense model's noise draws from the generator as oracles ask: minibatches drawn ahead would reorder it.
    dense = problems.make("constrained_quadratic", seed=0, d=12, noise=0.01, noise_model="dense")
    diagonal = problems.make("constrained_quadratic", seed=0, d=12, noise=0.01)
    assert not dense.batches_drawn_whole() and diagonal.batches_drawn_whole()
    cfg = algorithms.make_config("soba", {"batch_size": 3})
    assert algorithms.get("soba")(counted(dense), cfg, np.random.default_rng(0))._stream is None


def test_a_problem_with_its_own_sample_batch_is_not_drawn_ahead_until_it_says_so():
    quadratic = problems.make("quadratic", seed=0, **PROBLEMS["quadratic"])

    class OwnDraw(type(quadratic)):
        def sample_batch(self, rng, size):
            return super().sample_batch(rng, size)

    quadratic.__class__ = OwnDraw
    assert not quadratic.batches_drawn_whole()
    simulated = problems.make("simulated", seed=0, **PROBLEMS["simulated"])
    assert problems.make("quadratic", seed=0, **PROBLEMS["quadratic"]).batches_drawn_whole()
    assert simulated.batches_drawn_whole()  # two index sets, its own sample_batch: declared whole
