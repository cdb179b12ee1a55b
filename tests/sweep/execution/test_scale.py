"""2,000 tiny runs: trials group many runs, and after a
SIGKILL of the driver the next session hands Tune nothing that had finished (exactly once, run by run); and a
trial's BLAS computes with as many threads as the trial has CPUs."""
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

N = 2000


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


def first_run_done(res, started, proc, timeout=600):
    """Seconds from the driver's start to its first run summary (waiting for it)."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if (res / "ended.txt").exists():  # written when a run ends (polled often: its time is the first end's)
            return (res / "ended.txt").stat().st_mtime - started
        assert proc.poll() is None, proc.stdout.read().decode()[-3000:]
        time.sleep(0.2)
    raise TimeoutError("no run finished")


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


def rng_id(seed):
    return int(np.random.default_rng(seed).bit_generator.state["state"]["state"])


def whole(summary) -> bool:
    """A summary the kill did not cut short (a torn one is not a finished run: the resume writes it again)."""
    try:
        return json.loads(summary.read_text()).get("status") in ("finished", "diverged")
    except ValueError:
        return False


def test_two_thousand_tiny_runs_start_at_once_and_resume_without_redoing_a_finished_run(tmp_path, repo, venv_bin):
    bisweep = str(venv_bin / "bisweep")

    def start(study, res):
        t0 = time.time()
        proc = subprocess.Popen([bisweep, "run", str(study), "--results-dir", str(res), "--num-cpus", "2",
                                 "--no-report"], cwd=repo, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                start_new_session=True)
        return proc, t0

    # How soon the first run ends against a 1-run study is a benchmark's figure (benchmarks/bench_tiny_runs.py), not
    # a timed test's: here the 2,000 runs must start lazily enough to be killed with most of them pending.
    trace = tmp_path / "trace.jsonl"
    study = tiny_study(tmp_path, N, trace)
    st = spec.load(str(study))
    res = tmp_path / "res"
    proc, t0 = start(study, res)
    try:
        first_run_done(res, t0, proc)
        end = time.monotonic() + 600
        while len(stored.done(res)) < 300 and time.monotonic() < end:
            assert proc.poll() is None, proc.stdout.read().decode()[-3000:]
            time.sleep(0.2)
    finally:
        kill_session(proc.pid)  # the crash: the driver, its local Ray and every worker at once
        proc.wait(timeout=30)
    lines_before = len(trace.read_text().splitlines())
    # A summary the kill cut short is left as a .json.tmp file: it is not a finished run.
    finished_before = stored.done(res)
    assert 300 <= len(finished_before) < N

    second = subprocess.run([bisweep, "run", str(study), "--results-dir", str(res), "--num-cpus", "2", "--no-report"],
                            cwd=repo, capture_output=True, text=True, timeout=1200)
    assert second.returncode == 0, second.stderr[-3000:]
    assert f"resuming: {len(finished_before)} of {N} runs already done" in second.stdout
    assert f"running {N - len(finished_before)} runs" in second.stdout
    assert "Trial" not in second.stdout + second.stderr  # no stray lines from Tune

    # Nothing that had finished was constructed again; everything else was, once.
    key_of = {(p.algorithm_params["lr"], rng_id(0)): p.run_key(0) for p in st.points}
    inits = [d for d in map(json.loads, trace.read_text().splitlines()[lines_before:]) if d["event"] == "init"]
    started_again = Counter(key_of[(d["lr"], d["rng"])] for d in inits)
    assert not set(started_again) & finished_before
    assert set(started_again) | finished_before == set(st.run_keys)
    assert max(started_again.values()) == 1

    session = json.loads((res / "sessions.jsonl").read_text().splitlines()[-1])
    assert session["runs"] == N - len(finished_before) and session["trials"] <= session["runs"] / 10  # runs grouped
    from mlflow import MlflowClient

    client = MlflowClient(f"sqlite:///{res / 'mlflow.db'}")
    exp = client.get_experiment_by_name(f"tiny{N}")
    runs = client.search_runs([exp.experiment_id], max_results=5000)
    kids = Counter(r.data.tags["bisweep.run_key"] for r in runs if r.data.tags["bisweep.role"] == "run")
    assert len(kids) == N and set(kids.values()) == {1}


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
    assert f"running {TEN_K - len(before)} runs" in second.stdout  # nothing committed is handed to Tune again

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
