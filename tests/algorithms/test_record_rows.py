"""A point's records made from a shared record with each run's own fields set (algorithms.explicit.result._rows)
are the dicts {name: column[run]}: the same keys in the same order, the same values of the same types, a zero's
sign and a NaN included; a column is one shared value at a point only where every run has it (`_Column`)."""
import math
import platform
import sys

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from algorithms.explicit.result import _Column, _record_maker, _rows


def plain(names, cols, k):
    return [dict(zip(names, row)) for row in zip(*cols)] if cols else [{} for _ in range(k)]


def same_records(got, want):
    """Equal as the store writes them: keys in order, values by type and bits (NaN == NaN, -0.0 != 0.0)."""
    def key(v):
        return (type(v), math.copysign(1.0, v), math.isnan(v) or v) if type(v) is float else (type(v), v)
    return [list(r) for r in got] == [list(r) for r in want] and all(
        key(a) == key(b) for g, w in zip(got, want) for a, b in zip(g.values(), w.values()))


def one_value(col):
    """Whether every run has the same value, by type and bits (a NaN is no run's value twice)."""
    def key(v):
        return (type(v), math.copysign(1.0, v), v) if type(v) is float else (type(v), v)
    return len({key(v) for v in col}) == 1 and not any(type(v) is float and math.isnan(v) for v in col)


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


@given(point(), st.data())
def test_a_points_records_are_the_columns_row_by_row(case, data):
    names, cols, k = case
    # a column every run has alike may be given as its one value, or as every run's (then each run sets its own)
    same = tuple(one_value(c) and data.draw(st.booleans()) for c in cols)
    values = [c[0] if one else c for c, one in zip(cols, same)]
    assert same_records(_rows(names, values, same, k), plain(names, cols, k))


@given(st.lists(st.lists(st.sampled_from([0.0, -0.0, 2.0, math.nan, -1.5]), min_size=3, max_size=3),
                min_size=1, max_size=4))
def test_a_column_is_one_value_at_a_point_only_where_every_run_has_it(rows):
    col = _Column(np.array(rows))
    for i, row in enumerate(rows):
        assert col.same[i] == one_value(row)
        got = col.at(i)
        assert same_records([{"v": v} for v in ([got] * 3 if col.same[i] else got)], [{"v": v} for v in row])


def test_a_zero_of_either_sign_and_a_shared_nan_stay_as_each_run_has_them():
    col = _Column(np.array([[0.0, -0.0, 0.0], [math.nan] * 3, [2.0] * 3]))
    assert col.same == [False, False, True]
    names = ("iteration", "status", "F", "calls/f", "time")
    values, same = [3, "running", col.at(0), 2, col.at(1)], (True, True, False, True, False)
    got = _rows(names, values, same, 3)
    assert same_records(got, plain(names, [[3] * 3, ["running"] * 3, [0.0, -0.0, 0.0], [2] * 3, [math.nan] * 3], 3))
    assert [math.copysign(1.0, r["F"]) for r in got] == [1.0, -1.0, 1.0]
    assert got[0] is not got[1] and list(got[2]) == list(names)  # each run its own dict, fields in order


def test_a_records_copies_share_its_table_of_keys_on_cpython():
    names = tuple(f"calls/{j}" for j in range(28))
    record = _record_maker(names)(*range(28))
    assert type(record) is dict and record == dict(zip(names, range(28))) and list(record) == list(names)
    if platform.python_implementation() == "CPython":  # a copy holds its values only: 296 against 832 bytes
        assert sys.getsizeof(record.copy()) < 0.5 * sys.getsizeof(dict(zip(names, range(28))).copy())
        made = _rows(names, [*range(27), [0.5, -0.5]], (True,) * 27 + (False,), 2)  # its own field set in each copy
        assert [r[names[-1]] for r in made] == [0.5, -0.5] and sys.getsizeof(made[1]) == sys.getsizeof(record.copy())
