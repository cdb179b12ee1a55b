"""The trial body without Ray: same numbers as a plain run, exact resume from checkpoints, skips, divergence."""
import copy
import dataclasses
import tempfile

import numpy as np
import pytest

import algorithms
import problems
from algorithms.checkpoint import load_state, save_state
from problems.validation import ParameterError
from sweep import spec
from sweep.trainable import META, execute_trial, trainable_for
from tests.sweep import toy_algorithms  # noqa: F401

VOLATILE = ("time", "cpu_time", "eval_time")


def trial_config(seeds=(0, 1), checkpoint_seconds=0.0, report_seconds=0.0, **alg):
    study = spec.validate({
        "name": "t", "imports": ["tests.sweep.toy_algorithms"], "kind": "comparison",
        "problems": [{"name": "quadratic", "params": {"dim_x": 4, "dim_y": 6}}],
        "algorithms": [{"name": "toy_aid", "params": alg}], "seeds": list(seeds),
        "budget": {"iterations": 40}, "n_evals": 8,
    })
    return dataclasses.replace(study.trials[0].config(checkpoint_seconds, study.imports), report_seconds=report_seconds)


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
    for seed in (0, 1):
        p = problems.make("quadratic", seed=seed, dim_x=4, dim_y=6)
        plain = list(algorithms.run("toy_aid", p, cfg.algorithm_params, seed=seed, budget={"iterations": 40}, n_evals=8))
        got = [r for r in results if r[META]["seed"] == seed]
        assert [strip(r) for r in got] == [strip(r) for r in plain]
        assert [r[META]["run_key"] for r in got] == [cfg.run_keys[seed]] * len(plain)
        assert got[-1][META]["run_done"] and not any(r[META]["run_done"] for r in got[:-1])
        assert set(got[0][META]["keys"]) == set(plain[0])
    assert results[-1]["status"] == "finished" and results[-1]["iteration"] == 40
    assert states[-1] == {"done": list(cfg.run_keys), "current": None}


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
    assert first[-1][META]["seed"] == 1 and not first[-1][META]["run_done"]
    rest, _ = collect(cfg, state=states[-1])
    assert rest[0][META]["seed"] == 1 and rest[0]["iteration"] > 0  # seed 0 not rerun, seed 1 not restarted
    merged = {(r[META]["seed"], r["iteration"], r["status"]): strip(r) for r in first + rest}
    want = {(r[META]["seed"], r["iteration"], r["status"]): strip(r) for r in full}
    assert merged == want
    # Oracle counts continue from the checkpoint, not from zero.
    assert rest[-1]["calls/total"] == full[-1]["calls/total"]


def test_skipped_runs_are_not_run_and_divergence_ends_only_its_seed():
    cfg = trial_config(seeds=(0, 1, 2))
    results, states = collect(cfg, skip=lambda key: key == cfg.run_keys[1])
    assert sorted({r[META]["seed"] for r in results}) == [0, 2]
    assert states[-1]["done"] == [cfg.run_keys[0], cfg.run_keys[1], cfg.run_keys[2]]
    bad = trial_config(seeds=(0, 1), inner_lr=5.0, inner_steps=10)  # |1 − 5L| = 4: y grows 4¹⁰ per step
    results, _ = collect(bad)
    ends = [r for r in results if r[META]["run_done"]]
    assert [r["status"] for r in ends] == ["diverged", "diverged"] and [r[META]["seed"] for r in ends] == [0, 1]
    assert all(r["diverged_at"] > r["iteration"] for r in ends)


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
    from sweep.tracking import records_in

    cfg = trial_config(seeds=(0, 1), checkpoint_seconds=1e9, report_seconds=1e9)  # only seed ends report (they checkpoint)
    results, states = collect(cfg)
    assert len(results) == 2 and len(states) == 2
    for seed, res in zip((0, 1), results):
        p = problems.make("quadratic", seed=seed, dim_x=4, dim_y=6)
        plain = list(algorithms.run("toy_aid", p, cfg.algorithm_params, seed=seed, budget={"iterations": 40}, n_evals=8))
        assert [strip(r) for r in records_in(res)] == [strip(r) for r in plain]


def test_records_buffered_before_a_failure_are_reported_before_it_propagates(eval_points):
    from sweep.tracking import records_in

    cfg = trial_config(seeds=(0,), checkpoint_seconds=1e9, report_seconds=1e9, fail_at=7)
    results = []
    with pytest.raises(RuntimeError, match="failing at iteration 7"):
        execute_trial(cfg, lambda res, ck: results.append(res))
    (res,) = results
    points = eval_points(40, 8)
    assert [r["iteration"] for r in records_in(res)] == [p for p in points if p < 7]  # all measured before the failure
    assert not res[META]["run_done"]


@pytest.mark.parametrize("in_thread", [False, True])
def test_blas_threads_limit_the_trial_and_are_part_of_the_run_identity(in_thread):
    # Ray runs a function trainable in a thread of its worker: the limit must hold there too.
    import threading

    from threadpoolctl import threadpool_info

    default = max(i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas")
    data = {"name": "t", "imports": ["tests.sweep.toy_algorithms"], "problems": [{"name": "quadratic"}],
            "algorithms": ["toy_threads"], "seeds": 1, "budget": {"iterations": 3}, "n_evals": 2}
    for threads, want in ((1, 1), (None, default)):
        study = spec.validate({**data, "blas_threads": threads})
        out: list = []
        body = lambda: out.extend(collect(study.trials[0].config(0.0, study.imports))[0])  # noqa: E731
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
