"""F2OBO Theorem 3.4 claim: V_T, H_2,T of each run's instance, the fitted relation regret = a + b·V_T, and the three
verdicts (regret linear in the path term, static regret against T, AF2OBO against the static methods) on
constructed regrets, each flipping with the numbers; the built-in study's setup table."""
import dataclasses
import math

import numpy as np
import pytest

import problems
from sweep import claims
from sweep.claims import f2obo_regret as fr
from sweep.study import spec
from sweep.study.record import StudyRecord

DRIFTS = (0.0, 0.1, 0.3, 1.0)
TS = (20, 80)
PARAMS = {"dim_x": 2, "dim_y": 2}


def _runs(run_data, regret, problem="drifting_quadratic", labels=(("f2obo", "f2obo", 0.5),), seeds=(0, 1)):
    """One run per (label, T, drift, seed) with the final regret `regret(label, T, V_T, H_2T, seed)`."""
    out = []
    for label, alg, tau in labels:
        for T in TS:
            for d in DRIFTS:
                for s in seeds:
                    v = problems.make(problem, seed=s, T=T, drift=d, **PARAMS).variation()
                    r = run_data(problem, {"cumulative_regret": regret(label, T, v["V_T"], v["H_2T"], s)}, label=label,
                                 algorithm=alg, axis=d, problem_params={**PARAMS, "T": T, "drift": d},
                                 grid={"problem.T": T})
                    r.point["algorithm_params"] = {} if tau == 0.5 else {"tau": tau}
                    out.append(dataclasses.replace(r, seed=s))
    return out


def _meta():
    return dataclasses.replace(StudyRecord.from_study(spec.load("f2obo_regret_bound", scale="ci")), seeds=[0, 1])


def test_variation_of_a_run_is_its_instances_eq5(run_data):
    r = _runs(run_data, lambda *a: 1.0)[-1]
    want = problems.make("drifting_quadratic", seed=1, T=80, drift=1.0, **PARAMS).variation()
    assert fr.variation(r) == (pytest.approx(want["V_T"], rel=1e-12), pytest.approx(want["H_2T"], rel=1e-12))
    assert want["H_2T"] == pytest.approx(1.0 ** 2 * 79, rel=1e-10)  # drift² per step, T − 1 steps


def test_linear_fit_and_path_slopes():
    assert fr.linear_fit([0, 1, 2, 3], [5, 7, 9, 11]) == (pytest.approx(5.0), pytest.approx(2.0))
    assert all(math.isnan(v) for v in fr.linear_fit([1, 1], [2, 3]))
    glob, top = fr.slopes([0.0, 1.0, 3.0, 7.0], [2.0 * (1 + p) ** 1.5 for p in (0.0, 1.0, 3.0, 7.0)])
    assert (glob, top) == (pytest.approx(1.5), pytest.approx(1.5))


def test_fitted_relation_and_a_linear_regret_agrees(run_data, tmp_path):
    # regret = 40 + 0.5 V_T + 0.1 H_2,T: linear in the path term (its slope just below 1 at the largest drifts).
    runs = _runs(run_data, lambda lab, T, V, H, s: 40.0 + 0.5 * V + 0.1 * H, seeds=(0, 1, 2))
    rep = claims.CLAIMS["f2obo_regret_bound"](_meta(), runs, tmp_path)
    rows = {(r["algorithm"], r["T"]): r for r in rep.tables["measured"]}
    for T in TS:
        V = [rows[("f2obo", T)][f"V_T@drift={d:g}"] for d in DRIFTS]
        H = [rows[("f2obo", T)][f"H_2T@drift={d:g}"] for d in DRIFTS]
        assert rows[("f2obo", T)]["regret@drift=1"] == pytest.approx(40 + 0.5 * V[-1] + 0.1 * H[-1], rel=0.2)
        b = fr.linear_fit(V, [40 + 0.5 * v + 0.1 * h for v, h in zip(V, H)])[1]
        assert rows[("f2obo", T)]["fit_b"] == pytest.approx(b, rel=0.2)
        assert 0 < rows[("f2obo", T)]["path_slope_top2"] <= 1.0
    path = next(v for v in rep.verdicts if v.criterion == "f2obo_path")
    assert path.status == "agrees" and path.setting == "deviating setup" and path.deviation.startswith("problem and data")
    assert (tmp_path / "claim.png").stat().st_size > 1000


def test_a_regret_growing_faster_than_the_path_term_disagrees(run_data, tmp_path):
    runs = _runs(run_data, lambda lab, T, V, H, s: 3.0 * (1 + V + H) ** 1.6 * (1 + 0.01 * s))
    path = next(v for v in fr.f2obo_regret_bound(_meta(), runs, tmp_path).verdicts if v.criterion == "f2obo_path")
    assert path.status == "disagrees" and path.estimate.value == pytest.approx(1.6, abs=0.01)


def test_a_regret_the_drift_does_not_move_is_not_measured(run_data, tmp_path):
    runs = _runs(run_data, lambda lab, T, V, H, s: 100.0 + 1e-3 * V)
    path = next(v for v in fr.f2obo_regret_bound(_meta(), runs, tmp_path).verdicts if "linearly" in v.claim)
    assert (path.status, path.note) == ("not measured", "no method moved")


@pytest.mark.parametrize("tau, power, want", [(0.5, 0.3, "agrees"), (0.5, 1.0, "disagrees"), (1.5, 0.0, "agrees"),
                                              (1.5, 0.5, "disagrees")])
def test_static_regret_against_T_by_tau(run_data, tmp_path, tau, power, want):
    label = "f2obo" if tau == 0.5 else "f2obo_tau1.5"
    runs = _runs(run_data, lambda lab, T, V, H, s: 7.0 * T ** power + V, labels=((label, "f2obo", tau),))
    v = next(v for v in fr.f2obo_regret_bound(_meta(), runs, tmp_path).verdicts if "static regret" in v.claim)
    assert v.status == want and v.estimate.value == pytest.approx(power, abs=1e-9)
    assert v.criterion == ("f2obo_static_one" if tau > 1 else "f2obo_static_half")


LABELS = (("af2obo", "af2obo", 0.5), ("f2obo", "f2obo", 0.5), ("obbo", "obbo", math.nan), ("oagd", "oagd", math.nan))


@pytest.mark.parametrize("af", [50.0, 500.0])
def test_af2obo_against_the_static_methods_is_shown_not_judged(run_data, tmp_path, af):
    """The paper compares Theorem 4.2's bound with the static methods' bounds: the measured regrets are a reference row
    (min static / AF2OBO = 100 / af), whichever way they point."""
    regret = {"af2obo": af, "f2obo": 200.0, "obbo": 300.0, "oagd": 100.0}
    runs = _runs(run_data, lambda lab, T, V, H, s: regret[lab] * (1 + 0.01 * s), problem="moving_quadratic",
                 labels=LABELS)
    v = next(v for v in fr.f2obo_regret_bound(_meta(), runs, tmp_path).verdicts if v.criterion == "af2obo_adapts")
    assert v.status == "reference" and v.estimate.value == pytest.approx(100.0 / af, rel=0.02)
    assert "comparison of bounds" in v.paper and "compares bounds" in v.claim and "oagd " in v.measured


def test_the_built_in_study_setup_table_and_a_broken_condition():
    meta = StudyRecord.from_study(spec.load("f2obo_regret_bound"))
    rows = {s.field: s for s in claims.CLAIMS["f2obo_regret_bound"].settings(meta)}
    assert [f for f, s in rows.items() if s.deviation] == ["problem and data"]
    assert rows["noise"].status == rows["batch sizes"].status == "chosen: exact gradients"  # a theorem: no experiment
    assert rows["metric"].status.startswith("chosen: the final cumulative regret (3)")
    assert rows["step sizes"].status.startswith("chosen: γ = 0.1") and "every stated condition holds" in rows["step sizes"].study
    assert rows["iteration counts"].study == "horizons T = 100, 400, one run per T"
    data = dict(spec.load("f2obo_regret_bound", scale="ci").source)
    data["algorithms"] = [{"name": "f2obo", "params": {"lambda1": 1.0}}]
    with pytest.warns(UserWarning, match="outside the paper's theorem conditions: lambda1 = 1 must exceed"):
        meta = StudyRecord.from_study(spec.validate(data))
    rows = {s.field: s for s in claims.CLAIMS["f2obo_regret_bound"].settings(meta)}
    assert "lambda1 = 1 must exceed 2 L_f,1/μ_g" in rows["step sizes"].deviation


def test_each_threshold_is_the_papers():
    assert (fr.PATH_C.threshold, fr.STATIC_HALF_C.threshold, fr.STATIC_ONE_C.threshold) == (1.1, 0.6, 0.1)
    assert "af2obo_adapts" not in {c.name for c in fr.CRITERIA}  # bounds against bounds: no measured verdict
    assert np.isclose(fr.STATIC_HALF_C.threshold - fr.STATIC_MARGIN, 0.5)


@pytest.mark.parametrize("power, want", [(1.0, "agrees"), (1.6, "disagrees")])
def test_af2obo_is_checked_against_its_own_bound(run_data, tmp_path, power, want):
    """Theorem 4.2: AF2OBO's regret O(√T + V_T): a regret c (√T + V_T) passes at any H_2,T, one growing like
    (√T + V_T)^1.6 fails — judged against the bound, not against another method's measured regret."""
    runs = _runs(run_data, lambda lab, T, V, H, s: 2.0 * (math.sqrt(T) + V) ** power * (1 + 0.01 * s),
                 problem="moving_quadratic", labels=LABELS[:2])
    v = next(v for v in fr.f2obo_regret_bound(_meta(), runs, tmp_path).verdicts if v.criterion == "af2obo_bound")
    assert v.status == want and v.estimate.value == pytest.approx(power, abs=0.01)
    assert "free of H_2,T" in v.claim
