"""The store's records as columns: a field read slice by slice equals the field read at once; equal strings are one
object; the runs of one place share one `where`; a run without records has none."""
import numpy as np
import pytest

from sweep.results import run_columns
from sweep.results.store import ResultStore
from tests.sweep.results.test_shards import recs, report


def columns_of(tmp_path):
    store = ResultStore(tmp_path)
    report(store, {"a.s0": recs([0, 1, 2], "finished"), "b.s0": recs([0, 1], "diverged")}, ["a.s0", "b.s0"])
    report(store, {"c.s0": [{**r, "extra": 7} for r in recs([0, 1], "finished")]}, ["c.s0"])
    return run_columns.load(store)


def test_a_field_read_slice_by_slice_equals_it_read_at_once(tmp_path):
    cols = columns_of(tmp_path)
    rows = np.array([6, 0, 3, 5, 2])
    for name in ("F", "iteration", "status", "extra"):
        taken, want = cols.taken(name, rows), cols.take(name, rows)
        assert list(taken) == want and taken[1:4] == want[1:4] and taken[-1] == want[-1] and len(taken) == 5
    assert cols.taken("extra", np.array([0, 1, 2])) is None  # no such row has it
    assert cols.taken("nowhere", rows) is None


def test_equal_strings_are_one_object_and_a_missing_one_is_none(tmp_path):
    cols = columns_of(tmp_path)
    statuses = cols.take("status", np.arange(7))
    assert statuses == ["running", "running", "finished", "running", "diverged", "running", "finished"]
    assert statuses[0] is statuses[1] is statuses[3] and statuses[2] is statuses[6]
    assert cols.take("extra", np.arange(7)) == [None] * 5 + [7, 7]


def test_the_runs_of_one_place_share_their_where_and_a_run_without_records_has_none(tmp_path):
    cols = columns_of(tmp_path)
    briefs = [cols.summaries.brief(k) for k in ("a.s0", "b.s0", "c.s0")]
    assert [b[0] for b in briefs] == ["finished", "diverged", "finished"]
    assert briefs[0][1] == {"node": "10.0.0.1", "host": "h"} and briefs[0][1] is briefs[1][1] is briefs[2][1]
    assert cols.summaries.brief("z.s0") is None and list(cols.records("z.s0")) == []
    assert [r["iteration"] for r in cols.records("a.s0")] == [0, 1, 2]


def test_a_run_that_stored_an_iteration_twice_reads_one_record_per_iteration_without_reading_every_shard_again(
        tmp_path, monkeypatch):
    store = ResultStore(tmp_path)
    twice = [*recs([0, 1]), {"iteration": 1, "status": "diverged", "F": 9.0, "diverged_at": 2}]
    report(store, {"d.s0": twice[:2], "a.s0": recs([0, 1], "finished")}, ["a.s0"])
    report(store, {"d.s0": twice[2:]}, ["d.s0"])
    want = ResultStore(tmp_path).records("d.s0")
    assert [(r["iteration"], r["status"], r["F"]) for r in want] == [(0, "running", 1.0), (1, "diverged", 9.0)]
    fresh = ResultStore(tmp_path)
    monkeypatch.setattr(type(fresh.shards), "read", lambda self: pytest.fail("every shard read again"))
    cols = run_columns.load(fresh)
    assert list(cols.records("d.s0")) == want and [r["iteration"] for r in cols.records("a.s0")] == [0, 1]


def history(tmp_path):
    """Runs reported over several shards: one in two reports, one that stored an iteration twice, one from a JSON
    shard, one still running, and a finished one beside them."""
    from tests.sweep.results.test_shards import json_report

    store = ResultStore(tmp_path)
    twice = [*recs([0, 1]), {"iteration": 1, "status": "diverged", "F": 9.0, "diverged_at": 2}]
    report(store, {"a.s0": recs([0, 1]), "d.s0": twice[:2], "b.s0": recs([0, 4], "finished"), "r.s0": recs([0])},
           ["b.s0"])
    report(store, {"a.s0": recs([2, 3], "finished"), "d.s0": twice[2:]}, ["a.s0", "d.s0"])
    json_report(store, {"j.s0": recs([0, 5], "finished")}, ["j.s0"])
    return ResultStore(tmp_path)


def test_each_runs_last_record_alone_gives_its_summary_and_final_values_as_every_record_does(tmp_path):
    store = history(tmp_path)
    full, last = run_columns.load(store), run_columns.load(store, last_only=True)
    keys = ["a.s0", "b.s0", "d.s0", "j.s0", "r.s0"]
    for key in keys:
        assert list(last.records(key)) == [full.records(key)[-1]], key
        assert last.summary(key) == full.summary(key), key
    assert last.ends(keys)[0] == full.ends(keys)[0] == ["finished", "finished", None, None, None]
    rows_last, rows_full = last.ends(keys)[1], full.ends(keys)[1]
    for name in ("F", "iteration", "status"):
        assert last.take(name, rows_last[:2]) == full.take(name, rows_full[:2])
    assert full.records("a.s0")[-1]["iteration"] == 3 and last.records("d.s0")[-1]["status"] == "diverged"


def test_the_records_of_some_runs_only_equal_theirs_among_every_run(tmp_path):
    store = history(tmp_path)
    full, some = run_columns.load(store), run_columns.load(store, runs={"a.s0", "d.s0", "j.s0"})
    assert list(some.records("a.s0")) == list(full.records("a.s0")) and len(full.records("a.s0")) == 4
    assert list(some.records("d.s0")) == list(full.records("d.s0"))
    assert list(some.records("b.s0")) == [] and some.summary("b.s0") is None  # nor its summary
    assert all(some.summary(k) == full.summary(k) is not None for k in ("a.s0", "d.s0", "j.s0"))
    assert list(some.records("j.s0")) == list(full.records("j.s0")) and len(full.records("j.s0")) == 2
