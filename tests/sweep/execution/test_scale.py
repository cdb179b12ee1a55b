"""10⁴ tiny runs: trials group many runs, and after a SIGKILL of the driver the next session hands Tune nothing that
had finished (exactly once, run by run, in the store and in MLflow); and a trial's BLAS computes with as many
threads as the trial has CPUs. (Unbatched runs killed and resumed, with a trace of every construction: test_resume.)"""
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
from tests.sweep import stored
from tests.sweep import toy_algorithms  # noqa: F401

pytestmark = pytest.mark.integration


def tiny_study(tmp_path, n, trace):
    """n configurations of toy_aid (its outer step on a grid) x 1 seed, 5 iterations on a 2x2 quadratic."""
    lrs = [round(0.01 + 0.49 * i / max(n - 1, 1), 9) for i in range(n)]
    path = tmp_path / f"tiny{n}.yaml"
    path.write_text(yaml.safe_dump({
        "name": f"tiny{n}", "imports": ["tests.sweep.toy_algorithms"], "kind": "comparison",
        "problems": [{"name": "quadratic", "params": {"dim_x": 2, "dim_y": 2}}],
        "algorithms": [{"name": "toy_aid", "params": {"lr": lrs, "trace": str(trace)}}],
        "seeds": 1, "budget": {"iterations": 5}, "n_evals": 2}))
    return path


def session_members(sid):
    """Live (not zombie) processes of session sid, read from /proc."""
    pids = []
    for entry in os.listdir("/proc"):
        try:
            fields = open(f"/proc/{entry}/stat").read().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue  # not a process, or it ended while we read
        if fields[0] != "Z" and int(fields[3]) == sid:
            pids.append(int(entry))
    return pids


def kill_session(sid, timeout=60):
    """SIGKILL every process of the session the driver leads, until none is left alive.

    Killing the driver's process group alone can leave Ray workers (in groups of their own) finishing the runs they
    hold after the test has counted what finished; a crash of the whole node leaves nothing running."""
    end = time.monotonic() + timeout
    while members := session_members(sid):
        assert time.monotonic() < end, f"processes of the killed study still alive: {members}"
        for pid in members:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        time.sleep(0.1)


@pytest.mark.parametrize("cpu", [1, 2])
def test_a_trial_computes_with_as_many_blas_threads_as_it_has_cpus(tmp_path, repo, venv_bin, cpu):
    # OMP_NUM_THREADS=2 set by the user: Ray then leaves it to the workers, and OpenBLAS starts two threads.
    trace = tmp_path / "trace.jsonl"
    study = tiny_study(tmp_path, 4, trace)
    data = yaml.safe_load(study.read_text())
    study.write_text(yaml.safe_dump({**data, "resources": {"cpu": cpu}}))
    proc = subprocess.run([str(venv_bin / "bisweep"), "run", str(study), "--results-dir", str(tmp_path / "res"),
                           "--num-cpus", "2", "--no-report"], cwd=repo, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "OMP_NUM_THREADS": "2"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    inits = [d for d in map(json.loads, trace.read_text().splitlines()) if d["event"] == "init"]
    assert len(inits) == 4 and all(d["blas"] and set(d["blas"]) == {cpu} for d in inits), inits


TEN_K = 10_000


def soba_study(tmp_path, n):
    """n configurations of SOBA (its outer step on a grid) x 1 seed, 2 iterations on a d = 5 quadratic."""
    path = tmp_path / f"soba{n}.yaml"
    gammas = [round(1e-3 + (0.5 - 1e-3) * i / (n - 1), 12) for i in range(n)]
    path.write_text(yaml.safe_dump({
        "name": f"soba{n}", "kind": "comparison", "problems": [{"name": "quadratic", "params": {"dim_x": 5, "dim_y": 5}}],
        "algorithms": [{"name": "soba", "params": {"gamma": gammas}}], "seeds": 1, "budget": {"iterations": 2}}))
    return path


def test_ten_thousand_runs_killed_midway_resume_with_nothing_lost_or_stored_twice(tmp_path, repo, venv_bin):
    """SIGKILL of the driver (and its Ray) once the first of 10⁴ runs is committed; the resume runs only what was not
    committed, and the store then holds every run once, each record once, finals those of runs made alone."""
    import algorithms
    import problems
    from sweep.results.shards import ShardLog
    from sweep.results.store import ResultStore

    study = soba_study(tmp_path, TEN_K)
    st = spec.load(str(study))
    res = tmp_path / "res"
    cmd = [str(venv_bin / "bisweep"), "run", str(study), "--results-dir", str(res), "--num-cpus", "2", "--no-report"]
    proc = subprocess.Popen(cmd, cwd=repo, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        end = time.monotonic() + 300
        # The first commit, not half: a commit is one Tune report, thousands of runs, so "half" can be jumped over.
        while not stored.done(res) and time.monotonic() < end:
            assert proc.poll() is None, proc.stdout.read().decode()[-3000:]
            time.sleep(0.05)
    finally:
        kill_session(proc.pid)
        proc.wait(timeout=30)
    before = stored.done(res)
    assert 0 < len(before) < TEN_K, len(before)

    second = subprocess.run(cmd, cwd=repo, capture_output=True, text=True, timeout=600)
    assert second.returncode == 0, second.stderr[-3000:]
    assert f"resuming: {len(before)} of {TEN_K} runs already done" in second.stdout
    assert f"running {TEN_K - len(before)} runs" in second.stdout  # nothing committed is handed to Tune again
    assert "Trial" not in second.stdout + second.stderr  # no stray lines from Tune
    session = json.loads((res / "sessions.jsonl").read_text().splitlines()[-1])
    assert session["runs"] == TEN_K - len(before) and session["trials"] <= session["runs"] / 10  # runs grouped

    store = ResultStore(res)
    ended = (res / "ended.txt").read_text().split()
    assert sorted(ended[1::2]) == sorted(st.run_keys) and set(ended[0::2]) == {"finished"}  # each run ended once
    held = ShardLog(store.root).read()
    assert set(held) == set(st.run_keys)
    for key, (records, summary) in held.items():  # records exactly once: iterations 0..2, the last the final one
        assert [r["iteration"] for r in records] == [0, 1, 2] and summary["final"] == records[-1], key
    problem = problems.make("quadratic", seed=0, dim_x=5, dim_y=5)
    rng = np.random.default_rng(0)
    sample = [st.points[i] for i in rng.choice(TEN_K, 40, replace=False)]  # from either side of the kill
    for point in sample:
        alone = list(algorithms.run("soba", problem, point.algorithm_params, seed=0, budget=point.budget,
                                    n_evals=point.n_evals))[-1]
        final = held[point.run_key(0)][1]["final"]
        for metric in ("F", "grad_F_sq"):
            assert final[metric] == pytest.approx(alone[metric], rel=1e-9, abs=1e-12), (point.key, metric)
    assert os.path.getsize(res / "shards.txt") < 40 * TEN_K / 10  # an index line per report, not per run
    from mlflow import MlflowClient

    client = MlflowClient(f"sqlite:///{res / 'mlflow.db'}")
    exp = client.get_experiment_by_name(f"soba{TEN_K}")
    runs = client.search_runs([exp.experiment_id], filter_string="tags.`bisweep.role` = 'run'", max_results=50_000)
    kids = Counter(r.data.tags["bisweep.run_key"] for r in runs)
    assert len(kids) == TEN_K and set(kids.values()) == {1}  # a child per run (at most mlflow_children), each once
