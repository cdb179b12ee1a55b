"""Nothing outside the driver can hang it (issue 34, items 2-3): an MLflow store that takes TCP but never answers
ends the run with one line saying how many results MLflow did not get (they are on disk), a port that is no Ray
head is refused in seconds, and a killed raylet ends the run in one line (exit 1) that a rerun finishes."""
from tests.sweep import stored
import copy
import errno
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import traceback

import pytest
import yaml

from sweep.cli import main
from sweep.execution.mlflow_writer import MlflowCallback
from sweep.results.store import ResultStore
from sweep.tracking.tracker import SyncLog, Tracker, default_tracking_uri
from tests.conftest import TOY_STUDY
from tests.sweep.tracking.test_tracking import ended_result, index_of


@pytest.fixture
def silent_port():
    """A port that accepts TCP connections and never says a word (a socket listener on a database port)."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(64)
    held, stop = [], threading.Event()

    def accept():
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                held.append(server.accept()[0])
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield server.getsockname()[1]
    stop.set()
    thread.join()
    # Left open until the tests end: the driver's abandoned MLflow thread then waits on silently, where a closed
    # port would set MLflow retrying with a warning line every few seconds during the tests that follow.
    _KEPT_OPEN.extend([server, *held])


_KEPT_OPEN: list[socket.socket] = []


def test_the_writer_gives_up_on_a_store_that_stops_answering(tmp_path, toy_study):
    study = toy_study(seeds=1)
    never = threading.Event()
    cb = MlflowCallback(lambda: never.wait(), index_of(study), ResultStore(tmp_path))  # connect never returns
    cb.on_trial_result(0, [], None, ended_result(study.run_keys[0], [0, 1]))
    start = time.monotonic()
    assert cb.close(stall=0.5) is False
    assert cb.stalled and 0.5 <= time.monotonic() - start < 2.0 and cb.backlog == 2  # the result and the stop mark
    never.set()


def test_the_writer_waits_for_a_slow_store_that_keeps_answering(tmp_path, toy_study):
    study = toy_study(seeds=1)
    store = ResultStore(tmp_path)
    t = Tracker(default_tracking_uri(tmp_path), study.name)
    t.start_study(study)

    def slow():  # 1.2 s to connect, answering every 0.2 s: never 0.5 s silent
        for _ in range(6):
            time.sleep(0.2)
            t.answers.mark()
        return t, SyncLog(store, t.parent_id)

    cb = MlflowCallback(slow, index_of(study), store, t.answers)
    cb.on_trial_result(0, [], None, ended_result(study.run_keys[0], [0, 1]))
    assert cb.close(stall=0.5) is True
    assert not cb.stalled and cb.drain_seconds >= 1.0 and cb.synced.keys == {study.run_keys[0]}


def test_a_store_that_takes_tcp_but_never_answers_ends_the_run_in_one_line(tmp_path, toy_study, write_synthetic,
                                                                           silent_port, repo):
    """Every run is on disk already (no Ray starts): what is left is MLflow, which never answers. The driver runs
    in a process of its own: the MLflow thread it abandons holds MLflow's store registry while it waits, which
    would stall every later MLflow client of a test process."""
    data = {**copy.deepcopy(TOY_STUDY), "name": "silent"}
    path = tmp_path / "silent.yaml"
    path.write_text(yaml.safe_dump(data))
    root = tmp_path / "res"
    write_synthetic(toy_study(name="silent"), root,
                    lambda p, s: ("finished", {"iteration": 30, "status": "finished", "grad_F_sq": 0.1 * s}))
    uri = f"postgresql+psycopg://mlflow:S3cretPW@127.0.0.1:{silent_port}/mlflow"
    driver = ("import os, sys\nfrom sweep import cli\nfrom sweep.tracking import mlflow_store\nmlflow_store.STALL_SECONDS = 1.0\n"
              "code = cli.main(sys.argv[1:])\nsys.stdout.flush(); sys.stderr.flush(); os._exit(code)\n")
    start = time.monotonic()
    proc = subprocess.run([sys.executable, "-c", driver, "run", str(path), "--results-dir", str(root),
                           "--tracking-uri", uri, "--no-report"], cwd=repo, capture_output=True, text=True,
                          timeout=120, env={**os.environ, "PYTHONPATH": str(repo)})
    # The pre-check asks for PostgreSQL's SSL answer, which never comes: refused before the study, in one line.
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert time.monotonic() - start < 20.0  # its bounded wait, the imports and the toy study's validation
    assert "S3cretPW" not in proc.stdout + proc.stderr
    assert proc.stderr.strip().splitlines() == [
        f"bisweep: error: tracking-uri: not a PostgreSQL server at 127.0.0.1:{silent_port} (it does not answer "
        "PostgreSQL's SSL request); check the host and port"]
    assert ResultStore(root).done(toy_study(name="silent").run_keys) == set(toy_study(name="silent").run_keys)


def test_an_address_that_takes_tcp_but_is_no_ray_head_is_refused_before_anything_is_written(tmp_path, silent_port,
                                                                                             repo):
    start = time.monotonic()
    run = subprocess.run([sys.executable, "-m", "sweep.cli", "run", "quickstart", "--results-dir", str(tmp_path / "r"),
                          "--address", f"127.0.0.1:{silent_port}"], cwd=repo, capture_output=True, text=True,
                         timeout=120, env={**os.environ, "PYTHONPATH": str(repo)})
    assert run.returncode == 2 and time.monotonic() - start < 20
    assert run.stderr.strip().splitlines() == [
        f"bisweep: error: address: no Ray head answered at 127.0.0.1:{silent_port} within 5 s (something takes TCP "
        "there but does not speak Ray's protocol); give the head's GCS port (`ray start --head` prints it, 6379 by "
        "default)"]
    assert not (tmp_path / "r").exists() and run.stdout == ""


def _children(pid: int, name: str) -> list[int]:
    """The direct children of `pid` whose command is `name` (from /proc)."""
    found = []
    for entry in os.listdir("/proc"):
        try:
            with open(f"/proc/{entry}/stat") as fh:
                fields = fh.read().rsplit(")", 1)[1].split()
            with open(f"/proc/{entry}/comm") as fh:
                comm = fh.read().strip()
        except (OSError, IndexError):
            continue
        if entry.isdigit() and int(fields[1]) == pid and comm == name:
            found.append(int(entry))
    return found


@pytest.mark.integration
def test_a_killed_raylet_ends_the_run_in_one_line_and_the_rerun_finishes_it(tmp_path, repo, venv_bin):
    study_file = tmp_path / "lost.yaml"
    study_file.write_text(yaml.safe_dump({
        "name": "lost", "imports": ["tests.sweep.toy_algorithms"],
        "problems": [{"name": "quadratic", "params": {"dim_x": 3, "dim_y": 3}}],
        "algorithms": [{"name": "toy_aid", "params": {"sleep": 0.1}}], "seeds": 2,
        "budget": {"iterations": 40}, "n_evals": 8}))
    res = tmp_path / "res"
    cmd = [str(venv_bin / "bisweep"), "run", str(study_file), "--results-dir", str(res), "--num-cpus", "1",
           "--no-report"]
    env = {**os.environ, "PYTHONPATH": str(repo)}
    driver = subprocess.Popen(cmd, cwd=repo, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              start_new_session=True)
    try:
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline and driver.poll() is None:
            if stored.has_records(res):
                break  # a run is under way
            time.sleep(0.1)
        (raylet,) = _children(driver.pid, "raylet")
        os.kill(raylet, signal.SIGKILL)  # as the kernel's OOM killer would
        killed = time.monotonic()
        out, err = driver.communicate(timeout=60)
    finally:
        if driver.poll() is None:
            os.killpg(driver.pid, signal.SIGKILL)
    assert driver.returncode == 1 and time.monotonic() - killed < 20
    (line,) = err.strip().splitlines()
    assert line.startswith("bisweep: Ray node lost: the local Ray node's raylet ended (exit code -9")
    assert line.endswith(f"runs are done and kept in {res}: run the same command again to resume")
    assert "Raylet is terminated" not in out
    again = subprocess.run(cmd, cwd=repo, env=env, capture_output=True, text=True, timeout=240)
    assert again.returncode == 0, again.stderr[-2000:]
    st = ResultStore(res)
    assert {s["status"] for s in st.summaries()} == {"finished"} and len(st.summaries()) == 2
    assert [len(st.records(s["run_key"])) for s in st.summaries()] == [9, 9]  # 0 and 8 evaluation points


@pytest.mark.parametrize("wrapped", [False, True], ids=["oserror", "tune-error-text"])
def test_a_full_disk_is_one_line_saying_so_and_where(tmp_path, toy_study, monkeypatch, capsys, wrapped):
    """A write that fails with ENOSPC, as on a full disk (a link to /dev/full would be refused as a link now)."""
    from sweep import cli

    st = toy_study(seeds=1)
    store = ResultStore(tmp_path / "res")
    store.write_study(st)
    target = store.records_dir / f"{st.run_keys[0]}.jsonl"

    def run_study(*args, **kwargs):
        exc = OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))  # write() names no file
        if not wrapped:
            raise exc
        # Tune's TuneError carries a worker's traceback as text; open() of a new file names it
        named = OSError(exc.errno, exc.strerror, str(target))
        raise RuntimeError("Traceback (most recent call last):\n" + "".join(traceback.format_exception(named))) from None

    monkeypatch.setattr(cli, "run_study", run_study)
    assert main(["run", "quickstart", "--results-dir", str(tmp_path / "res")]) == 1
    where = f"while writing {target}" if wrapped else f"on the file system of {tmp_path / 'res'}"  # write(): no name
    assert capsys.readouterr().err.strip().splitlines() == [
        f"bisweep: error: the disk is full (no space left on device) {where}; free space there, then "
        "run the same command again to resume (the results written so far are kept)"]


def test_the_watch_notices_a_dead_raylet_at_once_and_interrupts_a_stuck_experiment(monkeypatch):
    from sweep.execution import node_watch

    monkeypatch.setattr(node_watch, "_cluster_cpus", lambda: 2.0)
    # The interrupt is a simulated SIGINT: Python's own handler must be in place (a pytest-xdist worker ignores
    # SIGINT, and then the interrupt would do nothing).
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    raylet = subprocess.Popen(["sleep", "30"])
    watch = node_watch.NodeWatch(raylet, period=0.05, grace_seconds=0.5)
    start = time.monotonic()
    try:
        with pytest.raises(KeyboardInterrupt):  # Tune never stops here: the watch interrupts the main thread
            with watch:
                assert not watch.stop_all()
                raylet.kill()
                while time.monotonic() - start < 10:  # bounded: a watch that never interrupts fails the test
                    time.sleep(0.01)
    finally:
        signal.signal(signal.SIGINT, previous)
    assert watch.interrupted and watch.stop_all() and 0.5 <= time.monotonic() - start < 3.0
    assert watch.lost == "the local Ray node's raylet ended (exit code -9: killed, or out of memory?)"
    raylet.wait()


def test_the_watch_waits_for_a_cluster_to_scale_up_and_notices_when_its_nodes_go(monkeypatch):
    from sweep.execution import node_watch

    cpus = [0.0] * 50 + [4.0] * 3 + [0.0] * 1000  # 1 s without CPUs (autoscaling), then some, then none
    monkeypatch.setattr(node_watch, "_cluster_cpus", lambda: cpus.pop(0))
    watch = node_watch.NodeWatch(None, period=0.02, lost_seconds=0.3, grace_seconds=30)
    with watch:
        end = time.monotonic() + 5
        while watch.lost is None and time.monotonic() < end:
            time.sleep(0.01)
    assert watch.lost == "the Ray cluster's nodes have shown no CPU for 0.3 s" and not watch.interrupted
    assert len(cpus) < 1000  # lost only once the CPUs it had went away, not in the first second without any
