"""Runtime distributions as optimizer benchmarks report them (COCO, IOHprofiler): the expected running time,
the empirical cumulative distribution of costs to reach many targets, and the area under it as one score.

- ERT (Hansen et al., COCO): the total cost of all runs, an unsuccessful run charged what it spent (its whole
  budget, or less when it diverged or stopped early), divided by the number of successful runs; +inf when no
  run succeeds.
- Runtime ECDF: over every (run, target) pair of a group, the fraction reached within cost κ. The targets are
  `ECDF_TARGETS` log-spaced levels τ of the convergence test between the study's largest and smallest τ.
- ECDF area: the area under the ECDF over log-cost from `FLOOR` to the budget, normalised to [0, 1]. A pair
  reached at cost c ≤ B contributes log(B / c) / log(B / FLOOR), an unreached pair 0; the area is their mean
  (1: every target reached at the floor; 0: none within the budget).
"""
from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pandas as pd

#: Number of log-spaced targets per problem of the runtime ECDFs.
ECDF_TARGETS = 50
#: Lower end of the cost axis of the ECDF area (one gradient-equivalent).
FLOOR = 1.0


def ecdf_taus(taus: Sequence[float], n: int = ECDF_TARGETS) -> np.ndarray:
    """n log-spaced levels from the largest to the smallest τ of the study."""
    hi, lo = max(taus), min(taus)
    return np.logspace(math.log10(hi), math.log10(lo), n) if hi > lo else np.array([hi])


def ert(costs: Sequence[float], spent: float | Sequence[float]) -> float:
    """Expected running time: (sum of successful costs + what each unsuccessful run spent) / successes (+inf: none).

    `costs`: one per run, +inf where the run never reached the target; `spent`: what each run spent in all (its
    last record's cost), or one number for every run (the budget).
    """
    c = np.asarray(costs, dtype=float)
    charge = np.broadcast_to(np.asarray(spent, dtype=float), c.shape)
    solved = np.isfinite(c)
    if not solved.any():
        return math.inf
    return float((c[solved].sum() + charge[~solved].sum()) / solved.sum())


def ecdf_area(costs: Sequence[float], budget: float, floor: float = FLOOR) -> float:
    """Normalised area under the runtime ECDF over log-cost in [floor, budget] (module docstring)."""
    if not budget > floor:
        raise ValueError(f"budget: must exceed the floor {floor}, got {budget!r}")
    c = np.asarray(costs, dtype=float)
    if c.size == 0:
        return math.nan
    with np.errstate(divide="ignore"):
        part = np.log(budget / np.clip(c, floor, None)) / math.log(budget / floor)
    return float(np.where(c <= budget, part, 0.0).mean())


def ecdf(costs: pd.DataFrame, cost: str, by: Sequence[str] = ("algorithm",)) -> pd.DataFrame:
    """The runtime ECDF of each group at every finite cost: columns `by`, x (cost), fraction."""
    rows = []
    for key, g in costs.groupby(list(by), sort=True):
        v = np.sort(g[cost].to_numpy(float))
        x = np.unique(v[np.isfinite(v)])
        frac = np.searchsorted(v, x, side="right") / v.size
        rows.append(pd.DataFrame({**dict(zip(by, key if isinstance(key, tuple) else (key,))), "x": x,
                                  "fraction": frac}))
    if not rows:
        return pd.DataFrame(columns=[*by, "x", "fraction"])
    return pd.concat(rows, ignore_index=True)


def ert_table(costs: pd.DataFrame, budgets: dict[str, float], by: Sequence[str] = ("problem", "tau", "algorithm")
              ) -> pd.DataFrame:
    """ERT per group on each cost axis of `budgets` (axis -> the budget an unsuccessful run is charged).

    Columns: the `by` columns, runs, successes, then ert_<axis> for each axis.
    """
    rows = []
    for key, g in costs.groupby(list(by), sort=True):
        first = g[next(iter(budgets))].to_numpy(float)
        row = {**dict(zip(by, key if isinstance(key, tuple) else (key,))), "runs": len(g),
               "successes": int(np.isfinite(first).sum())}
        row.update({f"ert_{axis}": ert(g[axis].to_numpy(float), b) for axis, b in budgets.items()})
        rows.append(row)
    return pd.DataFrame(rows, columns=[*by, "runs", "successes", *(f"ert_{a}" for a in budgets)])
