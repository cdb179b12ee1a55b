"""The `benchmark` study's report: tuning.csv, choices.csv, targets.csv, ranking.csv, pairwise.csv, power.csv,
ert.csv, ecdf.csv, profiles.csv; performance and data profiles (pooled and per problem), runtime ECDFs, the
tuning-budget curve and the chosen configurations' convergence.

ranking.csv has one row per (problem, budget, τ, algorithm) — and per (budget, τ, algorithm) for the family
`all` (the problems every algorithm ran on, pooled) — with the number of independent instances, the median
over instances of the per-instance median gradient-equivalents, samples and seconds to the target and their
hierarchical bootstrap 95% intervals, and the algorithms it is significantly better or worse than in
gradient-equivalents by Holm-adjusted exact sign tests on instance wins (adjusted p-values in brackets); the
rank counts only those. pairwise.csv gives every pair's finite effects (P(a beats b), ties half; log ERT ratio)
with bootstrap intervals over instances and the Holm family it was corrected in (sweep.kinds.benchmark.power:
the per-problem pairs at one budget and τ; the pooled pairs apart). power.csv: the strongest pair of each group,
its power now and the instances its effect needs. Files with no rows keep their header.
"""
from __future__ import annotations

import math
import warnings
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from sweep.compare import figures as bench_figures, profiles, runtime, statistics
from sweep.kinds.benchmark import numbers as bench, power as bench_power, targets
from sweep.report import tables
from sweep.results import safe_files
from sweep.results.runs import RunData
from sweep.study.record import StudyRecord

FAMILY = "all"
COSTS = {"calls": "gradient-equivalents", "samples": "samples", "seconds": "compute seconds"}
#: The cost the paired tests rank by. Samples and seconds get medians and intervals but no tests: seconds
#: measure the machine's load as much as the method, and one family of tests per cost keeps Holm's families few.
TESTED = ("calls",)
PAIRWISE = ["problem", "budget", "tau", "a", "b", "units", "wins", "losses", "ties", "p_beats", "p_beats_low",
            "p_beats_high", "log_ert_ratio", "log_ert_low", "log_ert_high", "test", "p", "p_holm", "family"]


RANKING = ["problem", "budget", "tau", "algorithm", "runs", "instances", "reached", "fraction", "calls_median",
           "calls_low", "calls_high", "rank_calls", "better_calls", "worse_calls"]


def weights_note(axis: dict[str, Any]) -> str:
    """The oracle weights behind the gradient-equivalents, as printed under the figures."""
    w = bench.weights(axis)
    return ("gradient-equivalents: " + ", ".join(f"{k} {w[k]:g}" for k in ("grad_f", "grad_g", "hvp", "cross"))
            + " per call (a gradient pair of f or g counts once)")


def report(runs: list[RunData], meta: StudyRecord, directory: Path) -> tuple[dict[str, list[dict]], list[Path]]:
    """Every table and figure of a benchmark study; printed: tuning, the family ranking, power, primary."""
    axis, goal = meta.axis, meta.report.goal
    frame = bench.run_frame(runs, meta)
    bounds = bench.instance_bounds(runs, axis, directory)
    tuned, tuned_goal = bench.tuning_frame(frame, runs, axis, bounds, goal)
    chosen = bench.choices(tuned, axis, tuned_goal)
    tuning_rows = records(bench.tuning_table(tuned, axis, tuned_goal).assign(tune_on=axis.get("tune_on", "final")))
    budget = call_budget(meta)
    ranks, pairs, powers, erts, areas, plots = [], [], [], [], [], []
    for name in bench.BUDGETS:
        units = bench.chosen_runs(runs, chosen, axis, name)
        costs = bench.hitting_costs(units, axis, bounds)
        r, p, pw = ranking(costs, name, axis["seed"])
        ranks.append(r)
        pairs.append(p)
        powers.append(pw)
        erts.append(ert_rows(costs, units, bench.weights(axis)).assign(budget=name))
        dense = bench.hitting_costs(units, axis, bounds, runtime.ecdf_taus(axis["taus"]))
        areas.append(ecdf_areas(dense, budget).assign(budget=name))
        if name == "large":
            plots += profile_figures(costs, meta, directory, budget)
            plots += ecdf_figure(dense, meta, directory, budget)
            plots += convergence_figures(units, bounds, meta, directory)
    plots += tuning_figure(frame, bounds, meta, directory)
    ranking_frame = pd.concat(ranks, ignore_index=True)
    write_frame(directory / "ranking.csv", ranking_frame, None if len(ranking_frame.columns) else RANKING)
    write_frame(directory / "pairwise.csv", pd.concat(pairs, ignore_index=True), PAIRWISE)
    write_frame(directory / "choices.csv", chosen)
    write_frame(directory / "targets.csv", bounds, list(bounds.columns))
    write_frame(directory / "ert.csv", pd.concat(erts, ignore_index=True))
    write_frame(directory / "ecdf_area.csv", pd.concat(areas, ignore_index=True))
    power = pd.concat(powers, ignore_index=True)
    out = {"tuning": tuning_rows, "power": records(power)}
    note = targets.below_note(bounds)
    if note:
        out["reference"] = [{"note": note}]
    if ranking_frame.empty:
        return out, plots
    family = ranking_frame[(ranking_frame["problem"] == FAMILY) & (ranking_frame["budget"] == "large")]
    if family.empty:
        family = ranking_frame[ranking_frame["budget"] == "large"]
    shown = family[["problem", "budget", "tau", "algorithm", "instances", "fraction", "calls_median", "calls_low",
                    "calls_high", "samples_median", "rank_calls", "better_calls"]]
    out["ranking_family"] = records(shown)
    out["primary"] = records(primary_rows(pd.concat(pairs, ignore_index=True), power, axis))
    return out, plots


def call_budget(meta: StudyRecord) -> float:
    """The study's oracle-call budget per run (the largest of its points'), NaN when runs are not call-bounded."""
    values = [(p.get("budget") or {}).get("oracle_calls") for p in meta.points]
    values = [float(v) for v in values if v]
    return max(values) if values else math.nan


def records(frame: pd.DataFrame) -> list[dict[str, Any]]:
    """Plain rows (Python numbers) of a frame."""
    return [{k: (v.item() if hasattr(v, "item") else v) for k, v in row.items()} for row in frame.to_dict("records")]


def write_frame(path: Path, frame: pd.DataFrame, columns: list[str] | None = None) -> None:
    """A CSV of a frame; its header even when it has no rows."""
    columns = list(frame.columns) if columns is None else columns
    if frame.empty:
        safe_files.write_text(path, ",".join(columns) + "\n")
    else:
        tables.write_csv(path, records(frame[columns]))


# ------------------------------------------------------------------ runtime distributions
def ert_rows(costs: pd.DataFrame, units: list[dict[str, Any]], weights: dict[str, float]) -> pd.DataFrame:
    """ERT per problem, τ and algorithm in gradient-equivalents and samples, an unsuccessful run charged what it
    actually spent (its last record's; exact budgets: never more than the budget)."""
    if costs.empty:
        return pd.DataFrame(columns=["problem", "tau", "algorithm", "runs", "successes", "ert_calls", "ert_samples"])
    rows = []
    spent = _spent(units, weights)
    for (prob, tau, name), g in costs.groupby(["problem", "tau", "algorithm"], sort=True):
        charge = np.array([spent.get((prob, r.instance, r.seed, name), (math.nan, math.nan))
                           for r in g.itertuples(index=False)]).reshape(-1, 2)
        calls, samples = g["calls"].to_numpy(float), g["samples"].to_numpy(float)
        rows.append({"problem": prob, "tau": tau, "algorithm": name, "runs": len(g),
                     "successes": int(np.isfinite(calls).sum()), "ert_calls": runtime.ert(calls, charge[:, 0]),
                     "ert_samples": runtime.ert(np.where(np.isfinite(calls), samples, math.inf), charge[:, 1])})
    return pd.DataFrame(rows)


def _spent(units: list[dict[str, Any]], weights: dict[str, float]) -> dict[tuple, tuple[float, float]]:
    """(gradient-equivalents, samples) each run spent in all, from its last record."""
    out = {}
    for u in units:
        last = u["records"][-1] if u["records"] else {}
        out[(u["problem"], u["instance"], u["seed"], u["algorithm"])] = (
            profiles.gradient_equivalents(last, weights), float(last.get("samples/total", math.nan)))
    return out


def ecdf_areas(dense: pd.DataFrame, budget: float) -> pd.DataFrame:
    """The scalar score: area under the runtime ECDF (gradient-equivalents, up to the budget) per problem and
    pooled over the problems every algorithm ran on."""
    if dense.empty or not budget > runtime.FLOOR:
        return pd.DataFrame(columns=["problem", "algorithm", "pairs", "ecdf_area"])
    rows = []
    for prob, g in _with_family(dense).groupby("problem", sort=False):
        for name, a in g.groupby("algorithm", sort=True):
            rows.append({"problem": prob, "algorithm": name, "pairs": len(a),
                         "ecdf_area": runtime.ecdf_area(a["calls"].to_numpy(float), budget)})
    return pd.DataFrame(rows).sort_values(["problem", "ecdf_area"], ascending=[True, False], ignore_index=True)


def _with_family(costs: pd.DataFrame) -> pd.DataFrame:
    """The costs with the pooled family `all` appended (when more than one problem is common to all)."""
    common = bench.common_problems(costs)
    return pd.concat([costs, bench.pooled(costs, common, FAMILY)] if len(common) > 1 else [costs],
                     ignore_index=True)


# ------------------------------------------------------------------ ranking
def ranking(costs: pd.DataFrame, budget: str, seed: int) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """(ranking rows, pairwise tests, power rows) at one budget, per problem and for the pooled family.

    Every pair of every (problem, τ) group is compared (sweep.compare.effects: finite effects, the sign test);
    Holm runs over the declared family (sweep.kinds.benchmark.power: the per-problem pairs at this budget and τ,
    the pooled pairs apart), and the ranks count only the verdicts that survive it.
    """
    if costs.empty:
        return pd.DataFrame(), pd.DataFrame(columns=PAIRWISE), pd.DataFrame()
    frame = _with_family(costs)
    keys = ["problem", "tau", "algorithm"]
    with warnings.catch_warnings():  # medians and differences of +inf (never reached) costs
        warnings.simplefilter("ignore", RuntimeWarning)
        out = statistics.time_to_target(frame, by=keys, axes=tuple(COSTS), seed=seed).rename(columns={"n": "runs"})
        tests = []
        for cost in TESTED:
            t = bench_power.adjust(statistics.pairwise_tests(frame, cost, group=("problem", "tau"), seed=seed), budget)
            out = out.merge(_ranks(t, cost), on=keys, how="left")
            tests.append(t)
        power = bench_power.power_rows(frame, tests[0], budget, seed)
    size = out.groupby(["problem", "tau"])["algorithm"].transform("size")
    for cost in TESTED:  # groups with no pair: nobody is separated
        out[f"rank_{cost}"] = out[f"rank_{cost}"].fillna(1).astype(int)
        out[f"same_{cost}"] = out[f"same_{cost}"].fillna(size - 1).astype(int)
        out[[f"better_{cost}", f"worse_{cost}"]] = out[[f"better_{cost}", f"worse_{cost}"]].fillna("")
    out.insert(1, "budget", budget)
    order = {p: i for i, p in enumerate(sorted(set(out["problem"]) - {FAMILY}) + [FAMILY])}
    out = out.assign(_p=out["problem"].map(order), _t=-out["tau"]).sort_values(["_p", "_t", "rank_calls", "algorithm"])
    pairwise = pd.concat(tests, ignore_index=True).rename(columns={
        "algorithm_a": "a", "algorithm_b": "b", "p_value": "p"})
    pairwise.insert(1, "budget", budget)
    return out.drop(columns=["_p", "_t"]).reset_index(drop=True), pairwise[PAIRWISE], power


def primary_rows(pairwise: pd.DataFrame, power: pd.DataFrame, axis: dict[str, Any]) -> pd.DataFrame:
    """The declared primary comparison (axis `primary`: problem, budget, τ): its power line and its pairs
    significant after Holm (or, when none is, the three with the smallest p)."""
    problem, budget, tau = primary(axis)
    pw = power[(power["problem"] == problem) & (power["budget"] == budget) & np.isclose(power["tau"], tau)]
    p = pairwise[(pairwise["problem"] == problem) & (pairwise["budget"] == budget) & np.isclose(pairwise["tau"], tau)]
    p = p.sort_values("p_holm", kind="stable")
    shown = p[p["p_holm"] < statistics.ALPHA]
    shown = shown if len(shown) else p.head(3)
    head = pw[["problem", "budget", "tau", "power", "family"]].assign(a="", b="")
    return pd.concat([head, shown[["problem", "budget", "tau", "a", "b", "p_holm", "p_beats", "p_beats_low",
                                   "p_beats_high", "log_ert_ratio"]]], ignore_index=True)


def primary(axis: dict[str, Any]) -> tuple[str, str, float]:
    """(problem, budget, τ) of the primary comparison: the axis's `primary`, by default the pooled family at the
    large budget and the middle τ."""
    taus = sorted(axis["taus"], reverse=True)
    p = axis.get("primary") or {}
    return p.get("problem", FAMILY), p.get("budget", "large"), float(p.get("tau", taus[len(taus) // 2]))


def _ranks(tests: pd.DataFrame, cost: str) -> pd.DataFrame:
    """rank_<cost>, same_<cost>, better_<cost>, worse_<cost> per (problem, τ, algorithm) of the tested groups."""
    columns = ["problem", "tau", "algorithm", f"rank_{cost}", f"same_{cost}", f"better_{cost}", f"worse_{cost}"]
    if tests.empty:
        return pd.DataFrame(columns=columns)
    ranks = statistics.ranking(tests)[["problem", "tau", "algorithm", "rank", "no_difference"]]
    better, worse = verdict_lists(tests)
    ranks = ranks.rename(columns={"rank": f"rank_{cost}", "no_difference": f"same_{cost}"})
    ranks[f"better_{cost}"] = [better.get((r.problem, r.tau, r.algorithm), "") for r in ranks.itertuples()]
    ranks[f"worse_{cost}"] = [worse.get((r.problem, r.tau, r.algorithm), "") for r in ranks.itertuples()]
    return ranks[columns]


def verdict_lists(tests: pd.DataFrame) -> tuple[dict[tuple, str], dict[tuple, str]]:
    """(problem, τ, algorithm) -> "b (p=0.012), c (p=0.03)": those it is significantly better / worse than."""
    better: dict[tuple, list[str]] = defaultdict(list)
    worse: dict[tuple, list[str]] = defaultdict(list)
    for t in tests.itertuples(index=False):
        if t.verdict == statistics.SAME:
            continue
        win, lose = (t.algorithm_a, t.algorithm_b) if t.verdict == statistics.BETTER else (t.algorithm_b, t.algorithm_a)
        better[(t.problem, t.tau, win)].append(f"{lose} (p={t.p_holm:.2g})")
        worse[(t.problem, t.tau, lose)].append(f"{win} (p={t.p_holm:.2g})")
    return ({k: ", ".join(v) for k, v in better.items()}, {k: ", ".join(v) for k, v in worse.items()})


# ------------------------------------------------------------------ figures
def profile_figures(costs: pd.DataFrame, meta: StudyRecord, directory: Path, budget: float) -> list[Path]:
    """Performance and data profiles of the large-budget choices: the pooled family on every cost axis, and
    each problem in gradient-equivalents."""
    if costs.empty:
        write_frame(directory / "profiles.csv", pd.DataFrame(), ["tau", "algorithm", "x", "fraction", "profile",
                                                                 "cost", "family"])
        return []
    axis = meta.axis
    common = bench.common_problems(costs)
    groups = [("", costs[costs["problem"].isin(common)], tuple(COSTS))]
    if costs["problem"].nunique() > 1:  # one problem: the family is that problem
        groups += [(f"_{tables.slug(p)}", g, ("calls",)) for p, g in costs.groupby("problem", sort=True)]
    left_out = sorted(set(costs["problem"]) - set(common))
    rows, paths = [], []
    for suffix, family, axes in groups:
        shown = sorted(family["problem"].unique())
        instances = family.drop_duplicates(list(profiles.FUNCTION))
        studies = family["seed"].nunique()
        note = (f"{len(family.drop_duplicates(list(profiles.UNIT)))} units = {len(instances)} independent held-out "
                f"instances ({len(shown)} problem(s) × held-out seeds {axis['held_out']}) × {studies} tuning "
                f"studies' "
                f"choices, "
                f"each chosen from {axis['budgets']['large']} quasi-random trials on instances {axis['tune']}")
        if left_out and not suffix:
            note += f"; not pooled (not every algorithm runs there): {', '.join(left_out)}"
        lower = profiles.lower_bound_note(family, axis["metric"]) + " (one F_L per instance, every budget)"
        for cost in axes:
            label = COSTS[cost]
            for kind, fn in (("performance", profiles.performance_profile), ("data", profiles.data_profile)):
                prof = fn(family, cost)  # drawn even when empty: its caption says no run reached a target
                unreached = [f"{t:g}" for t in axis["taus"] if t not in set(prof["tau"])]
                lines = [lower, note] + ([weights_note(axis)] if cost == "calls" else [])
                if unreached:
                    lines.append(f"no run reached the target at τ = {', '.join(unreached)} (panel left out)")
                title = f"{meta.name}: {kind} profile of {axis['metric']} ({label}; {', '.join(shown)})"
                name = f"{kind}_profile{suffix}{'' if cost == 'calls' else '_' + cost}.png"
                profiles.plot_profile(prof, "\n".join(lines), directory / name, title, label,
                                      budget=budget if (kind == "data" and cost == "calls") else None,
                                      ylabel="fraction of (instance, study) units solved")
                paths.append(directory / name)
                x = "ratio" if "ratio" in prof.columns else "budget"
                rows += records(prof.rename(columns={x: "x"}).assign(
                    profile=kind, cost=cost, family=",".join(shown)))
    write_frame(directory / "profiles.csv", pd.DataFrame(rows), None if rows else
                ["tau", "algorithm", "x", "fraction", "profile", "cost", "family"])
    return paths


def ecdf_figure(dense: pd.DataFrame, meta: StudyRecord, directory: Path, budget: float) -> list[Path]:
    """Runtime ECDFs in gradient-equivalents over the log-spaced targets, per problem and pooled (ecdf.csv)."""
    if dense.empty or not budget > runtime.FLOOR:
        write_frame(directory / "ecdf.csv", pd.DataFrame(), ["algorithm", "x", "fraction", "problem"])
        return []
    frame = _with_family(dense)
    curves = {p: runtime.ecdf(g, "calls") for p, g in frame.groupby("problem", sort=False)}
    write_frame(directory / "ecdf.csv", pd.concat([c.assign(problem=p) for p, c in curves.items()], ignore_index=True),
                ["algorithm", "x", "fraction", "problem"])
    taus = sorted(dense["tau"].unique())
    caption = (f"{len(taus)} log-spaced targets τ from {taus[-1]:g} to {taus[0]:g} per instance (one F_L per "
               f"instance); each (instance, study) unit's run to each target; large budget; "
               f"{weights_note(meta.axis)}")
    path = directory / "runtime_ecdf.png"
    bench_figures.runtime_ecdf(curves, budget, f"{meta.name}: runtime ECDF of {meta.axis['metric']}",
                               caption, path)
    return [path]


def convergence_figures(units: list[dict[str, Any]], bounds: pd.DataFrame, meta: StudyRecord,
                        directory: Path) -> list[Path]:
    """F − F_L of the large-budget choices on the held-out instances, one figure per problem."""
    axis = meta.axis
    ended = [u for u in units if u["status"] != "failed"]
    if not ended:
        return []
    hist = profiles.history_frame(ended, bench.weights(axis), values=(axis["metric"],))
    paths = []
    for prob, h in hist.groupby("problem", sort=True):
        runs = h.drop_duplicates(["algorithm", "instance", "seed"])
        per = runs.groupby("algorithm").size()
        configs = sum(len({u["run"].point["key"] for u in ended if u["problem"] == prob and u["algorithm"] == a})
                      for a in per.index)
        source = ", ".join(sorted(set(bounds.loc[bounds["problem"] == prob, "lower_source"])))
        caption = (f"median (IQR) over {h['instance'].nunique()} held-out instances × {h['seed'].nunique()} "
                   f"tuning studies' choices ({configs} distinct configurations over {len(per)} algorithms); "
                   f"F_L: {source}")
        paths.append(bench_figures.convergence(
            h, bounds, axis["metric"], f"{meta.name}: {prob}, tuned at the large budget", caption,
            bench_figures.slug_path(directory, "convergence", prob)))
    return paths


def tuning_figure(frame: pd.DataFrame, bounds: pd.DataFrame, meta: StudyRecord, directory: Path) -> list[Path]:
    """The tuning-budget curve (tuning_curve.csv, tuning_curve.png)."""
    axis = meta.axis
    curve = bench_figures.best_so_far(frame, bounds, axis["tune"])
    write_frame(directory / "tuning_curve.csv", curve)
    if curve.empty:
        return []
    caption = (f"median and IQR over {axis['studies']} tuning studies of the best mean final F − F_L over "
               f"tuning instances {axis['tune']} among trials 1..k")
    path = directory / "tuning_curve.png"
    bench_figures.tuning_curve(curve, f"{meta.name}: tuning-budget curve", caption, path)
    return [path]
