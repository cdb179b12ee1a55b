"""The benchmark report's multiplicity family and power (pairwise.csv's p_holm and family, power.csv).

The family: Holm's correction runs over every pair of every problem at one budget and τ — a reader asking "at this
budget and target, which method beats which, on which problem" gets one correction for all of them. The pooled
family `all` (instances of several problems together) repeats the problems' evidence, so its pairs are a family of
their own, never mixed with the per-problem pairs.

Power: per (problem, budget, τ), the pair with the smallest p is taken as the comparison's observed effect; its
per-instance outcomes (wins, losses, ties) are resampled to N instances (`SIMULATIONS` draws) and the exact sign
test, multiplied by the family's size as Holm does to the smallest p, is significant at α in a fraction of them:
`instances_needed` is the smallest N where that fraction reaches `POWER`. A group not significant searches from
one instance more than it has (so never reports what it already has); "no effect observed" when the pair has as
many wins as losses; "> MAX_INSTANCES" when even that many would not do.
"""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
from scipy import stats

from sweep.compare import effects, statistics

POWER = 0.8
SIMULATIONS = 400
MAX_INSTANCES = 5000
POOLED = "all"


def family_of(problem: str, budget: str, tau: float) -> str:
    """The family a pair belongs to, in words (pairwise.csv's `family`)."""
    if problem == POOLED:
        return f"pooled pairs ({POOLED}) at budget {budget}, τ {tau:g}"
    return f"per-problem pairs at budget {budget}, τ {tau:g}"


def adjust(tests: pd.DataFrame, budget: str, alpha: float = statistics.ALPHA) -> pd.DataFrame:
    """`tests` (statistics.pairwise_tests at one budget) with p_holm, verdict and family over the declared family."""
    if tests.empty:
        return tests.assign(family=pd.Series(dtype=str))
    out = tests.copy()
    out["family"] = [family_of(p, budget, t) for p, t in zip(out["problem"], out["tau"])]
    for _, idx in out.groupby("family").groups.items():
        out.loc[idx, "p_holm"] = statistics.holm(out.loc[idx, "p_value"].to_numpy(float))
    direction = np.where(out["wins"] > out["losses"], statistics.BETTER,
                         np.where(out["wins"] < out["losses"], statistics.WORSE, statistics.SAME))
    out["verdict"] = np.where(out["p_holm"] < alpha, direction, statistics.SAME)
    return out


def family_sizes(frame: pd.DataFrame, budget: str) -> dict[str, int]:
    """Pairs per family, from the cost frame of one budget (every (problem, τ) group's algorithm pairs)."""
    sizes: dict[str, int] = {}
    for (prob, tau), g in frame.groupby(["problem", "tau"], sort=True):
        n = g["algorithm"].nunique()
        key = family_of(prob, budget, tau)
        sizes[key] = sizes.get(key, 0) + n * (n - 1) // 2
    return sizes


def sign_p(wins: np.ndarray, losses: np.ndarray) -> np.ndarray:
    """Exact two-sided sign-test p-values, elementwise (1 where there is no win nor loss)."""
    n = wins + losses
    k = np.minimum(wins, losses)
    with np.errstate(invalid="ignore"):
        p = np.minimum(1.0, 2 * stats.binom.cdf(k, n, 0.5))
    return np.where(n > 0, p, 1.0)


def instances_needed(outcomes: np.ndarray, have: int, family: int, significant: bool, seed: int = 0,
                     alpha: float = statistics.ALPHA) -> tuple[str, float]:
    """(instances needed for `POWER` at the family's Holm factor, or a phrase; the power at `have`)."""
    o = np.asarray(outcomes, dtype=float)
    if o.size == 0 or (o == 1).sum() == (o == 0).sum():
        return "no effect observed", math.nan
    rng = np.random.default_rng(seed)

    def power(n: int) -> float:
        draws = o[rng.integers(0, o.size, size=(SIMULATIONS, n))]
        p = sign_p((draws == 1).sum(axis=1), (draws == 0).sum(axis=1))
        return float((np.minimum(1.0, family * p) < alpha).mean())

    now = power(have)
    if significant:
        return str(have), now
    lo, hi = have, have + 1  # lo: known short of the power (or what we have); never answer <= have
    while power(hi) < POWER:
        if hi >= MAX_INSTANCES:
            return f"> {MAX_INSTANCES}", now
        lo, hi = hi, min(MAX_INSTANCES, max(hi + 1, int(hi * 1.5)))
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if power(mid) >= POWER else (mid, hi)
    return str(hi), now


def power_rows(frame: pd.DataFrame, tests: pd.DataFrame, budget: str, seed: int,
               alpha: float = statistics.ALPHA) -> pd.DataFrame:
    """power.csv rows of one budget: per (problem, τ), the strongest pair, its power now and instances needed."""
    sizes = family_sizes(frame, budget)
    rows = []
    for (prob, tau), g in frame.groupby(["problem", "tau"], sort=True):
        family = family_of(prob, budget, tau)
        names = g["algorithm"].nunique()
        pairs = names * (names - 1) // 2
        t = tests[(tests["problem"] == prob) & np.isclose(tests["tau"], tau)] if not tests.empty else tests
        have = int(g["instance"].nunique())
        row = {"problem": prob, "budget": budget, "tau": tau, "instances": have, "pairs": pairs,
               "family_pairs": sizes[family], "family": family, "a": "", "b": "", "p_holm": math.nan,
               "significant": False, "power_now": math.nan, "instances_needed": "no effect observed"}
        if not t.empty:
            imbalance = -(t["wins"] - t["losses"]).abs()  # at equal p, the pair with an effect before a balanced one
            best = t.assign(_i=imbalance).sort_values(["p_value", "_i", "algorithm_a", "algorithm_b"],
                                                      kind="stable").iloc[0]
            outcomes = _outcomes(g, best["algorithm_a"], best["algorithm_b"])
            significant = bool(best["p_holm"] < alpha)
            need, now = instances_needed(outcomes, have, sizes[family], significant, seed, alpha)
            row.update(a=best["algorithm_a"], b=best["algorithm_b"], p_holm=float(best["p_holm"]),
                       significant=significant, power_now=now, instances_needed=need)
        row["power"] = _line(row)
        rows.append(row)
    return pd.DataFrame(rows)


def _outcomes(g: pd.DataFrame, a: str, b: str) -> np.ndarray:
    """Per instance both ran on: 1 a wins, ½ tie, 0 b wins (medians over replicates; statistics.pairwise_tests)."""
    table = g.pivot_table(index=["instance", "seed"], columns="algorithm", values="calls", aggfunc="first")
    pairs = statistics.paired_instances(table, a, b)
    return effects.outcomes([np.median(p[:, 0]) for p in pairs], [np.median(p[:, 1]) for p in pairs])


def _line(row: dict) -> str:
    """The power line, in words: the strongest pair, whether significant, and the instances its effect needs."""
    if not row["a"]:
        return f"{row['instances']} instances: no pair to test"
    head = (f"{row['a']} vs {row['b']} (strongest of {row['pairs']}; Holm over {row['family_pairs']} pairs): "
            f"p_holm {row['p_holm']:.3g} with {row['instances']} instances")
    need = row["instances_needed"]
    if need == "no effect observed":
        return head + "; no effect observed (as many wins as losses)"
    if row["significant"]:
        return head + "; significant"
    power = "" if math.isnan(row["power_now"]) else f" (power now {row['power_now']:.2f})"
    return head + f"; not significant{power}: the observed effect needs {need} instances for 80 % power"
