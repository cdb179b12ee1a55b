"""The driver's recording callbacks on Tune's results, without Ray: what Tune keeps of a report once it is stored."""
import os
from types import SimpleNamespace

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from sweep.execution.recording import Slim, StoreCallback
from sweep.execution.trainable import META
from sweep.execution.trial_runs import SHARD, _light, shard
from sweep.results import store as store_module
from sweep.results.store import ResultStore


def report(n):
    """A report of n runs' records, as a trial sends it."""
    runs = [{"run_key": f"k{i}.s0", "seed": 0, "index": i, "done": i % 2 == 0, "points": "[]",
             "records": [{"iteration": it, "status": "running", "F": 1.0} for it in range(3)]} for i in range(n)]
    return {"F": 1.0, META: {"trial_key": "t", "runs": runs, "node": "", "host": "h"}}


def test_tune_keeps_only_how_many_runs_a_report_and_the_copy_that_came_with_its_checkpoint_carried():
    result, saved = report(4), report(4)  # Tune's save call brings the checkpointed report again, another object
    trial = SimpleNamespace(latest_checkpoint_result=SimpleNamespace(metrics=saved))
    kept = [result[META], saved[META]]
    Slim().on_trial_result(0, [], trial, result)
    Slim().on_trial_save(0, [], trial)
    want = {"reported": 4, "ended": 2}  # the keys are in the trial's config
    assert kept[0]["runs"] == want == kept[1]["runs"]  # in place: other references to the result see it slim
    Slim().on_trial_save(0, [], trial)  # again (or a trial that never saved): nothing changes, nothing raises
    Slim().on_trial_save(0, [], SimpleNamespace(latest_checkpoint_result=None))
    assert kept[1]["runs"] == want and result["F"] == 1.0


def test_a_completed_trial_keeps_its_config_without_its_runs():
    from sweep.study.model import RunSpec, TrialConfig

    runs = tuple(RunSpec(f"k{i}.s0", 0, "soba", {}, "quadratic", {}, None, {"iterations": 2}, 1) for i in range(3))
    config, invalidated = TrialConfig("t", runs), []
    trial = SimpleNamespace(config={"trial": config}, invalidate_json_state=lambda: invalidated.append(1))
    Slim().on_trial_complete(0, [], trial)
    assert trial.config["trial"] is config and config.runs == () and invalidated == [1]
    Slim().on_trial_complete(0, [], SimpleNamespace(config={}))  # not a study's trial: left alone


def trial_report(study, ended_keys=(), only=None, light=False, iterations=(0, 3)):
    """A report as a trial sends it: two records per run of `study` (or of the run keys `only`), the runs of
    `ended_keys` ended (with spans), and the report's shard the trial encoded; `light`: each chunk with its final
    record and idents only, its records in the shard (as a trial sends them)."""
    runs = []
    for i, point in enumerate(study.points):
        key = point.run_key(0)
        if only is not None and key not in only:
            continue
        done = key in ended_keys
        recs = [{"iteration": it, "status": "running", "F": 1.0 / (i + it + 1)} for it in iterations]
        if done:
            recs[-1]["status"] = "finished"
        runs.append({"run_key": key, "seed": 0, "index": i, "done": done, "points": "[]", "records": recs,
                     **({"span": [1.0, 2.0 + i]} if done else {})})
    where = {"node": "10.0.0.2", "host": "h", "pid": "7"}
    meta = {"trial_key": "t", "runs": runs, **where, SHARD: shard(runs, "t", where)}
    if light:
        meta["runs"] = [_light(c) for c in runs]
    return {"F": 1.0, META: meta}


def shard_files(root):
    return [(root / "shards" / n).read_bytes() for n in sorted(os.listdir(root / "shards"))]


@pytest.mark.parametrize("light", [False, True])
def test_the_trial_encodes_the_shard_the_driver_would_and_the_driver_stores_it(tmp_path, toy_study, monkeypatch,
                                                                              light):
    study = toy_study(algorithms=[{"name": "toy_aid", "params": {"lr": [0.1, 0.2, 0.3]}}], seeds=1)
    index = {p.run_key(0): (p, 0) for p in study.points}
    ended = {study.points[0].run_key(0), study.points[2].run_key(0)}
    stores = {}
    for name, drop in (("trial", False), ("driver", True)):
        monkeypatch.undo()
        result = trial_report(study, ended, light=light and not drop)
        if drop:  # the driver encodes it itself
            del result[META][SHARD]
        else:  # the driver stores the trial's bytes: it encodes nothing
            monkeypatch.setattr(store_module.columns, "encode", lambda *a: pytest.fail("the driver encoded"))
        stores[name] = ResultStore(tmp_path / name)
        stores[name].ensure()
        StoreCallback(stores[name], index).on_trial_result(0, [], None, result)
        assert SHARD not in result[META]  # Tune does not keep the bytes with the trial's last result
    assert shard_files(tmp_path / "trial") == shard_files(tmp_path / "driver")
    assert len(shard_files(tmp_path / "trial")) == 1
    monkeypatch.undo()
    again = ResultStore(tmp_path / "trial")
    key = study.points[2].run_key(0)
    assert again.records(key) == trial_report(study, ended)[META]["runs"][2]["records"]
    assert again.summary(key)["span"] == [1.0, 4.0] and again.summary(key)["where"] == {"node": "10.0.0.2",
                                                                                      "host": "h"}
    assert again.ended() == dict.fromkeys(sorted(ended), "finished")


@pytest.mark.parametrize("light", [False, True])
def test_a_report_with_a_run_that_had_ended_is_encoded_again_without_it(tmp_path, toy_study, light):
    study = toy_study(algorithms=[{"name": "toy_aid", "params": {"lr": [0.1, 0.2]}}], seeds=1)
    index = {p.run_key(0): (p, 0) for p in study.points}
    first, second = (p.run_key(0) for p in study.points)
    store = ResultStore(tmp_path)
    store.ensure()
    StoreCallback(store, index).on_trial_result(0, [], None, trial_report(study, {first}, only={first}, light=light))
    StoreCallback(store, index).on_trial_result(0, [], None, trial_report(study, {first, second}, light=light))
    later = ResultStore(tmp_path)
    assert [r["iteration"] for r in later.records(first)] == [0, 3]  # stored once
    assert later.records(second)[-1]["status"] == "finished" and later.ended() == {first: "finished",
                                                                                    second: "finished"}
    assert len(shard_files(tmp_path)) == 2
    rerun = pq.read_table(pa.BufferReader(shard_files(tmp_path)[1]))
    assert set(rerun.column("run_key").to_pylist()) == {second}  # the trial's shard held both runs


def test_slim_drops_a_shard_tune_would_keep():
    result = report(2)
    result[META][SHARD] = b"bytes"
    Slim().on_trial_result(0, [], None, result)
    assert SHARD not in result[META]


def test_records_a_light_report_sent_again_are_read_from_its_shard_and_stored_once(tmp_path, toy_study):
    # a trial that starts again from its checkpoint sends some records again: the driver stores each once, its
    # records read from the report's shard (a light chunk carries only its final record and idents)
    study = toy_study(algorithms=[{"name": "toy_aid", "params": {"lr": [0.1, 0.2]}}], seeds=1)
    index = {p.run_key(0): (p, 0) for p in study.points}
    first, second = (p.run_key(0) for p in study.points)
    store = ResultStore(tmp_path)
    store.ensure()
    StoreCallback(store, index).on_trial_result(0, [], None, trial_report(study, light=True, iterations=(0,)))
    again = trial_report(study, {second}, light=True, iterations=(0, 3, 5))
    assert all("records" not in c and c["idents"][0] == (0, "running") for c in again[META]["runs"])
    StoreCallback(store, index).on_trial_result(0, [], None, again)
    later = ResultStore(tmp_path)
    assert [r["iteration"] for r in later.records(first)] == [0, 3, 5]
    assert [(r["iteration"], r["status"], r["F"]) for r in later.records(second)] == [
        (0, "running", 0.5), (3, "running", 0.2), (5, "finished", 1 / 7)]
    assert later.ended() == {second: "finished"} and later.summary(second)["final"]["iteration"] == 5
