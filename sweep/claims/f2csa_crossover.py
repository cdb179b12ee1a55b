"""F2CSA paper §6.4's crossover: where F2CSA's cost per iteration falls below a Hessian-based method's, as an interval.

The crossover is read on the medians over seeds (log–log interpolation between measured d; one-sided when it is
not inside the axis) and its 95 % interval is a bootstrap over the seeds, paired (each resample keeps a seed's
F2CSA and baseline runs together). Remark 4.1's loop constant c is a free choice that decides the verdict: each
F2CSA entry is judged against the baselines of its own c (`crossover_by_c`), and the `sensitivity` rows show the
crossover and its verdict at every c the study ran.
"""
from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from typing import Any

import numpy as np

from sweep.claims.base import Estimate, Verdict, bootstrap, num

CROSS_NAME = "f2csa_crossover"
C_VALUES = ("0.5", "1", "2")  # the inner_c scale's values of Remark 4.1's constant


def crossover(ds: Sequence[float], first: Sequence[float], other: Sequence[float]) -> tuple[Estimate, str]:
    """Where `first` becomes and stays faster than `other`, as an interval: the d found by log–log interpolation
    between measured d (a point); a censored crossover is one-sided — at most the smallest d when `first` is faster
    at every d, at least the largest d when it is faster at none (the fitted power laws' crossing, an extrapolation,
    is only named in `how`); NaN with fewer than two usable d."""
    e = crossing(ds, first, other)
    if math.isnan(e.value):
        return e, "not measured"
    if e.high == math.inf:
        d, a, b = _usable(ds, first, other)
        k1, c1 = np.polyfit(np.log(d), np.log(a), 1)
        k2, c2 = np.polyfit(np.log(d), np.log(b), 1)
        fit = (f"fitted power laws cross at d ≈ {num(math.exp(min((c1 - c2) / (k2 - k1), 700.0)))}" if k2 > k1
               else "fitted power laws never cross")
        return e, f"not reached up to d = {e.value:g}: at least {e.value:g} ({fit})"
    if e.low == 0.0:
        return e, f"faster at every d from {e.value:g}: at most {e.value:g}"
    return e, "measured"


def _usable(ds: Sequence[float], first: Sequence[float], other: Sequence[float]) -> tuple[np.ndarray, ...]:
    d, a, b = (np.asarray(v, dtype=float) for v in (ds, first, other))
    ok = np.isfinite(a) & np.isfinite(b) & (a > 0) & (b > 0)
    return d[ok], a[ok], b[ok]


def crossing(ds: Sequence[float], first: Sequence[float], other: Sequence[float]) -> Estimate:
    """The crossover as an interval (see `crossover`), without the words."""
    d, a, b = _usable(ds, first, other)
    if d.size < 2:
        return Estimate.point(math.nan)
    diff = np.log(a) - np.log(b)
    if diff[-1] > 0:
        return Estimate(float(d[-1]), float(d[-1]), math.inf)
    slower = np.flatnonzero(diff > 0)
    if slower.size == 0:
        return Estimate(float(d[0]), 0.0, float(d[0]))
    i = int(slower[-1])
    w = diff[i] / (diff[i] - diff[i + 1])
    return Estimate.point(float(np.exp((1 - w) * np.log(d[i]) + w * np.log(d[i + 1]))))


def _medians(rows: Sequence[Sequence[float]]) -> list[float]:
    """Per d, the median over the seeds' values (NaN ignored; statistics.median: a bootstrap calls this often)."""
    cols = ([v for v in col if not math.isnan(v)] for col in zip(*rows))
    return [statistics.median(c) if c else math.nan for c in cols]


def seeded_crossover(ds: Sequence[float], mine: Sequence[Sequence[float]], other: Sequence[Sequence[float]],
                     seed: int = 0) -> tuple[Estimate, str]:
    """The crossover of the medians over seeds with its 95 % bootstrap interval over seeds (paired by position):
    `mine`, `other` hold one cost-per-iteration sequence (aligned with ds) per seed."""
    pairs = list(zip(mine, other))
    if not pairs:
        return Estimate.point(math.nan), "not measured"
    how = crossover(ds, _medians(mine), _medians(other))[1]

    def stat(cases: Sequence[tuple[Sequence[float], Sequence[float]]]) -> Estimate:
        return crossing(ds, _medians([a for a, _ in cases]), _medians([b for _, b in cases]))

    return bootstrap(pairs, stat, seed), how


def bounds_text(e: Estimate) -> str:
    """A crossover as printed: the point, or its interval."""
    return e.text() if e.low == e.high else f"{num(e.value)} [{num(e.low)}, {num(e.high)}]"


def crossover_by_c(params: dict[str, dict[str, Any]], pairs: dict[str, list[str]], c_of: dict[str, str],
                   crossings: dict[tuple[str, str], Estimate], verdicts: list[Verdict]) -> list[dict[str, Any]]:
    """One row per F2CSA entry: its inner-loop constant c (`c_of`), loop lengths, crossover d with its interval
    against each baseline of the same c (`crossings[(entry, baseline)]`), and the crossover verdict."""
    out = []
    for s, bases in pairs.items():
        cfg = params.get(s, {})
        v = next((v for v in verdicts if v.criterion == CROSS_NAME and v.claim.startswith(f"{s}:")), None)
        row = {"entry": s, "c": c_of[s], "steps": f"{cfg.get('lower_max_iter')} + {cfg.get('inner_max_iter')}",
               "baseline_steps": ", ".join(str(params.get(b, {}).get("pd_max_iter")) for b in bases)}
        for b in bases:
            e = crossings[(s, b)]
            row[f"crossover_vs_{b.split('_c')[0]}"] = e.value
            row[f"bounds_vs_{b.split('_c')[0]}"] = bounds_text(e)
        row["verdict"] = v.status if v else "not measured"
        out.append(row)
    return sorted(out, key=lambda r: float(r["c"]) if r["c"].replace(".", "", 1).isdigit() else math.inf)


def sensitivity_rows(by_c: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The crossover verdict at each loop constant c the study ran; a c of Remark 4.1's grid it did not run is a row
    that says where it is measured."""
    rows = [{"choice": "Remark 4.1's loop constant c (the paper leaves it open)", "value": f"c = {r['c']}",
             "statement": "crossover near d = 1000",
             "measured [95%]": "; ".join(f"vs {k[len('bounds_vs_'):]} d ≈ {v}" for k, v in r.items()
                                         if k.startswith("bounds_vs_")),
             "verdict": r["verdict"]} for r in by_c]
    ran = {r["c"] for r in by_c}
    rows += [{"choice": "Remark 4.1's loop constant c (the paper leaves it open)", "value": f"c = {c}",
              "statement": "crossover near d = 1000", "measured [95%]": "not run at this scale (`--scale inner_c`)",
              "verdict": "not measured"} for c in C_VALUES if c not in ran]
    return sorted(rows, key=lambda r: float(r["value"][4:]))
