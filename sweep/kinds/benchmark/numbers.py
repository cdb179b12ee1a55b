"""The `benchmark` study kind's numbers: its configurations, then, from its runs, the tuning table, the
configurations each tuning study chose, and the frames the profiles and the ranking are computed from.

A run of a benchmark study is one configuration on one instance (the run's seed builds the problem); each
configuration fills one or more (study, trial) slots of the tuning plan (`coords["tuning"]`). Tuning reads
the final value of the target metric on the tuning instances; the chosen configurations are compared on
the held-out instances. The independent unit of a comparison is the held-out instance; each tuning study's
choice is a replicate on it (sweep.compare.statistics reduces the replicates of an instance to their median
before testing). At the one-shot budget every study chooses the same paper-default configuration, so only
study 1 is used there.

The target of an instance is fixed once for every algorithm and budget (`instance_bounds`): its exact optimum
where the problem knows it, else a reference solve of the instance that is not one of the compared runs
(sweep.kinds.benchmark.targets).
"""
from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from sweep.compare import profiles, runtime, tuning
from sweep.kinds.benchmark import targets
from sweep.report import analysis
from sweep.results.runs import RunData, problem_label
from sweep.study.record import StudyRecord

#: Budget names of the report, in order, and the axis field giving each one's trials per study.
BUDGETS = ("one-shot", "small", "large")
#: Statuses that count as a run (anything else is a run that did not end: "missing").
ENDED = ("finished", "diverged", "failed")


# ------------------------------------------------------------------ the configurations
def plan_configurations(algorithm: str, fixed: Mapping[str, Any],
                        axis: Mapping[str, Any]) -> dict[tuple, list[list[int]]]:
    """Each distinct configuration of the tuning plan (sorted (name, value) pairs) -> its [study, trial] slots.

    The plan is `tuning.tuning_plan` for one algorithm with the user's `fixed` values pinned: the paper
    default as trial 0 and `axis["trials"]` quasi-random draws in each of `axis["studies"]` studies.
    """
    plan = tuning.tuning_plan([algorithm], axis["trials"], axis["studies"], axis["seed"], axis["sampler"],
                              {algorithm: dict(fixed)})
    out: dict[tuple, list[list[int]]] = {}
    for row in plan.itertuples(index=False):
        out.setdefault(tuple(sorted(row.params.items())), []).append([int(row.study), int(row.trial)])
    return out


#: What tuning scores: the gradient-equivalents to the primary τ's target, or the final metric.
TUNE_ON = ("time_to_target", "final")


def tuning_frame(frame: pd.DataFrame, runs: list[RunData], axis: Mapping[str, Any], bounds: pd.DataFrame,
                 goal: str) -> tuple[pd.DataFrame, str]:
    """The run frame tuning reads and its goal, by `tune_on`.

    final: the frame as it is. time_to_target: a run that does not reach the primary τ's target is censored at
    what it spent, not +inf: a configuration's score is its ERT over the instances of a split (tuning, or
    held-out) — the gradient-equivalents of its hits plus the spend of its censored runs, over its hits; +inf
    only when no run of it hits — the same for each of its rows, goal min; tiebreak = its mean final metric as a
    loss, which decides among configurations that never hit (`RULES`).
    """
    if axis.get("tune_on", "final") == "final":
        return frame, goal
    tau = float(axis["primary"]["tau"])
    units = [{"algorithm": r.point["key"], "problem": problem_label(r.point), "instance": r.seed, "seed": 0,
              "status": r.status, "records": r.records} for r in runs if r.status in ENDED and r.records]
    costs = hitting_costs(units, axis, bounds, taus=[tau])
    hits = {(c.algorithm, c.instance): c.calls for c in costs.itertuples(index=False)}
    final = frame["score"].astype(float) if goal == "min" else -frame["score"].astype(float)
    held = frame["instance"].isin(axis["held_out"])
    ert = {}
    for (key, split), g in frame.assign(held=held).drop_duplicates(["key", "instance"]).groupby(["key", "held"]):
        cost = [hits.get((key, i), math.inf) for i in g["instance"]]
        ert[(key, split)] = runtime.ert(cost, g["calls"].to_numpy(float))
    score = [ert[(k, h)] for k, h in zip(frame["key"], held)]
    mean_final = final.groupby([frame["key"], held]).transform("mean")
    return frame.assign(score=score, tiebreak=mean_final.fillna(math.inf)), "min"


def rules(axis: Mapping[str, Any]) -> tuple[str, str]:
    """What the tuning keys are called in `rule` (choices.csv, tuning.csv), by `tune_on`."""
    if axis.get("tune_on", "final") == "final":
        return "final value", "tiebreak"
    return "ERT to the primary target", "final value (no hit)"


def weights(axis: Mapping[str, Any]) -> dict[str, float]:
    """Gradient-equivalents per oracle call: 1 for each kind, with the study's `weights` (hvp, cross, ...)."""
    return {**profiles.GRADIENT_EQUIVALENTS, **{k: float(v) for k, v in (axis.get("weights") or {}).items()}}


def budgets(axis: Mapping[str, Any]) -> dict[str, int]:
    """Budget name -> trials per study (0: the one-shot paper default)."""
    return {"one-shot": tuning.ONE_SHOT, "small": int(axis["budgets"]["small"]), "large": int(axis["budgets"]["large"])}


# ------------------------------------------------------------------ the runs as frames
def run_frame(runs: list[RunData], meta: StudyRecord) -> pd.DataFrame:
    """One row per (configuration, instance, slot): every planned run, ended or not.

    Columns: problem, algorithm (the entry's label), key (configuration), instance (the run's seed), study,
    trial, status ("missing" when the run has not ended), score (final metric: ±inf diverged, NaN failed
    or missing), calls (final gradient-equivalents), samples (final samples drawn), seconds (final compute
    time).
    """
    metric, goal = meta.axis["metric"], meta.report.goal
    by_key = {(r.point["key"], r.seed): r for r in runs}
    rows = []
    for point in meta.points:
        for seed in meta.seeds:
            r = by_key.get((point["key"], seed))
            status = r.status if r is not None and r.status in ENDED else "missing"
            final = (r.final or {}) if r is not None else {}
            score = analysis.final_value({"status": status, "final": final}, metric, goal)
            calls = profiles.gradient_equivalents(final, weights(meta.axis)) if final else math.nan
            base = {"problem": problem_label(point), "algorithm": point["label"], "key": point["key"],
                    "instance": seed, "status": status, "score": score, "calls": calls,
                    "samples": float(final.get("samples/total", math.nan)),
                    "seconds": float(final.get("time", math.nan))}
            rows += [{**base, "study": s, "trial": t} for s, t in point["coords"]["tuning"]]
    columns = ["problem", "algorithm", "key", "instance", "study", "trial", "status", "score", "calls", "samples",
               "seconds"]
    return pd.DataFrame(rows, columns=columns)


def split(frame: pd.DataFrame, axis: Mapping[str, Any]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(tuning rows, held-out rows) of a run frame, by the instance seeds the axis assigned."""
    held = frame["instance"].isin(axis["held_out"])
    return frame[~held & frame["instance"].isin(axis["tune"])], frame[held]


# ------------------------------------------------------------------ tuning
def choices(frame: pd.DataFrame, axis: Mapping[str, Any], goal: str) -> pd.DataFrame:
    """The trial each study chose at each budget, scored on tuning and on held-out instances.

    Columns: problem, algorithm, budget (name), trials (per study), study, trial, key, tune_score,
    held_out_score, gap (how much worse on held-out instances; `tuning.held_out_gap`), regret (how much worse
    on held-out instances than the study's best trial there; `regret`).
    """
    tune, held = split(frame, axis)
    named = budgets(axis)
    out = []
    for prob, t in tune.groupby("problem", sort=True):
        h = held[held["problem"] == prob]
        gaps = tuning.held_out_gap(t, h, sorted(set(named.values())), goal, rules=rules(axis))
        for name, k in named.items():
            g = gaps[gaps["budget"] == k].assign(problem=prob, budget=name, trials=k)
            out.append(g)
    columns = ["problem", "algorithm", "budget", "trials", "study", "trial", "key", "tune_score", "held_out_score",
               "gap", "regret", "rule"]
    if not out:
        return pd.DataFrame(columns=columns)
    chosen = regret(pd.concat(out, ignore_index=True), held, goal)
    keys = frame[["problem", "algorithm", "study", "trial", "key"]].drop_duplicates()
    return chosen.merge(keys, on=["problem", "algorithm", "study", "trial"], how="left")[columns]


def regret(chosen: pd.DataFrame, held: pd.DataFrame, goal: str) -> pd.DataFrame:
    """`chosen` with column regret: how much worse on the held-out instances the chosen trial is than the best
    trial the study could have chosen at that budget (its trials 1..k; one-shot: trial 0), 0 when it is that
    one, NaN when both are +inf (censored). Scores are the mean over held-out instances (`tuning.trial_scores`)."""
    if held.empty:
        return chosen.assign(regret=math.nan)
    loss = {}
    for prob, h in held.groupby("problem", sort=True):  # per algorithm, study, trial: loss (lower is better)
        scores = tuning.trial_scores(h, goal)
        loss.update({(prob, r.algorithm, r.study, r.trial): r.loss for r in scores.itertuples(index=False)})
    out = []
    for c in chosen.itertuples(index=False):
        pool = [0] if c.trials == tuning.ONE_SHOT else range(1, c.trials + 1)
        best = min(loss.get((c.problem, c.algorithm, c.study, t), math.inf) for t in pool)
        mine = loss.get((c.problem, c.algorithm, c.study, c.trial), math.inf)
        # Both censored (+inf): undefined, not 0 — neither reached the target, how far apart is unknown.
        out.append(math.nan if math.isinf(mine) and math.isinf(best) else 0.0 if mine == best else mine - best)
    return chosen.assign(regret=out)


def tuning_table(frame: pd.DataFrame, axis: Mapping[str, Any], goal: str) -> pd.DataFrame:
    """Per problem, algorithm and budget: the protocol's score over studies, held-out score, gap, tuning cost.

    tune_median/q25/q75: median and quartiles over studies of the per-study best on tuning instances
    (`tuning.tuning_summary`); held_out_median, gap_median: the same choices on held-out instances
    (`tuning.held_out_summary`); regret_median: median over studies of the held-out regret (`regret`);
    tuning_trials, tuning_calls, tuning_samples, tuning_seconds: what the S studies spent on tuning instances
    up to that budget, each study paying for its own trials; rules: what decided the studies' choices (counts).
    """
    tune, _ = split(frame, axis)
    named = budgets(axis)
    gaps = choices(frame, axis, goal)
    regrets = gaps.groupby(["problem", "algorithm", "budget"])["regret"].apply(list).to_dict()
    decided = gaps.groupby(["problem", "algorithm", "budget"])["rule"].apply(_count_rules).to_dict()
    rows = []
    for prob, t in tune.groupby("problem", sort=True):
        summary = tuning.tuning_summary(t, sorted(set(named.values())), goal)
        for name, k in named.items():
            s = summary[summary["budget"] == k]
            h = tuning.held_out_summary(gaps[(gaps["problem"] == prob) & (gaps["budget"] == name)])
            merged = s.merge(h.drop(columns=["budget", "n_studies"]), on="algorithm", how="left")
            for r in merged.itertuples(index=False):
                rows.append({"problem": prob, "algorithm": r.algorithm, "budget": name, "trials_per_study": k,
                             "tune_median": r.median, "tune_q25": r.q25, "tune_q75": r.q75,
                             "held_out_median": r.held_out_median, "gap_median": r.gap_median,
                             "regret_median": analysis.median(regrets.get((prob, r.algorithm, name), [])),
                             "rules": decided.get((prob, r.algorithm, name), ""),
                             "n_studies": r.n_studies, "tuning_trials": r.trials, "tuning_calls": r.calls,
                             "tuning_samples": r.samples, "tuning_seconds": r.seconds})
    return pd.DataFrame(rows)


def _count_rules(rules_: pd.Series) -> str:
    """"ERT to the primary target: 2, final value (no hit): 1": what decided the studies' choices."""
    return ", ".join(f"{k}: {v}" for k, v in rules_.value_counts(sort=False).sort_index().items())


# ------------------------------------------------------------------ what the profiles and the ranking compare
def chosen_runs(runs: list[RunData], chosen: pd.DataFrame, axis: Mapping[str, Any],
                budget: str) -> list[dict[str, Any]]:
    """The held-out runs of the configurations chosen at `budget`, as `profiles.history_frame` reads them.

    Each is a unit (problem, instance = held-out seed, seed = tuning study); one-shot: study 1 only.
    """
    by_key = {(r.point["key"], r.seed): r for r in runs}
    picked = chosen[chosen["budget"] == budget]
    if budget == "one-shot":
        picked = picked[picked["study"] == picked["study"].min()]
    out = []
    for c in picked.itertuples(index=False):
        for inst in axis["held_out"]:
            r = by_key.get((c.key, inst))
            if r is None or r.status not in ENDED:
                continue  # not run yet: `hitting_costs` counts the unit as missing (never reached)
            out.append({"algorithm": c.algorithm, "problem": c.problem, "instance": inst, "seed": int(c.study),
                        "status": r.status, "records": r.records, "run": r})
    return out


def instance_bounds(runs: list[RunData], axis: Mapping[str, Any], directory: Path | None = None) -> pd.DataFrame:
    """F(x0) and F_L of every (problem, instance) (`targets.instance_bounds`): the same target for every algorithm
    and budget, the exact optimum where known, else a reference solve no compared run sets (lower_source says
    which); reference solves are cached in `directory`."""
    units = [{"algorithm": r.point["label"], "problem": problem_label(r.point), "instance": r.seed, "seed": 0,
              "status": r.status, "records": r.records} for r in runs if r.status in ENDED and r.records]
    return targets.instance_bounds(runs, axis, directory, units)


def hitting_costs(units: list[dict[str, Any]], axis: Mapping[str, Any], bounds: pd.DataFrame,
                  taus: Sequence[float] | None = None) -> pd.DataFrame:
    """`profiles.hitting_costs` problem by problem against the fixed `bounds` (`instance_bounds`), at `taus`
    (default the axis's); an algorithm absent from a problem is not counted there."""
    if not units:
        return pd.DataFrame(columns=[*profiles.UNIT, "algorithm", "tau", "status", "reached", *profiles.COST_AXES,
                                     "spent", "start", "lower", "lower_exact", "lower_source", "target"])
    hist = profiles.history_frame(units, weights(axis), values=(axis["metric"],))
    taus = axis["taus"] if taus is None else taus
    frames = [profiles.hitting_costs(h, taus, axis["metric"], bounds=bounds[bounds["problem"] == prob])
              for prob, h in hist.groupby("problem", sort=True)]
    return pd.concat(frames, ignore_index=True)


def common_problems(costs: pd.DataFrame) -> list[str]:
    """The problems every algorithm of the study ran on (a family profile pools only these)."""
    names = set(costs["algorithm"])
    return sorted(p for p, g in costs.groupby("problem") if set(g["algorithm"]) == names)


def pooled(costs: pd.DataFrame, problems_: list[str], label: str = "all") -> pd.DataFrame:
    """The costs on `problems_` as one family: problem `label`, instance "<problem>/<instance>"."""
    c = costs[costs["problem"].isin(problems_)].copy()
    c["instance"] = c["problem"].astype(str) + "/" + c["instance"].astype(str)
    c["problem"] = label
    return c
