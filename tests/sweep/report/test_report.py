"""On-disk store and reports: idempotent records, and report tables checked against independent numbers."""
import json

import numpy as np
import pytest

import algorithms
import problems
from sweep.cli import main
from sweep.report.build import build_report
from sweep.results.store import ResultStore
from sweep.study import spec
from tests.sweep import toy_algorithms  # noqa: F401


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


def test_best_configuration_from_platform_records_matches_plain_runs(tmp_path, toy_study, run_through_platform, read_csv):
    st = toy_study(algorithms=[{"name": "toy_aid", "params": {"lr": [0.05, 0.2, 0.6]}}])
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


def test_store_knows_what_ended_from_one_file_and_from_summaries_it_misses(tmp_path):
    store = ResultStore(tmp_path)
    store.finish("a", {"run_key": "a", "status": "finished"})
    store.finish("b", {"run_key": "b", "status": "failed"})
    store.finish("b", {"run_key": "b", "status": "diverged"})  # a failed run that ran again: the last line wins
    (tmp_path / "runs" / "c.json").write_text(json.dumps({"run_key": "c", "status": "finished"}))  # killed before
    with open(tmp_path / "ended.txt", "a") as fh:                                                 # its line
        fh.write("finis")  # ... or killed mid-line
    again = ResultStore(tmp_path)
    assert again.ended() == {"a": "finished", "b": "diverged", "c": "finished"}
    assert again.done(["a", "b", "c", "d"]) == {"a", "b", "c"} and again.status("d") is None
    store.note_checkpoint("d", "/ckpt/1")
    store.note_checkpoint("d", "/ckpt/2")
    store.note_checkpoint("a", "/ckpt/0")
    assert ResultStore(tmp_path).checkpoints() == {"d": "/ckpt/2"}  # ended runs need none


def test_a_report_is_not_rebuilt_when_nothing_changed(tmp_path, toy_study, run_through_platform, monkeypatch, capsys):
    import sweep.report.build as report

    st = toy_study(algorithms=[{"name": "toy_aid", "params": {"lr": [0.05, 0.2]}}])
    store = run_through_platform(st, tmp_path)
    first = build_report(tmp_path, quiet=True)
    png = first.directory / "convergence_quadratic.png"
    stamp = png.stat().st_mtime_ns
    loads = []
    real = report.load_runs
    monkeypatch.setattr(report, "load_runs", lambda *a: loads.append(1) or real(*a))
    again = build_report(tmp_path)
    assert not loads and png.stat().st_mtime_ns == stamp
    assert "report up to date" in capsys.readouterr().out
    assert [r["best_config"] for r in again.tables["best"]] == [r["best_config"] for r in first.tables["best"]]
    runs = again.tables["runs"]
    assert runs._rows is None  # the tables of a report up to date are read when asked (10⁵ runs: ~500 MB)
    assert list(runs) == list(first.tables["runs"]) and len(runs) == 2 * len(st.seeds)
    build_report(tmp_path, quiet=True, force=True)
    assert len(loads) == 1 and png.stat().st_mtime_ns != stamp
    key = st.points[0].run_key(0)  # a run ends differently (say it was re-run): the report is rebuilt
    store.finish(key, {**store.summary(key), "status": "diverged"})
    build_report(tmp_path, quiet=True)
    assert len(loads) == 2


def test_cli_list_validate_and_report(tmp_path, capsys, toy_study, run_through_platform):
    assert main(["list", "algorithms", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert listed["toy_aid"]["step_sizes"] == ["lr", "inner_lr"] and listed["toy_aid"]["params"]["lr"]["default"] == 0.5
    assert main(["list", "problems"]) == 0
    assert "dim_x = 20  (positive_int)  outer dimension" in capsys.readouterr().out
    assert main(["list", "studies"]) == 0
    names = [ln.split(":")[0] for ln in capsys.readouterr().out.splitlines() if not ln.startswith(" ")]
    assert names == sorted(spec.studies()) and "quickstart" in names  # the files and the studies claims define
    path = tmp_path / "s.yaml"
    path.write_text("imports: [tests.sweep.toy_algorithms]\nproblems: [quadratic]\nalgorithms: [toy_aid]\n"
                    "budget: {iterations: 5}\n")
    assert main(["run", str(path), "--validate-only"]) == 0
    assert "1 configurations x 3 seeds = 3 runs; trials sized to about 2 s of runs each" in capsys.readouterr().out
    path.write_text(path.read_text() + "runs_per_trial: 2\n")
    assert main(["run", str(path), "--validate-only"]) == 0
    assert "3 runs; 2 runs per trial" in capsys.readouterr().out
    path.write_text("problems: [quadratic]\nalgorithms: [{name: toy_aid, params: {lr: -1}}]\nbudget: {iterations: 5}\n")
    assert main(["run", str(path)]) == 2
    err = capsys.readouterr().err
    assert err == "bisweep: error: algorithms[0].params.lr: must be a positive number, got -1\n"
    st = toy_study()
    run_through_platform(st, tmp_path / "res")
    assert main(["report", "r", "--results-dir", str(tmp_path / "res"), "--no-mlflow"]) == 0
    out = capsys.readouterr().out
    assert "== best ==" in out and "report written to" in out


def test_unreachable_tracking_server_is_a_one_line_error_before_anything_is_written(tmp_path, capsys):
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
    assert captured.out == "" and not (tmp_path / "r").exists()  # refused before anything is written


def test_a_tracking_store_mlflow_cannot_use_is_a_one_line_error(tmp_path, capsys):
    import sqlite3

    db = tmp_path / "newer.db"  # as a newer MLflow leaves it: a schema revision this MLflow does not know
    with sqlite3.connect(db) as con:
        con.execute("CREATE TABLE alembic_version (version_num VARCHAR(32) NOT NULL)")
        con.execute("INSERT INTO alembic_version VALUES ('0123456789ab')")
    con.close()
    path = tmp_path / "s.yaml"
    path.write_text("imports: [tests.sweep.toy_algorithms]\nproblems: [quadratic]\nalgorithms: [toy_aid]\n"
                    "budget: {iterations: 5}\n")
    assert main(["run", str(path), "--tracking-uri", f"sqlite:///{db}", "--results-dir", str(tmp_path / "r")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"bisweep: error: tracking-uri: cannot use the MLflow store at "
                                               f"sqlite:///{db} (CommandError: Can't locate revision identified by '0123456789ab')"), err
