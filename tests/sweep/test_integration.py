"""End to end on Ray and MLflow: the README's quickstart, failures and divergence, a user's own Tuner,
an `mlflow server`, and `bisweep ui`. Every process a test starts is stopped by its id.
"""
from tests.sweep import stored
import json
import os
import re
import signal
import subprocess
import urllib.request
from collections import Counter

import pytest
import yaml

import algorithms
import problems
from sweep.execution.ray_cluster import start_ray, started_here
from sweep.execution.runner import run_study
from sweep.study import spec
from tests import documents
from tests.sweep import toy_algorithms  # noqa: F401
from tests.sweep.servers import serve

pytestmark = pytest.mark.integration



def stop_group(proc: subprocess.Popen) -> None:
    """Stop a process started with its own session, and everything in that session, by its id."""
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=20)


def children_of(client, experiment_name: str):
    exp = client.get_experiment_by_name(experiment_name)
    runs = client.search_runs([exp.experiment_id], max_results=5000)
    parents = [r for r in runs if r.data.tags.get("bisweep.role") == "study"]
    kids = [r for r in runs if r.data.tags.get("bisweep.role") == "run"]
    return parents, kids


def readme_main_command(repo) -> str:
    lines = (repo / "README.md").read_text().splitlines()
    i = lines.index("<!-- main-command -->") + 1
    while lines[i].startswith("```"):
        i += 1
    return lines[i]


# ---------------------------------------------------------------- the README's quickstart
def test_quickstart_from_the_readme_main_command(tmp_path, repo, venv_bin, eval_points):
    cmd = readme_main_command(repo)
    assert cmd.split("&&")[0].strip().startswith("python3 -m venv .venv") and "pip install -e ." in cmd
    last = cmd.split("&&")[-1].strip()
    assert last == ".venv/bin/bisweep run quickstart"
    # This environment is the one the first two steps build: run the study step with its bisweep.
    proc = subprocess.run(f"{venv_bin}/bisweep run quickstart", shell=True, cwd=tmp_path, capture_output=True,
                          text=True, timeout=180)  # the acceptance bound: 3 minutes on 2 cores
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = proc.stdout
    assert re.search(r"runs \d+/27 done, \d+ running", out)  # live progress
    assert "== sensitivity ==" in out
    m = re.search(r"(\d+) finished, (\d+) diverged, 0 failed, 0 not run", out)
    assert m and int(m.group(1)) + int(m.group(2)) == 27
    from mlflow import MlflowClient

    root = tmp_path / "results" / "quickstart"
    client = MlflowClient(f"sqlite:///{root / 'mlflow.db'}")
    parents, kids = children_of(client, "quickstart")
    assert len(parents) == 1 and parents[0].info.status == "FINISHED"
    assert len(kids) == 27 and {k.data.tags["mlflow.parentRunId"] for k in kids} == {parents[0].info.run_id}
    assert Counter(k.data.params["algorithm"] for k in kids) == {"dtfbo": 9, "stfbo": 9, "soba": 9}
    assert len({k.data.tags["bisweep.run_key"] for k in kids}) == 27
    n_points = len(eval_points(5000, 20))
    for k in kids:
        assert k.info.status == "FINISHED" and k.data.tags["status"] in ("finished", "diverged")
        hist = client.get_metric_history(k.info.run_id, "Metrics/grad_F_sq")
        if k.data.tags["status"] == "finished":
            assert sorted(m.step for m in hist) == sorted({m.step for m in hist}) and len(hist) == n_points
        assert k.data.params["alg.alpha0" if k.data.params["algorithm"] != "soba" else "alg.rho"]
    arts = {a.path for a in client.list_artifacts(parents[0].info.run_id, "report")}
    assert {"report/best.csv", "report/sensitivity.csv", "report/runs.csv", "report/sensitivity.png",
            "report/convergence_quadratic.png"} <= arts
    # The same results are on disk for reports without MLflow.
    assert len(stored.summaries(root)) == 27 and (root / "report" / "sensitivity.csv").exists()
    # At the paper defaults (factor 1) every method converges: ‖∇F‖² ≤ 1e-3 × its start, read from the records.
    factor_one = 0
    for run in stored.summaries(root):
        if run["point"]["coords"]["axis"] == 1:
            recs = stored.stored_records(root, run["run_key"])
            assert run["status"] == "finished" and recs[-1]["grad_F_sq"] <= 1e-3 * recs[0]["grad_F_sq"], run["run_key"]
            factor_one += 1
    assert factor_one == 9
    # What the tutorial shows is what a new user sees: this run's output and a second `bisweep report`'s, in
    # shape (numbers, ids and paths normalised) as docs/_generated holds them (docs/tutorial_output.py).
    generated = repo / "docs" / "_generated"
    assert documents.shape(out, str(tmp_path)) == documents.shape((generated / "quickstart-run.txt").read_text())
    again = subprocess.run(f"{venv_bin}/bisweep report quickstart", shell=True, cwd=tmp_path, capture_output=True,
                           text=True, timeout=180)
    assert again.returncode == 0, again.stderr[-3000:]
    assert documents.shape(again.stdout + again.stderr, str(tmp_path)) == documents.shape(
        (generated / "quickstart-report.txt").read_text())
    assert "report up to date in ./results/quickstart/report" in again.stdout.replace(str(tmp_path), ".")
    pandas = subprocess.run([str(venv_bin / "python"), str(generated / "quickstart-pandas.py")], cwd=tmp_path,
                            capture_output=True, text=True, timeout=180)
    assert pandas.returncode == 0, pandas.stderr[-3000:]
    assert documents.shape(pandas.stdout) == documents.shape((generated / "quickstart-pandas.txt").read_text())
    listed = sorted(f"report/{p.name}" for p in (root / "report").iterdir() if not p.name.startswith("."))
    assert listed == (generated / "quickstart-files.txt").read_text().split()


# ---------------------------------------------------------------- in-process studies on one Ray
ORIGINAL_ENVIRONMENT = dict(os.environ)


@pytest.fixture(scope="module")
def ray_session(repo):
    import ray

    saved = os.getcwd()
    os.chdir(repo)  # trials import tests.sweep.toy_algorithms from here
    started = start_ray(None, 1)  # one trial worker: no test here is about concurrency
    os.chdir(saved)
    yield
    if started:
        ray.shutdown()


FAULTS = {
    "name": "faults", "imports": ["tests.sweep.toy_algorithms"], "kind": "comparison",
    "problems": [{"name": "quadratic", "params": {"dim_x": 4, "dim_y": 5}}],
    "algorithms": [
        {"name": "toy_aid", "label": "good"},
        {"name": "toy_aid", "label": "wild", "params": {"inner_lr": 5.0, "inner_steps": 10}},
        {"name": "toy_aid", "label": "broken", "params": {"fail_at": 5}},
        {"name": "toy_aid", "label": "flaky", "params": {"fail_at": 12}},
    ],
    "seeds": 2, "budget": {"iterations": 30}, "n_evals": 6, "max_failures": 1,
    "checkpoint_seconds": 0, "report_seconds": 0,  # a checkpoint at every evaluation point
    "runs_per_trial": 2,  # one trial per configuration: its two seeds one after another
}


@pytest.fixture(scope="module")
def faults_study(ray_session, tmp_path_factory):
    root = tmp_path_factory.mktemp("faults")
    trace, flaky = root / "trace.jsonl", root / "flaky.jsonl"
    data = json.loads(json.dumps(FAULTS))
    data["algorithms"][2]["params"]["trace"] = str(trace)
    data["algorithms"][3]["params"].update(trace=str(flaky), fail_once=str(root / "failed_once"))
    outcome = run_study(spec.validate(data), root / "results", out=open(os.devnull, "w"))
    return outcome, trace, flaky


def test_failures_and_divergence_never_stop_a_study(faults_study, eval_points):
    from mlflow import MlflowClient

    outcome, trace, flaky = faults_study
    assert outcome.counts == {"finished": 4, "diverged": 2, "failed": 2, "missing": 0}
    assert not outcome.complete
    # The failing trial was retried once (max_failures: 1): two starts of its first seed; then only that run
    # failed, and its second seed, which had not started, ran in another trial (and failed the same way).
    assert sum(json.loads(x)["event"] == "init" for x in trace.read_text().splitlines()) == 4
    # The flaky trial failed once at iteration 12 and its retry resumed from the checkpoint of the last
    # evaluation point before it (iteration 10 of 0,1,2,4,5,10,30), not from the start.
    events = [json.loads(x) for x in flaky.read_text().splitlines()]
    inits = [i for i, e in enumerate(events) if e["event"] == "init"]
    assert len(inits) == 3  # seed 0, its retry, seed 1
    steps_before = [e["iteration"] for e in events[inits[0] + 1:inits[1]]]
    steps_retry = [e["iteration"] for e in events[inits[1] + 1:inits[2]]]
    points = eval_points(30, 6)
    resume_at = max(p for p in points if p < 12)
    assert steps_before == list(range(12)) and steps_retry == list(range(resume_at, 30))
    client = MlflowClient(outcome.tracking_uri)
    parents, kids = children_of(client, "faults")
    assert parents[0].info.status == "FAILED" and parents[0].data.tags["runs.failed"] == "2"
    by = Counter((k.data.params["label"], k.data.tags["status"], k.info.status) for k in kids)
    assert by == {("good", "finished", "FINISHED"): 2, ("wild", "diverged", "FINISHED"): 2,
                  ("broken", "failed", "FAILED"): 2, ("flaky", "finished", "FINISHED"): 2}
    broken = {k.data.params["seed"]: k for k in kids if k.data.params["label"] == "broken"}
    for seed in ("0", "1"):
        assert "failing at iteration 5" in broken[seed].data.tags["error"]
        steps = [m.step for m in client.get_metric_history(broken[seed].info.run_id, "Metrics/F")]
        assert steps == [p for p in eval_points(30, 6) if p < 5]  # what it measured before it failed
    rows = {(r["algorithm"], r["seed"]): r for r in outcome_rows(outcome)}
    assert "failing at iteration 5" in rows[("broken", "0")]["error"]
    for seed in (0, 1):  # the good runs, and the flaky one resumed mid-run, are exactly the plain run loop's
        p = problems.make("quadratic", seed=seed, dim_x=4, dim_y=5)
        plain = list(algorithms.run("toy_aid", p, {}, seed=seed, budget={"iterations": 30}, n_evals=6))[-1]
        for label in ("good", "flaky"):
            row = rows[(label, str(seed))]
            assert float(row["grad_F_sq"]) == pytest.approx(plain["grad_F_sq"], rel=1e-9)
            assert int(row["calls/total"]) == plain["calls/total"]  # oracle counts continue across the retry
        assert rows[("good", str(seed))]["node"]  # where each run ran is recorded


def outcome_rows(outcome):
    import csv

    with open(outcome.report_dir / "runs.csv") as fh:
        return list(csv.DictReader(fh))


def test_local_workers_see_the_callers_directory_and_tunes_variable_the_driver_keeps_its_own(ray_session, repo):
    import ray

    @ray.remote(num_cpus=0)
    def environment() -> tuple[str | None, list[str]]:
        return os.environ.get("PL_DISABLE_FORK"), os.environ.get("PYTHONPATH", "").split(os.pathsep)

    assert started_here()  # so trials_on_idle_workers is on for the studies of this module
    fork, paths = ray.get(environment.remote())
    assert fork == "1" and paths[0] == str(repo)  # what trials_on_idle_workers takes from Tune's runtime env
    assert os.environ.get("PL_DISABLE_FORK") != "1" or "PL_DISABLE_FORK" in ORIGINAL_ENVIRONMENT


def test_a_local_rays_workers_have_tune_and_the_trial_code_imported_before_they_take_work(ray_session):
    import ray

    from sweep.execution import ray_cluster

    @ray.remote(num_cpus=0)
    def loaded() -> list[bool]:
        import sys

        return [name in sys.modules for name in ray_cluster.WORKER_PRELOAD]

    assert ray.get(loaded.remote()) == [True, True]


def test_a_local_ray_starts_without_the_monitors_and_the_dashboard_server_then_ray_is_as_before(ray_session):
    from ray._private.node import Node

    from sweep.execution import ray_cluster

    processes = ray_cluster._node().all_processes
    assert "gcs_server" in processes and "raylet" in processes  # what a study needs, started
    assert "monitor" not in processes and "dashboard" not in processes and "log_monitor" not in processes
    assert all(Node.__dict__[name].__name__ == name for name in ray_cluster.HEAD_SERVICES)  # put back after the start


def test_the_same_study_again_on_the_same_ray_into_a_new_results_directory_runs_every_run(ray_session, tmp_path):
    """A Ray that outlives a study (a user's `ray start --head`, a cluster) keeps nothing of it that a later study
    of the same name reads: the second results directory gets every run, not only those the first lacked."""
    data = {"name": "twice", "imports": ["tests.sweep.toy_algorithms"], "kind": "comparison",
            "problems": [{"name": "quadratic", "params": {"dim_x": 4, "dim_y": 5}}],
            "algorithms": [{"name": "toy_aid"}], "seeds": 2, "budget": {"iterations": 5}, "n_evals": 2}
    first = run_study(spec.validate(data), tmp_path / "a", out=open(os.devnull, "w"), report=False)
    second = run_study(spec.validate(data), tmp_path / "b", out=open(os.devnull, "w"), report=False)
    assert first.counts == second.counts == {"finished": 2, "diverged": 0, "failed": 0, "missing": 0}
    import time

    import ray

    end = time.monotonic() + 30  # ray.kill is asynchronous
    while (left := [a for a in ray.util.list_named_actors() if a.startswith("bisweep-done-")]) and \
            time.monotonic() < end:
        time.sleep(0.2)
    assert left == []  # each session's registry of finished runs ends with it


def test_a_study_larger_than_its_mlflow_children_gets_its_browsed_children_and_every_run_in_the_table(
        ray_session, tmp_path):
    """A browsed study through a whole session: its trials send no metric points, its children and table are written
    once its experiment ended (while Ray stops), and the parent run ends after them with every run reachable."""
    import pandas as pd
    from mlflow import MlflowClient
    from mlflow.artifacts import download_artifacts

    data = {"name": "browsed", "imports": ["tests.sweep.toy_algorithms"], "kind": "comparison",
            "problems": [{"name": "quadratic", "params": {"dim_x": 4, "dim_y": 5}}],
            "algorithms": [{"name": "toy_aid", "params": {"lr": [0.05, 0.1, 0.2, 0.3, 0.4]}}], "seeds": 1,
            "budget": {"iterations": 6}, "n_evals": 3, "mlflow_children": 2}
    outcome = run_study(spec.validate(data), tmp_path / "res", out=open(os.devnull, "w"), report=False)
    assert outcome.counts == {"finished": 5, "diverged": 0, "failed": 0, "missing": 0}
    client = MlflowClient(outcome.tracking_uri)
    parent = client.get_run(outcome.parent_run_id)
    assert parent.info.status == "FINISHED"
    kids = client.search_runs([parent.info.experiment_id], f"tags.`mlflow.parentRunId` = '{parent.info.run_id}'")
    assert len(kids) == 2  # the best and the worst configuration, each its one seed
    assert all(len(client.get_metric_history(k.info.run_id, "Metrics/F")) == 4 for k in kids)  # its 3 points + end
    table = pd.read_parquet(download_artifacts(run_id=parent.info.run_id, artifact_path="runs/runs.parquet",
                                               tracking_uri=outcome.tracking_uri, dst_path=str(tmp_path / "dl")))
    assert sorted(table["run_key"]) == sorted(spec.validate(data).run_keys)
    marks = json.loads((tmp_path / "res" / "sessions.jsonl").read_text().splitlines()[-1])
    assert marks["fit_done"] <= marks["synced"] <= marks["end"]


def test_a_jax_study_runs_its_batches_compiled_on_ray(ray_session, tmp_path):
    """`backend: jax` through Ray Tune: every run finished once, its records those of the JAX engine."""
    pytest.importorskip("jax")

    data = {"name": "jaxed", "kind": "comparison", "instance_seed": 0, "backend": "jax",
            "problems": [{"name": "quadratic", "params": {"dim_x": 4, "dim_y": 3}}],
            "algorithms": [{"name": "soba", "params": {"rho": [0.05, 0.1]}}], "seeds": 2,
            "budget": {"iterations": 50}, "n_evals": 4}
    outcome = run_study(spec.validate(data), tmp_path / "res", out=open(os.devnull, "w"), report=False)
    assert outcome.counts == {"finished": 4, "diverged": 0, "failed": 0, "missing": 0}
    for summary in stored.summaries(tmp_path / "res"):
        records = stored.stored_records(tmp_path / "res", summary["run_key"])
        assert [r["iteration"] for r in records][-1] == 50 and records[-1]["time_mode"] == "compiled"


def test_a_trainable_in_a_users_own_tuner(ray_session, tmp_path):
    from ray import tune

    from sweep import trainable_for

    fn = trainable_for("toy_aid", "quadratic", problem_params={"dim_x": 4, "dim_y": 5}, budget={"iterations": 30},
                       n_evals=6, imports=["tests.sweep.toy_algorithms"])
    tuner = tune.Tuner(fn, param_space={"lr": tune.grid_search([0.05, 0.6]), "seed": 1},
                       tune_config=tune.TuneConfig(metric="grad_F_sq", mode="min"),
                       run_config=tune.RunConfig(storage_path=str(tmp_path), name="mine", verbose=0))
    grid = tuner.fit()
    assert not grid.errors and len(grid) == 2
    finals = {}
    for lr in (0.05, 0.6):
        p = problems.make("quadratic", seed=1, dim_x=4, dim_y=5)
        finals[lr] = list(algorithms.run("toy_aid", p, {"lr": lr}, seed=1, budget={"iterations": 30}, n_evals=6))[-1]
    best = grid.get_best_result()
    want = min(finals, key=lambda lr: finals[lr]["grad_F_sq"])
    assert best.config["lr"] == want
    assert best.metrics["grad_F_sq"] == pytest.approx(finals[want]["grad_F_sq"], rel=1e-12)
    assert best.metrics["status"] == "finished" and best.metrics["iteration"] == 30


def test_bisweep_ui_serves_the_study_store(faults_study, venv_bin, free_port, tmp_path):
    outcome = faults_study[0]
    log = open(tmp_path / "ui.txt", "w")
    proc, base = serve(lambda port: subprocess.Popen(
        [str(venv_bin / "bisweep"), "ui", "faults", "--results-dir", str(outcome.results_dir), "--port", str(port)],
        stdout=log, stderr=subprocess.STDOUT, start_new_session=True), free_port, stop=stop_group)
    try:
        with urllib.request.urlopen(base + "/api/2.0/mlflow/experiments/get-by-name?experiment_name=faults") as r:
            exp = json.load(r)["experiment"]
        req = urllib.request.Request(base + "/api/2.0/mlflow/runs/search", method="POST",
                                     data=json.dumps({"experiment_ids": [exp["experiment_id"]], "max_results": 100}).encode(),
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req) as r:
            runs = json.load(r)["runs"]
        assert len(runs) == 1 + 8
        parent = next(r for r in runs if any(t["key"] == "bisweep.role" and t["value"] == "study"
                                             for t in r["data"]["tags"]))
        q = f"/api/2.0/mlflow/artifacts/list?run_id={parent['info']['run_id']}&path=report"
        with urllib.request.urlopen(base + q) as r:
            files = {f["path"] for f in json.load(r)["files"]}
        assert "report/best.csv" in files
    finally:
        stop_group(proc)
        log.close()
    printed = (tmp_path / "ui.txt").read_text()
    assert "bisweep: MLflow UI at http://127.0.0.1:" in printed
    assert "Warning" not in printed, printed  # the server's deprecation warnings stay out (--debug shows them)


# ---------------------------------------------------------------- a real mlflow server
def test_study_against_an_mlflow_server(tmp_path, repo, venv_bin, free_port, eval_points):
    env = {**os.environ, "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"}
    server, uri = serve(lambda port: subprocess.Popen(
        [str(venv_bin / "mlflow"), "server", "--host", "127.0.0.1", "--port", str(port),
         "--backend-store-uri", f"sqlite:///{tmp_path / 'server.db'}", "--artifacts-destination", str(tmp_path / "art"),
         "--gunicorn-opts", "--workers 1"],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True), free_port, stop=stop_group)
    try:
        study_file = tmp_path / "served.yaml"
        study_file.write_text(yaml.safe_dump({
            "name": "served", "imports": ["tests.sweep.toy_algorithms"], "kind": "stepsize_sensitivity",
            "axis": {"factors": [0.5, 1]}, "problems": [{"name": "quadratic", "params": {"dim_x": 3, "dim_y": 3}}],
            "algorithms": [{"name": "toy_aid"}], "seeds": 2, "budget": {"iterations": 20}, "n_evals": 5}))
        proc = subprocess.run([str(venv_bin / "bisweep"), "run", str(study_file), "--tracking-uri", uri,
                               "--results-dir", str(tmp_path / "res"), "--num-cpus", "1"],
                              cwd=repo, capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, proc.stderr[-3000:]
        from mlflow import MlflowClient

        client = MlflowClient(uri)
        parents, kids = children_of(client, "served")
        assert len(parents) == 1 and len(kids) == 4
        n_points = len(eval_points(20, 5))
        for k in kids:
            assert len(client.get_metric_history(k.info.run_id, "Metrics/F")) == n_points
            assert "problem.dim_x" not in k.data.params  # shared by every run: the parent's
        assert client.get_run(parents[0].info.run_id).data.params["problem.dim_x"] == "3"
        arts = {a.path for a in client.list_artifacts(parents[0].info.run_id, "report")}
        assert {"report/sensitivity.csv", "report/sensitivity.png"} <= arts
        assert not (tmp_path / "res" / "mlflow.db").exists()  # nothing went to the local default store
    finally:
        stop_group(server)
