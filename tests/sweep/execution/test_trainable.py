"""The trial body without Ray: same numbers as a plain run, exact resume from checkpoints, skips, divergence,
several configurations in one trial, records batched across runs."""
import copy
import dataclasses
import tempfile

import numpy as np
import pytest

import algorithms
import problems
from algorithms.checkpoint import load_state, save_state
from problems.shared.errors import ParameterError
from sweep.execution.trainable import META, execute_trial
from sweep.execution.trial_runs import with_records as chunks  # a report's chunks, records decoded from its shard
from sweep.execution.user_api import trainable_for
from sweep.study import spec
from sweep.study.model import TrialConfig
from tests.sweep import toy_algorithms  # noqa: F401

VOLATILE = ("time", "cpu_time", "eval_time")


def toy(seeds=(0, 1), **alg):
    return spec.validate({
        "name": "t", "imports": ["tests.sweep.toy_algorithms"], "kind": "comparison",
        "problems": [{"name": "quadratic", "params": {"dim_x": 4, "dim_y": 6}}],
        "algorithms": [{"name": "toy_aid", "params": alg}], "seeds": list(seeds),
        "budget": {"iterations": 40}, "n_evals": 8,
    })


def trial_config(seeds=(0, 1), checkpoint_seconds=0.0, report_seconds=0.0, **alg):
    study = toy(seeds, **alg)
    return dataclasses.replace(study.trials[0].config(checkpoint_seconds, study.imports), report_seconds=report_seconds)


def by_run(results):
    """run key -> every record reported for it, in order; and the run keys whose end was reported."""
    out, ended = {}, []
    for res in results:
        for ch in chunks(res):
            out.setdefault(ch["run_key"], []).extend(ch["records"])
            if ch["done"]:
                ended.append(ch["run_key"])
    return out, ended


def plain(spec_, seed=None):
    """The records of the same run made directly with the run loop."""
    seed = spec_.seed if seed is None else seed
    p = problems.make(spec_.problem, seed=seed, **spec_.problem_params)
    return list(algorithms.run(spec_.algorithm, p, spec_.algorithm_params, seed=seed, budget=spec_.budget,
                               n_evals=spec_.n_evals))


def collect(config, state=None, skip=None, stop_after=None):
    """Run a trial body, returning (results, checkpoint states); optionally die after `stop_after` reports."""
    results, states = [], []

    def report(result, ckpt):
        results.append(copy.deepcopy(result))
        if ckpt is not None:
            with tempfile.TemporaryDirectory() as d:  # what a checkpoint round trip gives back
                save_state(ckpt, d)
                states.append(load_state(d))
        if stop_after is not None and len(results) >= stop_after:
            raise KeyboardInterrupt("killed")

    try:
        execute_trial(config, report, state, skip)
    except KeyboardInterrupt:
        pass
    return results, states


def strip(rec):
    return {k: v for k, v in rec.items() if k not in VOLATILE and k != META}


def test_trial_reports_exactly_what_a_plain_run_yields_for_each_seed():
    cfg = trial_config(seeds=(0, 1))
    results, states = collect(cfg)
    got, ended = by_run(results)
    for run in cfg.runs:
        want = plain(run)
        assert [strip(r) for r in got[run.run_key]] == [strip(r) for r in want]
        # report_seconds 0: one record per report, the flat keys are that record
        mine = [r for r in results if chunks(r)[0]["run_key"] == run.run_key]
        assert [strip(r) for r in mine] == [strip(r) for r in want] and all(len(chunks(r)) == 1 for r in mine)
        assert [chunks(r)[0]["done"] for r in mine] == [False] * (len(want) - 1) + [True]
        assert chunks(mine[0])[0]["seed"] == run.seed
    assert ended == list(cfg.run_keys)
    assert results[-1]["status"] == "finished" and results[-1]["iteration"] == 40
    assert states[-1] == {"done": list(cfg.run_keys), "current": None}


def test_one_trial_runs_several_configurations_and_batches_their_records():
    study = toy(seeds=(0, 1), lr=[0.1, 0.3, 0.5])
    runs = tuple(r for t in study.trials for r in t.config(0.0, study.imports).runs)  # 3 configurations x 2 seeds
    cfg = TrialConfig("mixed", runs, checkpoint_seconds=1e9, report_seconds=1e9, imports=tuple(study.imports))
    results, states = collect(cfg)
    assert len(results) == 1 and not states  # everything in one report at the end, no checkpoint was due
    got, ended = by_run(results)
    assert ended == [r.run_key for r in runs] and len({r.algorithm_params["lr"] for r in runs}) == 3
    for run in runs:
        assert [strip(r) for r in got[run.run_key]] == [strip(r) for r in plain(run)]
    spans = [ch["span"] for ch in chunks(results[0])]
    assert all(a <= b for a, b in spans) and all(spans[i][1] <= spans[i + 1][0] for i in range(len(spans) - 1))


def test_toy_aid_matches_an_independent_linear_recursion():
    # On the quadratic, toy_aid is linear: y ← y − η(Ay − Cx + a), v ← v − η(Av − P(y − e)), x ← x − lr(mx + c + Cᵀv).
    p = problems.make("quadratic", seed=3, dim_x=4, dim_y=6)
    lr, eta, k = 0.3, 0.5, 3
    x, y, v = np.zeros(4), np.zeros(6), np.zeros(6)
    for _ in range(25):
        for _ in range(k):
            y = y - eta * (p.A @ y - p.C @ x + p.a)
        for _ in range(k):
            v = v - eta * (p.A @ v - p.P @ (y - p.e))
        x = x - lr * (p.m * x + p.c + p.C.T @ v)
    last = list(algorithms.run("toy_aid", p, {"lr": lr, "inner_lr": eta, "inner_steps": k}, budget={"iterations": 25}))[-1]
    assert last["F"] == pytest.approx(p.F(x), rel=1e-12)
    g = p.grad_F(x)
    assert last["grad_F_sq"] == pytest.approx(g @ g, rel=1e-10)


def test_resume_from_a_mid_run_checkpoint_continues_exactly():
    cfg = trial_config(seeds=(0, 1), checkpoint_seconds=0.0)
    full, _ = collect(cfg)
    first, states = collect(cfg, stop_after=11)  # dies inside the second seed
    assert chunks(first[-1])[0]["seed"] == 1 and not chunks(first[-1])[0]["done"]
    rest, _ = collect(cfg, state=states[-1])
    assert chunks(rest[0])[0]["seed"] == 1 and rest[0]["iteration"] > 0  # seed 0 not rerun, seed 1 not restarted
    key = lambda r: (chunks(r)[0]["seed"], r["iteration"], r["status"])  # noqa: E731
    assert {key(r): strip(r) for r in first + rest} == {key(r): strip(r) for r in full}
    # Oracle counts continue from the checkpoint, not from zero.
    assert rest[-1]["calls/total"] == full[-1]["calls/total"]


def test_a_run_an_earlier_driver_left_midway_continues_from_its_checkpoint():
    cfg = trial_config(seeds=(0, 1), checkpoint_seconds=0.0)
    full, _ = collect(cfg)
    first, states = collect(cfg, stop_after=11)  # a driver died while seed 1 ran; seed 0 is done on its disk
    midway = states[-1]["current"]
    assert midway["run_key"] == cfg.run_keys[1]
    # The next driver hands out only seed 1, with the state its checkpoint holds.
    rest, _ = collect(dataclasses.replace(cfg, runs=cfg.runs[1:]), state=None)
    resumed = []
    execute_trial(dataclasses.replace(cfg, runs=cfg.runs[1:]), lambda res, ck: resumed.append(copy.deepcopy(res)),
                  resume=lambda k: midway["run"] if k == midway["run_key"] else None)
    at = midway["run"]["iteration"]
    assert at > 0 and [r["iteration"] for r in resumed] == [r["iteration"] for r in full if
                                                             chunks(r)[0]["seed"] == 1 and r["iteration"] > at]
    got, _ = by_run(first + resumed)
    want, _ = by_run(full)
    assert {r["iteration"]: strip(r) for r in got[cfg.run_keys[1]]} == {r["iteration"]: strip(r)
                                                                        for r in want[cfg.run_keys[1]]}
    assert resumed[-1]["calls/total"] == full[-1]["calls/total"]  # counts continue from the checkpoint
    assert rest[0]["iteration"] == 0  # without it the run starts again from its beginning


def test_skipped_runs_are_not_run_and_divergence_ends_only_its_seed():
    cfg = trial_config(seeds=(0, 1, 2))
    asked = []
    results, states = collect(cfg, skip=lambda keys: asked.append(list(keys)) or {cfg.run_keys[1]})
    assert asked == [list(cfg.run_keys)]  # one question per trial, not one per run
    assert sorted({ch["seed"] for r in results for ch in chunks(r)}) == [0, 2]
    assert states[-1]["done"] == [cfg.run_keys[0], cfg.run_keys[1], cfg.run_keys[2]]
    bad = trial_config(seeds=(0, 1), inner_lr=5.0, inner_steps=10)  # |1 − 5L| = 4: y grows 4¹⁰ per step
    results, _ = collect(bad)
    ends = [ch for r in results for ch in chunks(r) if ch["done"]]
    assert [ch["records"][-1]["status"] for ch in ends] == ["diverged", "diverged"]
    assert [ch["seed"] for ch in ends] == [0, 1]
    assert all(ch["records"][-1]["diverged_at"] > ch["records"][-1]["iteration"] for ch in ends)


def test_trainable_for_validates_before_any_trial():
    with pytest.raises(ParameterError, match="algorithm: unknown name 'nope'"):
        trainable_for("nope")
    with pytest.raises(ParameterError, match="online vs offline"):
        trainable_for("toy_ogd", "quadratic", imports=["tests.sweep.toy_algorithms"])
    with pytest.raises(ParameterError, match="problem 'quadratic': 'dim_x' must be a positive integer"):
        trainable_for("toy_aid", "quadratic", problem_params={"dim_x": 0})
    fn = trainable_for("toy_aid", "quadratic", imports=["tests.sweep.toy_algorithms"], quiet=False)  # no Ray here
    assert fn.__name__ == "toy_aid_on_quadratic"
    with pytest.raises(ParameterError, match="unknown config key 'learning_rate'; allowed: batch_size, lr"):
        fn({"learning_rate": 0.1})


def test_records_between_reports_travel_together_and_arrive_complete():
    cfg = trial_config(seeds=(0, 1), checkpoint_seconds=1e9, report_seconds=1e9)  # one report, at the trial's end
    results, states = collect(cfg)
    assert len(results) == 1 and not states
    got, ended = by_run(results)
    assert ended == list(cfg.run_keys)
    for run in cfg.runs:
        assert [strip(r) for r in got[run.run_key]] == [strip(r) for r in plain(run)]
    assert strip(results[0]) == strip(got[cfg.run_keys[1]][-1])  # the flat keys: the latest record


def test_records_buffered_before_a_failure_are_reported_before_it_propagates(eval_points):
    cfg = trial_config(seeds=(0,), checkpoint_seconds=1e9, report_seconds=1e9, fail_at=7)
    results = []
    with pytest.raises(RuntimeError, match="failing at iteration 7"):
        execute_trial(cfg, lambda res, ck: results.append(res))
    (res,) = results
    points = eval_points(40, 8)
    (ch,) = chunks(res)
    assert [r["iteration"] for r in ch["records"]] == [p for p in points if p < 7]  # all measured before the failure
    assert not ch["done"] and META in res


@pytest.mark.parametrize("in_thread", [False, True])
def test_blas_threads_limit_the_trial_and_are_part_of_the_run_identity(in_thread):
    # Ray runs a function trainable in a thread of its worker: the limit must hold there too.
    import threading

    from threadpoolctl import threadpool_info

    default = max(i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas")
    data = {"name": "t", "imports": ["tests.sweep.toy_algorithms"], "problems": [{"name": "quadratic"}],
            "algorithms": ["toy_threads"], "seeds": 1, "budget": {"iterations": 3}, "n_evals": 2}
    limit = 2 if default == 1 else 1  # a count other than the one in force (the tests run at 1)
    for threads, want in ((limit, limit), (None, default)):
        study = spec.validate({**data, "blas_threads": threads})
        out: list = []
        body = lambda: out.extend(rec for res in collect(study.trials[0].config(0.0, study.imports))[0]  # noqa: E731
                                  for ch in chunks(res) for rec in ch["records"])
        if in_thread:
            t = threading.Thread(target=body)
            t.start()
            t.join()
        else:
            body()
        assert out and all(r["diag/blas_threads"] == want for r in out)
        assert max(i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas") == default  # restored
    keys = {spec.validate({**data, "blas_threads": n}).points[0].key for n in (None, 1, 2)}
    assert len(keys) == 3
    assert spec.validate({**data, "blas_threads": None}).points[0].key == spec.validate(data).points[0].key


def test_a_problem_entry_budget_merges_over_the_studys(spec_error):
    data = {"name": "t", "problems": [{"name": "quadratic", "budget": {"iterations": 7}},
                                      {"name": "simulated", "params": {"dim_x": 4, "dim_y": 4, "n_samples_inner": 8, "n_samples_outer": 8}}],
            "algorithms": ["soba"], "seeds": 1, "budget": {"iterations": 20, "seconds": 5}}
    budgets = {p.problem: p.budget for p in spec.validate(data).points}
    assert budgets["quadratic"]["iterations"] == 7 and budgets["quadratic"]["seconds"] == 5
    assert budgets["simulated"]["iterations"] == 20
    data["problems"][0]["budget"] = {"iterations": -1}
    spec_error(data, "problems[0].budget.iterations", "positive integer")
    data["problems"][0]["budget"] = 3
    spec_error(data, "problems[0].budget", "must be a mapping")


def test_reports_carry_mlflow_points_only_when_the_trial_config_asks_for_them():
    from sweep.tracking.metric_points import points_of

    cfg = trial_config(seeds=(0,))
    with_points, _ = collect(cfg)
    without, _ = collect(dataclasses.replace(cfg, mlflow_points=False))
    got = [ch for r in with_points for ch in chunks(r)]
    assert got and all(points_of(ch["points"])[-1][0] == ch["records"][-1]["iteration"] for ch in got)
    assert not any("points" in ch for r in without for ch in chunks(r))
    assert [strip(r) for r in without] == [strip(r) for r in with_points]  # the records themselves are the same
    assert TrialConfig.from_dict(dataclasses.replace(cfg, mlflow_points=False).to_dict()).mlflow_points is False


def test_a_study_whose_children_are_chosen_at_the_end_sends_no_points_from_its_trials():
    from sweep.execution.experiment import _config_maker

    small = toy(seeds=(0, 1))
    large = dataclasses.replace(small, mlflow_children=1)  # 2 runs > 1: children chosen once the runs ended
    runs = small.trials[0].config(0.0, small.imports).runs
    assert _config_maker(small, "r", {})("k", runs).mlflow_points is True
    assert _config_maker(large, "r", {})("k", runs).mlflow_points is False


def test_the_tiny_trial_benchmark_prints_its_four_variants():
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[3]
    out = subprocess.run([sys.executable, str(root / "benchmarks" / "bench_trial_tiny.py"), "20", "--repeats", "1"],
                         capture_output=True, text=True, timeout=300, cwd=root)
    assert out.returncode == 0, out.stderr[-2000:]
    rows = [line.split() for line in out.stdout.splitlines()[3:]]
    assert [r[:2] for r in rows] == [["yes", "no"], ["yes", "yes"], ["no", "no"], ["no", "yes"]]
    assert all(0 < float(r[2]) < 1e5 for r in rows)


def test_a_trials_batch_keys_are_each_runs_own_encoding_whether_or_not_runs_share_their_mappings():
    from sweep.execution import trial

    study = toy(seeds=(0, 1), lr=[0.1, 0.3])
    runs = [r for t in study.trials for r in t.config(0.0, study.imports).runs]
    copied = [dataclasses.replace(r, problem_params=dict(r.problem_params), budget=dict(r.budget)) for r in runs]
    other = dataclasses.replace(runs[0], problem_params={**runs[0].problem_params, "dim_x": 5})
    mixed = runs + copied + [other, dataclasses.replace(runs[0], instance_seed=7)]
    assert trial._batch_keys(mixed, True) == [trial._batch_of(r) for r in mixed]
    assert len(set(trial._batch_keys(mixed, True))) == 4  # seeds 0 and 1, the other problem, the other instance
    assert trial._batch_keys(mixed, False) == [r.run_key for r in mixed]
