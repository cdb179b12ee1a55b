"""Tuning parity: the same number of quasi-random trials for every algorithm, repeated in S independent
studies, scored AlgoPerf-style by the median over studies of the per-study best, on tuning instances
and on held-out instances.

Protocol (Schmidt et al. 2021 budgets; AlgoPerf's median over studies):
- trial 0 of every study is the paper-default configuration: the "one-shot" budget (budget 0);
- trials 1..n are quasi-random draws from the algorithm's search space (scrambled Sobol or Halton,
  seeded per study), the same n for every algorithm;
- at budget k a study's result is its best trial among 1..k (ties: the lowest trial number), scored
  on the tuning instance seeds; the summary is the median and quartiles of that over the S studies;
- the chosen configuration is then scored on held-out instance seeds that no tuning run saw.

Scores are "lower is better" unless goal="max". A failed run's score (NaN) counts as the worst value,
like a diverged run's (+inf for min): a configuration that breaks is never chosen over one that runs.
"""
from __future__ import annotations

import math
import warnings
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd
from scipy.stats import qmc

import algorithms
from algorithms.search_space import Range
from sweep.report import analysis

METHODS = ("sobol", "halton")
GOALS = ("min", "max")
#: Budget label of the paper-default configuration (trial 0).
ONE_SHOT = 0


# ------------------------------------------------------------------ drawing configurations
def study_seed(seed: int, study: int) -> int:
    """The seed of tuning study `study` (independent streams for distinct studies of one seed)."""
    return int(np.random.SeedSequence([int(seed), int(study)]).generate_state(1)[0])


def tunable_space(algorithm: str, fixed: Mapping[str, Any] | None = None) -> dict[str, Range]:
    """The algorithm's search space without the hyperparameters the user fixed."""
    fixed = fixed or {}
    return {k: r for k, r in algorithms.get(algorithm).search_space().items() if k not in fixed}


def unit_points(d: int, n: int, seed: int, method: str = "sobol") -> np.ndarray:
    """n points of a scrambled, seeded low-discrepancy sequence in [0, 1)^d, shape (n, d)."""
    if method not in METHODS:
        raise ValueError(f"tuning method: must be one of {', '.join(METHODS)}, got {method!r}")
    if n < 1:
        raise ValueError(f"n_trials: must be a positive integer, got {n!r}")
    if d == 0:
        return np.zeros((n, 0))
    rng = np.random.default_rng(seed)
    if method == "halton":
        return qmc.Halton(d, scramble=True, rng=rng).random(n)
    # A Sobol prefix of any length keeps its low discrepancy; only the 2^m balance needs full blocks,
    # so draw the next power of two and keep the first n (no balance warning to silence).
    return qmc.Sobol(d, scramble=True, rng=rng).random_base2(math.ceil(math.log2(n)))[:n]


def sample_configurations(algorithm: str, n: int, seed: int, method: str = "sobol",
                          fixed: Mapping[str, Any] | None = None) -> list[dict[str, int | float]]:
    """n configurations (tuned names → values) from the search space, reproducible from `seed`.

    Each one is validated together with `fixed` (the user's pinned hyperparameters, never tuned).
    """
    space = tunable_space(algorithm, fixed)
    u = unit_points(len(space), n, seed, method)
    columns = {name: r.from_unit(u[:, j]) for j, (name, r) in enumerate(space.items())}
    configs = [{name: space[name].value(columns[name][i]) for name in space} for i in range(n)]
    for c in configs:
        algorithms.make_config(algorithm, {**(fixed or {}), **c})
    return configs


def one_shot(algorithm: str, fixed: Mapping[str, Any] | None = None) -> dict[str, int | float]:
    """The paper defaults of the tunable hyperparameters (the one-shot configuration)."""
    defaults = algorithms.get(algorithm).Config.describe()
    return {name: defaults[name]["default"] for name in tunable_space(algorithm, fixed)}


def tuning_plan(names: Sequence[str], n_trials: int, n_studies: int, seed: int,
                method: str = "sobol", fixed: Mapping[str, Mapping[str, Any]] | None = None) -> pd.DataFrame:
    """Every trial of every study: columns algorithm, study (1..S), trial (0 = one-shot, 1..n), params.

    Every algorithm gets the same `n_trials` quasi-random trials per study, drawn with the seed
    `study_seed(seed, s)` (so adding an algorithm never changes another's draws).
    """
    if n_studies < 1:
        raise ValueError(f"n_studies: must be a positive integer, got {n_studies!r}")
    fixed = fixed or {}
    rows = []
    for name in names:
        pinned = fixed.get(name, {})
        for s in range(1, n_studies + 1):
            draws = sample_configurations(name, n_trials, study_seed(seed, s), method, pinned)
            rows.append({"algorithm": name, "study": s, "trial": ONE_SHOT, "params": one_shot(name, pinned)})
            rows += [{"algorithm": name, "study": s, "trial": i, "params": p} for i, p in enumerate(draws, 1)]
    return pd.DataFrame(rows, columns=["algorithm", "study", "trial", "params"])


# ------------------------------------------------------------------ scoring the protocol
def _check_goal(goal: str) -> None:
    if goal not in GOALS:
        raise ValueError(f"goal: must be one of {', '.join(GOALS)}, got {goal!r}")


def _loss(score: pd.Series, goal: str) -> pd.Series:
    """Scores as losses (lower is better), NaN (failed) as +inf."""
    loss = score.astype(float) if goal == "min" else -score.astype(float)
    return loss.fillna(math.inf)


def _require(frame: pd.DataFrame, columns: Sequence[str], what: str) -> None:
    missing = [c for c in columns if c not in frame.columns]
    if missing:
        raise ValueError(f"{what}: missing column '{missing[0]}'; needs {', '.join(columns)}")


def _sum(values: pd.Series) -> float:
    """Sum that stays NaN when no value is known (cost columns absent)."""
    return float(values.sum(min_count=1))


def _check_budgets(budgets: Sequence[int]) -> list[int]:
    out = [int(k) for k in budgets]
    if not out or any(k < 0 or k != b for k, b in zip(out, budgets)):
        raise ValueError(f"budgets: must be non-negative integers (0: one-shot), got {list(budgets)!r}")
    return out


def trial_scores(scores: pd.DataFrame, goal: str = "min", aggregate: str = "mean") -> pd.DataFrame:
    """One score per trial over its instance seeds (`aggregate`: mean or median of the losses).

    Input columns: algorithm, study, trial, instance, score (optional: calls, samples, seconds, tiebreak: a second
    loss, lower is better, that orders trials of equal loss).
    Output: algorithm, study, trial, score (in the goal's sign; ±inf for a failed or diverged trial),
    loss (lower is better), n_instances, calls, samples, seconds (sums over the trial's runs, NaN if absent), tiebreak
    (its `aggregate`, 0 if absent).
    """
    _check_goal(goal)
    _require(scores, ("algorithm", "study", "trial", "instance", "score"), "scores")
    if aggregate not in ("mean", "median"):
        raise ValueError(f"aggregate: must be one of mean, median, got {aggregate!r}")
    frame = scores.assign(loss=_loss(scores["score"], goal))
    for col in ("calls", "samples", "seconds"):
        if col not in frame.columns:
            frame[col] = math.nan
    frame["tiebreak"] = frame["tiebreak"].astype(float).fillna(math.inf) if "tiebreak" in frame else 0.0
    keys = ["algorithm", "study", "trial"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # inf − inf inside a mean of diverged runs
        out = frame.groupby(keys, sort=True).agg(loss=("loss", aggregate), n_instances=("instance", "nunique"),
                                                 calls=("calls", _sum), samples=("samples", _sum),
                                                 seconds=("seconds", _sum),
                                                 tiebreak=("tiebreak", aggregate))
    out[["loss", "tiebreak"]] = out[["loss", "tiebreak"]].fillna(math.inf)
    out["score"] = out["loss"] if goal == "min" else -out["loss"]
    return out.reset_index()[["algorithm", "study", "trial", "score", "loss", "n_instances", "calls", "samples",
                              "seconds", "tiebreak"]]


#: What decides a choice, by default: the score, then the tiebreak, then the lower trial number.
RULES = ("score", "tiebreak")


def deciding_rule(pool: pd.DataFrame, order: np.ndarray, rules: Sequence[str] = RULES) -> str:
    """Which key separated the chosen trial (order[0]) from the runner-up: a rule name, "trial order" (equal on
    every key), or "only candidate"."""
    if len(order) < 2:
        return "only candidate"
    best, next_ = pool.iloc[int(order[0])], pool.iloc[int(order[1])]
    for key, name in zip(("loss", "tiebreak"), rules):
        if best[key] != next_[key]:
            return name
    return "trial order"


def best_per_study(scores: pd.DataFrame, budgets: Sequence[int], goal: str = "min",
                   aggregate: str = "mean", rules: Sequence[str] = RULES) -> pd.DataFrame:
    """The chosen trial of each (algorithm, study, budget): columns algorithm, study, budget, trial, score, rule.

    Budget 0 is the one-shot trial 0; budget k > 0 is the best of trials 1..k (on equal losses the lower
    tiebreak, then the lower trial). `rule`: what decided the choice (`deciding_rule`, named by `rules`).
    """
    budgets = _check_budgets(budgets)
    per_trial = trial_scores(scores, goal, aggregate)
    rows = []
    for (name, study), g in per_trial.groupby(["algorithm", "study"], sort=True):
        g = g.sort_values("trial")
        for k in budgets:
            pool = g[g["trial"] == ONE_SHOT] if k == ONE_SHOT else g[(g["trial"] >= 1) & (g["trial"] <= k)]
            if k != ONE_SHOT and pool["trial"].nunique() < k:
                raise ValueError(f"budgets: {name} study {study} has {pool['trial'].nunique()} random trials, "
                                 f"fewer than the budget {k}")
            if pool.empty:
                raise ValueError(f"budgets: {name} study {study} has no one-shot trial 0")
            order = np.lexsort((pool["trial"].to_numpy(), pool["tiebreak"].to_numpy(), pool["loss"].to_numpy()))
            best = pool.iloc[int(order[0])]
            rows.append({"algorithm": name, "study": study, "budget": int(k), "trial": int(best["trial"]),
                         "score": float(best["score"]), "rule": deciding_rule(pool, order, rules)})
    return pd.DataFrame(rows, columns=["algorithm", "study", "budget", "trial", "score", "rule"])


def tuning_cost(scores: pd.DataFrame, budgets: Sequence[int]) -> pd.DataFrame:
    """Cost of tuning at each budget, over all studies: columns algorithm, budget, trials, calls, samples,
    seconds."""
    budgets = _check_budgets(budgets)
    per_trial = trial_scores(scores)
    rows = []
    for name, g in per_trial.groupby("algorithm", sort=True):
        for k in budgets:
            used = g[g["trial"] == ONE_SHOT] if k == ONE_SHOT else g[(g["trial"] >= 1) & (g["trial"] <= k)]
            rows.append({"algorithm": name, "budget": int(k), "trials": len(used),
                         "calls": _sum(used["calls"]), "samples": _sum(used["samples"]),
                         "seconds": _sum(used["seconds"])})
    return pd.DataFrame(rows, columns=["algorithm", "budget", "trials", "calls", "samples", "seconds"])


def tuning_summary(scores: pd.DataFrame, budgets: Sequence[int], goal: str = "min",
                   aggregate: str = "mean") -> pd.DataFrame:
    """Per algorithm and budget: median and quartiles over studies of the per-study best, and the cost.

    Columns: algorithm, budget, median, q25, q75, n_studies, trials, calls, samples, seconds.
    Quartiles follow `sweep.report.analysis.quantiles` (an interval touching ±inf gives ±inf).
    """
    best = best_per_study(scores, budgets, goal, aggregate)
    rows = []
    for (name, k), g in best.groupby(["algorithm", "budget"], sort=True):
        v = g["score"].to_list()
        q25, q75 = analysis.quantiles(v, (0.25, 0.75))
        rows.append({"algorithm": name, "budget": k, "median": analysis.median(v), "q25": q25, "q75": q75,
                     "n_studies": len(v)})
    summary = pd.DataFrame(rows, columns=["algorithm", "budget", "median", "q25", "q75", "n_studies"])
    return summary.merge(tuning_cost(scores, budgets), on=["algorithm", "budget"], how="left")


# ------------------------------------------------------------------ held-out instances
def split_seeds(seeds: Sequence[int], n_held_out: int, seed: int) -> tuple[list[int], list[int]]:
    """(tuning seeds, held-out seeds): a seeded random split of distinct instance seeds, disjoint."""
    values = [int(s) for s in seeds]
    if len(set(values)) != len(values):
        raise ValueError("instance seeds: must be distinct (a seed in both sets would leak), got duplicates")
    if not 0 < n_held_out < len(values):
        raise ValueError(f"n_held_out: must be in 1..{len(values) - 1} (both sets non-empty), got {n_held_out!r}")
    order = np.random.default_rng(seed).permutation(len(values))
    held = sorted(values[i] for i in order[:n_held_out])
    tune = sorted(values[i] for i in order[n_held_out:])
    return tune, held


def held_out_gap(scores: pd.DataFrame, held_out: pd.DataFrame, budgets: Sequence[int], goal: str = "min",
                 aggregate: str = "mean", rules: Sequence[str] = RULES) -> pd.DataFrame:
    """The chosen configurations scored on held-out instances, per algorithm, study and budget.

    `held_out` has the columns of `scores` (algorithm, study, trial, instance, score) for the chosen
    trials run on held-out instance seeds. Output columns: algorithm, study, budget, trial, tune_score,
    held_out_score, gap, rule, where gap is how much worse the held-out score is (held − tune for min,
    tune − held for max; 0 when both are equal; NaN, undefined, when both are infinite: two censored scores
    say nothing of how far apart they are), and rule what decided the choice (`best_per_study`).
    """
    _check_leak(scores, held_out)
    best = best_per_study(scores, budgets, goal, aggregate, rules).rename(columns={"score": "tune_score"})
    held = trial_scores(held_out, goal, aggregate)[["algorithm", "study", "trial", "score"]]
    out = best.merge(held.rename(columns={"score": "held_out_score"}), on=["algorithm", "study", "trial"],
                     how="left")
    t, h = out["tune_score"].to_numpy(float), out["held_out_score"].to_numpy(float)
    with np.errstate(invalid="ignore"):
        gap = np.where(t == h, 0.0, (h - t) if goal == "min" else (t - h))
    out["gap"] = np.where(np.isinf(t) & np.isinf(h), math.nan, gap)
    return out[["algorithm", "study", "budget", "trial", "tune_score", "held_out_score", "gap", "rule"]]


def _check_leak(scores: pd.DataFrame, held_out: pd.DataFrame) -> None:
    """Held-out scores must come from instance seeds that no tuning run of the algorithm used."""
    _require(held_out, ("algorithm", "study", "trial", "instance", "score"), "held-out scores")
    for name, g in held_out.groupby("algorithm"):
        shared = set(g["instance"]) & set(scores.loc[scores["algorithm"] == name, "instance"])
        if shared:
            raise ValueError(f"held-out instances: {name} was tuned on instance seed {sorted(shared)[0]}; "
                             "held-out seeds must be disjoint from tuning seeds")


def held_out_summary(gaps: pd.DataFrame) -> pd.DataFrame:
    """Medians over studies: columns algorithm, budget, tune_median, held_out_median, gap_median, n_studies."""
    rows = []
    for (name, k), g in gaps.groupby(["algorithm", "budget"], sort=True):
        rows.append({"algorithm": name, "budget": k, "tune_median": analysis.median(g["tune_score"].to_list()),
                     "held_out_median": analysis.median(g["held_out_score"].to_list()),
                     "gap_median": analysis.median(g["gap"].to_list()), "n_studies": len(g)})
    return pd.DataFrame(rows, columns=["algorithm", "budget", "tune_median", "held_out_median", "gap_median",
                                       "n_studies"])
