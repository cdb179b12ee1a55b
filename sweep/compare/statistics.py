"""Calls- and time-to-target with hierarchical bootstrap intervals, exact paired signed-rank tests on
instances with Holm's correction, Hodges–Lehmann effects, and a ranking that only separates methods where the
instances support it.

The independent unit is the problem *instance*. A benchmark scores each instance several times (once per
tuning study's chosen configuration); those scores share the instance and are not independent evidence, so
every test first takes, per algorithm, the median over an instance's replicates (studies) and then compares
instances. Intervals come from a hierarchical bootstrap: instances are resampled, then the replicates within
each resampled instance.

Runs that never reach the target (failed, diverged, or out of budget) count as +inf. A median is +inf when
more than half the values are; an interval bound of +inf says such resamples are plausible. The fraction of
runs reaching the target is reported beside them, since a median alone hides it.

Paired comparisons (sweep.compare.effects): per instance, a's median against b's — a win, a loss or a tie (two
censored medians tie) — the exact sign test on wins against losses, P(a beats b) with ties half and the log ERT
ratio, each with a bootstrap interval over instances; every number finite whatever the censoring. With n
instances not tied the smallest two-sided p-value is 2/2^n, so with m pairs Holm cannot go below m · 2/2^n: such
a group is not tested. Holm runs over the pairs of one group (one problem, budget and τ): that group is a family.
The exact signed-rank test (`signed_rank_test`) stays for callers that want it.
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from itertools import combinations

import numpy as np
import pandas as pd
from scipy import stats

from sweep.compare import effects

ALPHA = 0.05
CONFIDENCE = 0.95
RESAMPLES = 9999
BETTER, WORSE, SAME = "better", "worse", "no significant difference"
UNIT, REPLICATE = "instance", "seed"


# ------------------------------------------------------------------ hierarchical bootstrap
def _matrix(groups: Sequence[Sequence[float]]) -> tuple[np.ndarray, np.ndarray]:
    """Ragged groups as a NaN-padded (instances, replicates) matrix and the count of each row."""
    counts = np.array([len(g) for g in groups], dtype=int)
    out = np.full((len(groups), int(counts.max()) if len(groups) else 0), np.nan)
    for i, g in enumerate(groups):
        out[i, :len(g)] = np.asarray(g, dtype=float)
    return out, counts


def hierarchical_index(index: Sequence[Sequence[float]], rng: np.random.Generator,
                       n_resamples: int = RESAMPLES) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The draws of a hierarchical bootstrap of ragged groups: instances drawn with replacement (B, n), then
    within each drawn instance its replicates drawn with replacement (B, n, width; positions past the
    instance's own count are unused), and the count of each group."""
    counts = np.array([len(i) for i in index])
    n, width = len(index), int(counts.max())
    inst = rng.integers(0, n, size=(n_resamples, n))
    picks = (rng.random((n_resamples, n, width)) * counts[inst][..., None]).astype(int)
    return inst, picks, counts


def resampled_medians(groups: Sequence[Sequence[float]], draws: tuple) -> np.ndarray:
    """Per resample and drawn instance, the median of its drawn replicates, shape (B, n)."""
    inst, picks, counts = draws
    values, _ = _matrix(groups)
    picked = values[inst[..., None], picks]
    if (counts == counts[0]).all():
        return np.median(picked, axis=2)
    picked[np.arange(picks.shape[-1]) >= counts[inst][..., None]] = np.nan  # an instance keeps its own count
    return np.nanmedian(picked, axis=2)


def instance_medians(groups: Sequence[Sequence[float]]) -> np.ndarray:
    """The median over each instance's replicates."""
    return np.array([np.median(np.asarray(g, dtype=float)) for g in groups])


def bootstrap_median(groups: Sequence[Sequence[float]] | Sequence[float], seed: int = 0,
                     confidence: float = CONFIDENCE, n_resamples: int = RESAMPLES) -> tuple[float, float, float]:
    """(median, low, high): the median over instances of the per-instance medians, and its hierarchical
    percentile-bootstrap interval (+inf values allowed). A flat sequence is one replicate per instance.

    Fewer than two instances: the interval is (NaN, NaN). NaN values are not allowed (map them first).
    """
    groups = [np.atleast_1d(np.asarray(g, dtype=float)) for g in groups]
    if any(np.isnan(g).any() for g in groups):
        raise ValueError("values: NaN is not allowed (a run that never reaches the target is +inf)")
    if not groups:
        return math.nan, math.nan, math.nan
    median = float(np.median(instance_medians(groups)))
    if len(groups) < 2:
        return median, math.nan, math.nan
    draws = hierarchical_index(groups, np.random.default_rng(seed), n_resamples)
    stats_ = np.median(resampled_medians(groups, draws), axis=1)
    return median, *_percentiles(stats_, confidence)


def _percentiles(values: np.ndarray, confidence: float) -> tuple[float, float]:
    """The percentile interval, without interpolating towards an infinite neighbour."""
    tail = (1 - confidence) / 2 * 100
    lo, hi = np.percentile(values, [tail, 100 - tail], method="inverted_cdf")
    return float(lo), float(hi)


def time_to_target(costs: pd.DataFrame, by: Sequence[str] = ("problem", "tau", "algorithm"),
                   axes: Sequence[str] = ("calls", "seconds"), seed: int = 0,
                   confidence: float = CONFIDENCE, n_resamples: int = RESAMPLES,
                   unit: str = UNIT) -> pd.DataFrame:
    """Median cost to reach the target (over instances of the per-instance median) with hierarchical
    bootstrap intervals, per group.

    Input: `profiles.hitting_costs` (one row per run and τ; +inf where never reached); `unit` names the
    instance column (the rows of one instance are its replicates). Output columns: the `by` columns, n (runs),
    instances, reached, fraction, then for each cost axis <axis>_median, <axis>_low, <axis>_high.
    """
    missing = [c for c in (*by, *axes, unit) if c not in costs.columns]
    if missing:
        raise ValueError(f"costs: missing column '{missing[0]}'")
    rows = []
    for key, g in costs.groupby(list(by), sort=True):
        row = dict(zip(by, key if isinstance(key, tuple) else (key,)))
        first = g[axes[0]].to_numpy(float)
        row.update(n=len(g), instances=int(g[unit].nunique()), reached=int(np.isfinite(first).sum()),
                   fraction=float(np.isfinite(first).mean()))
        for axis in axes:
            groups = [x[axis].to_numpy(float) for _, x in g.groupby(unit, sort=True)]
            unknown = any(np.isnan(x).any() for x in groups)  # an axis the runs do not record (no samples)
            m, lo, hi = (math.nan,) * 3 if unknown else bootstrap_median(groups, seed, confidence, n_resamples)
            row.update({f"{axis}_median": m, f"{axis}_low": lo, f"{axis}_high": hi})
        rows.append(row)
    columns = [*by, "n", "instances", "reached", "fraction",
               *(f"{a}_{s}" for a in axes for s in ("median", "low", "high"))]
    return pd.DataFrame(rows, columns=columns)


# ------------------------------------------------------------------ paired tests
def holm(pvalues: Sequence[float]) -> np.ndarray:
    """Holm's step-down adjusted p-values: max over j ≤ i of min(1, (m − j + 1) p_(j)), in input order."""
    p = np.asarray(pvalues, dtype=float)
    order = np.argsort(p, kind="stable")
    m = p.size
    stepped = np.minimum(1.0, (m - np.arange(m)) * p[order])
    adjusted = np.empty(m)
    adjusted[order] = np.maximum.accumulate(stepped) if m else stepped
    return adjusted


def paired_differences(a: Sequence[float], b: Sequence[float]) -> np.ndarray:
    """a − b with two infinities of the same sign counted as a tie (0)."""
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    with np.errstate(invalid="ignore"):
        return np.where(a == b, 0.0, a - b)


def signed_rank_test(d: Sequence[float]) -> dict[str, float]:
    """Exact two-sided Wilcoxon signed-rank test of differences `d` (zeros dropped, ties averaged, ±inf ranked
    largest). Keys: n (non-zero differences), r_plus, r_minus, statistic (min of the two), p_value (1 when no
    difference is non-zero)."""
    d = np.asarray(d, dtype=float)
    if np.isnan(d).any():
        raise ValueError("differences: NaN is not allowed")
    nonzero = d[d != 0]
    ranks = _average_ranks(np.abs(nonzero))
    r_plus, r_minus = float(ranks[nonzero > 0].sum()), float(ranks[nonzero < 0].sum())
    out = {"n": int(nonzero.size), "r_plus": r_plus, "r_minus": r_minus, "statistic": min(r_plus, r_minus)}
    if nonzero.size == 0:
        return {**out, "p_value": 1.0}
    # Doubled ranks are integers; the null law of the positive rank sum is the convolution of each rank's
    # {0, r} with probability ½ each (every sign flip equally likely).
    doubled = np.rint(2 * ranks).astype(int)
    law = np.zeros(int(doubled.sum()) + 1)
    law[0] = 1.0
    for r in doubled:
        flipped = 0.5 * law
        flipped[r:] += 0.5 * law[:-r]
        law = flipped
    total, observed = doubled.sum(), round(2 * r_plus)
    extreme = np.abs(2 * np.arange(law.size) - total) >= abs(2 * observed - total)
    return {**out, "p_value": float(min(1.0, law[extreme].sum()))}


def _average_ranks(v: np.ndarray) -> np.ndarray:
    """Ranks 1..n with ties averaged (+inf ranks last): scipy's rankdata."""
    return stats.rankdata(v) if v.size else np.zeros(0)


def paired_wilcoxon(a: Sequence[float], b: Sequence[float]) -> dict[str, float]:
    """The exact signed-rank test of a − b (`signed_rank_test`) and the median difference."""
    d = paired_differences(a, b)
    return {**signed_rank_test(d), "median_difference": float(np.median(d)) if d.size else math.nan}


def paired_instances(table: pd.DataFrame, a: str, b: str, unit: str = UNIT) -> list[np.ndarray]:
    """Per instance where both ran: the (replicates, 2) values of a and b, replicate by replicate."""
    both = table[[a, b]].dropna()
    return [g.to_numpy(float) for _, g in both.groupby(level=unit, sort=True)]


def instance_differences(pairs: list[np.ndarray]) -> np.ndarray:
    """Per instance: median of a's replicates minus median of b's (a tie of infinities is 0)."""
    if not pairs:
        return np.zeros(0)
    a = np.array([np.median(p[:, 0]) for p in pairs])
    b = np.array([np.median(p[:, 1]) for p in pairs])
    return paired_differences(a, b)


def smallest_holm_p(pairs: int, units: int) -> float:
    """The smallest Holm-adjusted p-value m pairs can reach with n non-zero instance differences: m · 2/2^n."""
    return min(1.0, pairs * 2.0 ** (1 - units)) if pairs else 1.0


def instances_needed(pairs: int, alpha: float = ALPHA) -> int:
    """The fewest instances with which one of m pairs can be significant after Holm (m · 2/2^n < α)."""
    return int(math.floor(math.log2(2 * max(pairs, 1) / alpha))) + 1


def pairwise_tests(frame: pd.DataFrame, value: str = "calls", group: Sequence[str] = ("problem", "tau"),
                   unit: str = UNIT, replicate: str = REPLICATE, goal: str = "min", alpha: float = ALPHA,
                   seed: int = 0, n_resamples: int = RESAMPLES, spent: str = "spent") -> pd.DataFrame:
    """Every pair of algorithms in each group, tested on instances, Holm-corrected within the group.

    Rows are replicates (`unit`, `replicate`); per algorithm the replicates of an instance are reduced to their
    median, and a pair is compared instance by instance (sweep.compare.effects): wins, losses and ties, the exact
    sign test on wins against losses, P(a beats b) with ties half and the log ERT ratio (from the `spent` column:
    what each run spent in all; absent, NaN), each with a bootstrap interval over instances.
    Columns: the `group` columns, algorithm_a, algorithm_b (a < b alphabetically), units (instances both ran on),
    n (instances not tied), wins, losses, ties (a's), statistic (wins), p_value, p_holm, median_difference,
    p_beats, p_beats_low, p_beats_high, log_ert_ratio, log_ert_low, log_ert_high, test, verdict (for a: better,
    worse, or no significant difference at level `alpha` after Holm).
    """
    if goal not in ("min", "max"):
        raise ValueError(f"goal: must be one of min, max, got {goal!r}")
    rows = []
    for key, g in frame.groupby(list(group), sort=True):
        table = g.pivot_table(index=[unit, replicate], columns="algorithm", values=value, aggfunc="first")
        spend = (g.pivot_table(index=[unit, replicate], columns="algorithm", values=spent, aggfunc="first",
                               dropna=False).reindex_like(table) if spent in g else None)
        tests = [_pair(table, spend, a, b, goal, unit, seed, n_resamples)
                 for a, b in combinations(sorted(table.columns), 2)]
        adjusted = holm([t["p_value"] for t in tests])
        for t, p_holm in zip(tests, adjusted):
            t["p_holm"] = float(p_holm)
            direction = t.pop("direction")
            t["verdict"] = direction if p_holm < alpha else SAME
            rows.append({**dict(zip(group, key if isinstance(key, tuple) else (key,))), **t})
    return pd.DataFrame(rows, columns=[*group, *PAIR_COLUMNS])


PAIR_COLUMNS = ("algorithm_a", "algorithm_b", "units", "n", "wins", "losses", "ties", "statistic", "p_value", "p_holm",
                "median_difference", "p_beats", "p_beats_low", "p_beats_high", "log_ert_ratio", "log_ert_low",
                "log_ert_high", "test", "verdict")


def _pair(table: pd.DataFrame, spend: pd.DataFrame | None, a: str, b: str, goal: str, unit: str, seed: int,
          n_resamples: int) -> dict[str, object]:
    """The sign test of a against b on the instances where both ran, its effects, and which way a differs."""
    pairs = paired_instances(table, a, b, unit)
    d = instance_differences(pairs)
    o = effects.outcomes([np.median(p[:, 0]) for p in pairs], [np.median(p[:, 1]) for p in pairs], goal)
    wins, losses = int((o == 1).sum()), int((o == 0).sum())
    p_beats = effects.p_beats(o, seed, n_resamples=n_resamples)
    ratio = (math.nan,) * 3
    if spend is not None:
        ratio = effects.log_ert_ratio(*_charged(table, spend, a, b, unit), seed=seed, n_resamples=n_resamples)
    direction = SAME if wins == losses else BETTER if wins > losses else WORSE
    return {"algorithm_a": a, "algorithm_b": b, "units": len(pairs), "n": wins + losses, "wins": wins,
            "losses": losses, "ties": len(pairs) - wins - losses, "statistic": wins,
            "p_value": effects.sign_test(wins, losses),
            "median_difference": float(np.median(d)) if d.size else math.nan,
            "p_beats": p_beats[0], "p_beats_low": p_beats[1], "p_beats_high": p_beats[2],
            "log_ert_ratio": ratio[0], "log_ert_low": ratio[1], "log_ert_high": ratio[2], "test": effects.TEST,
            "direction": direction}


def _charged(table: pd.DataFrame, spend: pd.DataFrame, a: str, b: str, unit: str) -> list[np.ndarray]:
    """Per instance where both ran: the cost charged to a (hits' costs + censored runs' spend), a's hits, and b's."""
    both = table[[a, b]].notna().all(axis=1)
    cost, spent = table.loc[both, [a, b]], spend.loc[both, [a, b]]
    hit = np.isfinite(cost.to_numpy(float))
    charged = pd.DataFrame(np.where(hit, cost.to_numpy(float), spent.to_numpy(float)), index=cost.index)
    hits = pd.DataFrame(hit.astype(float), index=cost.index)
    c, h = charged.groupby(level=unit, sort=True).sum(min_count=1), hits.groupby(level=unit, sort=True).sum()
    return [c[0].to_numpy(float), h[0].to_numpy(float), c[1].to_numpy(float), h[1].to_numpy(float)]


def nonzero_units(frame: pd.DataFrame, value: str, unit: str = UNIT, replicate: str = REPLICATE) -> int:
    """The most non-zero instance differences any pair of the group has (what the screen may count on)."""
    table = frame.pivot_table(index=[unit, replicate], columns="algorithm", values=value, aggfunc="first")
    best = 0
    for a, b in combinations(sorted(table.columns), 2):
        d = instance_differences(paired_instances(table, a, b, unit))
        best = max(best, int((d != 0).sum()))
    return best


def ranking(tests: pd.DataFrame, group: Sequence[str] = ("problem", "tau")) -> pd.DataFrame:
    """Rank = 1 + number of algorithms significantly better (ties share a rank).

    Columns: the `group` columns, algorithm, rank, better_than, worse_than, no_difference (counts of
    the other algorithms), significantly_better (names of those it beats, comma-separated).
    """
    rows = []
    for key, g in tests.groupby(list(group), sort=True):
        names = sorted(set(g["algorithm_a"]) | set(g["algorithm_b"]))
        beats = {n: [] for n in names}
        for t in g.itertuples(index=False):
            if t.verdict == BETTER:
                beats[t.algorithm_a].append(t.algorithm_b)
            elif t.verdict == WORSE:
                beats[t.algorithm_b].append(t.algorithm_a)
        for n in names:
            beaten_by = sum(n in beats[m] for m in names)
            rows.append({**dict(zip(group, key if isinstance(key, tuple) else (key,))), "algorithm": n,
                         "rank": 1 + beaten_by, "better_than": len(beats[n]), "worse_than": beaten_by,
                         "no_difference": len(names) - 1 - len(beats[n]) - beaten_by,
                         "significantly_better": ", ".join(sorted(beats[n]))})
    columns = [*group, "algorithm", "rank", "better_than", "worse_than", "no_difference", "significantly_better"]
    return pd.DataFrame(rows, columns=columns).sort_values([*group, "rank", "algorithm"], ignore_index=True)
