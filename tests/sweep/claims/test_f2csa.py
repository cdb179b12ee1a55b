"""F2CSA Fig. 1-2 claim: the study against the paper's setting, crossover of power laws, per-run quantities, and
the verdicts on constructed timings (the direction from the numbers; a deviation of the setting named beside it)."""
import math

import pytest
import yaml

from sweep import claims
from sweep.claims import f2csa, f2csa_setup
from sweep.study import spec
from sweep.study.record import StudyRecord


def _settings(scale):
    st = spec.load("f2csa_scaling", scale=scale)
    meta = StudyRecord.from_study(st)
    return meta, {s.field: s for s in claims.CLAIMS["f2csa_fig2"].settings(meta)}


def test_the_built_in_study_runs_the_papers_setting_field_by_field():
    meta, rows = _settings("full")
    # Even at full scale two fields deviate: §6.1's zero-mean Gaussian matrices (indefinite) are made positive
    # definite, and the noise is drawn per matrix–vector product.
    assert [f for f, s in rows.items() if s.deviation] == ["problem and data", "noise"]
    assert rows["problem and data"].deviation.startswith("Q_l, Q_u made positive definite")
    assert [f for f, s in rows.items() if s.status == "same"] == ["dimensions", "constraints"]
    # D, δ_G, α, N_g and Remark 4.1's constant are the study's choices, not the paper's values.
    assert rows["step sizes"].status == "chosen: D = 0.01, δ_G = 0.1, α = 0.1"
    assert rows["inner-loop policy"].status == "chosen: c = 1, κ_g = 5 → 35 steps"
    assert rows["batch sizes"].status.startswith("chosen: F2CSA: 1 sample per inner gradient, N_g = 10")
    assert rows["what is timed"].status.startswith("chosen: CPU seconds") and "one BLAS thread" in rows["what is timed"].study
    pts = meta.points
    assert {(p["problem_params"]["constraints"], p["problem_params"]["noise"], p["problem_params"]["noise_model"])
            for p in pts} == {("box", 0.01, "dense")}
    assert sorted({p["coords"]["axis"] for p in pts}) == [50, 100, 250, 500, 1000, 2000, 4000]
    assert {p["blas_threads"] for p in pts} == {1}
    cfg = {p["label"]: p["algorithm_params"] for p in pts}
    length = f2csa_setup.remark41_length(0.1)
    assert length == math.ceil(5 * math.log(1000)) == 35
    assert (cfg["f2csa"]["lower_max_iter"], cfg["f2csa"]["inner_max_iter"], cfg["f2csa"]["eta"]) == (35, 35, 1e-5)
    for b in ("ssigd", "dsblo"):
        assert (cfg[b]["lower_solver"], cfg[b]["pd_max_iter"]) == ("primal_dual", 35)
    assert (cfg["ssigd"]["beta"], cfg["ssigd"]["beta_decay"]) == (1e-4, 0.5)
    # The default scale stops at d = 2000: the one deviation, and it names the full scale.
    _, rows = _settings("default")
    assert [(f, s.deviation) for f, s in rows.items() if s.deviation][1] == (
        "dimensions", "d only up to 2000 (`--scale full` reaches 4000)")


def test_a_study_off_the_papers_setting_shows_each_deviation():
    st = spec.load("f2csa_scaling")
    data = dict(st.source)
    data["problems"] = [{"name": "constrained_quadratic", "params": {"constraints": "linear", "p": 10, "noise": 0.01}}]
    data["algorithms"] = ["f2csa", "ssigd", "dsblo"]
    data.pop("blas_threads")
    rows = {s.field: s for s in claims.CLAIMS["f2csa_fig2"].settings(StudyRecord.from_study(spec.validate(data)))}
    assert rows["constraints"].deviation == "not the paper's box"
    assert rows["noise"].deviation == "not the paper's noise"
    assert rows["inner-loop policy"].deviation.startswith("not ⌈κ_g ln(1/δ)⌉ = 35 steps")
    assert rows["what is timed"].deviation.startswith("trials not limited to one BLAS thread")


def test_crossover_of_power_laws():
    ds = [100, 250, 500, 2000, 4000]
    a = [1e-3 * d for d in ds]  # first-order: linear
    b = [1e-6 * d ** 2 for d in ds]  # dense: quadratic; equal at d = 1000
    d, how = f2csa.crossover(ds, a, b)
    assert how == "measured" and d.low == d.high == pytest.approx(1000.0, rel=1e-9)
    # Not reached by d = 500: censored, at least 500 (the fitted laws' crossing at 1000 is named, not used).
    d, how = f2csa.crossover(ds[:3], a[:3], b[:3])
    assert (d.low, d.high) == (500.0, math.inf) and "fitted power laws cross at d ≈ 1000" in how
    # Faster at every d from 2000: censored the other way, at most 2000.
    d, how = f2csa.crossover(ds[3:], a[3:], b[3:])
    assert (d.low, d.high) == (0.0, 2000.0) and "at most 2000" in how
    d, how = f2csa.crossover(ds, b, a)  # the quadratic one never becomes faster
    assert (d.low, d.high) == (4000.0, math.inf) and "never cross" in how
    assert f2csa.power_law_at(ds, b, 4000.0) == pytest.approx(16.0, rel=1e-9)


def test_run_quantities(run_data):
    recs = [{"iteration": 0, "time": 0.0, "grad_F_sq": 10.0}, {"iteration": 5, "time": 1.0, "grad_F_sq": 0.5},
            {"iteration": 10, "time": 2.5, "grad_F_sq": 0.05}]
    r = run_data("p", recs[-1], records=recs)
    assert f2csa.seconds_per_iteration(r) == 0.25
    assert f2csa.time_to_fraction(r, "grad_F_sq", 0.1) == 1.0
    assert f2csa.time_to_fraction(r, "grad_F_sq", 0.01, "iteration") == 10
    assert math.isnan(f2csa.time_to_fraction(r, "grad_F_sq", 1e-3))
    assert math.isnan(f2csa.seconds_per_iteration(run_data("p", recs[-1], status="diverged", records=recs)))
    # With one BLAS thread and a recorded CPU time, the CPU seconds are the compute seconds.
    cpu = [{**rec, "cpu_time": rec["time"] / 2} for rec in recs]
    r = run_data("p", cpu[-1], records=cpu)
    r.point["blas_threads"] = 1
    assert f2csa.seconds_per_iteration(r) == 0.125
    assert f2csa.to_target([r], "time") == (0.5, True)
    never = run_data("p", {**recs[-1], "grad_F_sq": 5.0}, records=[recs[0], {**recs[-1], "grad_F_sq": 5.0}])
    assert f2csa.to_target([never], "time") == (2.5, False)  # a lower bound: the run ended first
    # A recorded first iteration is left out (a warm-up): (3.0 − 0.5) / (10 − 1) seconds per iteration.
    warm = [recs[0], {"iteration": 1, "time": 0.5, "grad_F_sq": 9.0}, {"iteration": 10, "time": 3.0, "grad_F_sq": 1.0}]
    assert f2csa.seconds_per_iteration(run_data("p", warm[-1], records=warm)) == pytest.approx(2.5 / 9, rel=1e-12)
    # Projection to d = 4000: iterations ∝ d^0.5 (10 at d = 100) times seconds ∝ d (1 ms at d = 100):
    # 10·√40 × 40 ms = 2.53 s.
    ds = [100.0, 400.0, 1600.0]
    got = f2csa._projected_seconds(ds, [1e-5 * d for d in ds], [(10 * (d / 100) ** 0.5, True) for d in ds])
    assert got == pytest.approx(10 * 40 ** 0.5 * 0.04, rel=1e-9)


def _timed_runs(run_data, per_it, reach_at):
    """Runs at each d with a constant cost per iteration and ‖∇F‖² falling below 10% of its start at `reach_at`."""
    runs = []
    for lab, by_d in per_it.items():
        for d, t in by_d.items():
            its = [0, 10, 100, 1000]
            recs = [{"iteration": i, "time": t * i, "calls/total": 3 * i, "F": 10.0 - i / 1000,
                     "grad_F_sq": 1.0 if i < reach_at[lab] else 0.05} for i in its]
            runs.append(run_data("constrained_quadratic", recs[-1], algorithm=lab.split("_")[0], label=lab, axis=d,
                                 records=recs))
    return runs


def test_verdicts_on_constructed_timings_and_the_gate(run_data, tmp_path, monkeypatch):
    monkeypatch.setattr(f2csa, "oracle_accuracy", lambda meta, d: {"d": float(d), "f2csa_bias": 0.05, "f2csa_rms": 0.1})
    ds = (100, 1000, 4000)
    per_it = {"f2csa": {d: 1e-3 * d for d in ds}, "ssigd": {d: 1e-6 * d ** 2 * 3 for d in ds},
              "dsblo": {d: 1e-6 * d ** 2 * 3 for d in ds}}
    runs = _timed_runs(run_data, per_it, {"f2csa": 100, "ssigd": 10, "dsblo": 10})
    meta, _ = _settings("full")
    rep = claims.CLAIMS["f2csa_fig2"](meta, runs, tmp_path)
    status = [v.status for v in rep.verdicts]
    # Crossover at d = 333 (outside [500, 2000]), ≥ 2× faster per iteration at 4000 (12×), F2CSA linear (and the
    # baselines are not: discriminating), the baselines quadratic; to the target F2CSA needs 10× the iterations:
    # 100 × 4 s = 400 s against 10 × 48 s = 480 s, 1.2× (< 2×).
    assert status[:5] == ["disagrees", "agrees", "agrees", "agrees", "disagrees"], rep.verdicts
    assert rep.verdicts[0].estimate.value == pytest.approx(1000 / 3)
    assert "d ≈ 333.3 (measured)" in rep.verdicts[0].measured
    assert rep.verdicts[1].estimate.value == pytest.approx(12.0)
    assert rep.verdicts[2].discriminating == "yes" and rep.verdicts[2].estimate.value == pytest.approx(1.0)
    assert "ssigd/f2csa = 1.2 (ssigd 480 s; f2csa 400 s)" in rep.verdicts[4].measured
    assert status[5] == "not measured"  # no d = 50 runs: Fig. 1 is not measured
    # The same runs judged against a study off the paper's box: the same directions, earned in a deviating setup.
    data = yaml.safe_load(spec.resolve("f2csa_scaling").read_text())
    data["problems"] = [{"name": "constrained_quadratic", "params": {"constraints": "linear", "p": 10, "noise": 0.01,
                                                                      "noise_model": "dense"}}]
    off = claims.CLAIMS["f2csa_fig2"](StudyRecord.from_study(spec.validate(data, scale="full")), runs, tmp_path)
    assert [v.status for v in off.verdicts] == status
    assert "constraints: not the paper's box" in off.verdicts[0].deviation
    assert "constraints" not in rep.verdicts[0].deviation and rep.verdicts[0].setting == "deviating setup"
    assert (tmp_path / "claim.png").stat().st_size > 1000


def test_oracle_accuracy_against_the_exact_gradient():
    # Exact oracles and converged loops: SSIGD's implicit gradient is ∇F itself (error at rounding level);
    # F2CSA's penalty oracle keeps its O(α) bias.
    data = dict(spec.load("f2csa_scaling", scale="ci").source)
    data["problems"] = [{"name": "constrained_quadratic", "params": {"constraints": "box", "noise": 0.0}}]
    data["axis"] = {"param": "d", "values": [12, 24]}
    data["algorithms"] = [{"name": "f2csa", "params": {"batch_size": None, "lower_max_iter": 3000, "inner_max_iter": 3000}},
                          {"name": "ssigd", "params": {"batch_size": None, "lower_solver": "primal_dual",
                                                       "pd_max_iter": 5000, "pd_tol": 1e-11}}]
    acc = f2csa_setup.oracle_accuracy(StudyRecord.from_study(spec.validate(data)), 12)
    assert acc["ssigd_bias"] < 1e-8 and acc["ssigd_rms"] < 1e-8
    assert 1e-4 < acc["f2csa_bias"] < 0.05  # measured 0.0049 at α = 0.1



def _fig1_runs(run_data, finals):
    """Runs at d = 50: label -> (final F, final ‖∇F‖² as a fraction of its start); F starts at 16, ‖∇F‖² at 100."""
    runs = []
    for lab, (f_end, ratio) in finals.items():
        recs = [{"iteration": 0, "time": 0.0, "calls/total": 0, "F": 16.0, "grad_F_sq": 100.0},
                {"iteration": 2000, "time": 4.0, "calls/total": 6000, "F": f_end, "grad_F_sq": 100.0 * ratio}]
        runs.append(run_data("constrained_quadratic", recs[-1], algorithm=lab, label=lab, axis=50, records=recs))
    return runs


def test_fig1_verdict_needs_runs_the_budget_let_converge(run_data, tmp_path, monkeypatch):
    monkeypatch.setattr(f2csa, "oracle_accuracy", lambda meta, d: {"d": float(d)})
    meta, _ = _settings("full")
    # All three converged (‖∇F‖² ≤ 0.1 × start); spread (6.5 − 6) / (16 − 6) = 0.05 ≤ 0.1: agrees.
    rep = claims.CLAIMS["f2csa_fig2"](meta, _fig1_runs(run_data, {"f2csa": (6.5, 0.05), "ssigd": (6.0, 0.01),
                                                                  "dsblo": (6.2, 0.02)}), tmp_path)
    fig1 = rep.verdicts[-1]
    assert fig1.status == "agrees" and "spread = 0.05 ×" in fig1.measured
    setup = {s.field: s for s in rep.settings}
    assert setup["iteration counts"].status.startswith("chosen: ") and "ssigd 0.01" in setup["iteration counts"].study
    # All converged, spread (10 − 6) / 10 = 0.4: a difference no deviation explains, disagrees.
    rep = claims.CLAIMS["f2csa_fig2"](meta, _fig1_runs(run_data, {"f2csa": (10.0, 0.1), "ssigd": (6.0, 0.01),
                                                                  "dsblo": (6.2, 0.02)}), tmp_path)
    assert rep.verdicts[-1].status == "disagrees"
    # SSIGD still at 0.92 × its start when the budget ends (the paper's β = 1e-4 here): a disagreement, earned
    # with a budget that the paper's converged runs did not have (named beside it).
    rep = claims.CLAIMS["f2csa_fig2"](meta, _fig1_runs(run_data, {"f2csa": (8.0, 0.3), "ssigd": (15.7, 0.92),
                                                                  "dsblo": (5.6, 0.0002)}), tmp_path)
    fig1 = rep.verdicts[-1]
    assert (fig1.status, fig1.setting) == ("disagrees", "deviating setup")
    assert fig1.estimate.value == pytest.approx((15.7 - 5.6) / (16 - 5.6))
    # F2CSA's stall at the paper's η = 1e-5 is its step size (x orbits the minimiser), not the budget: named in the
    # study column, not as a budget deviation; SSIGD's is the budget.
    assert fig1.deviation.endswith("iteration counts: the budget ends ssigd at d = 50 before ‖∇F‖² ≤ 0.1 × its "
                                   "start (the paper's runs converged)")
    study = {s.field: s for s in rep.settings}["iteration counts"].study
    assert "f2csa 0.3, ssigd 0.92, dsblo 0.0002 × its start" in study and "f2csa: F2CSA at the paper's η = 1e-5" in study
    assert "x orbits the minimiser" in study and "not the budget" in study
    # F2CSA alone short: no budget deviation at all.
    rep = claims.CLAIMS["f2csa_fig2"](meta, _fig1_runs(run_data, {"f2csa": (8.0, 0.3), "ssigd": (6.0, 0.01),
                                                                  "dsblo": (5.6, 0.0002)}), tmp_path)
    assert {s.field: s for s in rep.settings}["iteration counts"].deviation is None
    assert "iteration counts" not in rep.verdicts[-1].deviation


def test_the_fig1_stall_is_the_step_size_not_the_bias_or_the_noise():
    """Re-examined: F2CSA at d = 50 stops near F ≈ 8 with ‖∇F‖² ≈ 20-30 while DS-BLO converges. Without noise the
    same happens, and at the same α (so the same O(α) bias) η = 1e-3 converges: Alg. 2's Δ_{t+1} = clip_D(Δ_t − η g_t)
    integrates the gradient without damping, so at the paper's η = 1e-5 (D = 0.01) x orbits the minimiser."""
    import algorithms
    import problems

    def grad_sq(eta):
        p = problems.make("constrained_quadratic", seed=0, d=50, constraints="box", noise=0.0)
        recs = list(algorithms.run("f2csa", p, {"lower_max_iter": 35, "inner_max_iter": 35, "eta": eta}, seed=0,
                                   budget={"iterations": 600}, n_evals=30))
        return [r["grad_F_sq"] for r in recs], recs[-1]["F"]

    slow, f_slow = grad_sq(1e-5)
    fast, f_fast = grad_sq(1e-3)
    # Measured (read at 30 evaluation points): η = 1e-5 passes ‖∇F‖² = 7.0 at iteration 310, swings back to 45.6 at
    # 481 and ends at 28.0 (F = 8.75) after 600; η = 1e-3 ends at 0.056 (F = 5.802), and at 0.003 after 1,500.
    assert min(slow) == pytest.approx(6.96, rel=0.02) and slow[-1] == pytest.approx(28.0, rel=0.02)
    assert max(slow[slow.index(min(slow)):]) == pytest.approx(45.6, rel=0.02)  # it comes back up: an orbit, not a floor
    assert fast[-1] == pytest.approx(0.0557, rel=0.05) and f_fast == pytest.approx(5.802, abs=2e-3)
    assert f_slow == pytest.approx(8.754, rel=0.01)


def test_the_target_scale_times_the_target_with_an_iteration_budget():
    """`--scale target`: d = 1000 and 2000, F2CSA and DS-BLO, 1000 iterations and no seconds cap (compute seconds
    exclude evaluation, so evaluation never shortens a run)."""
    st = spec.load("f2csa_scaling", scale="target")
    assert (st.budget["iterations"], st.budget["seconds"]) == (1000, None)
    assert sorted({p.coords["axis"] for p in st.points}) == [1000, 2000]
    assert sorted({p.label for p in st.points}) == ["dsblo", "f2csa"]
    assert f2csa.TARGET_SCALE == "target"


# Measured with `bisweep run f2csa_scaling --scale target` (1 seed, CPU seconds of the stepping thread): the first
# evaluation point with ‖∇F‖² ≤ 0.1 × its start, as (iteration, seconds); None: not within 1000 iterations
# (then the run's end).
TARGET = {"f2csa": {1000: (788, 44.53), 2000: None}, "dsblo": {1000: (57, 4.674), 2000: (92, 33.65)}}
TARGET_END = {"f2csa": {2000: (1000, 207.0)}}  # ‖∇F‖² at 0.110 × its start after 1000 iterations


def test_time_to_target_at_d_2000_on_the_measured_seconds(run_data, tmp_path, monkeypatch):
    monkeypatch.setattr(f2csa, "oracle_accuracy", lambda meta, d: {"d": float(d)})
    runs = []
    for lab, by_d in TARGET.items():
        for d, hit in by_d.items():
            it, t = hit or TARGET_END[lab][d]
            recs = [{"iteration": 0, "time": 0.0, "calls/total": 0, "F": 10.0, "grad_F_sq": 1.0},
                    {"iteration": it, "time": t, "calls/total": 3 * it, "F": 5.0, "grad_F_sq": 0.05 if hit else 0.5}]
            runs.append(run_data("constrained_quadratic", recs[-1], algorithm=lab, label=lab, axis=d, records=recs))
    meta, _ = _settings("target")
    rep = claims.CLAIMS["f2csa_fig2"](meta, runs, tmp_path)
    v = next(v for v in rep.verdicts if "sooner" in v.claim)
    # DS-BLO reaches the target at d = 2000; F2CSA does not within 1000 iterations, which already cost more than
    # DS-BLO's seconds to it: dsblo/f2csa ≤ 33.65/207 < 2, 'disagrees' by the one rule; d = 2000 < the paper's 4000
    # is a setup fact, named in the deviations, not in the label.
    assert v.status == "disagrees", v
    assert (v.estimate.low, v.estimate.high) == (0.0, pytest.approx(33.65 / 207))
    assert v.measured.startswith("at d = 2000: dsblo/f2csa = ≤ 0.1626 (dsblo 33.65 s; f2csa not within its budget "
                                 "(> 207 s))"), v.measured
    assert v.setting == "deviating setup" and "dimensions: d only up to 2000" in v.deviation
    assert "ssigd not run" in v.measured
    # The setup rows describe the methods the scale runs: the paper's step sizes and solver, no deviation for them.
    rows = {s.field: s for s in rep.settings}
    assert rows["step sizes"].deviation is None and "SSIGD" not in rows["step sizes"].study
    assert rows["inner-loop policy"].deviation is None and "DS-BLO: primal_dual (35 steps)" in rows["inner-loop policy"].study


# ---------------------------------------------------------------- the paper's open choices, run both ways
def test_the_inner_c_scale_runs_remark41_at_c_half_one_two_for_every_method():
    meta, rows = _settings("inner_c")
    cfg = {p["label"]: p["algorithm_params"] for p in meta.points}
    for c, suffix in ((0.5, "_c0.5"), (1.0, ""), (2.0, "_c2")):
        n = f2csa_setup.remark41_length(0.1, c)
        assert n == {0.5: 18, 1.0: 35, 2.0: 70}[c]
        assert (cfg[f"f2csa{suffix}"]["lower_max_iter"], cfg[f"f2csa{suffix}"]["inner_max_iter"]) == (n, n)
        assert cfg[f"ssigd{suffix}"]["pd_max_iter"] == cfg[f"dsblo{suffix}"]["pd_max_iter"] == n
    assert rows["inner-loop policy"].status == "chosen: c ∈ {0.5, 1, 2}, κ_g = 5"
    assert "c = 0.5: dsblo 18, f2csa 18 + 18, ssigd 18 steps; c = 2: dsblo 70, f2csa 70 + 70, ssigd 70 steps" \
        in rows["inner-loop policy"].study


def test_each_c_is_judged_against_the_baselines_of_the_same_c(run_data, tmp_path, monkeypatch):
    # F2CSA costs 1e-3·c·d per iteration, the baselines 3e-6·d² whatever c: the crossover is at d = 333·c, so only
    # c = 2 (667) lies in "near 1000" = [500, 2000].
    monkeypatch.setattr(f2csa, "oracle_accuracy", lambda meta, d: {"d": float(d)})
    ds = (100, 250, 500, 1000, 2000)
    per_it = {}
    for c, sfx in ((0.5, "_c0.5"), (1.0, ""), (2.0, "_c2")):
        per_it[f"f2csa{sfx}"] = {d: 1e-3 * c * d for d in ds}
        per_it[f"ssigd{sfx}"] = per_it[f"dsblo{sfx}"] = {d: 3e-6 * d ** 2 for d in ds}
    meta, _ = _settings("inner_c")
    rep = claims.CLAIMS["f2csa_fig2"](meta, _timed_runs(run_data, per_it, {lab: 10 for lab in per_it}), tmp_path)
    cross = {v.claim.split(":")[0]: v for v in rep.verdicts if v.criterion == "f2csa_crossover"}
    assert {k: v.status for k, v in cross.items()} == {"f2csa_c0.5": "disagrees", "f2csa": "disagrees", "f2csa_c2": "agrees"}
    for lab, c in (("f2csa_c0.5", 0.5), ("f2csa", 1.0), ("f2csa_c2", 2.0)):
        assert cross[lab].estimate.value == pytest.approx(1000 / 3 * c, rel=1e-9)
    suffix = {"f2csa_c0.5": "_c0.5", "f2csa": "", "f2csa_c2": "_c2"}
    assert all(f"vs ssigd{suffix[k]}:" in v.measured and f"vs dsblo{suffix[k]}:" in v.measured for k, v in cross.items())
    table = rep.tables["crossover_by_c"]
    assert [(r["c"], r["steps"], r["verdict"]) for r in table] == [("0.5", "18 + 18", "disagrees"), ("1", "35 + 35", "disagrees"),
                                                                  ("2", "70 + 70", "agrees")]
    assert table[2]["crossover_vs_ssigd"] == pytest.approx(2000 / 3)
    assert "c = 0.5: d ≈ 166.7, 166.7 → disagrees; c = 1: d ≈ 333.3, 333.3 → disagrees; c = 2: d ≈ 666.7, 666.7 → agrees" \
        in rep.setup


def test_fig1_scale_runs_the_box_and_the_file_names_ten_linear_rows_side_by_side(run_data, tmp_path, monkeypatch):
    monkeypatch.setattr(f2csa, "oracle_accuracy", lambda meta, d: {"d": float(d)})
    meta, rows = _settings("fig1")
    assert {(p["problem_params"]["constraints"], p["problem_params"]["p"]) for p in meta.points} == \
        {("box", 10), ("linear", 10)}
    assert meta.seeds == [1234]
    assert rows["constraints"].status == "same" and rows["constraints"].study.startswith("both: box")
    runs = []
    for kind, finals in (("box", {"f2csa": (6.5, 0.05), "ssigd": (6.0, 0.01), "dsblo": (6.2, 0.02)}),
                         ("linear", {"f2csa": (12.0, 0.05), "ssigd": (6.0, 0.01), "dsblo": (6.2, 0.02)})):
        for r in _fig1_runs(run_data, finals):
            r.point["coords"]["grid"] = {"problem.constraints": kind}
            r.point["problem_params"] = {"constraints": kind, "p": 10}
            runs.append(r)
    rep = claims.CLAIMS["f2csa_fig2"](meta, runs, tmp_path)
    fig1 = {v.claim: v.status for v in rep.verdicts if v.criterion == "f2csa_fig1"}
    assert fig1 == {"Fig. 1 (d = 50, constrained_quadratic(constraints=box)): the paper's three configurations reach "
                    "similar final F (spread ≤ 0.1 × the largest decrease)": "agrees",
                    "Fig. 1 (d = 50, constrained_quadratic(constraints=linear)): the paper's three configurations reach "
                    "similar final F (spread ≤ 0.1 × the largest decrease)": "disagrees"}
    assert {r["problem"] for r in rep.tables["fig1_d50"]} == {"constrained_quadratic(constraints=box)",
                                                              "constrained_quadratic(constraints=linear)"}


def test_the_oracle_accuracy_at_each_inner_loop_constant():
    # At d = 20 (seed 0, x ~ N(0, 0.25 I) seed 1): halving c to 18 + 18 steps leaves F2CSA's oracle off by 200 %,
    # doubling it to 70 + 70 brings the bias from 11 % to 7.5 %; the baselines' implicit gradients stay near 0.5 %.
    meta = StudyRecord.from_study(spec.load("f2csa_scaling", scale="inner_c"))
    acc = f2csa_setup.oracle_accuracy(meta, 20)
    assert acc["f2csa_c0.5_bias"] == pytest.approx(2.0012, rel=1e-3)
    assert acc["f2csa_bias"] == pytest.approx(0.1075, rel=1e-2) and acc["f2csa_c2_bias"] == pytest.approx(0.075, rel=1e-2)
    assert all(acc[f"{b}{c}_bias"] < 0.01 for b in ("ssigd", "dsblo") for c in ("", "_c0.5", "_c2"))


def test_the_crossover_interval_is_a_bootstrap_over_seeds_by_hand():
    """F2CSA costs 1 at d = 100 and 1000; a baseline 0.5 at 100 and b at 1000, b = 2, 4, 8 on three seeds. The crossing
    of the medians is at 100·10^w, w = ln 2 / (ln 2 + ln b): 215.4 at the median b = 4; the 27 resamples' medians of b
    range over 2 … 8, so the interval runs from 100·10^(1/4) = 177.8 (b = 8) to 100·10^(1/2) = 316.2 (b = 2)."""
    ds = [100.0, 1000.0]
    e, how = f2csa.seeded_crossover(ds, [[1.0, 1.0]] * 3, [[0.5, b] for b in (2.0, 4.0, 8.0)])
    assert how == "measured"
    assert (e.value, e.low, e.high) == pytest.approx((100 * 10 ** (1 / 3), 100 * 10 ** 0.25, 100 * 10 ** 0.5))
    assert f2csa.CROSS_C.judge([e]) == "disagrees"  # wholly below 500


def test_the_sensitivity_rows_show_the_crossover_at_each_c():
    """Only c = 1 run: its row with the verdict; c = 0.5 and 2 name the scale that runs them."""
    from sweep.claims.f2csa_crossover import sensitivity_rows
    rows = sensitivity_rows([{"c": "1", "bounds_vs_ssigd": "333.3", "verdict": "disagrees"}])
    assert [(r["value"], r["verdict"]) for r in rows] == [("c = 0.5", "not measured"), ("c = 1", "disagrees"),
                                                          ("c = 2", "not measured")]
    assert rows[1]["measured [95%]"] == "vs ssigd d ≈ 333.3" and "--scale inner_c" in rows[0]["measured [95%]"]
