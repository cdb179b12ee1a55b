"""Clusters: a two-node Ray cluster on loopback running a study, and cluster.yaml validated offline."""
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
from pathlib import Path

import pytest
import yaml

HEAD, WORKER = "127.0.0.2", "127.0.0.3"
REPO = Path(__file__).resolve().parents[3]


def _parent(pid: int) -> int | None:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return None


def descendants(pid: int) -> list[int]:
    """Every process below `pid` (from /proc), children before grandchildren."""
    children: dict[int, list[int]] = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            children.setdefault(_parent(int(d)), []).append(int(d))
    out, todo = [], [pid]
    while todo:
        for c in children.get(todo.pop(0), []):
            out.append(c)
            todo.append(c)
    return out


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def stop_tree(proc: subprocess.Popen) -> None:
    """Stop a `ray start --block` process and everything it started, by their ids (gcs_server needs SIGKILL)."""
    pids = descendants(proc.pid)
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid in reversed(pids):
            if _alive(pid):
                os.kill(pid, sig)
        end = time.monotonic() + 10
        while time.monotonic() < end and any(_alive(p) for p in pids):
            time.sleep(0.2)
    if proc.poll() is None:
        proc.kill()
    proc.wait(timeout=30)


@pytest.fixture(scope="module")
def loopback_cluster(venv_bin, free_port):
    """A two-node Ray cluster on loopback (head and worker, one CPU each): (head address, environment)."""
    port = free_port(HEAD)
    env = {**os.environ, "RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": secrets.token_hex(32), "PYTHONPATH": str(REPO)}
    # Short temp dirs: Ray's socket paths must fit in 107 bytes.
    head_dir, worker_dir = (tempfile.mkdtemp(prefix=p, dir="/tmp") for p in ("bswh", "bsww"))
    common = ["--num-cpus=1", "--disable-usage-stats", "--block"]
    procs = []
    try:
        procs.append(subprocess.Popen(
            [str(venv_bin / "ray"), "start", "--head", f"--node-ip-address={HEAD}", f"--port={port}",
             f"--temp-dir={head_dir}", "--include-dashboard=false", *common],
            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True))
        _wait_port(HEAD, port)
        procs.append(subprocess.Popen(
            [str(venv_bin / "ray"), "start", f"--address={HEAD}:{port}", f"--node-ip-address={WORKER}",
             f"--temp-dir={worker_dir}", *common],
            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True))
        nodes = subprocess.run(
            [sys.executable, "-c", "import ray, sys, time\n"
             f"ray.init(address='{HEAD}:{port}', logging_level='ERROR')\n"
             "end = time.time() + 90\n"
             "while time.time() < end and sum(n['Alive'] for n in ray.nodes()) < 2: time.sleep(0.5)\n"
             "print(sorted(n['NodeManagerAddress'] for n in ray.nodes() if n['Alive']))"],
            env=env, capture_output=True, text=True, timeout=150)
        assert nodes.stdout.strip() == str(sorted([HEAD, WORKER])), nodes.stderr[-2000:]
        yield f"{HEAD}:{port}", env
    finally:
        for p in reversed(procs):
            stop_tree(p)
        for d in (head_dir, worker_dir):
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
    return [json.loads(p.read_text()) for p in (results / "runs").glob("*.json")]


@pytest.mark.integration
def test_study_on_a_two_node_loopback_cluster(loopback_cluster, tmp_path):
    address, env = loopback_cluster
    study = {"name": "two", "imports": ["tests.sweep.toy_algorithms"], "kind": "stepsize_sensitivity",
             "axis": {"factors": [0.25, 0.5, 1, 1.5]},
             "problems": [{"name": "quadratic", "params": {"dim_x": 3, "dim_y": 3}}],
             # 6 s a trial: time for both nodes
             "algorithms": [{"name": "toy_aid", "params": {"sleep": 0.15}}], "seeds": 1,
             "budget": {"iterations": 40}, "n_evals": 5}
    run = run_bisweep(study, tmp_path / "out", env, "--address", address)
    assert f"the Ray cluster at {address}" in run.stdout
    done = summaries(tmp_path / "out")
    assert len(done) == 4 and {s["status"] for s in done} == {"finished"}
    assert {s["where"]["node"] for s in done} == {HEAD, WORKER}  # trials ran on both nodes


@pytest.mark.integration
def test_without_address_a_study_joins_the_cluster_ray_address_names(loopback_cluster, tmp_path):
    address, env = loopback_cluster  # a Ray Job's driver finds its cluster in RAY_ADDRESS
    study = {"name": "job", "problems": [{"name": "quadratic", "params": {"dim_x": 2, "dim_y": 2}}],
             "algorithms": ["soba"], "seeds": 1, "budget": {"iterations": 5}, "n_evals": 2}
    run = run_bisweep(study, tmp_path / "out", {**env, "RAY_ADDRESS": address}, "--no-report")
    assert f"the Ray cluster at {address}" in run.stdout
    assert [s["status"] for s in summaries(tmp_path / "out")] == ["finished"]


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
