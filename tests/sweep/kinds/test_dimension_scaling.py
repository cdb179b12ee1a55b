"""The dimension_scaling kind: the axis sets dimensions of every problem; fitted exponents against known laws."""
import math

import numpy as np
import pytest

from sweep.report.build import build_report


def test_the_axis_sets_every_named_dimension(toy_study):
    st = toy_study(kind="dimension_scaling", axis={"param": ["dim_x", "dim_y"], "values": [4, 8, 16]})
    assert [(p.problem_params["dim_x"], p.problem_params["dim_y"], p.coords["axis"]) for p in st.points] == \
        [(4, 4, 4), (8, 8, 8), (16, 16, 16)]
    assert st.axis_name == "dim_x+dim_y"


def test_scaling_table_recovers_fitted_exponents(tmp_path, toy_study, write_synthetic):
    st = toy_study(kind="dimension_scaling", axis={"param": ["dim_x", "dim_y"], "values": [8, 16, 32, 64]},
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
