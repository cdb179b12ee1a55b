"""What a new user meets (issue 34, item 10): `bisweep ui` announces its address only once the server answers and
stops every process it started; a partial report says so in MLflow; a re-run keeps the parent run's duration to
the time the study ran; connecting to a cluster is not 'starting' one."""
import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from types import SimpleNamespace

import pytest

from sweep.cli import main
from sweep.execution import runner
from sweep.execution.session import Timeline
from sweep.results.store import ResultStore
from sweep.tracking.tracker import Tracker, default_tracking_uri, local_artifact_location


def _finished(st, root, write_synthetic, missing=0):
    """A study's results with the last `missing` runs not ended."""
    store = write_synthetic(st, root, lambda p, s: ("finished", {"iteration": 30, "status": "finished", "F": 1.0 + s}))
    for key in st.run_keys[len(st.run_keys) - missing:]:
        (store.runs_dir / f"{key}.json").unlink()
    ended = [line for line in (root / "ended.txt").read_text().splitlines()
             if line.split()[1] in st.run_keys[:len(st.run_keys) - missing]]
    (root / "ended.txt").write_text("".join(line + "\n" for line in ended))
    return store


def test_a_partial_report_says_so_on_disk_and_in_mlflow(tmp_path, toy_study, write_synthetic, capsys):
    st = toy_study(seeds=3)
    root = tmp_path / "res"
    _finished(st, root, write_synthetic, missing=2)
    uri = default_tracking_uri(root)
    tracker = Tracker(uri, st.name, local_artifact_location(uri, root))
    tracker.start_study(st)
    assert main(["report", "r", "--results-dir", str(root)]) == 0
    out = capsys.readouterr().out
    assert f"partial report (1 of 3 runs ended) logged as report-partial/ to MLflow run {tracker.parent_id}" in out
    assert (root / "report" / "summary.txt").read_text().startswith(
        "PARTIAL REPORT: 1 of 3 runs ended; the study is not complete\n")
    names = {a.path for a in tracker.client.list_artifacts(tracker.parent_id)}
    assert names == {"report-partial"}
    _finished(st, root, write_synthetic)  # every run ended: the report is whole again
    assert main(["report", "r", "--results-dir", str(root)]) == 0
    assert "PARTIAL" not in (root / "report" / "summary.txt").read_text()
    assert {a.path for a in tracker.client.list_artifacts(tracker.parent_id)} == {"report", "report-partial"}


def test_the_parent_runs_duration_is_the_time_its_sessions_ran(tmp_path, toy_study):
    st = toy_study()
    store = ResultStore(tmp_path)
    store.ensure()
    earlier = [{"started": 1.0, "spec_hash": st.spec_hash, "end": 13.7},  # the first session
               {"started": 2.0, "spec_hash": "another study", "end": 500.0},  # another study in this directory
               {"started": 3.0, "end": 99.0}]  # written before sessions named their study
    (tmp_path / "sessions.jsonl").write_text("".join(json.dumps(line) + "\n" for line in earlier))
    session = SimpleNamespace(study=st, store=store, timeline=Timeline(time.time() - 2.0))
    active = runner.active_seconds(session)
    assert active == pytest.approx(13.7 + 2.0, abs=0.5)
    uri = default_tracking_uri(tmp_path)
    tracker = Tracker(uri, st.name)
    tracker.start_study(st)
    time.sleep(1.0)  # the pause between sessions must not count
    tracker.end_study("FINISHED", {"finished": 3}, active_seconds=15.7)
    info = tracker.client.get_run(tracker.parent_id).info
    assert (info.end_time - info.start_time) / 1000 == pytest.approx(15.7, abs=0.002)


def test_a_cluster_is_connected_to_and_a_local_ray_started(tmp_path, monkeypatch):
    lines = []
    monkeypatch.setattr(runner, "start_ray", lambda address, num_cpus, *timeout: False)
    with runner._ray_up(tmp_path, "10.0.0.1:6379", None, lines.append):
        pass
    assert lines == ["bisweep: connecting to the Ray cluster at 10.0.0.1:6379"]


@pytest.mark.integration
def test_ui_announces_its_address_once_it_answers_and_sigterm_stops_every_process(tmp_path, free_port, repo):
    uri = default_tracking_uri(tmp_path)
    Tracker(uri, "empty")  # a store to serve
    port = free_port()
    ui = subprocess.Popen([sys.executable, "-m", "sweep.cli", "ui", "--tracking-uri", uri, "--port", str(port)],
                          cwd=repo, env={**os.environ, "PYTHONPATH": str(repo)}, stdout=subprocess.PIPE,
                          stderr=subprocess.DEVNULL, text=True, start_new_session=True)
    try:
        assert ui.stdout.readline().startswith(f"bisweep: starting the MLflow UI for {uri}")
        announced = ""
        while not announced.startswith("bisweep:") and ui.poll() is None:  # the server prints lines of its own
            announced = ui.stdout.readline()
        assert announced == f"bisweep: MLflow UI at http://127.0.0.1:{port}\n"
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2) as reply:
            assert reply.status == 200  # at once: it answered before it was announced
        server_group = _groups_listening(port, ui.pid)
        assert server_group and ui.pid not in server_group  # the server runs in a group of its own
        ui.send_signal(signal.SIGTERM)  # to bisweep only, as a service manager would
        assert ui.wait(timeout=30) == 0
        end = time.monotonic() + 15
        while time.monotonic() < end and any(_group_alive(g) for g in server_group):
            time.sleep(0.2)
        assert not any(_group_alive(g) for g in server_group)
    finally:
        if ui.poll() is None:
            os.killpg(ui.pid, signal.SIGKILL)


def _groups_listening(port: int, but: int) -> set[int]:
    """Process groups of the processes but `but` whose command line names `--port <port>` (the server and its
    workers)."""
    groups = set()
    for entry in os.listdir("/proc"):
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as fh:
                args = fh.read().split(b"\0")
        except OSError:
            continue
        if b"--port" in args and str(port).encode() in args and entry.isdigit() and int(entry) != but:
            groups.add(os.getpgid(int(entry)))
    return groups


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True
