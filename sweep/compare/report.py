"""The `benchmark` study's report: tuning.csv, choices.csv, ranking.csv, pairwise.csv, profiles.csv, the
performance and data profiles (gradient-equivalents and seconds) and the chosen configurations' convergence.

ranking.csv has one row per (problem, budget, τ, algorithm) — and per (budget, τ, algorithm) for the family
`all` (the problems every algorithm ran on, pooled) — with the median gradient-equivalents and seconds to the
target and their bootstrap 95% intervals, and the algorithms it is significantly better or worse than in
gradient-equivalents by Holm-adjusted paired Wilcoxon tests (adjusted p-values in brackets); the rank counts
only those.
"""
from __future__ import annotations

import warnings
from collections import defaultdict
from pathlib import Path
from typing import Any

import pandas as pd

from sweep import tables
from sweep.curves import plot_convergence
from sweep.compare import benchmark as bench
from sweep.compare import profiles, statistics
from sweep.results import RunData, problem_label

FAMILY = "all"
COSTS = {"calls": "gradient-equivalents", "seconds": "compute seconds"}
#: The cost the paired tests rank by. Seconds get medians and intervals but no tests: on a shared machine they
#: measure the load as much as the method, and scipy's tests with tied differences (every +∞) cost ~0.1 s each.
TESTED = ("calls",)
WEIGHTS_NOTE = ("gradient-equivalents: 1 per gradient pair of f or g, 1 per Hessian-vector product ∇²yy g·v, "
                "1 per cross product ∇²xy g·v")


def report(runs: list[RunData], meta: dict[str, Any], directory: Path) -> tuple[dict[str, list[dict]], list[Path]]:
    """Every table and figure of a benchmark study; the printed tables are tuning and the family ranking."""
    axis, goal = meta["axis"], meta["report"]["goal"]
    frame = bench.run_frame(runs, meta)
    chosen = bench.choices(frame, axis, goal)
    tuning_rows = records(bench.tuning_table(frame, axis, goal))
    ranks, pairs, plots = [], [], []
    for budget in bench.BUDGETS:
        units = bench.chosen_runs(runs, chosen, axis, budget)
        costs = bench.hitting_costs(units, axis)
        r, p = ranking(costs, budget, axis["seed"])
        ranks.append(r)
        pairs.append(p)
        if budget == "large":
            plots += profile_figures(costs, meta, directory)
            plots += convergence_figures([u["run"] for u in units], meta, directory)
    ranking_frame = pd.concat(ranks, ignore_index=True)
    tables.write_csv(directory / "ranking.csv", records(ranking_frame))
    tables.write_csv(directory / "pairwise.csv", records(pd.concat(pairs, ignore_index=True)))
    tables.write_csv(directory / "choices.csv", records(chosen))
    if ranking_frame.empty:
        return {"tuning": tuning_rows}, plots
    family = ranking_frame[(ranking_frame["problem"] == FAMILY) & (ranking_frame["budget"] == "large")]
    shown = family[["budget", "tau", "algorithm", "fraction", "calls_median", "calls_low", "calls_high",
                    "seconds_median", "rank_calls", "better_calls"]]
    return {"tuning": tuning_rows, "ranking_family": records(shown)}, plots


def records(frame: pd.DataFrame) -> list[dict[str, Any]]:
    """Plain rows (Python numbers) of a frame."""
    return [{k: (v.item() if hasattr(v, "item") else v) for k, v in row.items()} for row in frame.to_dict("records")]


# ------------------------------------------------------------------ ranking
def ranking(costs: pd.DataFrame, budget: str, seed: int) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(ranking rows, pairwise tests) at one budget, per problem and for the pooled family.

    A group (problem, τ) is tested only when its units could make a difference significant after Holm:
    with m pairs and n units the smallest adjusted p-value is m · 2/2^n (every difference of one sign), so a
    group where that is at least α gets `tested` false and every algorithm rank 1, without running tests that
    cannot separate anything.
    """
    if costs.empty:
        return pd.DataFrame(), pd.DataFrame()
    common = bench.common_problems(costs)
    frame = pd.concat([costs, bench.pooled(costs, common, FAMILY)] if len(common) > 1 else [costs],
                      ignore_index=True)
    keys = ["problem", "tau", "algorithm"]
    with warnings.catch_warnings():  # medians and differences of +inf (never reached) costs
        warnings.simplefilter("ignore", RuntimeWarning)
        out = statistics.time_to_target(frame, by=keys, seed=seed).rename(columns={"n": "units"})
        tested = testable(frame)
        out = out.merge(tested, on=["problem", "tau"], how="left")
        sub = frame.merge(tested[tested["tested"]][["problem", "tau"]], on=["problem", "tau"])
        tests = []
        for cost in TESTED:
            t = statistics.pairwise_tests(sub, cost, group=("problem", "tau"), match=("instance", "seed"))
            out = out.merge(_ranks(t, cost), on=keys, how="left")
            tests.append(t.assign(cost=cost))
    size = out.groupby(["problem", "tau"])["algorithm"].transform("size")
    for cost in TESTED:  # untested groups: nobody is separated
        out[f"rank_{cost}"] = out[f"rank_{cost}"].fillna(1).astype(int)
        out[f"same_{cost}"] = out[f"same_{cost}"].fillna(size - 1).astype(int)
        out[[f"better_{cost}", f"worse_{cost}"]] = out[[f"better_{cost}", f"worse_{cost}"]].fillna("")
    out.insert(1, "budget", budget)
    order = {p: i for i, p in enumerate(sorted(set(out["problem"]) - {FAMILY}) + [FAMILY])}
    out = out.assign(_p=out["problem"].map(order), _t=-out["tau"]).sort_values(["_p", "_t", "rank_calls", "algorithm"])
    pairwise = pd.concat(tests, ignore_index=True)
    pairwise.insert(1, "budget", budget)
    return out.drop(columns=["_p", "_t"]).reset_index(drop=True), pairwise


def testable(frame: pd.DataFrame, alpha: float = statistics.ALPHA) -> pd.DataFrame:
    """Per (problem, τ): units, pairs and whether m · 2/2^n < α (some difference could be significant)."""
    g = frame.groupby(["problem", "tau"], sort=True)
    units = g.apply(lambda x: len(x.drop_duplicates(["instance", "seed"])), include_groups=False)
    names = g["algorithm"].nunique()
    out = pd.DataFrame({"test_units": units, "pairs": names * (names - 1) // 2}).reset_index()
    out["tested"] = out["pairs"] * 2.0 ** (1 - out["test_units"]) < alpha
    return out


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
def profile_figures(costs: pd.DataFrame, meta: dict[str, Any], directory: Path) -> list[Path]:
    """Performance and data profiles of the large-budget choices on the pooled family (calls and seconds)."""
    if costs.empty:
        return []
    axis = meta["axis"]
    common = bench.common_problems(costs)
    family = costs[costs["problem"].isin(common)]
    left_out = sorted(set(costs["problem"]) - set(common))
    units = len(family.drop_duplicates(list(profiles.UNIT)))
    note = (f"{units} units = problems × held-out instances {axis['held_out']} × {axis['studies']} tuning studies; "
            f"each study's configuration chosen from {axis['budgets']['large']} quasi-random trials on instances "
            f"{axis['tune']}")
    if left_out:
        note += f"; not pooled (not every algorithm runs there): {', '.join(left_out)}"
    lower = profiles.lower_bound_note(family, axis["metric"])
    rows, paths = [], []
    for cost, label in COSTS.items():
        suffix = "" if cost == "calls" else "_seconds"
        for kind, fn in (("performance", profiles.performance_profile), ("data", profiles.data_profile)):
            prof = fn(family, cost)
            unreached = [f"{t:g}" for t in axis["taus"] if t not in set(prof["tau"])]
            lines = [lower, note] + ([WEIGHTS_NOTE] if cost == "calls" else [])
            if unreached:
                lines.append(f"no run reached the target at τ = {', '.join(unreached)} (panel left out)")
            caption = "\n".join(lines)
            title = (f"{meta['name']}: {kind} profile of {axis['metric']} ({label}; "
                     f"problems {', '.join(common)})")
            path = directory / f"{kind}_profile{suffix}.png"
            profiles.plot_profile(prof, caption, path, title, label)
            paths.append(path)
            x = "ratio" if "ratio" in prof.columns else "budget"
            rows += records(prof.rename(columns={x: "x"}).assign(profile=kind, cost=cost))
    tables.write_csv(directory / "profiles.csv", rows)
    return paths


def convergence_figures(runs: list[RunData], meta: dict[str, Any], directory: Path) -> list[Path]:
    """Convergence of the large-budget choices on the held-out instances, one figure per problem."""
    by_problem: dict[str, dict[str, RunData]] = defaultdict(dict)
    for r in runs:  # a configuration chosen by several studies is drawn once
        if r.status != "failed":
            by_problem[problem_label(r.point)][r.key] = r
    metric = meta["axis"]["metric"]
    return [plot_convergence(rs, metric, "min", f"{meta['name']}: {prob} (tuned at the large budget, held-out "
                                                f"instances × studies)",
                             directory / f"convergence_{tables.slug(prob)}.png")
            for prob, rs in ((p, list(d.values())) for p, d in sorted(by_problem.items()))]
