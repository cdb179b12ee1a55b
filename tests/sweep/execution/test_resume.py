"""Kill the driver mid-study, resume, and check every run finished exactly once with no MLflow duplicates."""
from tests.sweep import stored
import json
import os
import signal
import subprocess
import time
from collections import Counter

import numpy as np
import pytest
import yaml

from sweep.study import spec
from tests.sweep import toy_algorithms  # noqa: F401

pytestmark = pytest.mark.integration


def rng_id(seed: int) -> int:
    """The fingerprint toy_aid writes for a run of this seed (its untouched generator state)."""
    return int(np.random.default_rng(seed).bit_generator.state["state"]["state"])


def midway_of(res) -> set[str]:
    """Runs the driver has noted a midway checkpoint of (resume.txt)."""
    path = res / "resume.txt"
    return {line.split()[0] for line in path.read_text().splitlines()} if path.exists() else set()


def test_killed_study_resumes_and_finishes_each_run_once(tmp_path, repo, venv_bin, eval_points):
    trace = tmp_path / "trace.jsonl"
    study_file = tmp_path / "slow.yaml"
    study_file.write_text(yaml.safe_dump({
        "name": "slow", "imports": ["tests.sweep.toy_algorithms"], "kind": "stepsize_sensitivity",
        "axis": {"factors": [0.25, 0.5, 1, 1.5]},
        "problems": [{"name": "quadratic", "params": {"dim_x": 4, "dim_y": 4}}],
        "algorithms": [{"name": "toy_aid", "params": {"sleep": 0.02, "trace": str(trace)}}],
        "seeds": 2, "budget": {"iterations": 100}, "n_evals": 10, "checkpoint_seconds": 0.5}))
    st = spec.load(str(study_file))
    res = tmp_path / "res"
    cmd = [str(venv_bin / "bisweep"), "run", str(study_file), "--results-dir", str(res), "--num-cpus", "2"]
    first = subprocess.Popen(cmd, cwd=repo, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline and first.poll() is None:
            done = stored.done(res)
            if len(done) >= 2 and midway_of(res) - done:  # some unfinished run has a midway checkpoint
                break
            time.sleep(0.2)
        assert first.poll() is None, first.stdout.read().decode()[-3000:]
    finally:
        # The crash: the driver and the local Ray it started (its session) die at once, by its id.
        os.killpg(first.pid, signal.SIGKILL)
        first.wait(timeout=30)
    finished_before = stored.done(res)
    assert 2 <= len(finished_before) < 8
    midway = midway_of(res) - finished_before
    assert midway
    lines_before = len(trace.read_text().splitlines())
    time.sleep(3)  # let the orphaned Ray workers notice their raylet is gone

    second = subprocess.run(cmd + ["--resume"], cwd=repo, capture_output=True, text=True, timeout=300)
    assert second.returncode == 0, second.stderr[-3000:]
    assert f"resuming: {len(finished_before)} of 8 runs already done" in second.stdout
    assert f"running {8 - len(finished_before)} runs" in second.stdout  # nothing finished is handed to Tune

    # Exactly once: no run that had finished was started again after the resume.
    lr_of = {p.key: p.algorithm_params["lr"] for p in st.points}
    key_of = {(lr_of[p.key], rng_id(s)): p.run_key(s) for p in st.points for s in st.seeds}
    after = [d for d in map(json.loads, trace.read_text().splitlines()[lines_before:]) if d["event"] == "init"]
    restarted = {key_of[(d["lr"], d["rng"])] for d in after}
    assert not restarted & finished_before
    assert restarted | finished_before == set(st.run_keys)
    # A run the killed driver had checkpointed midway continued from there: fewer than 100 steps each.
    steps = sum(d["event"] == "step" for d in map(json.loads, trace.read_text().splitlines()[lines_before:]))
    assert steps < 100 * len(restarted)  # the runs checkpointed midway did not start again from step 0

    from mlflow import MlflowClient

    client = MlflowClient(f"sqlite:///{res / 'mlflow.db'}")
    exp = client.get_experiment_by_name("slow")
    runs = client.search_runs([exp.experiment_id], max_results=1000)
    assert Counter(r.data.tags.get("bisweep.role") for r in runs) == {"study": 1, "run": 8}
    kids = [r for r in runs if r.data.tags["bisweep.role"] == "run"]
    assert sorted(r.data.tags["bisweep.run_key"] for r in kids) == sorted(st.run_keys)
    n_points = len(eval_points(100, 10))
    for r in kids:
        steps = [m.step for m in client.get_metric_history(r.info.run_id, "Metrics/grad_F_sq")]
        assert sorted(steps) == sorted(set(steps)) and len(steps) == n_points  # complete, no duplicates
        assert r.info.status == "FINISHED" and r.data.tags["status"] == "finished"

    # A third run finds nothing to do and starts no Ray at all.
    third = subprocess.run(cmd, cwd=repo, capture_output=True, text=True, timeout=120)
    assert third.returncode == 0 and "all 8 runs already done" in third.stdout
    assert "starting a local Ray" not in third.stdout
    assert len(client.search_runs([exp.experiment_id], max_results=1000)) == 9


def test_ctrl_c_stops_the_study_as_interrupted_and_running_it_again_finishes_it(tmp_path, repo, venv_bin):
    study_file = tmp_path / "slow.yaml"
    study_file.write_text(yaml.safe_dump({  # lr 60 and 80 diverge within a few steps, before the Ctrl-C
        "name": "slow", "imports": ["tests.sweep.toy_algorithms"],
        "problems": [{"name": "quadratic", "params": {"dim_x": 3, "dim_y": 3}}],
        "algorithms": [{"name": "toy_aid", "params": {"sleep": 0.05, "lr": [0.1, 0.2, 60, 80]}}],
        "seeds": 2, "budget": {"iterations": 60}, "n_evals": 5}))
    res = tmp_path / "res"
    cmd = [str(venv_bin / "bisweep"), "run", str(study_file), "--results-dir", str(res), "--num-cpus", "2",
           "--no-report"]
    first = subprocess.Popen(cmd, cwd=repo, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             start_new_session=True)
    try:
        for line in first.stdout:  # Tune's experiment starts right after this line
            if line.startswith("bisweep: running 8 runs"):
                break
        time.sleep(4)  # into the first trials
        os.killpg(first.pid, signal.SIGINT)  # what Ctrl-C in a terminal sends: the whole foreground group
        out, err = first.communicate(timeout=120)
    finally:
        if first.poll() is None:
            os.killpg(first.pid, signal.SIGKILL)
            first.wait(timeout=30)
    assert first.returncode == 130, err[-3000:]
    assert err.strip().splitlines() == ["bisweep: interrupted; run the same command again to resume"]
    assert "bisweep: stopping the running trials (Ctrl-C again to stop at once)" in out
    done = len(stored.done(res))
    assert done < 8

    second = subprocess.run(cmd, cwd=repo, capture_output=True, text=True, timeout=300)
    assert second.returncode == 0, second.stderr[-3000:]
    assert f"running {8 - done} runs" in second.stdout
    # The live line and the closing line count the same runs: all of the study's, the first driver's included.
    assert "4 finished, 4 diverged, 0 failed, 0 not run" in second.stdout
    last = [line for line in second.stdout.splitlines() if line.startswith("runs ")][-1]
    assert last.startswith("runs 8/8 done, 0 running, 0 pending, 0 failed | diverged 4 |"), last
