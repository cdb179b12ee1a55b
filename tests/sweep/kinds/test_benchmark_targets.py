"""F_L of benchmark instances with no known optimum: a reference solve that no compared run sets, checked against
scipy on the problem's ground truth; a run below it reported, never taking its place; the study's own values; the
cache."""
import math

import numpy as np
import pytest
from scipy import optimize

import problems
from sweep.kinds.benchmark import numbers as bench, targets
from sweep.results.runs import RunData

PARAMS = {"max_samples": 40}
AXIS = {"metric": "F", "taus": [0.1, 1e-3]}


def run(value, seed=0, label="soba", start=None):
    point = {"problem": "regularization_selection", "problem_params": PARAMS, "label": label, "key": label,
             "coords": {"grid": {}}}
    p = problems.make("regularization_selection", seed=seed, **PARAMS)
    f0 = p.F(p.initial_point()[0]) if start is None else start
    records = [{"iteration": 0, "F": f0, "calls/total": 0, "status": "running"},
               {"iteration": 9, "F": value, "calls/total": 90, "status": "finished"}]
    return RunData(label, point, seed, "finished", records[-1], records, {}, None)


def scipy_minimum(seed):
    p = problems.make("regularization_selection", seed=seed, **PARAMS)
    x0 = p.initial_point()[0]
    box = [(v - 20 * max(1, abs(x0).max()), v + 20 * max(1, abs(x0).max())) for v in x0]
    res = optimize.minimize(p.F, x0, jac=p.grad_F, method="L-BFGS-B", bounds=box,
                            options={"maxiter": 20000, "gtol": 1e-14, "ftol": 0.0})
    return float(res.fun)


@pytest.fixture(scope="module")
def reference():
    return scipy_minimum(0)


def test_the_best_compared_run_no_longer_sets_f_l(reference, tmp_path):
    best = reference + 0.25  # the best compared run: before, F_L was this value
    runs = [run(best), run(best + 1.0, label="aid_cg")]
    b = bench.instance_bounds(runs, AXIS, tmp_path).iloc[0]
    assert b["lower"] != pytest.approx(best)
    assert b["lower"] == pytest.approx(reference, rel=1e-6, abs=1e-9)
    assert b["lower_source"].startswith("reference solve: L-BFGS-B") and "converged" in b["lower_source"]
    assert not b["lower_exact"] and b["best_run"] == pytest.approx(best) and b["run_below"] == 0.0
    assert targets.below_note(bench.instance_bounds(runs, AXIS, tmp_path)) == ""


def fake_solver(calls):
    """A reference solve that finds 1.0 from x0 and 0.75 from more starts, noting each call."""
    def solve(problem, restarts=0, seed=0):
        calls.append(restarts)
        return targets.Reference(1.0 if restarts == 0 else 0.75, 0.01, f"fake solve ({restarts} restarts)", True)
    return solve


def test_a_run_below_the_reference_is_reported_and_does_not_replace_it(tmp_path, monkeypatch):
    calls = []
    monkeypatch.setattr(targets, "reference_solve", fake_solver(calls))
    bounds = bench.instance_bounds([run(0.25, start=3.0), run(2.0, label="aid_cg", start=3.0)], AXIS, tmp_path)
    b = bounds.iloc[0]
    # Below the first solve: solved again from more starts (0.75, better), still above the run: kept, reported.
    assert calls == [0, targets.RESTARTS]
    assert (b["lower"], b["lower_gap"], b["run_below"]) == (0.75, 0.01, 0.5)
    assert b["lower_source"] == f"fake solve ({targets.RESTARTS} restarts)"
    assert targets.below_note(bounds).startswith(
        "a compared run ended below the reference F_L on 1 of 1 instances (at most 0.5 below, "
        "regularization_selection instance 0)")


def test_the_studys_own_reference_and_the_cache(tmp_path, monkeypatch):
    calls = []
    monkeypatch.setattr(targets, "reference_solve", fake_solver(calls))
    given = {**AXIS, "reference": {"regularization_selection": {"0": 0.125}}}
    b = bench.instance_bounds([run(1.0, start=3.0)], given, tmp_path).iloc[0]
    assert (b["lower"], b["lower_source"], calls) == (0.125, "given in the study (axis reference)", [])
    bench.instance_bounds([run(2.0, start=3.0)], AXIS, tmp_path)
    bench.instance_bounds([run(2.0, start=3.0)], AXIS, tmp_path)  # cached in the results directory
    assert calls == [0] and (tmp_path / targets.CACHE).is_file()
    (tmp_path / targets.CACHE).write_text('{"x": "not a reference"}')  # read as data: a bad entry is solved again
    assert bench.instance_bounds([run(2.0, start=3.0)], AXIS, tmp_path).iloc[0]["lower"] == 1.0
    assert calls == [0, 0]


def test_a_known_optimum_stays_exact():
    point = {"problem": "quadratic", "problem_params": {"dim_x": 3, "dim_y": 3}, "label": "soba", "key": "soba",
             "coords": {"grid": {}}}
    p = problems.make("quadratic", seed=0, dim_x=3, dim_y=3)
    f_opt = p.F(p.x_opt())
    recs = [{"iteration": 0, "F": f_opt + 5, "F_gap": 5.0, "status": "running"},
            {"iteration": 3, "F": f_opt + 1, "F_gap": 1.0, "status": "finished"}]
    b = bench.instance_bounds([RunData("soba", point, 0, "finished", recs[-1], recs, {}, None)], AXIS).iloc[0]
    assert b["lower_exact"] and b["lower"] == pytest.approx(f_opt) and b["lower_gap"] == 0.0
    assert b["lower_source"] == "exact optimum" and math.isfinite(b["best_run"])
    assert np.isclose(b["best_run"], f_opt + 1)
