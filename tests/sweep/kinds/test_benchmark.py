"""The benchmark kind: its expansion (equal trials per algorithm, reproducible from the seed, held-out seeds
disjoint from the tuning seeds), its one-line errors, and its report tables on constructed results checked
against hand computations (and scipy for the paired test)."""
import copy
import math
from collections import Counter

import numpy as np
import pandas as pd
import pytest
from scipy import stats

import algorithms
from sweep.compare import statistics, tuning
from sweep.report.build import build_report
from sweep.study import spec

STUDY = {"name": "bench", "kind": "benchmark",
         "axis": {"trials": 2, "studies": 2, "budgets": {"small": 1, "large": 2}, "held_out": [2, 3, 4, 5],
                  "tune_on": "final"},
         "problems": [{"name": "quadratic", "params": {"dim_x": 3, "dim_y": 3, "n_samples": 8}}],
         "algorithms": [{"name": "soba"}, {"name": "aid_cg"}], "seeds": 6, "budget": {"oracle_calls": 300},
         "n_evals": 4}


def study(**axis):
    data = copy.deepcopy(STUDY)
    data["axis"].update(axis)
    return spec.validate(data)


def slots(st, label):
    return sorted(tuple(s) for p in st.points if p.label == label for s in p.coords["tuning"])


# ---------------------------------------------------------------- expansion
def test_the_kinds_restated_constants_are_the_comparison_machinerys():
    from sweep.compare import adaptive, profiles
    from sweep.kinds.benchmark import kind as benchmark

    assert benchmark.SAMPLERS == tuning.METHODS and benchmark.TAUS == profiles.TAUS
    assert benchmark.ADAPTIVE == adaptive.SAMPLERS
    from problems.counting import ORACLE_KINDS
    from sweep.kinds.benchmark import numbers as bench

    assert benchmark.BUDGET_NAMES == bench.BUDGETS and tuple(benchmark.Weights.model_fields) == ORACLE_KINDS
    assert benchmark.TUNE_ON == bench.TUNE_ON


def test_oracle_weights_and_the_primary_comparison_are_the_studys():
    from sweep.kinds.benchmark import numbers as bench, report

    st = study(weights={"hvp": 2, "cross": 3}, primary={"budget": "small", "tau": 1.0e-5})
    w = bench.weights(st.axis)
    assert (w["hvp"], w["cross"], w["grad_g"]) == (2.0, 3.0, 1.0)
    record = {"calls/grad_g": 10, "calls/hvp": 4, "calls/cross": 1}
    assert bench.profiles.gradient_equivalents(record, w) == 10 + 2 * 4 + 3 * 1
    assert "hvp 2, cross 3" in report.weights_note(st.axis)
    assert report.primary(st.axis) == ("all", "small", 1e-5)
    assert report.primary(study().axis) == ("all", "large", 1e-3)  # the middle τ by default


def test_every_algorithm_gets_the_same_slots_and_the_draws_of_the_protocol():
    data = copy.deepcopy(STUDY)
    data["axis"] = {"trials": 5, "studies": 3, "seed": 7, "held_out": 2, "sampler": "halton"}
    data["algorithms"] = [{"name": "soba"}, {"name": "aid_cg", "params": {"inner_steps": 5}}, {"name": "f2ba"}]
    st = spec.validate(data)
    want = [(s, t) for s in (1, 2, 3) for t in range(6)]  # trial 0 (one-shot) and 5 draws per study
    for label in ("soba", "aid_cg", "f2ba"):
        assert slots(st, label) == want
    assert st.axis["budgets"] == {"small": 1, "large": 5}  # defaults: trials // 4 (at least 1), trials
    for p in st.points:
        cls = algorithms.get(p.algorithm)
        fixed = {"inner_steps": 5} if p.label == "aid_cg" else {}
        for s, t in p.coords["tuning"]:
            if t == 0:
                tuned = tuning.one_shot(p.algorithm, fixed)
            else:
                tuned = tuning.sample_configurations(p.algorithm, 5, tuning.study_seed(7, s), "halton", fixed)[t - 1]
            assert {k: p.algorithm_params[k] for k in tuned} == tuned
        assert p.algorithm_params == cls.Config.from_dict({**p.algorithm_params}).as_dict()
        if p.label == "aid_cg":
            assert p.algorithm_params["inner_steps"] == 5  # fixed by the user, never tuned
    # One point per distinct configuration: the paper default fills trial 0 of every study.
    one_shot = [p for p in st.points if p.label == "soba" and (1, 0) in map(tuple, p.coords["tuning"])]
    assert len(one_shot) == 1 and sorted(map(tuple, one_shot[0].coords["tuning"])) == [(1, 0), (2, 0), (3, 0)]
    assert len([p for p in st.points if p.label == "soba"]) == 1 + 3 * 5


def test_the_readme_benchmark_block_validates_as_written():
    """The README's `kind: benchmark` block, completed with a study's required fields, expands as it says."""
    import re
    from pathlib import Path

    import yaml

    from tests import documents

    readme = documents.text()
    (block,) = re.findall(r"```yaml\n(kind: benchmark\n.*?)```", readme, re.S)
    data = {**yaml.safe_load(block), "name": "readme_bench", "problems": STUDY["problems"],
            "algorithms": STUDY["algorithms"], "budget": STUDY["budget"]}
    st = spec.validate(data)
    assert st.seeds == [0, 1, 2, 3, 4] and st.axis["budgets"] == {"small": 2, "large": 8}
    for label in ("soba", "aid_cg"):  # trial 0 (the paper default) and 8 draws in each of 3 studies
        assert slots(st, label) == [(s, t) for s in (1, 2, 3) for t in range(9)]


def test_the_expansion_is_reproducible_from_its_seed_and_changes_with_it():
    params = lambda st: [p.algorithm_params for p in st.points]  # noqa: E731
    assert params(study(seed=3)) == params(study(seed=3))
    assert [p.key for p in study(seed=3).points] == [p.key for p in study(seed=3).points]
    assert params(study(seed=3)) != params(study(seed=4))


@pytest.mark.parametrize("seed", range(5))
def test_held_out_seeds_never_tune(seed):
    data = copy.deepcopy(STUDY)
    data["axis"] = {"trials": 1, "studies": 1, "held_out": 3, "seed": seed}
    data["seeds"] = [10, 11, 12, 13, 14, 15, 16]
    st = spec.validate(data)
    tune, held = st.axis["tune"], st.axis["held_out"]
    assert not set(tune) & set(held) and sorted(tune + held) == st.seeds and len(held) == 3
    assert (tune, held) == tuning.split_seeds(st.seeds, 3, seed)
    assert st.instance_seed is None and all(p.instance_seed is None for p in st.points)  # seeds build instances
    listed = study(held_out=[1, 4])
    assert listed.axis["held_out"] == [1, 4] and listed.axis["tune"] == [0, 2, 3, 5]


@pytest.mark.parametrize("change, path, words", [
    ({"axis": {"trials": 2, "budgets": {"large": 3}}}, "axis", ("small <= large <= trials",)),
    ({"axis": {"held_out": 6}}, "axis.held_out", ("at least one",)),
    ({"axis": {"held_out": [7]}}, "axis.held_out", ("not one of the study's seeds",)),
    ({"axis": {"held_out": 0}}, "axis.held_out", ("positive number",)),
    ({"axis": {"sampler": "grid"}}, "axis.sampler", ("sobol, halton, optuna",)),
    ({"axis": {"batch": 2}}, "axis", ("batch: only an adaptive sampler (optuna)",)),
    ({"axis": {"trials": 2, "sampler": "optuna", "batch": 3}}, "axis", ("batch <= trials (2)",)),
    ({"axis": {"sampler": "optuna", "batch": 0}}, "axis.batch", ("positive integer",)),
    ({"axis": {"taus": [0.1, 1.5]}}, "axis.taus[1]", ("(0, 1)",)),
    ({"axis": {"metric": "y_err_sq"}}, "axis.metric", ("F, grad_F_sq",)),
    ({"axis": {"trial": 3}}, "axis.trial", ("unknown field",)),
    ({"instance_seed": 0}, "instance_seed", ("must be null",)),
    ({"axis": {"weights": {"hvp": 0}}}, "axis.weights.hvp", ("positive number",)),
    ({"axis": {"tune_on": "best"}}, "axis.tune_on", ("time_to_target, final",)),
    ({"axis": {"sampler": "optuna", "tune_on": "time_to_target"}}, "axis", ("tune_on: final",)),
    ({"axis": {"primary": {"tau": 0.5}}}, "axis", ("primary.tau", "one of the taus")),
    ({"axis": {"primary": {"problem": "quad"}}}, "axis.primary.problem", ("quadratic",)),
    ({"algorithms": [{"name": "soba", "params": {"rho": [0.1, 0.2]}}]}, "algorithms[0].params.rho", ("one value",)),
    ({"algorithms": [{"name": "saba"}], "problems": [{"name": "quadratic", "params": {"dim_x": 3, "dim_y": 3}}]},
     "algorithms[0].problems", ("finite-sum",)),
])
def test_bad_protocols_are_one_line_errors(spec_error, change, path, words):
    spec_error({**copy.deepcopy(STUDY), **change}, path, *words)


# ---------------------------------------------------------------- the report on constructed results
#: Final F of each configuration on the tuning instances, by (study, trial); (0, 0): the paper default.
FINALS = {"soba": {(0, 0): 5.0, (1, 1): 3.0, (1, 2): 2.0, (2, 1): 4.0, (2, 2): 1.0},
          "aid_cg": {(0, 0): 8.0, (1, 1): 6.0, (1, 2): 7.0, (2, 1): 9.0, (2, 2): 5.0}}


def final_f(point, seed, held):
    s, t = point.coords["tuning"][0]
    v = FINALS[point.label][(0, 0) if t == 0 else (s, t)]
    return 2 * v if seed in held else v + (-0.5 if seed == 0 else 0.5)  # tuning score: the mean, v


def records(point, seed, held, exact=True):
    """F from 10 (F_gap = F: optimum 0, unless not `exact`); soba passes 0.1 v (v: the configuration's tuning
    score) at 100 + 10 s + seed gradient-equivalents, aid_cg reaches 0.9 at 200 + 10 s + 3 seed (s: the point's
    first tuning study); every run ends at 300 calls."""
    s, t = point.coords["tuning"][0]
    if point.label == "soba":
        path = [(0, 10.0), (100 + 10 * s + seed, 0.1 * FINALS["soba"][(0, 0) if t == 0 else (s, t)]), (250, 0.5)]
    else:
        path = [(0, 10.0), (100, 2.0), (200 + 10 * s + 3 * seed, 0.9)]
    path.append((300, final_f(point, seed, held)))
    return [{"iteration": i, "status": "finished" if i == len(path) - 1 else "running", "F": f,
             **({"F_gap": f} if exact else {}), "calls/grad_g": c, "calls/total": c, "samples/total": 8 * c,
             "time": c / 100} for i, (c, f) in enumerate(path)]


def report_study(exact=True):
    """Seven held-out instances (enough for one pair: 2/2^7 < 0.05), two tuning instances (0, 1); without an
    exact optimum the study gives F_L = 0.1 (the best value any run reaches: a reference solve of the quadratic
    would find the instance's true optimum, which these constructed records do not follow)."""
    data = copy.deepcopy(STUDY)
    data["seeds"], data["axis"]["held_out"] = 9, list(range(2, 9))
    if not exact:
        data["axis"]["reference"] = {"quadratic": 0.1}
    return spec.validate(data)


def write(tmp, write_synthetic, exact=True):
    st = report_study(exact)
    held = st.axis["held_out"]
    write_synthetic(st, tmp, lambda p, s: ("finished", records(p, s, held, exact)[-1]),
                    lambda p, s: records(p, s, held, exact))
    return st, build_report(tmp, quiet=True)


@pytest.fixture(scope="module")
def built(tmp_path_factory, write_synthetic):
    """No exact optimum: F_L is the study's reference value, the best value any run reached on the instance."""
    return write(tmp_path_factory.mktemp("bench"), write_synthetic, exact=False)


def test_tuning_table_is_the_median_over_studies_of_each_studys_best(built, read_csv):
    _, rep = built
    rows = {(r["algorithm"], r["budget"]): r for r in rep.tables["tuning"]}
    # soba: one-shot 5; small: best of trial 1 = (3, 4) -> 3.5; large: best of trials 1..2 = (2, 1) -> 1.5.
    # Held-out finals are 2v, so the held-out median doubles the tuning median, and the gap is v.
    want = {("soba", "one-shot"): (5.0, 5.0, 10.0, 5.0), ("soba", "small"): (3.5, 3.25, 7.0, 3.5),
            ("soba", "large"): (1.5, 1.25, 3.0, 1.5), ("aid_cg", "one-shot"): (8.0, 8.0, 16.0, 8.0),
            ("aid_cg", "small"): (7.5, 6.75, 15.0, 7.5), ("aid_cg", "large"): (5.5, 5.25, 11.0, 5.5)}
    for key, (median, q25, held, gap) in want.items():
        r = rows[key]
        assert (r["tune_median"], r["tune_q25"], r["held_out_median"], r["gap_median"]) == (median, q25, held, gap)
        assert r["n_studies"] == 2
    # Cost: 300 calls (3 s) per run, 2 tuning instances, 2 studies, k trials each (one-shot: 1).
    for label in ("soba", "aid_cg"):
        for budget, trials in (("one-shot", 2), ("small", 2), ("large", 4)):
            r = rows[(label, budget)]
            assert (r["tuning_trials"], r["tuning_calls"], r["tuning_seconds"]) == (trials, trials * 600,
                                                                                      pytest.approx(trials * 6))
            assert r["tuning_samples"] == trials * 600 * 8  # 8 samples per gradient-equivalent
    assert (rep.directory / "tuning.csv").exists()
    chosen = {(r["algorithm"], r["budget"], r["study"]): int(r["trial"])
              for r in read_csv(rep.directory / "choices.csv")}
    assert chosen[("soba", "large", "1")] == 2 and chosen[("aid_cg", "large", "1")] == 1
    assert chosen[("aid_cg", "large", "2")] == 2 and chosen[("soba", "small", "2")] == 1
    # Held-out finals are 2v, so the trial best on tuning is best on held-out too: no regret, except where the
    # study could not see it. aid_cg study 1 at the large budget chose trial 1 (v = 6) over trial 2 (v = 7):
    # held-out 12 against 14, regret 0. One-shot has one candidate: regret 0.
    regret = {(r["algorithm"], r["budget"], r["study"]): float(r["regret"])
              for r in read_csv(rep.directory / "choices.csv")}
    assert set(regret.values()) == {0.0}
    assert {r["regret_median"] for r in rep.tables["tuning"]} == {0.0}


def test_ranking_tests_instances_with_the_exact_p_and_hierarchical_intervals(built, read_csv):
    st, rep = built
    rows = read_csv(rep.directory / "ranking.csv")
    large = {r["algorithm"]: r for r in rows if r["problem"] == "quadratic" and r["budget"] == "large"
             and float(r["tau"]) == 0.1}
    held = st.axis["held_out"]
    soba = [[100 + 10 * s + i for s in (1, 2)] for i in held]  # per held-out instance: its two studies
    aid = [[200 + 10 * s + 3 * i for s in (1, 2)] for i in held]
    assert float(large["soba"]["calls_median"]) == np.median([np.median(g) for g in soba]) == 120.0
    assert float(large["aid_cg"]["calls_median"]) == np.median([np.median(g) for g in aid]) == 230.0
    assert (large["soba"]["instances"], large["soba"]["runs"]) == ("7", "14")
    m, lo, hi = statistics.bootstrap_median(soba, seed=0)
    assert (float(large["soba"]["calls_low"]), float(large["soba"]["calls_high"])) == pytest.approx((lo, hi), rel=1e-9)
    assert float(large["soba"]["seconds_median"]) == pytest.approx(1.2)
    assert float(large["soba"]["samples_median"]) == 960.0  # 8 samples per gradient-equivalent
    # The 7 instance differences are all positive: the exact p is 2/2^7 (one pair: Holm leaves it).
    p = 2 / 2**7
    pair = [r for r in read_csv(rep.directory / "pairwise.csv") if r["problem"] == "quadratic"
            and r["budget"] == "large" and float(r["tau"]) == 0.1]
    assert len(pair) == 1 and float(pair[0]["p_holm"]) == pytest.approx(p, rel=1e-12)
    assert (pair[0]["a"], pair[0]["b"], pair[0]["units"]) == ("aid_cg", "soba", "7")
    # soba wins on every instance: P(aid_cg beats soba) = 0, its interval [0, 0]; the sign test's p is 2/2^7.
    assert (pair[0]["wins"], pair[0]["losses"], pair[0]["ties"]) == ("0", "7", "0")
    assert [float(pair[0][k]) for k in ("p_beats", "p_beats_low", "p_beats_high")] == [0.0, 0.0, 0.0]
    assert pair[0]["test"] == "exact sign test on instance wins (ties dropped)"
    # Every run hits at τ = 0.1: ERT = Σ costs / (14 hits + ½) on each side.
    aid_sum, soba_sum = sum(sum(g) for g in aid), sum(sum(g) for g in soba)
    assert float(pair[0]["log_ert_ratio"]) == pytest.approx(math.log(aid_sum / soba_sum), rel=1e-12)
    assert float(pair[0]["log_ert_low"]) <= float(pair[0]["log_ert_ratio"]) <= float(pair[0]["log_ert_high"])
    assert pair[0]["family"] == "per-problem pairs at budget large, τ 0.1"
    assert (large["soba"]["rank_calls"], large["aid_cg"]["rank_calls"]) == ("1", "2")
    assert large["soba"]["better_calls"] == f"aid_cg (p={p:.2g})" and large["aid_cg"]["worse_calls"].startswith("soba")
    # τ = 1e-3 (F <= 0.1 + 1e-3 · 9.9): only soba's study-2 choice reaches it, so on every instance the median
    # over the two studies is +inf for both: all ties, nothing ranked.
    small_tau = {r["algorithm"]: r for r in rows if r["budget"] == "large" and float(r["tau"]) == 1e-3}
    assert (small_tau["soba"]["reached"], small_tau["aid_cg"]["reached"]) == ("7", "0")
    assert all(r["calls_median"] == "inf" and r["rank_calls"] == "1" for r in small_tau.values())
    # One-shot: every study chose the same configuration, so study 1 only: 7 instances, one run each.
    one = [r for r in rows if r["budget"] == "one-shot" and float(r["tau"]) == 0.1]
    assert {(r["instances"], r["runs"]) for r in one} == {("7", "7")}
    power = {(r["budget"], float(r["tau"])): r for r in read_csv(rep.directory / "power.csv")}
    assert power[("large", 0.1)]["significant"] == "True" and float(power[("large", 0.1)]["p_holm"]) == p
    assert power[("large", 0.1)]["instances_needed"] == "7"  # significant with the 7 it has
    # τ = 1e-3: nobody reaches it on any instance (medians over studies): all ties, no effect to power.
    assert power[("large", 0.001)]["instances_needed"] == "no effect observed"


def test_a_group_too_small_for_significance_gets_effects_and_instances_needed_beyond_it(tmp_path):
    from sweep.kinds.benchmark import report

    # 4 instances, soba cheaper on 3, aid_cg on 1: sign test p = 0.625, not significant; the effect is finite.
    costs = pd.DataFrame([{"problem": "quadratic", "instance": i, "seed": 1, "algorithm": a, "tau": 0.1,
                           "calls": 100.0 + i + (50 if (a == "aid_cg") != (i == 0) else 0), "samples": math.nan,
                           "seconds": 1.0, "spent": 300.0} for i in range(4) for a in ("aid_cg", "soba")])
    ranks, pairs, power = report.ranking(costs, "large", 0)
    row = pairs.iloc[0]
    assert (row["wins"], row["losses"], row["p"]) == (1, 3, pytest.approx(0.625))
    assert row["p_beats"] == 0.25 and np.isfinite(pairs[["p_beats_low", "p_beats_high", "log_ert_ratio",
                                                         "log_ert_low", "log_ert_high"]].to_numpy(float)).all()
    assert set(ranks["rank_calls"]) == {1}
    need = power.iloc[0]["instances_needed"]
    assert int(need) > 4 and "not significant" in power.iloc[0]["power"]
    report.write_frame(tmp_path / "pairwise.csv", pairs.iloc[:0], report.PAIRWISE)
    assert (tmp_path / "pairwise.csv").read_text() == ",".join(report.PAIRWISE) + "\n"


def test_one_target_per_instance_for_every_algorithm_and_budget(built, read_csv):
    # No exact optimum: F_L is the study's reference, 0.1, the best value any run reached (soba's configuration
    # (2, 2), chosen only by study 2 at the large budget). The one-shot choice reaches 0.5, so at τ = 1e-3
    # (target 0.1 + 1e-3 · 9.9) it never solves, though it would set its own F_L if only its runs counted.
    st, rep = built
    targets = read_csv(rep.directory / "targets.csv")
    assert {(r["lower"], r["lower_source"]) for r in targets} == {("0.1", "given in the study (axis reference)")}
    assert len(targets) == 9  # every instance, tuning ones too
    rows = [r for r in read_csv(rep.directory / "ranking.csv") if float(r["tau"]) == 1e-3 and r["algorithm"] == "soba"]
    reached = {r["budget"]: int(r["reached"]) for r in rows}
    assert reached == {"one-shot": 0, "small": 0, "large": 7}  # large: study 2's choice on the 7 instances
    ert = {(r["budget"], float(r["tau"]), r["algorithm"]): r for r in read_csv(rep.directory / "ert.csv")}
    # 7 successes at 100 + 20 + i, 7 failures charged what they spent: 300 calls each
    want = (sum(120 + i for i in st.axis["held_out"]) + 7 * 300) / 7
    assert float(ert[("large", 0.001, "soba")]["ert_calls"]) == pytest.approx(want, rel=1e-12)
    assert float(ert[("large", 0.001, "soba")]["ert_samples"]) == pytest.approx(8 * want, rel=1e-12)
    assert ert[("one-shot", 0.001, "soba")]["ert_calls"] == "inf"


def test_profiles_and_figures_are_written(built, read_csv):
    _, rep = built
    for name in ("performance_profile", "data_profile", "performance_profile_seconds", "data_profile_seconds",
                 "performance_profile_samples", "convergence_quadratic",
                 "runtime_ecdf", "tuning_curve"):
        assert (rep.directory / f"{name}.png").read_bytes()[:4] == b"\x89PNG"
    prof = read_csv(rep.directory / "profiles.csv")
    perf = {(r["algorithm"], float(r["x"])): float(r["fraction"]) for r in prof
            if r["profile"] == "performance" and r["cost"] == "calls" and float(r["tau"]) == 0.1}
    # soba is the best on every unit (ratio 1); aid_cg's ratios aid/soba all lie in (1.8, 2).
    assert perf[("soba", 1.0)] == 1.0 and perf[("aid_cg", 1.0)] == 0.0
    ratios = sorted(x for (a, x), f in perf.items() if a == "aid_cg" and x > 1 and f == 1.0)
    assert 1.8 < ratios[0] < 2.0
    assert Counter(r["profile"] for r in prof)["data"] > 0 and not math.isnan(ratios[0])


def test_held_out_regret_against_the_studys_best_trial_there():
    from sweep.kinds.benchmark import numbers as bench

    held = pd.DataFrame([{"problem": "q", "algorithm": "a", "study": 1, "trial": t, "instance": i, "score": v}
                         for t, values in ((0, (2.0, 2.0)), (1, (3.0, 5.0)), (2, (1.0, 1.0)))
                         for i, v in zip((7, 8), values)])
    chosen = pd.DataFrame([{"problem": "q", "algorithm": "a", "study": 1, "trials": k, "trial": t}
                           for k, t in ((0, 0), (1, 1), (2, 1), (2, 2))])
    # trial means on held-out instances: 2 (one-shot), 4, 1; choosing trial 1 of 2 costs 4 − 1 = 3
    assert bench.regret(chosen, held, "min")["regret"].tolist() == [0.0, 0.0, 3.0, 0.0]
    # goal max: trial 1 (mean 4) is the best of 1..2, so choosing trial 2 costs 3
    assert bench.regret(chosen, held, "max")["regret"].tolist() == [0.0, 0.0, 0.0, 3.0]


def test_tuning_on_time_to_target_scores_calls_to_the_primary_target(built):
    from sweep.kinds.benchmark import numbers as bench
    from sweep.report.build import load_runs
    from sweep.results.store import ResultStore

    _, rep = built
    store = ResultStore(rep.directory.parent)
    meta = store.read_study()
    runs = load_runs(store, meta)
    axis = {**meta.axis, "tune_on": "time_to_target"}
    frame, bounds = bench.run_frame(runs, meta), bench.instance_bounds(runs, axis)
    tuned, goal = bench.tuning_frame(frame, runs, axis, bounds, "min")
    # Primary τ = 1e-3: target 0.1 + 1e-3 · 9.9, reached only by soba's (2, 2) configuration, at 100 + 20 + seed.
    reached = tuned[tuned["score"] < math.inf]
    assert goal == "min" and set(zip(reached["algorithm"], reached["study"], reached["trial"])) == {("soba", 2, 2)}
    # Censored runs are charged their spend, not +inf: the score is the configuration's ERT over a split. Here
    # every run of (2, 2) hits: tuning instances 0, 1 at 120, 121 (ERT 120.5), held-out 2..8 at 122..128 (125).
    assert sorted(reached["score"]) == [120.5] * 2 + [125.0] * 7
    held = frame["instance"].isin(axis["held_out"])
    mean_final = frame["score"].groupby([frame["key"], held]).transform("mean")
    np.testing.assert_array_equal(tuned["tiebreak"], mean_final)  # mean final F as the second key
    # ERT against a hand computation where a configuration hits on one instance only: soba (1, 2) final v = 2.
    one = pd.DataFrame({"key": ["k", "k"], "instance": [0, 1], "calls": [300.0, 250.0]})
    assert bench.runtime.ert([120.0, math.inf], one["calls"].to_numpy()) == (120 + 250) / 1
    chosen = bench.choices(tuned, axis, goal).set_index(["algorithm", "budget", "study"])
    assert chosen.loc[("soba", "large", 2), ["trial", "tune_score"]].tolist() == [2, 120.5]
    # Study 1 never reaches the target: every trial +inf, the lower final value (trial 2, v = 2) is kept.
    assert chosen.loc[("soba", "large", 1), ["trial", "tune_score"]].tolist() == [2, math.inf]
    assert chosen.loc[("aid_cg", "large", 1), "trial"] == 1  # v = 6 before 7, as on final values
    # What decided each choice, as choices.csv and tuning.csv say it.
    assert chosen.loc[("soba", "large", 2), "rule"] == "ERT to the primary target"
    assert chosen.loc[("soba", "large", 1), "rule"] == "final value (no hit)"
    assert set(chosen.xs("one-shot", level="budget")["rule"]) == {"only candidate"}
    # Both censored (no hit on held-out or tuning instances): regret undefined, not 0.
    assert math.isnan(chosen.loc[("aid_cg", "large", 1), "regret"])
    data = copy.deepcopy(STUDY)
    del data["axis"]["tune_on"]
    assert spec.validate(data).axis["tune_on"] == "time_to_target"  # the default: what the ranking scores
    data["axis"]["sampler"] = "optuna"
    assert spec.validate(data).axis["tune_on"] == "final"  # optuna is told final values
