"""The store whose unit is the report: a shard per Tune report committed by one index line; a kill at any point
loses and duplicates nothing; an older results directory (a file per run) still loads, resumes and reports."""
import json
import os

import pytest

from sweep.report.frames import load_results
from sweep.results.shards import ShardLog, shard_lines
from sweep.results.store import ResultStore, records_text


def recs(steps, final=None, scale=1.0):
    out = [{"iteration": s, "status": "running", "F": scale / (s + 1)} for s in steps]
    if final:
        out[-1]["status"] = final
    return out


def summary(key, status="finished", final=None):
    """A summary a Parquet shard cannot hold whole (no seed, a final record of its own): written as JSON lines."""
    return {"run_key": key, "status": status, "final": final or {"iteration": 2, "F": 1 / 3}, "where": {}}


def report(store, runs, ended=()):
    """What StoreCallback does with one Tune report: runs = {key: records}; ended: the keys it ends (their
    summaries as the driver makes them: the final record is the run's last, the seed ends the key)."""
    ends = [(k, {"run_key": k, "trial_key": "t", "seed": int(k.rsplit(".s", 1)[1]), "status": runs[k][-1]["status"],
                 "final": runs[k][-1], "where": {"node": "10.0.0.1", "host": "h"}, "span": [1.0, 2.5],
                 "point": {"key": k.rsplit(".s", 1)[0]}}) for k in ended]
    return store.write_shard([(k, r, None) for k, r in runs.items()], ends)


def json_report(store, runs, ended=()):
    """A report as an earlier driver wrote it (or one whose summaries do not fit the table): JSON lines."""
    return store.write_shard([(k, r, shard_lines(k, r)) for k, r in runs.items()], [(k, summary(k)) for k in ended])


def read_back(key, records):
    """The summary a Parquet shard gives back of a run `report` ended (its configuration is in study.json)."""
    return {"run_key": key, "status": records[-1]["status"], "final": records[-1],
            "where": {"node": "10.0.0.1", "host": "h"}, "span": [1.0, 2.5], "trial_key": "t",
            "seed": int(key.rsplit(".s", 1)[1])}


def test_a_report_is_one_shard_and_one_index_line_and_reads_back_run_by_run(tmp_path):
    store = ResultStore(tmp_path)
    assert report(store, {"a.s0": recs([0, 1]), "b.s0": recs([0, 1, 2], "finished")}, ["b.s0"]) == 5
    assert report(store, {"a.s0": recs([1, 2], "finished")}, ["a.s0"]) == 1  # iteration 1 again: stored once
    assert sorted(os.listdir(tmp_path / "shards")) == ["00000000.parquet", "00000001.parquet"]
    sizes = [os.path.getsize(tmp_path / "shards" / n) for n in ("00000000.parquet", "00000001.parquet")]
    assert (tmp_path / "shards.txt").read_text() == f"00000000 {sizes[0]}\n00000001 {sizes[1]}\n"
    assert (tmp_path / "ended.txt").read_text() == "finished b.s0\nfinished a.s0\n"
    assert not (tmp_path / "records").exists() and not (tmp_path / "runs").exists()  # no file per run
    later = ResultStore(tmp_path)
    assert later.records("a.s0") == recs([0, 1, 2], "finished")
    assert later.summary("b.s0") == read_back("b.s0", recs([0, 1, 2], "finished"))
    assert later.summary("a.s0")["final"] == {"iteration": 2, "status": "finished", "F": 1 / 3}
    assert later.done(["a.s0", "b.s0", "c.s0"]) == {"a.s0", "b.s0"}
    assert sorted(s["run_key"] for s in later.summaries()) == ["a.s0", "b.s0"]


def test_a_report_that_does_not_fit_the_columns_is_a_json_shard_and_both_kinds_read_alike(tmp_path):
    store = ResultStore(tmp_path)
    json_report(store, {"a.s0": recs([0, 1], "finished")}, ["a.s0"])  # its summary's final is not its last record
    report(store, {"b.s0": recs([0, 1], "finished")}, ["b.s0"])
    report(store, {"c.s0": [{"iteration": 0, "status": "finished", "x": [1.0, 2.0]}]}, ["c.s0"])  # a list value
    assert sorted(os.listdir(tmp_path / "shards")) == ["00000000.jsonl", "00000001.parquet", "00000002.jsonl"]
    later = ResultStore(tmp_path)
    assert later.summary("a.s0") == summary("a.s0") and later.records("a.s0") == recs([0, 1], "finished")
    assert later.summary("b.s0") == read_back("b.s0", recs([0, 1], "finished"))
    assert later.records("c.s0") == [{"iteration": 0, "status": "finished", "x": [1.0, 2.0]}]
    assert later.done(["a.s0", "b.s0", "c.s0"]) == {"a.s0", "b.s0", "c.s0"}


def test_a_parquet_shard_keeps_every_value_as_sent(tmp_path):
    rec = [{"iteration": 0, "status": "running", "F": float("nan"), "g": float("inf"), "n": 3, "ok": True, "s": "x"},
           {"iteration": 1, "status": "diverged", "F": 1e308, "diverged_metric": "F", "n": 2**62}]
    report(ResultStore(tmp_path), {"a.s0": rec}, ["a.s0"])
    assert os.listdir(tmp_path / "shards") == ["00000000.parquet"]
    got = ResultStore(tmp_path).records("a.s0")
    assert repr(got) == repr(rec)  # NaN and inf kept, ints stay ints, a key a record did not have stays out
    assert [type(v) for v in got[0].values()] == [int, str, float, float, int, bool, str]
    mixed = [{"iteration": 0, "status": "running", "F": 1}, {"iteration": 1, "status": "finished", "F": 0.5}]
    report(ResultStore(tmp_path), {"b.s0": mixed}, ["b.s0"])  # an int and a float in one field: JSON lines
    assert sorted(os.listdir(tmp_path / "shards")) == ["00000000.parquet", "00000001.jsonl"]
    assert repr(ResultStore(tmp_path).records("b.s0")) == repr(mixed)


def test_a_shard_without_its_index_line_is_ignored_and_collected_on_resume(tmp_path):
    store = ResultStore(tmp_path)
    report(store, {"a.s0": recs([0, 1], "finished")}, ["a.s0"])
    (tmp_path / "shards" / "00000001.jsonl").write_text(shard_lines("b.s0", recs([0, 1], "finished"))
                                                        + json.dumps({"summary": summary("b.s0")}) + "\n")
    (tmp_path / "shards" / "00000002.parquet").write_bytes((tmp_path / "shards" / "00000000.parquet").read_bytes())
    later = ResultStore(tmp_path)  # the driver died after writing shard 1, before its index line
    assert later.records("b.s0") == [] and later.summary("b.s0") is None and later.done(["a.s0", "b.s0"]) == {"a.s0"}
    assert later.repair(["b.s0"]) == (0, 0)
    assert sorted(os.listdir(tmp_path / "shards")) == ["00000000.parquet"]
    report(later, {"b.s0": recs([0, 1], "finished")}, ["b.s0"])  # the run again: a new number, written once
    assert sorted(os.listdir(tmp_path / "shards")) == ["00000000.parquet", "00000001.parquet"]
    assert ResultStore(tmp_path).records("b.s0") == recs([0, 1], "finished")


def test_an_index_line_cut_short_commits_nothing_and_the_next_line_starts_on_its_own(tmp_path):
    store = ResultStore(tmp_path)
    report(store, {"a.s0": recs([0], "finished")}, ["a.s0"])
    report(store, {"b.s0": recs([0], "finished")}, ["b.s0"])
    index = (tmp_path / "shards.txt").read_text()
    (tmp_path / "shards.txt").write_text(index[:-3])  # the kill cut the second line: "00000001 1" names 1 byte
    (tmp_path / "ended.txt").write_text("finished a.s0\n")
    later = ResultStore(tmp_path)
    assert later.done(["a.s0", "b.s0"]) == {"a.s0"} and later.records("b.s0") == []
    later.repair(["b.s0"])
    report(later, {"b.s0": recs([0], "finished")}, ["b.s0"])
    assert (tmp_path / "shards.txt").read_text().splitlines()[1:] == [index.splitlines()[1][:-2],
                                                                       index.splitlines()[1].replace("01", "02", 1)]
    assert ResultStore(tmp_path).records("b.s0") == recs([0], "finished")


def test_a_kill_between_the_commit_and_ended_txt_is_repaired_from_the_shard(tmp_path):
    store = ResultStore(tmp_path)
    report(store, {"a.s0": recs([0, 1], "finished"), "b.s0": recs([0, 1], "finished")}, ["a.s0", "b.s0"])
    (tmp_path / "ended.txt").write_text("finished a.s0\n")  # the driver died before b's line
    later = ResultStore(tmp_path)
    assert later.done(["a.s0", "b.s0"]) == {"a.s0", "b.s0"}  # committed: b is not run again
    assert later.repair([]) == (1, 0)
    assert (tmp_path / "ended.txt").read_text() == "finished a.s0\nfinished b.s0\n"


def test_a_run_started_again_loses_its_old_records_unless_it_continues_from_a_midway_checkpoint(tmp_path):
    store = ResultStore(tmp_path)
    report(store, {"a.s0": recs([0, 1, 2], scale=9.0), "b.s0": recs([0, 1, 2], scale=9.0)})
    store.note_checkpoint("b.s0", "/ckpt/1")
    later = ResultStore(tmp_path)  # a resumed driver: a starts again from 0, b from its checkpoint at 2
    assert later.repair(["a.s0", "b.s0"]) == (0, 1)
    assert later.records("a.s0") == [] and len(later.records("b.s0")) == 3
    assert report(later, {"a.s0": recs([0, 1, 2, 3], "finished"), "b.s0": recs([2, 3], "finished")},
                  ["a.s0", "b.s0"]) == 5  # b's iteration 2 is stored already
    final = ResultStore(tmp_path)
    assert final.records("a.s0") == recs([0, 1, 2, 3], "finished")  # no record of the first attempt left
    assert final.records("b.s0") == recs([0, 1, 2], scale=9.0) + [{"iteration": 3, "status": "finished", "F": 0.25}]
    assert [r["iteration"] for r in ShardLog(final.root).read()["b.s0"][0]] == [0, 1, 2, 3]  # each stored once


def test_what_a_shard_holds_is_data_a_tampered_or_malformed_shard_is_not_read(tmp_path):
    store = ResultStore(tmp_path)
    json_report(store, {"a.s0": recs([0], "finished")}, ["a.s0"])
    json_report(store, {"b.s0": recs([0], "finished")}, ["b.s0"])
    report(store, {"c.s0": recs([0], "finished")}, ["c.s0"])
    report(store, {"d.s0": recs([0], "finished")}, ["d.s0"])
    with open(tmp_path / "shards" / "00000001.jsonl", "a") as fh:  # grown after its commit: not the shard committed
        fh.write(shard_lines("b.s0", recs([7])))
    with open(tmp_path / "shards" / "00000000.jsonl", "r+") as fh:  # same size, lines that are no record
        text = fh.read()
        fh.seek(0)
        fh.write(text.replace('"iteration": 0', '"iteratioN": 0'))
    with open(tmp_path / "shards" / "00000002.parquet", "ab") as fh:  # a table grown after its commit
        fh.write(b"x")
    size = os.path.getsize(tmp_path / "shards" / "00000003.parquet")
    (tmp_path / "shards" / "00000003.parquet").write_bytes(b"PAR1" + b"\0" * (size - 4))  # same size, no table
    with open(tmp_path / "shards.txt", "a") as fh:
        fh.write("../../etc/passwd 5\nreset \n")
    later = ResultStore(tmp_path)
    assert later.records("a.s0") == [] and later.summary("b.s0") is None and later.records("b.s0") == []
    assert later.summary("a.s0")["status"] == "finished"
    assert all(later.records(k) == [] and later.summary(k) is None for k in ("c.s0", "d.s0"))
    assert later.done(["c.s0", "d.s0"]) == {"c.s0", "d.s0"}  # ended.txt says so; their records are lost with the shard


def test_the_shard_store_writes_through_no_link(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (tmp_path / "res").mkdir()
    os.symlink(outside, tmp_path / "res" / "shards")
    with pytest.raises(Exception, match="shards is a symbolic link"):
        report(ResultStore(tmp_path / "res"), {"a.s0": recs([0], "finished")}, ["a.s0"])
    assert os.listdir(outside) == []


def test_an_older_results_directory_loads_resumes_and_gets_shards_beside_its_files(tmp_path, toy_study):
    st = toy_study(seeds=2)
    old = ResultStore(tmp_path)  # what drivers before shards wrote: records/<run>.jsonl, runs/<run>.json
    old.write_study(st)
    keys = st.run_keys
    for key in keys[:-1]:
        old.append_many(key, recs([0, 1, 2], "finished"), records_text(recs([0, 1, 2], "finished")))
        old.finish(key, {**summary(key), "seed": int(key.rsplit(".s", 1)[1]), "final": recs([2], "finished")[0]})
    old.append_many(keys[-1], recs([0, 1]))  # under way when it was killed
    resumed = ResultStore(tmp_path)
    assert resumed.done(keys) == set(keys[:-1])
    assert resumed.repair([keys[-1]]) == (0, 1)
    report(resumed, {keys[-1]: recs([0, 1, 2], "finished")}, [keys[-1]])
    res = load_results(tmp_path)
    assert sorted(res.runs["run_key"]) == sorted(keys)
    assert len(res.records) == 3 * len(keys) and set(res.records["iteration"]) == {0, 1, 2}
    assert list(res.records.groupby("run_key").size().unique()) == [3]


def test_the_columns_a_report_reads_give_each_run_what_the_store_gives_it(tmp_path):
    from sweep.results import run_columns

    store = ResultStore(tmp_path)  # an older driver's files, JSON and Parquet shards, a reset and a replayed run
    store.append_many("old.s0", recs([0, 1], "finished"))
    store.finish("old.s0", {**summary("old.s0"), "final": recs([0, 1], "finished")[-1]})
    store.finish("bad.s0", {"run_key": "bad.s0", "status": "failed", "final": None, "error": "boom", "where": {}})
    json_report(store, {"a.s0": recs([0, 1], "finished"), "r.s0": recs([0, 1], scale=5.0)}, ["a.s0"])
    report(store, {"b.s0": recs([0, 1, 2], "finished"), "m.s1": recs([0, 1])}, ["b.s0"])
    again = ResultStore(tmp_path)  # a resumed driver: r runs again from its start
    again.shards.reset(["r.s0"])
    report(again, {"r.s0": recs([0, 1, 2], "finished"), "m.s1": recs([2], "diverged")}, ["r.s0", "m.s1"])
    later = ResultStore(tmp_path)
    cols = run_columns.load(later)
    keys = ["old.s0", "bad.s0", "a.s0", "b.s0", "r.s0", "m.s1", "none.s0"]
    for key in keys:
        assert list(cols.records(key)) == later.records(key), key
        assert cols.records(key)[-1:] == later.records(key)[-1:]
        assert cols.records(key).column("F") == [r.get("F") for r in later.records(key)]
        assert cols.summary(key) == later.summary(key), key
        assert _plain(cols.summary(key)), key  # Python values, as a summary read from JSON (not NumPy scalars)
    assert cols.records("r.s0")[0] == {"iteration": 0, "status": "running", "F": 1.0}  # the reset dropped scale 5
    assert cols.summary("bad.s0")["error"] == "boom" and cols.summary("none.s0") is None
    with pytest.raises(IndexError):
        cols.records("b.s0")[3]


def test_a_summary_holding_its_configuration_stores_it_as_plain_data_when_written_as_json_lines(tmp_path):
    from sweep.study.model import Point

    point = Point("soba", "soba", {"gamma": 0.1}, "quadratic", {"dim_x": 5}, None, {"iterations": 2}, 3, {})
    key = point.run_key(0)
    records = [{"iteration": 0, "status": "running", "v": [1, 2]}, {"iteration": 2, "status": "finished", "v": [3]}]
    ends = [(key, {"run_key": key, "trial_key": "t", "seed": 0, "status": "finished", "final": records[-1],
                   "where": {}, "span": [1.0, 2.0], "point": point})]  # as StoreCallback makes it: the Point itself
    cached = ResultStore(tmp_path)
    report(cached, {"other.s0": recs([0, 2], "finished")}, ["other.s0"])
    assert cached.summary(key) is None  # its shards read and from now on kept up to date as it writes
    assert cached.write_shard([(key, records, None)], ends) == 2
    assert sorted(p.suffix for p in (tmp_path / "shards").iterdir()) == [".jsonl", ".parquet"]  # a list: JSON lines
    want = {**ends[0][1], "point": point.to_dict()}
    assert ResultStore(tmp_path).summary(key) == want == cached.summary(key)
    shard = next((tmp_path / "shards").glob("*.jsonl"))
    assert json.loads(shard.read_text().splitlines()[-1]) == {"summary": want}


def _plain(value) -> bool:
    """Whether `value` is made of Python's own types only (dicts, lists, str, int, float, bool, None)."""
    if isinstance(value, dict):
        return all(type(k) is str and _plain(v) for k, v in value.items())
    if isinstance(value, list):
        return all(map(_plain, value))
    return value is None or type(value) in (str, int, float, bool)


@pytest.mark.parametrize("env, want", [({}, "system"), ({"ARROW_DEFAULT_MEMORY_POOL": "jemalloc"}, "jemalloc")])
def test_the_cli_reads_shards_with_the_c_librarys_allocator_unless_the_user_chose_one(env, want):
    """mimalloc, pyarrow's default, kept much of each shard a driver read (its peak at 10⁵ runs: 697 -> 606 MB).
    Importing the CLI chooses the allocator before Arrow is first used, for Parquet's writer too."""
    import subprocess
    import sys

    code = ("import sweep.cli, io, pyarrow as pa, pyarrow.parquet as pq\n"
            "pq.write_table(pa.table({'a': list(range(1000))}), io.BytesIO())\n"
            "print(pa.default_memory_pool().backend_name, pa.mimalloc_memory_pool().max_memory())")
    base = {k: v for k, v in os.environ.items() if k != "ARROW_DEFAULT_MEMORY_POOL"}
    out = subprocess.run([sys.executable, "-c", code], env={**base, **env}, capture_output=True, text=True, check=True)
    backend, mimalloc_peak = out.stdout.split()
    assert backend == want and (int(mimalloc_peak) == 0 or want != "system")
