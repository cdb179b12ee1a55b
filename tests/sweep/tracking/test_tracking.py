"""MLflow tracking without Ray: idempotent parent and child runs, batched requests, backfill after a crash,
and what a person browses: run names, the axis as a parameter, the description, metric names."""
import pytest

from sweep.execution.mlflow_writer import MlflowCallback
from sweep.execution.trainable import META
from sweep.results.store import ResultStore
from sweep.tracking.mlflow_sinks import ApiSink
from sweep.tracking.metric_points import CURVE, LAST, SKIP, logged_as, mlflow_name
from sweep.tracking.tracker import SyncLog, Tracker, default_tracking_uri, local_artifact_location
from tests.sweep import toy_algorithms  # noqa: F401


@pytest.fixture()
def study(toy_study):
    return toy_study(name="trk", problems=["quadratic"], algorithms=["toy_aid"], seeds=1, budget={"iterations": 10},
                     n_evals=20)


def records(steps, final=None):
    out = [{"iteration": s, "status": "running", "time": 0.1 * s, "F": 10.0 - s, "calls/total": 4 * s} for s in steps]
    if final is not None:
        out[-1]["status"] = final
    return out


def tracker(root, study, api=False):
    uri = default_tracking_uri(root)
    t = Tracker(uri, study.name, local_artifact_location(uri))
    t.start_study(study)
    if api:  # the path a tracking server takes
        t._sink = ApiSink(t.client, t.experiment_id, t.parent_id)
    return t


def index_of(study):
    return {p.run_key(s): (p, s) for p in study.points for s in study.seeds}


def history(t, run_key):
    return sorted(m.step for m in t.client.get_metric_history(t.children()[run_key], "Metrics/F"))


@pytest.mark.parametrize("api", [False, True], ids=["sql", "api"])
def test_parent_and_child_runs_are_found_again_and_steps_logged_once(tmp_path, study, api):
    point, key = study.points[0], study.run_keys[0]
    a = tracker(tmp_path, study, api)
    for r in records([0, 1, 2]):
        a.add(key, point, 0, r)
    a.finish(key, "finished")
    a.flush(force=True)
    b = tracker(tmp_path, study, api)  # a new driver: same parent, same child, nothing logged twice
    assert b.parent_id == a.parent_id
    for r in records([0, 1, 2, 3]):
        b.add(key, point, 0, r)
    b.finish(key, "finished")
    b.flush(force=True)
    assert history(b, key) == [0, 1, 2, 3]
    runs = b.client.search_runs([b.experiment_id])
    assert len(runs) == 2
    child = b.client.get_run(b.children()[key])
    assert child.data.tags["mlflow.parentRunId"] == a.parent_id and child.data.tags["status"] == "finished"
    assert child.info.status == "FINISHED" and "alg.lr" not in child.data.params  # one configuration: shared
    assert b.client.get_run(b.parent_id).data.params["alg.lr"] == "0.5"  # so the parent holds it
    assert local_artifact_location(default_tracking_uri(tmp_path)) == (tmp_path / "mlartifacts").resolve().as_uri()


def test_a_finished_run_goes_out_in_one_request(tmp_path, study, monkeypatch):
    point, key = study.points[0], study.run_keys[0]
    t = tracker(tmp_path, study, api=True)
    calls = []
    real = t.client.log_batch
    monkeypatch.setattr(t.client, "log_batch", lambda *a, **k: (calls.append(k), real(*a, **k))[1])
    for r in records(range(20), final="diverged"):
        t.add(key, point, 0, r)
    t.finish(key, "diverged")
    t.flush(force=True)
    assert len(calls) == 1  # 20 points of F, then time and calls/total at the last record; the status tag
    assert len(calls[0]["metrics"]) == 22 and calls[0]["tags"][0].value == "diverged"
    assert t.client.get_run(t.children()[key]).info.status == "FINISHED"


def finish_resumed_run(t, study, store, key):
    """The next session's writer receives the run's last record (step 13, the trial continued from a
    checkpoint at step 8) and ends the run."""
    synced = SyncLog(store, t.parent_id)
    cb = MlflowCallback(lambda: (t, synced), index_of(study), store)
    final = records([13], final="finished")[0]
    store.append(key, final)
    meta = {"trial_key": "t", "runs": [{"run_key": key, "seed": 0, "index": 0, "records": [final], "done": True}]}
    cb.on_trial_result(0, [], None, {**final, META: meta})
    cb.close()
    assert cb.error is None


def test_a_resumed_run_backfills_what_a_crashed_driver_stored_but_never_sent(tmp_path, study):
    point, key = study.points[0], study.run_keys[0]
    store = ResultStore(tmp_path)
    first = tracker(tmp_path, study)
    for r in records([0, 1, 2, 3]):
        store.append(key, r)
        first.add(key, point, 0, r)
    first.flush(force=True)  # steps 0..3 sent
    for r in records([5, 8]):  # stored on disk, then the driver died before sending them
        store.append(key, r)
    second = tracker(tmp_path, study)
    finish_resumed_run(second, study, store, key)
    assert history(second, key) == [0, 1, 2, 3, 5, 8, 13]
    assert key in SyncLog(store, second.parent_id).keys


@pytest.mark.parametrize("writes", [1, 2], ids=["created-and-ended-in-one-write", "over-two-writes"])
def test_the_bulk_sql_writer_stores_what_the_mlflow_api_stores(tmp_path, toy_study, writes):
    import math

    st = toy_study(name="same", problems=["quadratic"], algorithms=[{"name": "toy_aid", "params": {"lr": [0.1, 0.2]}}],
                   seeds=2, budget={"iterations": 10}, n_evals=20)
    recs = records(range(6))
    recs[2]["F"], recs[3]["F"], recs[4]["F"] = float("nan"), float("inf"), -float("inf")
    views = []
    for api in (False, True):
        t = tracker(tmp_path / ("api" if api else "sql"), st, api)
        for i, (p, s) in enumerate((p, s) for p in st.points for s in st.seeds):
            key = p.run_key(s)
            for r in recs[:3]:
                t.add(key, p, s, r, {"node": "10.0.0.1"})
            if writes == 2:
                t.flush(force=True)  # a run spread over two writes
            for r in recs[3:] if i != 3 else recs[3:5]:
                t.add(key, p, s, r, {"node": "10.0.0.1"})
            t.finish(key, ["finished", "diverged", "failed", "finished"][i], "boom" if i == 2 else None)
        t.flush(force=True)
        runs = t.client.search_runs([t.experiment_id], max_results=100)
        kids = {r.data.tags["bisweep.run_key"]: r for r in runs if r.data.tags.get("bisweep.role") == "run"}
        view = {}
        for key, r in kids.items():
            hist = {m: sorted((x.step, "nan" if math.isnan(x.value) else x.value)
                              for x in t.client.get_metric_history(r.info.run_id, m))
                    for m in ("Metrics/F", "time", "calls/total")}
            view[key] = {"tags": {k: v for k, v in r.data.tags.items() if k != "mlflow.parentRunId"},
                         "params": r.data.params, "latest": r.data.metrics, "status": r.info.status,
                         "name": r.info.run_name, "history": hist, "ended": r.info.end_time is not None,
                         "parent": r.data.tags["mlflow.parentRunId"] == t.parent_id,
                         "artifacts": r.info.artifact_uri.endswith(f"{r.info.run_id}/artifacts")}
        views.append(view)
    sql, api = views
    assert sql == api and len(sql) == 4
    one = sql[st.points[0].run_key(0)]
    assert [v for _, v in one["history"]["Metrics/F"]] == [10.0, 9.0, "nan", 1.7976931348623157e308, -1.7976931348623157e308, 5.0]
    assert one["latest"] == {"Metrics/F": 5.0} and one["status"] == "FINISHED"  # the last record said "running"
    failed = sql[st.points[1].run_key(0)]
    assert failed["status"] == "FAILED" and failed["tags"]["status"] == "failed" and failed["tags"]["error"] == "boom"
    assert sql[st.points[1].run_key(1)]["history"]["Metrics/F"][-1][0] == 4  # its last record was step 4
    assert one["params"] == {"alg.lr": "0.1", "seed": "0"}  # what varies; the rest is the parent's
    assert one["tags"]["node"] == "10.0.0.1" and one["parent"]  # it ran on another host than the driver's
    assert one["tags"]["status"] == "finished" and one["ended"]


def test_run_ids_are_short_increasing_unique_and_valid_for_mlflow():
    import re
    import time

    from sweep.tracking.mlflow_sinks import _ordered_id

    first = [_ordered_id() for _ in range(20_000)]
    time.sleep(0.002)
    later = _ordered_id()
    assert len(set(first)) == 20_000 and all(len(i) == 13 and re.fullmatch(r"[0-9a-z]{13}", i) for i in first)
    assert later > max(first)  # a later millisecond sorts after (the metrics indexes grow at their end)
    assert sum(a < b for a, b in zip(first, first[1:])) >= 19_998  # in order but where the sequence wraps


# ---------------------------------------------------------------- what a person browses
def test_child_runs_are_named_by_what_varies_and_the_axis_is_a_param(tmp_path, toy_study):
    st = toy_study(name="names", description="toy_aid at two step-size factors", kind="stepsize_sensitivity",
                   axis={"factors": [0.5, 2]}, algorithms=[{"name": "toy_aid", "params": {"inner_steps": [2, 4]}}],
                   seeds=2, budget={"iterations": 10})
    t = tracker(tmp_path, st)
    for p in st.points:
        for s in st.seeds:
            for r in records([0, 1], final="finished"):
                t.add(p.run_key(s), p, s, r)
            t.finish(p.run_key(s), "finished")
    t.flush(force=True)
    kids = [r for r in t.client.search_runs([t.experiment_id]) if r.data.tags.get("bisweep.role") == "run"]
    assert len(kids) == 3 * 2 * 2  # factors 0.5, 2 and the unscaled reference; two grid points; two seeds
    want = {f"toy_aid(inner_steps={n}) · {ax} · quadratic · seed {s}": ax
            for n in (2, 4) for ax in ("step ×0.5", "step ×2", "reference") for s in (0, 1)}
    names = {k.info.run_name: k for k in kids}
    assert set(names) == set(want)
    for name, kid in names.items():
        axis = {"step ×0.5": "0.5", "step ×2": "2", "reference": "reference"}[want[name]]
        assert kid.data.params["axis.step_size_factor"] == axis
        assert kid.data.params["alg.inner_steps"] == name.split("=")[1][0] and "label" not in kid.data.params
    parent = t.client.get_run(t.parent_id).data.params
    assert parent["label"] == "toy_aid" and parent["budget.iterations"] == "10"  # shared by every run
    assert len({k.data.tags["bisweep.run_key"] for k in kids}) == 12  # the identity stays a unique tag
    exp = t.client.get_experiment(t.experiment_id)
    assert exp.tags["mlflow.note.content"] == "toy_aid at two step-size factors"
    assert exp.tags["mlflow.experimentKind"] == "custom_model_development"


def test_what_goes_to_mlflow_curves_of_the_measurements_and_where_the_run_ended(tmp_path, study):
    point, key = study.points[0], study.run_keys[0]
    t = tracker(tmp_path, study)
    for s in range(3):
        t.add(key, point, 0, {"iteration": s, "status": "finished" if s == 2 else "running", "time": 0.1 * s,
                              "cpu_time": 0.1 * s, "eval_time": 0.01, "F": 2.0 - s, "grad_F_sq": 1.0,
                              "calls/grad_g": 3 * s, "calls/total": 3 * s, "samples/total": 0, "calls/hvp": 0,
                              "diag/y_cap_hits": 0, "diag/alpha": 0.5, "gt/not_strongly_convex": 0.0,
                              "gt/cg_residual": 1e-9, "F_gap": 0.0})
    t.finish(key, "finished")
    t.flush(force=True)
    run = t.client.get_run(t.children()[key])
    # Curves: the measurements; at the last record: time, the totals (a zero count not at all), gt/* (a zero
    # flag not at all); per-oracle counters, diagnostics, CPU and evaluation times stay on disk.
    assert run.data.metrics == {"Metrics/F": 0.0, "Metrics/grad_F_sq": 1.0, "Metrics/F_gap": 0.0, "time": 0.2,
                                "calls/total": 6.0, "gt/cg_residual": 1e-9}
    history = {m: sorted(x.step for x in t.client.get_metric_history(run.info.run_id, m)) for m in run.data.metrics}
    assert history == {"Metrics/F": [0, 1, 2], "Metrics/grad_F_sq": [0, 1, 2], "Metrics/F_gap": [0, 1, 2],
                       "time": [2], "calls/total": [2], "gt/cg_residual": [2]}
    # MLflow orders chart sections by name, capitals first: the measurements come before the counters.
    assert sorted(["calls", "gt", "time", "Metrics"])[0] == mlflow_name("F").split("/")[0] == "Metrics"
    assert mlflow_name("cpu_time") == "cpu_time" and mlflow_name("diag/alpha") == "diag/alpha"
    assert [logged_as(k) for k in ("F", "time", "gt/x", "diag/x", "calls/hvp", "iteration", "eval_time")] == \
        [CURVE, LAST, LAST, SKIP, SKIP, SKIP, SKIP]


def test_a_run_continued_midway_backfills_even_when_the_crashed_driver_sent_nothing_of_it(tmp_path, study):
    # The killed driver stored steps 0..8 on disk but its writer had not yet created the run's child in
    # MLflow; the next session continues the run from its checkpoint at step 8 and sees only 13.
    key = study.run_keys[0]
    store = ResultStore(tmp_path)
    tracker(tmp_path, study)  # the first driver's parent run, nothing of this run sent
    for r in records([0, 1, 2, 3, 5, 8]):
        store.append(key, r)
    second = tracker(tmp_path, study)
    assert not second.existed_before(key)
    finish_resumed_run(second, study, store, key)
    assert history(second, key) == [0, 1, 2, 3, 5, 8, 13]


def ended_result(key, steps):
    recs = records(steps, final="finished")
    meta = {"trial_key": "t", "runs": [{"run_key": key, "seed": 0, "index": 0, "records": recs, "done": True}]}
    return {**recs[-1], META: meta}


def waiting_writer(tmp_path, study):
    """(run key, tracker, a writer whose connection waits for the event, the event)."""
    import threading

    key, store, ready = study.run_keys[0], ResultStore(tmp_path), threading.Event()
    t = tracker(tmp_path, study)

    def connect():
        ready.wait(10)
        return t, SyncLog(store, t.parent_id)

    return key, t, MlflowCallback(connect, index_of(study), store), ready


def test_results_that_arrive_while_the_writer_connects_are_written_once_it_has(tmp_path, study):
    key, t, cb, ready = waiting_writer(tmp_path, study)
    cb.on_step_begin(0, [])
    cb.on_trial_result(0, [], None, ended_result(key, [0, 1, 2]))
    assert cb.tracker is None and cb.backlog == 1  # queued, Tune's thread not held up
    ready.set()
    cb.close()
    assert cb.error is None and history(t, key) == [0, 1, 2] and key in cb.synced.keys


def test_a_store_that_cannot_be_used_stops_the_experiment_at_tunes_next_step(tmp_path, study):
    from problems.shared.errors import ParameterError

    def connect():
        raise ParameterError("tracking-uri: cannot use the MLflow store at sqlite:///x.db (broken)")

    cb = MlflowCallback(connect, index_of(study), ResultStore(tmp_path))
    cb.on_trial_result(0, [], None, ended_result(study.run_keys[0], [0, 1]))
    cb.close()  # the queue still drains: nothing waits for a store that never came
    with pytest.raises(ParameterError, match="^tracking-uri: cannot use the MLflow store"):
        cb.on_step_begin(1, [])
    assert cb.tracker is None and cb.error is cb.connect_error


def table_rows(root):
    import sqlite3

    with sqlite3.connect(root / "mlflow.db") as db:
        out = {t: db.execute(f"SELECT COUNT(*) FROM {t}").fetchone()[0]
               for t in ("runs", "tags", "params", "metrics", "latest_metrics")}
    db.close()
    return out


def test_runs_ended_in_one_write_are_not_sent_twice_after_a_kill_before_the_sync_log(tmp_path, toy_study):
    import shutil

    st = toy_study(name="kill", problems=["quadratic"], algorithms=[{"name": "toy_aid", "params": {"lr": [0.1, 0.2, 0.3]}}],
                   seeds=2, budget={"iterations": 10}, n_evals=20)
    store, index = ResultStore(tmp_path), index_of(st)
    first = tracker(tmp_path, st)
    cb = MlflowCallback(lambda: (first, SyncLog(store, first.parent_id)), index, store)
    chunks = []
    for i, key in enumerate(index):
        recs = records([0, 1, 2], final="diverged" if i == 1 else "finished")
        store.append_many(key, recs)
        store.finish(key, {"run_key": key, "status": recs[-1]["status"]})
        chunks.append({"run_key": key, "seed": index[key][1], "index": i, "records": recs, "done": True})
    cb.on_trial_result(0, [], None, {**chunks[-1]["records"][-1], META: {"trial_key": "t", "runs": chunks}})
    cb.close()
    assert cb.error is None
    sent = table_rows(tmp_path)
    assert sent["runs"] == 1 + 6 and sent["metrics"] == 6 * (3 + 2)  # F at 3 steps; time and calls/total at the last
    shutil.rmtree(tmp_path / "mlflow_synced")  # killed after the write, before the sync log noted it
    second = tracker(tmp_path, st)
    assert second.sync(store, index, SyncLog(store, second.parent_id).keys) == set(index)
    assert table_rows(tmp_path) == sent  # the next session found every child and sent nothing again
    kids = {r.data.tags["bisweep.run_key"]: r for r in second.client.search_runs([second.experiment_id])
            if r.data.tags.get("bisweep.role") == "run"}
    assert len(kids) == 6 and all(history(second, k) == [0, 1, 2] for k in index)
    assert [kids[k].data.tags["status"] for k in index] == ["finished", "diverged"] + ["finished"] * 4
    assert all(kids[k].data.metrics["Metrics/F"] == 8.0 and kids[k].info.status == "FINISHED" for k in index)


def test_a_write_that_fails_is_sent_whole_by_the_sync_at_the_end(tmp_path, toy_study, monkeypatch):
    from sweep.tracking.mlflow_sinks import SqlSink

    st = toy_study(name="fails", problems=["quadratic"], algorithms=[{"name": "toy_aid", "params": {"lr": [0.1, 0.2]}}],
                   seeds=1, budget={"iterations": 10}, n_evals=20)
    store, index = ResultStore(tmp_path), index_of(st)
    t = tracker(tmp_path, st)
    first, second = list(index)
    for r in records([0, 1]):  # `first` is created by a write that succeeds, then ends in the one that fails
        store.append(first, r)
        t.add(first, *index[first], r)
    t.flush(force=True)
    real = SqlSink._end
    monkeypatch.setattr(SqlSink, "_end", lambda *a: (_ for _ in ()).throw(OSError("disk I/O error")))
    for key, steps in ((first, [2, 3]), (second, [0, 1, 2])):
        for r in records(steps, final="finished"):
            store.append(key, r)
            t.add(key, *index[key], r)
        store.finish(key, {"run_key": key, "status": "finished"})
        t.finish(key, "finished")
    with pytest.raises(OSError):
        t.flush(force=True)  # rolled back: `second` does not exist, `first` has steps 0 and 1 only
    assert second not in t.children() and history(t, first) == [0, 1]
    monkeypatch.setattr(SqlSink, "_end", real)
    assert t.sync(store, index, set()) == {first, second}  # what the driver does at the end
    assert table_rows(tmp_path)["runs"] == 3 and history(t, first) == [0, 1, 2, 3] and history(t, second) == [0, 1, 2]
    kids = [t.client.get_run(t.children()[k]) for k in (first, second)]
    assert all(k.info.status == "FINISHED" and k.data.tags["status"] == "finished" for k in kids)
    assert [k.data.metrics["Metrics/F"] for k in kids] == [7.0, 8.0]


@pytest.mark.parametrize("api", [False, True], ids=["sql", "api"])
def test_a_run_created_and_ended_in_one_write_gets_its_own_span(tmp_path, study, api):
    point, key = study.points[0], study.run_keys[0]
    t = tracker(tmp_path, study, api)
    for r in records([0, 1, 2], final="finished"):
        t.add(key, point, 0, r)
    t.finish(key, "finished", span=[1_700_000_000.25, 1_700_000_003.5])
    t.flush(force=True)
    info = t.client.get_run(t.children()[key]).info
    assert (info.start_time, info.end_time) == (1_700_000_000_250, 1_700_000_003_500)  # 3.25 s, not 0 ms


def test_a_later_session_leaves_out_only_what_the_parent_holds(tmp_path, toy_study, monkeypatch):
    import sweep.tracking.tracker as tr

    st = toy_study(name="later", problems=["quadratic"], algorithms=[{"name": "toy_aid", "params": {"lr": [0.1, 0.3]}}],
                   seeds=1, budget={"iterations": 10})
    with monkeypatch.context() as m:  # a parent made by a version that kept every parameter on the children
        m.setattr(tr, "shared_params", lambda study: {})
        old = tracker(tmp_path, st)
    assert "problem.dim_x" not in old.client.get_run(old.parent_id).data.params
    later = tracker(tmp_path, st)  # resumed: the same parent
    assert later.parent_id == old.parent_id
    for p in st.points:
        for r in records([0, 1], final="finished"):
            later.add(p.run_key(0), p, 0, r)
        later.finish(p.run_key(0), "finished")
    later.flush(force=True)
    kids = [later.client.get_run(i).data.params for i in later.children().values()]
    assert sorted(k["alg.lr"] for k in kids) == ["0.1", "0.3"]
    assert all(k["problem.dim_x"] == str(st.points[0].problem_params["dim_x"]) for k in kids)  # the parent lacks it


def test_a_trials_encoded_points_are_the_metrics_of_its_records():
    import math

    from sweep.tracking.metric_points import mlflow_metrics, points_of, points_text

    recs = records([0, 1, 2], final="diverged")
    recs[1].update({"F": math.inf, "grad_F_sq": math.nan, "diag/alpha": 0.5, "gt/x": 1.0, "calls/hvp": 0})
    got = points_of(points_text(recs))
    want = [[r["iteration"], r["status"], [list(p) for p in mlflow_metrics(r)]] for r in recs]
    assert [s for s, _, _ in got] == [0, 1, 2] and got[2][1] == "diverged"
    assert repr(got) == repr(want)  # inf and nan survive the text (== on nan is False)
    assert ["Metrics/F", 10.0] in got[0][2] and ["calls/total", 8.0] in got[2][2]  # totals at the last only
    assert all(name != "calls/total" for name, _ in got[1][2])


def writer_results(keys, with_points):
    """One report ending every run of `keys` (records 0..2), as a trial sends it (points encoded) or without."""
    from sweep.tracking.metric_points import points_text

    runs = []
    for i, key in enumerate(keys):
        recs = [{**r, "F": r["F"] + i} for r in records([0, 1, 2], final="finished")]
        runs.append({"run_key": key, "seed": 0, "index": i, "records": recs, "done": True, "span": [1.0, 2.0],
                     **({"points": points_text(recs)} if with_points else {})})
    return {**runs[-1]["records"][-1], META: {"trial_key": "t", "runs": runs}}


@pytest.mark.parametrize("with_points", [True, False], ids=["points", "records"])
def test_a_report_larger_than_a_write_goes_out_whole_in_several(tmp_path, toy_study, monkeypatch, with_points):
    from sweep.execution import mlflow_writer

    st = toy_study(name="big", problems=["quadratic"], seeds=3, budget={"iterations": 10}, n_evals=20,
                   algorithms=[{"name": "toy_aid", "params": {"lr": [0.1, 0.2, 0.3]}}])
    monkeypatch.setattr(mlflow_writer, "MAX_RUNS_PER_WRITE", 2)
    store, t = ResultStore(tmp_path), tracker(tmp_path, st)
    sizes = []
    write = t.sink.write
    monkeypatch.setattr(t.sink, "write", lambda batch, ids: (sizes.append(len(batch.new)), write(batch, ids)))
    cb = MlflowCallback(lambda: (t, SyncLog(store, t.parent_id)), index_of(st), store)
    cb.on_trial_result(0, [], None, writer_results(st.run_keys, with_points))
    assert cb.close() and cb.error is None
    assert len(st.run_keys) == 9 and sum(sizes) == 9 and max(sizes) <= 2  # 9 runs, no write of more than 2
    for i, key in enumerate(st.run_keys):
        run = t.client.get_run(t.children()[key])
        assert run.info.status == "FINISHED" and run.data.tags["status"] == "finished"
        assert run.data.metrics == {"Metrics/F": 8.0 + i, "time": 0.2, "calls/total": 8.0}
        assert history(t, key) == [0, 1, 2]
    assert cb.synced.keys == set(st.run_keys)


def test_tunes_thread_waits_while_the_writer_is_a_bound_behind(tmp_path, toy_study, monkeypatch):
    import threading
    import time

    from sweep.execution import mlflow_writer

    st = toy_study(name="wait", problems=["quadratic"], algorithms=[{"name": "toy_aid", "params": {"lr": [0.1, 0.2]}}],
                   seeds=2, budget={"iterations": 10}, n_evals=20)
    monkeypatch.setattr(mlflow_writer, "MAX_QUEUED_RUNS", 2)
    store, t, go = ResultStore(tmp_path), tracker(tmp_path, st), threading.Event()
    cb = MlflowCallback(lambda: (go.wait(10), (t, SyncLog(store, t.parent_id)))[1], index_of(st), store)
    keys = st.run_keys
    cb.on_trial_result(0, [], None, writer_results(keys[:2], True))  # 2 queued: the bound
    waited = threading.Thread(target=cb.on_trial_result, args=(0, [], None, writer_results(keys[2:], True)))
    waited.start()
    time.sleep(0.5)
    assert waited.is_alive() and cb.backlog == 1  # held while the writer has not written
    go.set()
    waited.join(10)
    assert not waited.is_alive() and cb.close() and cb.synced.keys == set(keys)
    # A writer that stopped writing (its store failed) holds nothing up: results stay on disk for the sync.
    cb2 = MlflowCallback(lambda: (t, SyncLog(store, t.parent_id)), index_of(st), store)
    cb2.error = RuntimeError("store gone")
    for _ in range(3):
        cb2.on_trial_result(0, [], None, writer_results(keys, True))
    assert cb2.close()


def test_stop_returns_at_once_and_close_waits_for_what_was_queued(tmp_path, study):
    """The driver stops Ray while the writer logs its queue: `stop` does not wait, `close` does, and the drain is
    counted from `stop` to the queue's end, not to `close`."""
    import time

    key, t, cb, ready = waiting_writer(tmp_path, study)
    cb.on_trial_result(0, [], None, ended_result(key, [0, 1, 2]))
    start = time.monotonic()
    cb.stop()
    assert time.monotonic() - start < 0.5 and cb._thread.is_alive()  # the writer still connects: nothing written
    time.sleep(0.3)
    ready.set()
    cb._thread.join(10)
    time.sleep(0.3)  # the queue is empty well before `close` is asked
    assert cb.close() and history(t, key) == [0, 1, 2] and key in cb.synced.keys
    assert 0.3 <= cb.drain_seconds < time.monotonic() - start - 0.25
