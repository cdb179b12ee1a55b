"""The stacked engines window by window (the JAX engine's `CompiledStack`, algorithms/explicit/jax_engine.py, and the
NumPy engine's `NumpyStack`, numpy_engines.py): a stack advanced over any windows of its evaluation points gives
exactly the records of one window, and a stack rebuilt from its runs' saved states (through a checkpoint's encoding,
in another order, after a diverged run left) goes on exactly as the first would have: iterates, random streams,
divergence and seconds' continuity included."""
import numpy as np
import pytest

import problems
from algorithms import explicit
from algorithms.checkpoint import decode, encode
from algorithms.explicit.jax_engine import CompiledStack
from algorithms.explicit.numpy_engines import NumpyStack, saved_by
from tests.algorithms.test_engines import (CONFIGS, DIVERGING, EXACT, ITERATIONS, N_EVALS, NOT_NUMBERS, PER_SAMPLE,
                                           needs_jax)

SEEDS = [7, 3, 5, 11]
ENGINES = [pytest.param(CompiledStack, marks=needs_jax, id="jax"), pytest.param(NumpyStack, id="numpy")]
SAVED = {CompiledStack: "jax", NumpyStack: "numpy"}


def stack(name, problem, configs, saved=None, order=None, engine=CompiledStack):
    order = order or list(range(len(configs)))
    defn = explicit.definition(name)
    return engine(defn, problem, defn.configs([configs[k] for k in order]), explicit.points(ITERATIONS, N_EVALS),
                  [SEEDS[k] for k in order], saved=saved)


def whole(name, problem, configs, engine):
    s = stack(name, problem, configs, engine=engine)
    s.advance(len(s.points) - 1)
    return s


def stored(states):
    """The states as a checkpoint stores and reads them back (algorithms/checkpoint.py)."""
    arrays = {}
    doc = encode(states, arrays)
    return decode(doc, {k: np.array(v) for k, v in arrays.items()})


def assert_same_records(mine, theirs, rtol=0.0):
    """Equal records, run by run and point by point: every number to `rtol` (0: exactly), the seconds aside."""
    key = lambda kr: (kr[0], kr[1]["iteration"])  # noqa: E731
    mine, theirs = sorted(mine, key=key), sorted(theirs, key=key)
    assert [key(p) for p in mine] == [key(p) for p in theirs]
    for (_, a), (_, b) in zip(mine, theirs):
        assert a.keys() == b.keys()
        for n in set(a) - set(NOT_NUMBERS[2:5]):
            assert a[n] == b[n] or (a[n] != a[n] and b[n] != b[n]) or \
                (type(a[n]) is float and abs(a[n] - b[n]) <= rtol * max(1.0, abs(b[n]))), (n, a[n], b[n])


def cases():
    quadratic = problems.make("quadratic", seed=1, dim_x=5, dim_y=4)
    for name, configs in CONFIGS.items():
        yield pytest.param(name, quadratic, [*configs, *([DIVERGING[name]] if name in DIVERGING else [])], id=name)
    finite = problems.make("quadratic", seed=2, dim_x=4, dim_y=5, n_samples=12, rank=3)
    yield pytest.param("saba", finite, PER_SAMPLE["saba"], id="saba-finite-sum")
    yield pytest.param("soba", finite, [{"rho": 0.1, "gamma": 0.1, "batch_size": 4}, {"rho": 0.05, "gamma": 0.2,
                       "batch_size": 4}], id="soba-minibatches")  # draws from its keys
    yield pytest.param("soba", problems.make("simulated", seed=0), CONFIGS["soba"], id="soba-simulated")  # host truth


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("name, problem, configs", list(cases()))
def test_windows_and_a_resume_from_saved_states_give_the_records_of_one_window(name, problem, configs, engine):
    reference = whole(name, problem, configs, engine)
    expected = list(reference.result().records())
    s = stack(name, problem, configs, engine=engine)
    s.advance(2)
    s.advance(4)
    first = list(s.result().records())
    assert_same_records(first, [(k, r) for k, r in expected if r["iteration"] <= s.points[4]])
    assert list(s.result().records(since=3)) == [(k, r) for k, r in first if r["iteration"] >= s.points[3]]
    states = stored(s.saved())
    assert all(saved_by(state) == SAVED[engine] and state["point"] == 4 for state in states)
    same = stack(name, problem, configs, saved=states, engine=engine)  # every row, in its order: the same program, exactly
    same.advance(len(s.points) - 1)
    assert_same_records(first + list(same.result().records(since=5)), expected)
    ended = {k for k, r in first if r["status"] == "diverged"}
    going = [k for k in range(len(configs)) if k not in ended][::-1]  # the going runs, in another order
    again = stack(name, problem, configs, saved=[states[k] for k in going], order=going, engine=engine)
    for to in (5, len(s.points) - 1):
        again.advance(to)
    rest = [(going[k], r) for k, r in again.result().records(since=5)]
    assert_same_records(first + rest, expected, rtol=EXACT)  # another stack: XLA's (BLAS's) rounding may differ
    times = {k: [r["time"] for j, r in first + rest if j == k] for k in going}
    assert all(np.all(np.diff(t) >= 0) for t in times.values())  # a resumed run's seconds go on from its own


@pytest.mark.parametrize("engine", ENGINES)
def test_a_window_must_go_forward(engine):
    s = stack("soba", problems.make("quadratic", seed=1, dim_x=5, dim_y=4), CONFIGS["soba"], engine=engine)
    s.advance(3)
    for to in (3, 1, len(s.points)):
        with pytest.raises(ValueError, match="to: a point after 3 and before"):
            s.advance(to)


@pytest.mark.parametrize("engine", ENGINES)
def test_saved_states_must_share_their_point(engine):
    problem = problems.make("quadratic", seed=1, dim_x=5, dim_y=4)
    a, b = (stack("soba", problem, CONFIGS["soba"], engine=engine) for _ in range(2))
    a.advance(2)
    b.advance(3)
    with pytest.raises(ValueError, match="all saved at the same point"):
        stack("soba", problem, CONFIGS["soba"][:2], saved=[a.saved()[0], b.saved()[1]], engine=engine)
