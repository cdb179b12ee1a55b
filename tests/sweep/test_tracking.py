"""MLflow tracking without Ray: idempotent parent and child runs, batched requests, backfill after a crash,
and what a person browses: run names, the axis as a parameter, the description, metric names."""
import pytest

from sweep.store import ResultStore
from sweep.tracking import (META, MlflowCallback, SyncLog, Tracker, default_tracking_uri, local_artifact_location,
                            mlflow_name)
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


def tracker(root, study):
    uri = default_tracking_uri(root)
    t = Tracker(uri, study.name, local_artifact_location(uri))
    t.start_study(study)
    return t


def history(t, run_key):
    return sorted(m.step for m in t.client.get_metric_history(t.children()[run_key], "Metrics/F"))


def test_parent_and_child_runs_are_found_again_and_steps_logged_once(tmp_path, study):
    point, key = study.points[0], study.run_keys[0]
    a = tracker(tmp_path, study)
    for r in records([0, 1, 2]):
        a.add(key, point, 0, r)
    a.finish(key, "finished")
    b = tracker(tmp_path, study)  # a new driver: same parent, same child, nothing logged twice
    assert b.parent_id == a.parent_id
    for r in records([0, 1, 2, 3]):
        b.add(key, point, 0, r)
    b.finish(key, "finished")
    assert history(b, key) == [0, 1, 2, 3]
    runs = b.client.search_runs([b.experiment_id])
    assert len(runs) == 2
    child = b.client.get_run(b.children()[key])
    assert child.data.tags["mlflow.parentRunId"] == a.parent_id and child.data.tags["status"] == "finished"
    assert child.data.params["alg.lr"] == "0.5" and child.info.status == "FINISHED"
    assert local_artifact_location(default_tracking_uri(tmp_path)) == (tmp_path / "mlartifacts").resolve().as_uri()


def test_a_finished_run_goes_out_in_one_request(tmp_path, study, monkeypatch):
    point, key = study.points[0], study.run_keys[0]
    t = tracker(tmp_path, study)
    calls = []
    real = t.client.log_batch
    monkeypatch.setattr(t.client, "log_batch", lambda *a, **k: (calls.append(k), real(*a, **k))[1])
    for r in records(range(20)):
        t.add(key, point, 0, r)
    t.finish(key, "diverged")
    assert len(calls) == 1  # 20 records x 4 metrics (but the zero count at step 0), the params and the status tag
    assert len(calls[0]["metrics"]) == 79 and calls[0]["params"] and calls[0]["tags"][0].value == "diverged"
    assert t.client.get_run(t.children()[key]).info.status == "FINISHED"


def test_a_resumed_run_backfills_what_a_crashed_driver_stored_but_never_sent(tmp_path, study):
    point, key = study.points[0], study.run_keys[0]
    store = ResultStore(tmp_path)
    first = tracker(tmp_path, study)
    for r in records([0, 1, 2, 3]):
        store.append(key, r)
        first.add(key, point, 0, r)
    first._flush_run(key)  # steps 0..3 sent
    for r in records([5, 8]):  # stored on disk, then the driver died before sending them
        store.append(key, r)
    second = tracker(tmp_path, study)
    cb = MlflowCallback(second, study, SyncLog(store, second.parent_id), store)
    final = records([13], final="finished")[0]  # the trial resumed from a checkpoint at step 8
    store.append(key, final)
    meta = {"run_key": key, "keys": list(final), "earlier": []}
    cb.on_trial_result(0, [], None, {**final, META: meta})
    cb.close()
    assert cb.error is None
    assert history(second, key) == [0, 1, 2, 3, 5, 8, 13]
    assert key in SyncLog(store, second.parent_id).keys


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
    kids = [r for r in t.client.search_runs([t.experiment_id]) if r.data.tags.get("bisweep.role") == "run"]
    assert len(kids) == 3 * 2 * 2  # factors 0.5, 2 and the unscaled reference; two grid points; two seeds
    want = {f"toy_aid(inner_steps={n}) · {ax} · quadratic · seed {s}": ax
            for n in (2, 4) for ax in ("step ×0.5", "step ×2", "reference") for s in (0, 1)}
    names = {k.info.run_name: k for k in kids}
    assert set(names) == set(want)
    for name, kid in names.items():
        axis = {"step ×0.5": "0.5", "step ×2": "2", "reference": "reference"}[want[name]]
        assert kid.data.params["axis.step_size_factor"] == axis
        assert kid.data.params["alg.inner_steps"] == name.split("=")[1][0] and kid.data.params["label"] == "toy_aid"
    assert len({k.data.tags["bisweep.run_key"] for k in kids}) == 12  # the identity stays a unique tag
    exp = t.client.get_experiment(t.experiment_id)
    assert exp.tags["mlflow.note.content"] == "toy_aid at two step-size factors"
    assert exp.tags["mlflow.experimentKind"] == "custom_model_development"


def test_metric_names_put_measurements_first_and_skip_counters_while_zero(tmp_path, study):
    point, key = study.points[0], study.run_keys[0]
    t = tracker(tmp_path, study)
    for s in range(3):
        t.add(key, point, 0, {"iteration": s, "status": "running", "time": 0.1 * s, "F": 2.0 - s, "grad_F_sq": 1.0,
                              "calls/grad_g": 3 * s, "calls/hvp": 0, "samples/hvp": 0, "diag/y_cap_hits": 0,
                              "diag/alpha": 0.0, "gt/not_strongly_convex": 0.0, "F_gap": 0.0})
    t.finish(key, "finished")
    run = t.client.get_run(t.children()[key])
    assert set(run.data.metrics) == {"iteration", "time", "Metrics/F", "Metrics/grad_F_sq", "Metrics/F_gap",
                                     "calls/grad_g", "diag/alpha"}
    steps = [m.step for m in t.client.get_metric_history(run.info.run_id, "calls/grad_g")]
    assert sorted(steps) == [1, 2]  # the counter's chart starts at its first call
    assert sorted(m.value for m in t.client.get_metric_history(run.info.run_id, "Metrics/F_gap")) == [0.0] * 3
    # MLflow orders chart sections by name, capitals first: the measurements come before the counters.
    assert sorted(["calls", "diag", "samples", "Metrics"])[0] == mlflow_name("F").split("/")[0] == "Metrics"
