"""A point's records made from a shared record with each run's own fields set (algorithms.explicit.result._rows)
are the dicts {name: column[run]}: the same keys in the same order, the same values of the same types, a zero's
sign and a NaN included."""
import math

from hypothesis import given
from hypothesis import strategies as st

from algorithms.explicit.result import _rows


def plain(names, cols, k):
    return [dict(zip(names, row)) for row in zip(*cols)] if cols else [{} for _ in range(k)]


def same_records(got, want):
    """Equal as the store writes them: keys in order, values by type and bits (NaN == NaN, -0.0 != 0.0)."""
    def key(v):
        return (type(v), math.copysign(1.0, v), math.isnan(v) or v) if type(v) is float else (type(v), v)
    return [list(r) for r in got] == [list(r) for r in want] and all(
        key(a) == key(b) for g, w in zip(got, want) for a, b in zip(g.values(), w.values()))


@st.composite
def point(draw):
    k = draw(st.integers(1, 6))
    n = draw(st.integers(1, 7))
    cols = []
    for _ in range(n):  # a column of one type, as NumPy's tolist gives: shared (one value) or each run's own
        kind = draw(st.sampled_from(["int", "float", "str"]))
        pick = {"int": st.integers(-2, 2), "float": st.sampled_from([0.0, -0.0, 2.0, math.nan]),
                "str": st.sampled_from("ab")}[kind]
        cols.append([draw(pick)] * k if draw(st.booleans()) else draw(st.lists(pick, min_size=k, max_size=k)))
    return tuple(f"m{j}" for j in range(n)), cols, k


@given(point())
def test_a_points_records_are_the_columns_row_by_row(case):
    names, cols, k = case
    assert same_records(_rows(names, cols, k), plain(names, cols, k))


def test_a_zero_of_either_sign_and_a_shared_nan_stay_as_each_run_has_them():
    names = ("iteration", "status", "F", "calls/f", "time")
    cols = [[3, 3, 3], ["running"] * 3, [0.0, -0.0, 0.0], [2, 2, 2], [math.nan] * 3]
    got = _rows(names, cols, 3)
    assert same_records(got, plain(names, cols, 3))
    assert [math.copysign(1.0, r["F"]) for r in got] == [1.0, -1.0, 1.0]
    assert got[0] is not got[1] and list(got[2]) == list(names)  # each run its own dict, fields in order
