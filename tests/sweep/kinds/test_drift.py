"""The drift kind: a drift parameter of every online problem; the report's regret against plain runs."""
import pytest

import algorithms
import problems
from sweep.report.build import build_report


def test_the_axis_sets_the_drift_of_online_problems(toy_study):
    st = toy_study(kind="drift", axis={"param": "drift", "values": [0.0, 0.5]},
                   problems=[{"name": "toy_drift"}], algorithms=[{"name": "toy_ogd"}])
    assert st.online and st.report.metric == "cumulative_regret"
    assert [p.problem_params["drift"] for p in st.points] == [0.0, 0.5]


def test_online_drift_study_report_regret_from_platform_records(tmp_path, toy_study, run_through_platform):
    st = toy_study(kind="drift", axis={"param": "drift", "values": [0.0, 0.05]}, seeds=2,
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
