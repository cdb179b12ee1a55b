"""A YAML study on a function-built problem, end to end: validated with its parameters, trials run by the
platform's trial body (no Ray), then (integration) the `bisweep` CLI on Ray and a Tune trainable."""
from tests.sweep import stored
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

import algorithms
import problems
from problems.shared.errors import ParameterError
from sweep.execution.trainable import execute_trial
from sweep.execution.trial_runs import chunks, final_record
from sweep.study import spec

STUDY = Path(__file__).with_name("functional_study.yaml")
BIN = Path(sys.executable).parent


def plain_final(algorithm: str, params: dict, seed: int, study) -> dict:
    """The last record of the same run made directly with the run loop (the independent computation)."""
    prob = study.problems[0]
    p = problems.make(prob["name"], seed=seed, **prob["params"])
    return list(algorithms.run(algorithm, p, params, seed=seed, budget=study.budget, n_evals=study.n_evals))[-1]


def test_the_study_validates_and_its_trials_match_plain_runs():
    st = spec.load(str(STUDY))
    assert st.imports == ["problems.examples.regularization"] and len(st.run_keys) == 4
    finals = {}
    for trial in st.trials:
        cfg = trial.config(0.0, st.imports)
        results = []
        execute_trial(cfg, lambda res, ckpt: results.append(res))
        for res in results:
            for chunk in chunks(res):
                if chunk["done"]:
                    run = cfg.runs[chunk["index"]]
                    finals[(run.algorithm, run.seed)] = (final_record(chunk), run.algorithm_params)
    assert sorted(finals) == [("f2sa", 0), ("f2sa", 1), ("soba", 0), ("soba", 1)]
    for (alg, seed), (res, params) in finals.items():
        ref = plain_final(alg, params, seed, st)
        assert res["status"] == "finished" and res["iteration"] == 12
        assert res["F"] == ref["F"] and res["grad_F_sq"] == ref["grad_F_sq"]  # same process: bit-identical
        assert res["gt/not_strongly_convex"] == 0.0 and res["gt/cg_residual"] <= 1e-10
        assert res["calls/total"] == ref["calls/total"] > 0


@pytest.mark.parametrize("params, message", [
    ({"dataset": "iris", "x_init": "low"}, "problems[0].params.x_init: must be a finite number, got 'low'"),
    ({"datset": "iris"}, "problems[0].params.datset: unknown parameter; did you mean 'dataset'? allowed: dataset, "
                           "data_path"),
])
def test_bad_problem_parameters_get_the_built_ins_one_line_errors(params, message):
    data = yaml.safe_load(STUDY.read_text())
    data["problems"][0]["params"] = params
    with pytest.raises(ParameterError) as err:
        spec.validate(data)
    assert str(err.value).startswith(message) and "\n" not in str(err.value)


# ---------------------------------------------------------------- on Ray
@pytest.mark.integration
def test_the_cli_runs_the_study_on_ray(tmp_path):
    proc = subprocess.run([str(BIN / "bisweep"), "run", str(STUDY), "--results-dir", str(tmp_path / "res"),
                           "--num-cpus", "1"], cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert re.search(r"4 finished, 0 diverged, 0 failed, 0 not run", proc.stdout), proc.stdout[-2000:]
    st = spec.load(str(STUDY))
    summaries = stored.summaries(tmp_path / "res")
    assert len(summaries) == 4
    for s in summaries:
        alg = s["point"]["algorithm"]
        ref = plain_final(alg, s["point"]["algorithm_params"], s["seed"], st)
        assert s["status"] == "finished"
        assert s["final"]["F"] == pytest.approx(ref["F"], rel=1e-12)
        assert s["final"]["gt/not_strongly_convex"] == 0.0


@pytest.mark.integration
# Ray starts its processes by fork+exec, which is safe; JAX warns about any fork once it is imported.
@pytest.mark.filterwarnings("ignore:os.fork\\(\\) was called:RuntimeWarning")
def test_a_tune_trainable_on_the_function_built_problem(tmp_path):
    from ray import tune

    from sweep import trainable_for
    from sweep.execution.ray_cluster import start_ray

    import ray

    started = start_ray(None, 1)
    try:
        fn = trainable_for("soba", "fn_regularization_selection", problem_params={"dataset": "iris"},
                           budget={"iterations": 10}, n_evals=3, imports=["problems.examples.regularization"])
        tuner = tune.Tuner(fn, param_space={"gamma": tune.grid_search([0.5, 2.0]), "seed": 0},
                           tune_config=tune.TuneConfig(metric="F", mode="min"),
                           run_config=tune.RunConfig(storage_path=str(tmp_path), name="fn", verbose=0))
        grid = tuner.fit()
    finally:
        if started:
            ray.shutdown()
    assert not grid.errors and len(grid) == 2
    finals = {}
    for gamma in (0.5, 2.0):
        p = problems.make("fn_regularization_selection", seed=0, dataset="iris")
        run = algorithms.run("soba", p, {"gamma": gamma}, seed=0, budget={"iterations": 10}, n_evals=3)
        finals[gamma] = list(run)[-1]
    best = grid.get_best_result()
    assert best.config["gamma"] == min(finals, key=lambda g: finals[g]["F"])
    assert best.metrics["F"] == pytest.approx(finals[best.config["gamma"]]["F"], rel=1e-12)
