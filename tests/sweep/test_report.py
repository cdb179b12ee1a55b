"""On-disk store and reports: idempotent records, and report tables checked against independent numbers."""
import csv
import json
import math

import numpy as np
import pytest

import algorithms
import problems
from sweep import spec
from sweep.cli import main
from sweep.report import build_report
from sweep.runner import StoreCallback
from sweep.store import ResultStore, point_dict
from sweep.trainable import execute_trial
from tests.sweep import toy_algorithms  # noqa: F401

QUAD = {"name": "quadratic", "params": {"dim_x": 4, "dim_y": 5}}


def study(**fields):
    base = {"name": "r", "imports": ["tests.sweep.toy_algorithms"], "problems": [QUAD],
            "algorithms": [{"name": "toy_aid"}], "seeds": 3, "budget": {"iterations": 30}, "n_evals": 6}
    return spec.validate({**base, **fields})


def run_through_platform(st, root):
    """Every trial body fed to the driver's store callback, as under Tune (no Ray needed)."""
    store = ResultStore(root)
    store.write_study(st)
    cb = StoreCallback(store, st, registry=None)
    for t in st.trials:
        execute_trial(t.config(0.0, st.imports), lambda res, ck: cb.on_trial_result(0, [], None, res))
    return store


def write_synthetic(st, root, final_of, records_of=None):
    """Summaries (and records) with chosen final values: final_of(point, seed) -> (status, record)."""
    store = ResultStore(root)
    store.write_study(st)
    for p in st.points:
        for s in st.seeds:
            status, rec = final_of(p, s)
            key = p.run_key(s)
            for r in (records_of(p, s) if records_of else [rec]):
                store.append(key, r)
            store.finish(key, {"run_key": key, "trial_key": "t", "seed": s, "status": status, "final": rec,
                               "where": {}, "point": point_dict(p)})
    return store


def read_csv(path):
    with open(path) as fh:
        return list(csv.DictReader(fh))


def test_store_appends_once_and_tolerates_a_cut_line(tmp_path):
    store = ResultStore(tmp_path)
    rec = {"iteration": 3, "status": "running", "F": 1.0}
    assert store.append("k", rec) and not store.append("k", dict(rec))
    assert store.append("k", {**rec, "status": "finished"})
    with open(store.records_dir / "k.jsonl", "a") as fh:
        fh.write('{"iteration": 4, "sta')  # the driver died mid-write
    again = ResultStore(tmp_path)
    assert not again.append("k", rec)
    assert again.records("k") == [{**rec, "status": "finished"}]
    again.finish("k", {"run_key": "k", "status": "diverged"})
    again.finish("j", {"run_key": "j", "status": "failed"})
    assert again.done(["k", "j", "x"]) == {"k"}


def test_best_configuration_from_platform_records_matches_plain_runs(tmp_path):
    st = study(algorithms=[{"name": "toy_aid", "params": {"lr": [0.05, 0.2, 0.6]}}])
    store = run_through_platform(st, tmp_path)
    rep = build_report(tmp_path, quiet=True)
    # Independent: the plain run loop for every (lr, seed), median over seeds of the final F.
    med = {}
    for lr in (0.05, 0.2, 0.6):
        finals = []
        for seed in range(3):
            p = problems.make("quadratic", seed=seed, dim_x=4, dim_y=5)
            finals.append(list(algorithms.run("toy_aid", p, {"lr": lr}, seed=seed, budget={"iterations": 30}, n_evals=6))[-1]["grad_F_sq"])
        med[lr] = float(np.median(finals))
    best_lr = min(med, key=med.get)
    (row,) = rep.tables["best"]
    assert row["best_config"] == f"toy_aid(lr={best_lr})"
    assert row["median_grad_F_sq"] == pytest.approx(med[best_lr], rel=1e-12)
    assert row["configurations"] == 3 and row["seeds"] == 3
    runs = read_csv(rep.directory / "runs.csv")
    assert len(runs) == 9 and {r["status"] for r in runs} == {"finished"}
    assert all(len(store.records(p.run_key(s))) == 7 for p in st.points for s in st.seeds)  # 0 + 6 log-spaced points
    assert (rep.directory / "convergence_quadratic.png").stat().st_size > 10_000
    assert "== best ==" in (rep.directory / "summary.txt").read_text()


def test_sensitivity_table_relative_change_and_converged_fraction(tmp_path):
    st = study(kind="stepsize_sensitivity", axis={"values": [2, 4, 6, 8]}, seeds=[0, 1, 2])
    finals = {2: [59.7, 59.71, 59.9], 4: [59.62, 59.5, 59.7], 6: [59.11, 58.0, 60.0], 8: [59.08, 59.0, 70.0]}

    def final_of(p, s):
        a = p.coords.get("axis")
        if a is None:  # the unscaled reference configuration
            return "finished", {"iteration": 30, "status": "finished", "F": [59.54, 59.0, 60.0][s], "grad_F_sq": 1e-9}
        if a == 8 and s == 2:
            return "diverged", {"iteration": 12, "status": "diverged", "F": 70.0, "grad_F_sq": 1e3}
        return "finished", {"iteration": 30, "status": "finished", "F": finals[a][s], "grad_F_sq": 1e-2 if a == 6 else 1e-9}

    def records_of(p, s):
        first = {"iteration": 0, "status": "running", "F": 100.0, "grad_F_sq": 1.0}
        return [first, final_of(p, s)[1]]

    write_synthetic(st, tmp_path, final_of, records_of)
    rep = build_report(tmp_path, quiet=True)
    (row,) = rep.tables["sensitivity"]
    medians = {2: 59.71, 4: 59.62, 6: 59.11, 8: 59.08}  # seed 2 at 8 diverged: +inf, still the median is 59.08
    for a, m in medians.items():
        assert row[f"initial_step_size={a}"] == pytest.approx(m, rel=1e-12)
    assert row["reference"] == pytest.approx(59.54)
    assert row["relative_average_change"] == pytest.approx(abs(np.mean(list(medians.values())) - 59.54) / 59.54, rel=1e-12)
    # Converged: final grad_F_sq ≤ 1e-3 × its initial 1.0; the 3 runs at step 6 (1e-2) and the diverged one do not.
    assert row["grid_runs"] == 12 and row["diverged_runs"] == 1
    assert row["converged_fraction"] == pytest.approx(8 / 12)
    on_disk = read_csv(rep.directory / "sensitivity.csv")
    assert float(on_disk[0]["relative_average_change"]) == pytest.approx(row["relative_average_change"], rel=1e-9)
    assert (rep.directory / "sensitivity.png").exists()


def test_scaling_table_recovers_fitted_exponents(tmp_path):
    st = study(kind="dimension_scaling", axis={"param": ["dim_x", "dim_y"], "values": [8, 16, 32, 64]},
               report={"metric": "grad_F_sq", "target": 1e-6}, seeds=2)

    def records_of(p, s):
        d = p.coords["axis"]
        # time per iteration ∝ d^1.5; calls to reach 1e-6 ∝ d (grad_F_sq = exp(-calls / d)).
        its = np.arange(0, 51)
        calls = 10 * its
        return [{"iteration": int(i), "status": "running" if i < 50 else "finished", "time": 1e-6 * d ** 1.5 * i * (1 + s),
                 "calls/total": int(c), "grad_F_sq": float(np.exp(-c / (0.5 * d)))} for i, c in zip(its, calls)]

    write_synthetic(st, tmp_path, lambda p, s: ("finished", records_of(p, s)[-1]), records_of)
    rep = build_report(tmp_path, quiet=True)
    rows = {r["quantity"]: r for r in rep.tables["scaling"]}
    assert rows["seconds_per_iteration"]["exponent"] == pytest.approx(1.5, abs=1e-9)
    # First call count with exp(-c/(d/2)) <= 1e-6, on the grid of multiples of 10: computed independently.
    want = [10 * math.ceil(0.5 * d * math.log(1e6) / 10) for d in (8, 16, 32, 64)]
    got = [rows["calls_to_target"][f"dim_x+dim_y={d}"] for d in (8, 16, 32, 64)]
    assert got == want
    assert rows["calls_to_target"]["exponent"] == pytest.approx(np.polyfit(np.log([8, 16, 32, 64]), np.log(want), 1)[0])
    assert (rep.directory / "scaling.png").exists()


def test_online_drift_study_report_regret_from_platform_records(tmp_path):
    st = study(kind="drift", axis={"param": "drift", "values": [0.0, 0.05]}, seeds=2,
               problems=[{"name": "toy_drift", "params": {"horizon": 30}}], algorithms=[{"name": "toy_ogd"}],
               budget={"iterations": 30})
    run_through_platform(st, tmp_path)
    rep = build_report(tmp_path, quiet=True)
    rows = {r["drift"]: r for r in rep.tables["drift"]}
    for drift in (0.0, 0.05):
        p = problems.make("toy_drift", seed=0, horizon=30, drift=drift)
        plain = list(algorithms.run("toy_ogd", p, {}, seed=0, budget={"iterations": 30}, n_evals=6))[-1]
        assert rows[drift]["median_cumulative_regret"] == pytest.approx(plain["cumulative_regret"], rel=1e-12)
    assert rows[0.05]["median_cumulative_regret"] > rows[0.0]["median_cumulative_regret"]
    assert (rep.directory / "regret.png").exists() and (rep.directory / "drift.png").exists()


def test_cli_list_validate_and_report(tmp_path, capsys):
    assert main(["list", "algorithms", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert listed["toy_aid"]["step_sizes"] == ["lr", "inner_lr"] and listed["toy_aid"]["params"]["lr"]["default"] == 0.5
    assert main(["list", "problems"]) == 0
    assert "dim_x = 20  (positive_int)  outer dimension" in capsys.readouterr().out
    assert main(["list", "studies"]) == 0
    names = [ln.split(":")[0] for ln in capsys.readouterr().out.splitlines() if not ln.startswith(" ")]
    assert names == sorted(spec.builtin_studies()) and "quickstart" in names
    path = tmp_path / "s.yaml"
    path.write_text("imports: [tests.sweep.toy_algorithms]\nproblems: [quadratic]\nalgorithms: [toy_aid]\n"
                    "budget: {iterations: 5}\n")
    assert main(["run", str(path), "--validate-only"]) == 0
    assert "1 configurations x 3 seeds = 3 runs in 1 trials" in capsys.readouterr().out
    path.write_text("problems: [quadratic]\nalgorithms: [{name: toy_aid, params: {lr: -1}}]\nbudget: {iterations: 5}\n")
    assert main(["run", str(path)]) == 2
    err = capsys.readouterr().err
    assert err == "bisweep: error: algorithms[0].params.lr: must be a positive number, got -1\n"
    st = study()
    run_through_platform(st, tmp_path / "res")
    assert main(["report", "r", "--results-dir", str(tmp_path / "res"), "--no-mlflow"]) == 0
    out = capsys.readouterr().out
    assert "== best ==" in out and "report written to" in out


def test_unreachable_tracking_server_is_a_one_line_error_before_ray(tmp_path, capsys):
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again: nothing listens there
    path = tmp_path / "s.yaml"
    path.write_text("imports: [tests.sweep.toy_algorithms]\nproblems: [quadratic]\nalgorithms: [toy_aid]\n"
                    "budget: {iterations: 5}\n")
    assert main(["run", str(path), "--tracking-uri", f"http://127.0.0.1:{port}", "--results-dir", str(tmp_path / "r")]) == 2
    captured = capsys.readouterr()
    assert captured.err.startswith(f"bisweep: error: tracking-uri: no MLflow server answers at http://127.0.0.1:{port}")
    assert "starting" not in captured.out
