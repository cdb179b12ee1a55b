"""The comparison kind: no axis, grids only; its report is the common tables and curves, nothing more."""
import dataclasses

from sweep.report.build import build_report
from sweep.study.model import ReportOptions


def test_a_comparison_adds_no_axis_table_or_plot(tmp_path, toy_study, run_through_platform):
    st = toy_study(algorithms=[{"name": "toy_aid", "params": {"lr": [0.1, 0.3]}}], seeds=1)
    assert st.kind == "comparison" and st.axis == {} and st.axis_name is None
    assert [p.coords for p in st.points] == [{"grid": {"lr": 0.1}}, {"grid": {"lr": 0.3}}]
    run_through_platform(st, tmp_path)
    rep = build_report(tmp_path, quiet=True)
    assert list(rep.tables) == ["runs", "best"]
    assert sorted(p.name for p in rep.plots) == ["convergence_quadratic.png"]


def _runs(finals_by_gamma, start=10.0):
    from sweep.results.runs import RunData

    out = []
    for gamma, finals in finals_by_gamma.items():
        point = {"problem": "quadratic", "label": "amigo", "key": f"amigo-{gamma}",
                 "coords": {"grid": {"gamma": gamma}}}
        for seed, final in enumerate(finals):
            recs = [{"iteration": 0, "F": start, "status": "running"}, {"iteration": 50, "F": final, "status": "finished"}]
            out.append(RunData(f"{gamma}-{seed}", point, seed, "finished", recs[-1], recs, {}, None))
    return out


def test_best_config_does_not_pick_a_configuration_with_an_exploded_seed_unless_told():
    from sweep.report.tables import CRITERIA, best_table

    # gamma = 0.1 has the lower median (1.0) but one seed ended at 1,565, far above its start (10);
    # gamma = 0.05 converged on every seed (median 2.0).
    runs = _runs({0.1: [0.9, 1.0, 1565.0], 0.05: [1.9, 2.0, 2.2]})
    opts = ReportOptions(metric="F", goal="min", converged_metric="F", converged_below=1e-3, converged_relative=True)
    row = best_table(runs, opts)[0]
    assert (row["best_config"], row["median_F"], row["worst_seed"]) == ("amigo(gamma=0.05)", 2.0, 2.2)
    assert row["stable_on_all_seeds"] and row["criterion"] == CRITERIA["robust"].format(metric="F")
    row = best_table(runs, dataclasses.replace(opts, best_by="median"))[0]  # told: the best median, whatever the seeds
    assert (row["best_config"], row["median_F"], row["worst_seed"]) == ("amigo(gamma=0.1)", 1.0, 1565.0)
    assert not row["stable_on_all_seeds"] and row["criterion"].startswith("best median over seeds, whatever")
    # No configuration stable on every seed: the best median of all of them.
    row = best_table(_runs({0.1: [0.9, 1.0, 1565.0], 0.05: [1.9, 2.0, 99.0]}), opts)[0]
    assert row["best_config"] == "amigo(gamma=0.1)" and not row["stable_on_all_seeds"]


def test_best_by_is_a_checked_report_option(spec_error):
    from sweep.study import spec

    data = {"name": "c", "kind": "comparison", "problems": [{"name": "quadratic"}],
            "algorithms": [{"name": "soba"}], "budget": {"iterations": 5}}
    assert spec.validate({**data, "report": {"best_by": "median"}}).report.best_by == "median"
    assert spec.validate(data).report.best_by == "robust"
    spec_error({**data, "report": {"best_by": "mean"}}, "report.best_by", "robust, median")
