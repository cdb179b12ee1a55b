"""`sweep.load_results`: the runs and records DataFrames against the stored records and plain runs of the
run loop, runs.csv with the same columns, and `bisweep report --metric/--goal`."""
import math

import numpy as np
import pandas as pd
import pytest

import algorithms
import problems
from sweep import load_results
from sweep.cli import main
from sweep.report.build import build_report
from tests.sweep import toy_algorithms  # noqa: F401


@pytest.fixture(scope="module")
def study_results(tmp_path_factory, toy_study, run_through_platform):
    """toy_aid (inner_lr grid 0.3, 0.5) at step-size factors 0.5 and 1 on a 4×5 quadratic, 3 seeds, 30 iterations."""
    root = tmp_path_factory.mktemp("frames")
    st = toy_study(name="frames", kind="stepsize_sensitivity", axis={"factors": [0.5, 1]},
                   algorithms=[{"name": "toy_aid", "params": {"inner_steps": [2, 4]}}])
    store = run_through_platform(st, root)
    return st, store, root


def plain_run(lr, inner_lr, inner_steps, seed):
    p = problems.make("quadratic", seed=seed, dim_x=4, dim_y=5)
    return list(algorithms.run("toy_aid", p, {"lr": lr, "inner_lr": inner_lr, "inner_steps": inner_steps}, seed=seed,
                               budget={"iterations": 30}, n_evals=6))


def test_runs_frame_has_one_row_per_run_with_parameters_axis_and_final_values(study_results):
    st, store, root = study_results
    res = load_results(root)
    runs = res.runs
    assert len(runs) == len(st.points) * 3 == 12
    for col in ("study", "problem", "algorithm", "configuration", "step_size_factor", "seed", "status", "converged",
                "grad_F_sq", "F", "iteration", "time", "calls/total", "calls/grad_g", "alg.lr", "alg.inner_lr",
                "alg.inner_steps", "problem.dim_x", "problem.dim_y", "budget.iterations", "run_key"):
        assert col in runs.columns, col
    assert set(runs["study"]) == {"frames"} and set(runs["algorithm"]) == {"toy_aid"}
    assert set(runs["configuration"]) == {"toy_aid(inner_steps=2)", "toy_aid(inner_steps=4)"}
    for row in runs.to_dict("records"):
        factor = row["step_size_factor"]
        assert row["alg.lr"] == pytest.approx(0.5 * factor) and row["alg.inner_lr"] == pytest.approx(0.5 * factor)
        plain = plain_run(row["alg.lr"], row["alg.inner_lr"], row["alg.inner_steps"], row["seed"])
        assert row["grad_F_sq"] == pytest.approx(plain[-1]["grad_F_sq"], rel=1e-12)
        assert row["calls/total"] == plain[-1]["calls/total"] and row["iteration"] == 30
        assert row["converged"] == (plain[-1]["grad_F_sq"] <= 1e-3 * plain[0]["grad_F_sq"])
        assert row["status"] == "finished" and row["problem.dim_y"] == 5
    # The README's three lines: a groupby median is the median over seeds.
    med = runs.groupby(["configuration", "step_size_factor"])["grad_F_sq"].median()
    one = runs[(runs["configuration"] == "toy_aid(inner_steps=4)") & (runs["step_size_factor"] == 1)]
    assert med[("toy_aid(inner_steps=4)", 1)] == pytest.approx(float(np.median(one["grad_F_sq"])), rel=0)
    assert runs["converged"].dtype == bool


def test_records_frame_is_every_stored_record_in_long_format(study_results):
    st, store, root = study_results
    rec = load_results(root).records
    total = sum(len(store.records(p.run_key(s))) for p in st.points for s in st.seeds)
    assert len(rec) == total == 12 * 7  # iteration 0 and 6 log-spaced points per run
    for col in ("run_key", "algorithm", "configuration", "step_size_factor", "seed", "iteration", "time",
                "calls/grad_g", "calls/hvp", "samples/grad_g", "F", "grad_F_sq", "y_err_sq"):
        assert col in rec.columns, col
    point = st.points[-1]
    key = point.run_key(2)
    mine = rec[rec["run_key"] == key].sort_values("iteration")
    plain = plain_run(point.algorithm_params["lr"], point.algorithm_params["inner_lr"],
                      point.algorithm_params["inner_steps"], 2)
    assert mine["iteration"].tolist() == [r["iteration"] for r in plain]
    np.testing.assert_allclose(mine["grad_F_sq"], [r["grad_F_sq"] for r in plain], rtol=1e-12)
    assert mine["calls/hvp"].tolist() == [r["calls/hvp"] for r in plain]
    assert set(mine["seed"]) == {2}


def test_runs_csv_has_the_frame_columns_and_values(study_results, read_csv, monkeypatch):
    st, store, root = study_results
    rep = build_report(root, quiet=True)
    rows = read_csv(rep.directory / "runs.csv")
    res = load_results(root)
    assert list(rows[0]) == res.runs.columns.tolist()
    by_key = res.runs.set_index("run_key")
    for row in rows:
        want = by_key.loc[row["run_key"]]
        assert float(row["grad_F_sq"]) == want["grad_F_sq"] and float(row["alg.lr"]) == want["alg.lr"]
        assert row["converged"] == str(bool(want["converged"]))
    # By name from the working directory (./results/<study>), and the same by Study object.
    (tmp := root.parent / "cwd").mkdir(exist_ok=True)
    (tmp / "results").mkdir(exist_ok=True)
    link = tmp / "results" / "frames"
    if not link.exists():
        link.symlink_to(root)
    monkeypatch.chdir(tmp)
    assert load_results("frames").runs.equals(res.runs)
    assert load_results(st).runs.equals(res.runs)
    with pytest.raises(FileNotFoundError, match="no study results in .*nothing_here"):
        load_results("nothing_here")


def test_report_with_another_metric_and_goal(study_results, capsys, read_csv):
    st, store, root = study_results
    build_report(root, quiet=True)
    before = (root / "report" / "best.csv").read_text()
    assert main(["report", "frames", "--results-dir", str(root), "--metric", "F", "--goal", "max", "--no-mlflow"]) == 0
    out = capsys.readouterr().out
    assert "metric F (higher is better)" in out and "report-F-max" in out
    best = read_csv(root / "report-F-max" / "best.csv")
    runs = load_results(root).runs
    for row in best:  # the configuration with the largest median final F, per axis value
        sub = runs[runs["step_size_factor"] == float(row["axis"])]
        med = sub.groupby("configuration")["F"].median()
        assert row["best_config"] == med.idxmax() and float(row["median_F"]) == pytest.approx(med.max(), rel=1e-12)
    assert (root / "report" / "best.csv").read_text() == before  # the study's own report is untouched
    assert (root / "report-F-max" / "convergence_quadratic.png").exists()
    assert main(["report", "frames", "--results-dir", str(root), "--metric", "nope", "--no-mlflow"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("bisweep: error: metric: 'nope' is not in this study's records; "
                                               "they have: F, ")
    assert math.isfinite(float(best[0]["median_F"])) and isinstance(runs, pd.DataFrame)
