"""Clusters: a two-node Ray cluster on loopback running a study, and cluster.yaml validated offline."""
from tests.sweep import stored
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from tests.sweep.execution.nodes import alive, descendants, own_ports, start_worker, wait_for_node

HEAD, WORKER = "127.0.0.2", "127.0.0.3"
REPO = Path(__file__).resolve().parents[3]


def stop_tree(proc: subprocess.Popen) -> None:
    """Stop a `ray start --block` process and everything it started, by their ids (gcs_server needs SIGKILL)."""
    pids = descendants(proc.pid)
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid in reversed(pids):
            if alive(pid):
                os.kill(pid, sig)
        end = time.monotonic() + 10
        while time.monotonic() < end and any(alive(p) for p in pids):
            time.sleep(0.2)
    if proc.poll() is None:
        proc.kill()
    proc.wait(timeout=30)


@pytest.fixture(scope="module")
def loopback_cluster(venv_bin, free_port):
    """A two-node Ray cluster on loopback (head and worker, one CPU each): (head address, environment); the head's
    dashboard (for `ray job submit`) is at the environment's BISWEEP_TEST_DASHBOARD, its job agent up."""
    port, dashboard = free_port(HEAD), free_port(HEAD)
    agent = own_ports(head=True)
    env = {**os.environ, "RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": secrets.token_hex(32), "PYTHONPATH": str(REPO),
           # A killed node counts as dead after 3 missed health checks 0.5 s apart (Ray's default: 5 x 3 s).
           "RAY_health_check_period_ms": "500", "RAY_health_check_failure_threshold": "3"}
    # Short temp dirs: Ray's socket paths must fit in 107 bytes.
    head_dir = tempfile.mkdtemp(prefix="bswh", dir="/tmp")
    temps, procs = [head_dir], []
    try:
        procs.append(subprocess.Popen(
            [str(venv_bin / "ray"), "start", "--head", f"--node-ip-address={HEAD}", f"--port={port}",
             f"--temp-dir={head_dir}", "--include-dashboard=true", f"--dashboard-host={HEAD}",
             f"--dashboard-port={dashboard}", *agent, "--num-cpus=1", "--disable-usage-stats", "--block"],
            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True))
        _wait_port(HEAD, port)
        wait_for_node(f"{HEAD}:{port}", HEAD, env, timeout=90)
        for _ in range(3):  # a raylet gives up (a crash) on agents that take over 30 s to start, as under load
            temps.append(tempfile.mkdtemp(prefix="bsww", dir="/tmp"))
            procs.append(start_worker(venv_bin / "ray", f"{HEAD}:{port}", WORKER, temps[-1], env))
            try:
                wait_for_node(f"{HEAD}:{port}", WORKER, env, timeout=60)
                break
            except AssertionError:
                stop_tree(procs.pop())
        else:
            raise AssertionError(f"the worker node at {WORKER} did not join in 3 starts")
        _wait_port(HEAD, int(agent[0].split("=")[1]))  # the head's job agent: it registers as it starts serving
        yield f"{HEAD}:{port}", {**env, "BISWEEP_TEST_DASHBOARD": f"http://{HEAD}:{dashboard}"}
    finally:
        for p in reversed(procs):
            stop_tree(p)
        for d in temps:
            shutil.rmtree(d, ignore_errors=True)


def run_bisweep(study: dict, results: Path, env: dict, *options: str) -> subprocess.CompletedProcess:
    """`bisweep run` of `study` (written beside `results`) in a fresh process."""
    path = results.parent / f"{study['name']}.yaml"
    path.write_text(yaml.safe_dump(study))
    run = subprocess.run([sys.executable, "-m", "sweep.cli", "run", str(path), "--results-dir", str(results), *options],
                         cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-3000:]
    return run


def summaries(results: Path) -> list[dict]:
    return stored.summaries(results)


@pytest.mark.integration
def test_a_study_submitted_as_a_ray_job_runs_on_the_cluster(loopback_cluster, venv_bin, tmp_path):
    """The job's driver runs on the head and, without --address, joins the cluster RAY_ADDRESS names (Ray sets it
    for a job's entrypoint)."""
    address, env = loopback_cluster
    study = {"name": "job", "problems": [{"name": "quadratic", "params": {"dim_x": 2, "dim_y": 2}}],
             "algorithms": ["soba"], "seeds": 2, "budget": {"iterations": 5}, "n_evals": 2}
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump(study))
    out = tmp_path / "out"
    submit = subprocess.run(
        [str(venv_bin / "ray"), "job", "submit", "--address", env["BISWEEP_TEST_DASHBOARD"], "--",
         sys.executable, "-m", "sweep.cli", "run", str(path), "--results-dir", str(out), "--no-report"],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert submit.returncode == 0 and "succeeded" in submit.stdout, submit.stdout[-2000:] + submit.stderr[-2000:]
    assert f"the Ray cluster at {address}" in submit.stdout  # the driver's own lines, as the job's log
    assert sorted(s["status"] for s in summaries(out)) == ["finished", "finished"]


@pytest.mark.integration
def test_a_driver_without_the_clusters_token_is_one_line_before_anything_is_written(loopback_cluster, tmp_path):
    address, env = loopback_cluster
    home = tmp_path / "home"  # no ~/.ray/auth_token either
    home.mkdir()
    bare = {k: v for k, v in env.items() if k != "RAY_AUTH_TOKEN"} | {"HOME": str(home)}
    start = time.monotonic()
    run = subprocess.run([sys.executable, "-m", "sweep.cli", "run", "quickstart", "--results-dir", str(tmp_path / "out"),
                          "--address", address], cwd=REPO, env=bare, capture_output=True, text=True, timeout=120)
    assert run.returncode == 2 and time.monotonic() - start < 20, run.stderr[-2000:]
    assert run.stderr.strip().splitlines() == [
        f"bisweep: error: address: the Ray cluster at {address} wants an auth token this driver does not have: "
        "export RAY_AUTH_MODE=token and RAY_AUTH_TOKEN (or ~/.ray/auth_token) as the cluster's"]
    assert not (tmp_path / "out").exists()


@pytest.mark.integration
def test_a_local_start_is_a_ray_of_its_own_beside_a_running_cluster(loopback_cluster):
    address, env = loopback_cluster  # Ray's own default would join this cluster (and refuse num_cpus)
    own = subprocess.run(
        [sys.executable, "-c", "import ray\nfrom sweep.execution.ray_cluster import start_ray, started_here, stop_ray\n"
         "assert start_ray(None, 1)\nprint(started_here(), len(ray.nodes()), ray.cluster_resources()['CPU'])\n"
         "stop_ray()"],
        cwd=REPO, env={**env, "RAY_ADDRESS": address}, capture_output=True, text=True, timeout=150)
    assert own.returncode == 0, own.stderr[-3000:]
    assert own.stdout.split() == ["True", "1", "1.0"]  # one node, this process's, not the cluster's two


def _wait_port(host: str, port: int, timeout: float = 60) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        try:
            socket.create_connection((host, port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.3)
    raise TimeoutError(f"{host}:{port}")


def test_cluster_yaml_validates_offline_with_rays_own_schema(repo):
    import copy

    import jsonschema
    import ray
    from ray.autoscaler._private.util import prepare_config, validate_config

    raw = yaml.safe_load((repo / "cluster.yaml").read_text())
    config = prepare_config(copy.deepcopy(raw))  # what `ray up` does before any cloud call
    validate_config(config)
    assert config["provider"]["type"] == "aws" and config["head_node_type"] in config["available_node_types"]
    assert config["docker"]["image"].startswith(f"rayproject/ray:{ray.__version__}-py311")
    mount = next(k for k, v in config["file_mounts"].items() if v == ".")
    assert any(f"pip install -q -e {mount}" in c for c in config["setup_commands"])
    assert ".venv" in config["rsync_exclude"] and "results" in config["rsync_exclude"]
    broken = copy.deepcopy(raw)
    broken["available_node_types"]["cpu_worker"]["min_worker"] = 1  # a typo the schema must reject
    with pytest.raises(jsonschema.ValidationError, match="min_worker"):
        validate_config(prepare_config(broken))


def test_unreachable_cluster_is_a_one_line_error(monkeypatch):
    import ray

    from sweep.execution.ray_cluster import ClusterError, start_ray

    def refuse(*args, **kwargs):
        raise ConnectionError("Failed to connect to Ray cluster at 10.0.0.1:6379")

    monkeypatch.setattr(ray, "is_initialized", lambda: False)
    monkeypatch.setattr(ray, "init", refuse)
    with pytest.raises(ClusterError, match=r"^address: cannot connect to the Ray cluster at 10.0.0.1:6379 .*RAY_AUTH_TOKEN"):
        start_ray("10.0.0.1:6379", None)


def test_bisweep_cluster_check_gives_one_line_per_error_of_rays_schema(repo, tmp_path, capsys):
    from sweep.cli import main

    assert main(["cluster", "check", str(repo / "cluster.yaml")]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[-1] == f"bisweep: {repo / 'cluster.yaml'} is a valid Ray cluster file"
    raw = yaml.safe_load((repo / "cluster.yaml").read_text())
    raw["available_node_types"]["cpu_worker"]["min_worker"] = 1  # a typo
    raw["idle_timeout_minutes"] = "ten"
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump(raw))
    assert main(["cluster", "check", str(bad)]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.splitlines() == [
        f"bisweep: error: {bad}: available_node_types.cpu_worker: Additional properties are not allowed "
        "('min_worker' was unexpected)",
        f"bisweep: error: {bad}: idle_timeout_minutes: 'ten' is not of type 'number'",
    ]
    raw = yaml.safe_load((repo / "cluster.yaml").read_text())
    raw["head_node_type"] = "gpu_head"
    bad.write_text(yaml.safe_dump(raw))
    assert main(["cluster", "check", str(bad)]) == 2
    assert capsys.readouterr().err.splitlines() == [
        f"bisweep: error: {bad}: `head_node_type` must be one of `available_node_types`."]
    bad.write_text("provider: [aws]\n")
    assert main(["cluster", "check", str(bad)]) == 2
    assert capsys.readouterr().err.splitlines() == [
        f"bisweep: error: {bad}: provider.type: required (aws, gcp, azure, local, ...)"]


def test_the_cloud_extras_install_what_rays_cluster_launcher_imports(repo):
    import tomllib

    extras = tomllib.loads((repo / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert [r.split(">")[0] for r in extras["aws"]] == ["boto3"]
    assert [r.split(">")[0] for r in extras["gcp"]] == ["google-api-python-client", "google-auth-httplib2"]
    launcher = Path(__import__("ray.autoscaler").autoscaler.__file__).parent / "_private"
    assert "import boto3" in (launcher / "aws" / "config.py").read_text()
    assert "import googleapiclient" in (launcher / "gcp" / "config.py").read_text()
    assert "import google_auth_httplib2" in (launcher / "gcp" / "config.py").read_text()


# ---------------------------------------------------------------- a lost worker node
SPARE = "127.0.0.4"  # a third node, killed and started again (the fixture's two stay up for the other tests)
TIMES = ("time", "cpu_time", "eval_time")


def reference_finals(done: list[dict], batched: bool) -> dict[str, dict]:
    """Each run's final record computed here, without Ray, trial by trial as the study grouped them (toy_aid's
    sleep and trace, test hooks that change no number, left out)."""
    import dataclasses

    from sweep.execution.trial import execute_trial
    from sweep.execution.trial_runs import chunks, final_record
    from sweep.study.model import Point, RunSpec, TrialConfig

    finals: dict[str, dict] = {}
    by_trial: dict[str, list[dict]] = {}
    for s in done:
        by_trial.setdefault(s["trial_key"], []).append(s)
    for key, runs in by_trial.items():
        specs = []
        for s in sorted(runs, key=lambda s: s["run_key"]):
            spec = RunSpec.of(Point.from_dict(s["point"]), s["seed"])
            params = {k: v for k, v in spec.algorithm_params.items() if k not in ("sleep", "trace")}
            specs.append(dataclasses.replace(spec, run_key=s["run_key"], algorithm_params=params))
        config = TrialConfig(key, tuple(specs), 1e9, 0.0, ("tests.sweep.toy_algorithms",), batched=batched)

        def report(result: dict, state: object) -> None:
            for chunk in chunks(result):
                if chunk["done"]:
                    finals[chunk["run_key"]] = final_record(chunk)

        execute_trial(config, report)
    return finals


def without_times(record: dict) -> dict:
    return {k: v for k, v in record.items() if k not in TIMES}


def check_nothing_lost(results: Path, runs: int, batched: bool) -> None:
    """Every run finished once (ended.txt names it once), its records without a repeated or missing evaluation,
    and its final record the one computed without Ray."""
    ended = (results / "ended.txt").read_text().split()
    assert ended[0::2] == ["finished"] * runs and len(set(ended[1::2])) == runs  # 0 failed, 0 lost, 0 duplicated
    done = summaries(results)
    for s in done:
        iterations = [r["iteration"] for r in stored.stored_records(results, s["run_key"])]
        assert iterations == sorted(set(iterations)) and iterations[-1] == s["final"]["iteration"], s["run_key"]
    reference = reference_finals(done, batched)
    assert {s["run_key"]: without_times(s["final"]) for s in done} == {k: without_times(v) for k, v in reference.items()}


def study_beside_a_lost_node(study: dict, results: Path, address: str, env: dict, ray_bin: Path,
                             before_kill: float | Callable[[list[int]], bool], *options: str) -> tuple[subprocess.CompletedProcess, float, list[int]]:
    """`bisweep run` of `study` while a third node joins, takes a trial and is killed `before_kill` seconds
    later (or once `before_kill(its trial processes)`); the node is started again (so that the study can finish as fast with it as without) and stopped at
    the end. The run, its wall time and the processes of the killed node that ran trials."""
    from tests.sweep.execution.nodes import kill_node, start_worker, trial_processes, wait_for_node, wait_for_trial

    path = results.parent / f"{study['name']}.yaml"
    path.write_text(yaml.safe_dump(study))
    temp = [tempfile.mkdtemp(prefix=f"bsw{i}", dir="/tmp") for i in range(2)]
    node = start_worker(ray_bin, address, SPARE, temp[0], env)
    wait_for_node(address, SPARE, env)  # three nodes from the start: the spare takes a trial of the first wave
    start = time.monotonic()
    driver = subprocess.Popen([sys.executable, "-m", "sweep.cli", "run", str(path), "--results-dir", str(results),
                               "--address", address, "--no-report", *options],
                              cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    again = None
    try:
        wait_for_trial(node)
        if callable(before_kill):
            wait_until(lambda: before_kill(trial_processes(node)), driver)
        else:
            time.sleep(before_kill)
        killed = trial_processes(node)
        kill_node(node)
        again = start_worker(ray_bin, address, SPARE, temp[1], env)
        out, err = driver.communicate(timeout=300)
        seconds = time.monotonic() - start
    finally:
        if driver.poll() is None:
            driver.kill()
        for p in (node, again):
            if p is not None and p.poll() is None:
                kill_node(p)  # at once: nothing of it is kept
        for d in temp:
            shutil.rmtree(d, ignore_errors=True)
    assert driver.returncode == 0, out[-2000:] + err[-3000:]
    return subprocess.CompletedProcess(driver.args, driver.returncode, out, err), seconds, killed


def segments(trace: Path) -> dict[tuple, list[tuple[int, list[int]]]]:
    """toy_aid's trace by run ((lr, generator state): its seed): one (process, iterations stepped) per start."""
    runs: dict[tuple, list[tuple[int, list[int]]]] = {}
    current: dict[int, list[int]] = {}  # process -> the steps of the run it runs now
    for event in map(json.loads, trace.read_text().split("\n")[:-1]):  # whole lines: a trial may be writing one
        if event["event"] == "init":
            current[event["pid"]] = []
            runs.setdefault((event["lr"], event["rng"]), []).append((event["pid"], current[event["pid"]]))
        else:
            current[event["pid"]].append(event["iteration"])
    return runs


def wait_until(condition: Callable[[], bool], driver: subprocess.Popen, timeout: float = 120) -> None:
    """Until `condition` holds (an error once the study's driver ended or `timeout` s passed)."""
    end = time.monotonic() + timeout
    while not condition():
        assert driver.poll() is None, f"the study ended before the node could be killed mid-run"
        if time.monotonic() > end:
            raise TimeoutError("the condition did not hold in time")
        time.sleep(0.05)


def midway(trace: Path, steps: int) -> Callable[[list[int]], bool]:
    """Whether one of these processes is `steps` steps into a run (toy_aid's trace: past a checkpoint)."""
    def ready(pids: list[int]) -> bool:
        runs = segments(trace) if trace.exists() else {}
        return any(p in pids and len(s) >= steps for starts in runs.values() for p, s in starts[-1:])

    return ready


@pytest.mark.integration
def test_a_worker_node_lost_mid_study_fails_loses_and_repeats_no_run(loopback_cluster, venv_bin, tmp_path):
    """The lost node's trials start again elsewhere from their last checkpoint, with --max-failures over the
    study file's `max_failures: 0`."""
    address, env = loopback_cluster
    trace = tmp_path / "trace.jsonl"
    study = {"name": "lost", "imports": ["tests.sweep.toy_algorithms"], "batched": "off", "max_failures": 0,
             "problems": [{"name": "quadratic", "params": {"dim_x": 3, "dim_y": 3}}],
             # 3 s a run, 2 runs a trial; a checkpoint every 0.5 s
             "algorithms": [{"name": "toy_aid", "params": {"lr": [0.2, 0.3, 0.4, 0.5], "sleep": 0.1,
                                                           "trace": str(trace)}}], "seeds": 2,
             "runs_per_trial": 2, "budget": {"iterations": 30}, "n_evals": 5, "checkpoint_seconds": 0.5,
             "report_seconds": 0.2}
    # killed 1 s into a run (0.1 s a step): past a checkpoint, before the run's end
    run, seconds, killed = study_beside_a_lost_node(study, tmp_path / "out", address, env, venv_bin / "ray",
                                                    midway(trace, 10), "--max-failures", "2")
    check_nothing_lost(tmp_path / "out", 8, batched=False)
    runs = segments(trace)
    assert len(runs) == 8
    cut = {k: s for k, s in runs.items() if s[0][0] in killed and len(s) > 1}
    assert cut  # the killed node was running a run, which started again in another process
    for starts in cut.values():
        for (_, before), (_, after) in zip(starts, starts[1:]):
            # from its last checkpoint: not from iteration 0, and no step after the kill missing
            assert 0 < after[0] <= before[-1] + 1 and after == list(range(after[0], 30)), starts
    print(f"lost node, unbatched: {seconds:.1f} s")


@pytest.mark.integration
def test_a_worker_node_lost_mid_batch_fails_loses_and_repeats_no_run(loopback_cluster, venv_bin, tmp_path):
    address, env = loopback_cluster
    study = {"name": "lostbatch", "instance_seed": 0,  # one problem instance: a trial's runs step as one batch
             "problems": [{"name": "quadratic", "params": {"dim_x": 30, "dim_y": 30}}],
             "algorithms": [{"name": "soba", "params": {"gamma": [0.05, 0.1, 0.2]}}], "seeds": 2,
             "runs_per_trial": 2, "budget": {"iterations": 30000}, "n_evals": 5, "checkpoint_seconds": 0.5,
             "report_seconds": 0.2}
    run, seconds, _ = study_beside_a_lost_node(study, tmp_path / "out", address, env, venv_bin / "ray", before_kill=1.5)
    assert "batched: runs of one algorithm" in run.stdout
    check_nothing_lost(tmp_path / "out", 6, batched=True)
    print(f"lost node, batched: {seconds:.1f} s")


# ---------------------------------------------------------------- results that outlive the cluster
@pytest.mark.integration
def test_results_in_storage_outlive_the_cluster_and_resume_on_another_machine(loopback_cluster, tmp_path):
    """A study with --address runs its trials on both nodes; --storage (a shared directory standing in for a
    bucket) receives the results directory; with the head's copy gone (`ray down`), another machine reports from
    storage and finishes the study's failed run from there."""
    address, env = loopback_cluster
    bucket = tmp_path / "bucket"
    study = {"name": "kept", "imports": ["tests.sweep.toy_algorithms"], "max_failures": 0,
             "problems": [{"name": "quadratic", "params": {"dim_x": 2, "dim_y": 2}}],
             # 6 s a trial: time for both nodes (a trial actor is reused on its node)
             "algorithms": [{"name": "toy_aid", "params": {"lr": [0.2, 0.3, 0.4], "sleep": 0.15}},
                            {"name": "toy_aid", "label": "flaky", "params": {
                                "lr": 0.5, "fail_at": 3, "fail_once": str(tmp_path / "failed-once")}}],
             "seeds": 1, "budget": {"iterations": 40}, "n_evals": 3}
    path = tmp_path / "kept.yaml"
    path.write_text(yaml.safe_dump(study))

    def bisweep(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "sweep.cli", *args], cwd=REPO, env=env, capture_output=True,
                              text=True, timeout=300)

    head = tmp_path / "head" / "out"
    first = bisweep("run", str(path), "--results-dir", str(head), "--address", address, "--storage", str(bucket))
    assert first.returncode == 1 and f"bisweep: results copied to {bucket}" in first.stdout, first.stderr[-2000:]
    assert f"the Ray cluster at {address}" in first.stdout
    assert {s["where"]["node"] for s in summaries(head) if s["status"] == "finished"} == {HEAD, WORKER}  # both nodes
    kept = bucket / "results" / "out"
    assert sorted((kept / "ended.txt").read_text().split()[0::2]) == ["failed"] + ["finished"] * 3
    assert {p.name for p in kept.iterdir()} >= {"study.json", "runs", "shards", "shards.txt", "ended.txt", "report", "mlflow.db"}
    shutil.rmtree(head)  # `ray down`
    laptop = tmp_path / "laptop" / "out"
    report = bisweep("report", str(path), "--results-dir", str(laptop), "--storage", str(bucket), "--no-mlflow")
    assert report.returncode == 0 and (laptop / "report").is_dir(), report.stderr[-2000:]
    again = bisweep("run", str(path), "--results-dir", str(tmp_path / "other" / "out"), "--address", address,
                    "--storage", str(bucket), "--resume", "--no-report")
    assert again.returncode == 0 and "running 1 runs" in again.stdout, again.stdout[-2000:] + again.stderr[-2000:]
    assert (kept / "ended.txt").read_text().split()[0::2][-1] == "finished"
    assert sorted(s["status"] for s in summaries(kept)) == ["finished"] * 4


# ---------------------------------------------------------------- autoscaling
AUTOSCALED = "127.0.0.5"


def fake_autoscaling_config(gcs: str) -> dict:
    """Ray's fake multi-node provider: worker nodes started on this machine as the autoscaler asks (a head with no
    CPU, up to 2 one-CPU workers, removed once idle for 6 s)."""
    return {"cluster_name": "bisweep-fake", "max_workers": 2, "upscaling_speed": 1.0, "idle_timeout_minutes": 0.1,
            "provider": {"type": "fake_multinode", "use_node_id_as_ip": True, "disable_node_updaters": True,
                         "disable_launch_config_check": True, "gcs_address": gcs},
            "available_node_types": {
                "ray.head.default": {"resources": {"CPU": 0}, "max_workers": 0, "node_config": {}},
                "ray.worker.cpu": {"resources": {"CPU": 1}, "min_workers": 0, "max_workers": 2, "node_config": {}}},
            "head_node_type": "ray.head.default", "auth": {"ssh_user": "ubuntu"}, "docker": {}, "file_mounts": {},
            "cluster_synced_files": [], "file_mounts_sync_continuously": False, "rsync_exclude": [],
            "rsync_filter": [], "initialization_commands": [], "setup_commands": [], "head_setup_commands": [],
            "worker_setup_commands": [], "head_start_ray_commands": [], "worker_start_ray_commands": []}


@pytest.mark.integration
def test_an_autoscaling_cluster_starts_workers_on_demand_and_loses_nothing(venv_bin, free_port, tmp_path):
    port = free_port(AUTOSCALED)
    config = tmp_path / "autoscaling.yaml"
    config.write_text(yaml.safe_dump(fake_autoscaling_config(f"{AUTOSCALED}:{port}")))
    env = {**os.environ, "RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": secrets.token_hex(32), "PYTHONPATH": str(REPO),
           "RAY_FAKE_CLUSTER": "1", "AUTOSCALER_UPDATE_INTERVAL_S": "1"}
    temp = tempfile.mkdtemp(prefix="bswa", dir="/tmp")
    head = subprocess.Popen(
        [str(venv_bin / "ray"), "start", "--head", f"--node-ip-address={AUTOSCALED}", f"--port={port}", "--num-cpus=0",
         f"--temp-dir={temp}", "--include-dashboard=false", "--disable-usage-stats", f"--autoscaling-config={config}",
         "--block"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        _wait_port(AUTOSCALED, port)
        study = {"name": "scaled", "imports": ["tests.sweep.toy_algorithms"], "batched": "off",
                 "problems": [{"name": "quadratic", "params": {"dim_x": 2, "dim_y": 2}}],
                 "algorithms": [{"name": "toy_aid", "params": {"lr": [0.2, 0.3], "sleep": 0.05}}],
                 "seeds": 1, "runs_per_trial": 1, "budget": {"iterations": 40}, "n_evals": 3}
        run = run_bisweep(study, tmp_path / "out", env, "--address", f"{AUTOSCALED}:{port}", "--no-report")
        assert "a trial asks for 1 CPUs and the cluster has 0 now; trials wait until it scales up" in run.stdout
        ended = (tmp_path / "out" / "ended.txt").read_text().split()
        assert ended[0::2] == ["finished"] * 2 and len(set(ended[1::2])) == 2  # nothing lost, nothing twice
        nodes = {s["where"]["node"] for s in summaries(tmp_path / "out")}
        assert nodes and AUTOSCALED not in nodes  # every run on a worker the autoscaler started
        monitor = next(Path(temp).glob("session_*/logs/monitor.log")).read_text()
        assert "Adding 2 node(s) of type ray.worker.cpu" in monitor or "Adding 1 node(s) of type ray.worker.cpu" in monitor
    finally:
        from tests.sweep.execution.nodes import kill_node

        kill_node(head)  # the fake workers are the autoscaler's children: they go with it
        shutil.rmtree(temp, ignore_errors=True)
