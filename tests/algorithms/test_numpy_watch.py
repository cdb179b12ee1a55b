"""The NumPy engines' iterate check (algorithms.explicit.divergence.NumpyWatch) gives exactly what
`watch_iterates` gives, step after step, on one run's 1-D iterates and on a stack's rows: finite values, values on
and around a limit, past 1e100, NaN and inf, runs failing at different steps; and its screens do pass the common
step (a check that always fell through to `watch_iterates` would be equal but would not be the point)."""
from collections import namedtuple

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from algorithms.explicit import divergence
from algorithms.explicit.divergence import NEVER, NumpyWatch, iterate_limits, watch_iterates
from algorithms.run_settings import Divergence

State = namedtuple("State", "x y t")

#: Entries that put a squared norm on, just inside or just past a limit of 100 (‖·‖ = 10), or past 1e100.
SPECIAL = [0.0, -0.0, 1.0, 10.0, np.nextafter(10.0, 0.0), np.nextafter(10.0, 20.0), 7.0710678118654755, 1e100,
           1e101, 1e160, np.nan, np.inf, -np.inf]
entries = st.one_of(st.floats(-20.0, 20.0, allow_nan=False), st.sampled_from(SPECIAL))


def iterates(k, d, per_run):
    shape = (d,) if per_run else (k, d)
    return st.lists(entries, min_size=int(np.prod(shape)), max_size=int(np.prod(shape))).map(
        lambda v: np.array(v, dtype=float).reshape(shape))


@st.composite
def runs(draw):
    """(start state, the states of the steps after it) of one run (1-D) or a stack of k runs."""
    per_run = draw(st.booleans())
    k, dx, dy, n = 1 if per_run else draw(st.integers(1, 5)), draw(st.integers(1, 4)), draw(st.integers(1, 3)), draw(st.integers(1, 6))
    t_shape = (1,) if per_run else (k, 1)
    starts = st.floats(-30.0, 30.0, allow_nan=False)  # each run's limits from its own start
    start = State(*(np.array(draw(st.lists(starts, min_size=k * d, max_size=k * d))).reshape((d,) if per_run else
                                                                                            (k, d)) for d in (dx, dy)),
                  np.zeros(t_shape))
    steps = [State(draw(iterates(k, dx, per_run)), draw(iterates(k, dy, per_run)), np.full(t_shape, i + 1.0))
             for i in range(n)]
    return start, steps


@settings(max_examples=300, deadline=None)
@given(runs(), st.sampled_from([{}, {"factor": 10.0}, {"metrics": ["objective"]}]))
def test_the_numpy_watch_gives_what_watch_iterates_gives_at_every_step(run, rule):
    start, steps = run
    limits = iterate_limits(start, np, Divergence.from_dict(rule))
    watch = NumpyWatch(start, limits)
    want = got = (np.full(start.t.shape, NEVER), np.zeros(start.t.shape))
    with np.errstate(all="ignore"):
        for state in steps:
            want = watch_iterates(state, *want, limits, np)
            got = watch(state, *got)
            np.testing.assert_array_equal(got[0], want[0])
            np.testing.assert_array_equal(got[1], want[1])


@pytest.mark.parametrize("per_run", [True, False])
def test_a_value_on_its_limit_is_judged_by_watch_iterates(per_run):
    """‖x‖² exactly at its limit passes, one ulp past fails: the screens' margin sends both to the exact check."""
    shape = (3,) if per_run else (2, 3)
    start = State(np.zeros(shape), np.zeros(shape), np.zeros((1,) if per_run else (2, 1)))
    limits = (np.full(start.t.shape, 100.0), np.full(start.t.shape, 100.0))
    for edge, failed in ((10.0, NEVER), (np.nextafter(10.0, 20.0), 1.0)):
        x = np.zeros(shape)
        x[..., 0] = edge
        got = NumpyWatch(start, limits)(State(x, np.zeros(shape), start.t + 1), np.full(start.t.shape, NEVER),
                                        np.zeros(start.t.shape))
        np.testing.assert_array_equal(got[0], np.full(start.t.shape, failed))


def test_the_screens_pass_a_stack_in_bounds_without_the_exact_check(monkeypatch):
    """A stack well inside its limits never reaches `watch_iterates`; once a run has failed, the other runs' steps
    pass the per-run screen (the failed run does not stop it), and a new failure still reaches the exact check."""
    calls = []
    monkeypatch.setattr(divergence, "watch_iterates", lambda *a: calls.append(1) or watch_iterates(*a))
    start = State(np.ones((4, 3)), np.ones((4, 2)), np.zeros((4, 1)))
    watch = NumpyWatch(start, iterate_limits(start, np))
    failed = (np.full((4, 1), NEVER), np.zeros((4, 1)))
    failed = watch(State(np.full((4, 3), 2.0), np.ones((4, 2)), np.ones((4, 1))), *failed)
    assert calls == [] and watch.going is None
    x = np.full((4, 3), 2.0)
    x[1] = np.nan
    failed = watch(State(x, np.ones((4, 2)), np.full((4, 1), 2.0)), *failed)
    assert calls == [1] and failed[0].ravel().tolist() == [NEVER, 2.0, NEVER, NEVER]
    failed = watch(State(x, np.ones((4, 2)), np.full((4, 1), 3.0)), *failed)
    assert calls == [1]
    x[3] = 1e7  # past the default limit (1e6 · ‖start‖)
    failed = watch(State(x, np.ones((4, 2)), np.full((4, 1), 4.0)), *failed)
    assert calls == [1, 1] and failed[0].ravel().tolist() == [NEVER, 2.0, NEVER, 4.0]
