"""The on-disk store's records: each (iteration, status) once, whether a trial sent them encoded or not."""
import json

from sweep.results.store import ResultStore, records_text


def recs(steps, final=None):
    out = [{"iteration": s, "status": "running", "F": 1.0 / (s + 1)} for s in steps]
    if final:
        out[-1]["status"] = final
    return out


def test_records_sent_encoded_are_written_as_sent_and_once(tmp_path):
    store = ResultStore(tmp_path)
    first = recs([0, 1, 2])
    assert store.append_many("a.s0", first, records_text(first)) == 3
    again = recs([2, 3, 4], final="finished")  # step 2 again (a replay), then new ones: only 3 and 4 stored
    assert store.append_many("a.s0", again, records_text(again)) == 2
    lines = (tmp_path / "records" / "a.s0.jsonl").read_text().splitlines()
    assert [json.loads(x) for x in lines] == first + again[1:]
    assert lines == [json.dumps(r) for r in first + again[1:]]  # the same bytes as the driver would write


def test_a_new_store_reads_what_an_earlier_one_wrote_before_appending(tmp_path):
    ResultStore(tmp_path).append_many("b.s1", recs([0, 1]))
    later = ResultStore(tmp_path)  # a resumed driver: the file is there, its records are not written twice
    assert later.append_many("b.s1", recs([0, 1, 2]), records_text(recs([0, 1, 2]))) == 1
    assert [r["iteration"] for r in later.records("b.s1")] == [0, 1, 2]
    assert later.append_many("c.s0", recs([0])) == 1  # a run new to the directory listed at first write


def test_a_summary_cut_short_by_a_kill_reads_as_not_ended_until_the_run_writes_it_again(tmp_path):
    store = ResultStore(tmp_path)
    store.finish_many([("d.s0", {"status": "finished", "final": {"F": 0.5}}),
                       ("e.s0", {"status": "diverged", "final": None})])
    whole = (tmp_path / "runs" / "e.s0.json").read_text()
    assert (tmp_path / "ended.txt").read_text() == "finished d.s0\ndiverged e.s0\n"
    (tmp_path / "runs" / "f.s0.json").write_text(whole[:17])  # a killed driver's last summary, before ended.txt
    later = ResultStore(tmp_path)
    assert later.summary("f.s0") is None and later.status("f.s0") is None and later.done(["d.s0", "f.s0"]) == {"d.s0"}
    assert later.ended() == {"d.s0": "finished", "e.s0": "diverged"}
    later.finish("f.s0", {"status": "finished", "final": {"F": 0.25}})  # the run ran again
    assert later.summary("f.s0") == {"status": "finished", "final": {"F": 0.25}}
    assert ResultStore(tmp_path).ended() == {"d.s0": "finished", "e.s0": "diverged", "f.s0": "finished"}
