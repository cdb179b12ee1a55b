"""The comparison kind: no axis, grids only; its report is the common tables and curves, nothing more."""
from sweep.report.build import build_report


def test_a_comparison_adds_no_axis_table_or_plot(tmp_path, toy_study, run_through_platform):
    st = toy_study(algorithms=[{"name": "toy_aid", "params": {"lr": [0.1, 0.3]}}], seeds=1)
    assert st.kind == "comparison" and st.axis == {} and st.axis_name is None
    assert [p.coords for p in st.points] == [{"grid": {"lr": 0.1}}, {"grid": {"lr": 0.3}}]
    run_through_platform(st, tmp_path)
    rep = build_report(tmp_path, quiet=True)
    assert list(rep.tables) == ["runs", "best"]
    assert sorted(p.name for p in rep.plots) == ["convergence_quadratic.png"]
