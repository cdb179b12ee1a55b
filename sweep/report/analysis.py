"""The numbers behind reports: final values, medians over seeds, quantile bands, the TFBO paper's
relative average change, convergence fractions and fitted log–log exponents.
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from sweep.results.runs import field

QUANTILES = (0.25, 0.5, 0.75)


def final_value(summary: dict[str, Any], metric: str, goal: str = "min") -> float:
    """A run's final `metric`; a diverged run counts as the worst value (±inf), a failed one as NaN."""
    if summary["status"] == "diverged":
        return math.inf if goal == "min" else -math.inf
    final = summary.get("final") or {}
    value = final.get(metric)
    return float(value) if isinstance(value, (int, float)) and summary["status"] == "finished" else math.nan


def median(values: Sequence[float]) -> float:
    """Median over seeds, ignoring failed (NaN) runs; ±inf (diverged) runs take part."""
    kept = [x for x in values if not math.isnan(x)]
    if len(kept) == 1:  # one seed: its value (NumPy's median of one value costs ~20 µs, 10⁵ configurations seconds)
        return float(kept[0])
    v = np.asarray(kept, dtype=float)
    return float(np.median(v)) if v.size else math.nan


def quantiles(values: Sequence[float], qs: Sequence[float] = (0.25, 0.75)) -> list[float]:
    """Linear-interpolation quantiles of the non-NaN values; an interval touching ±inf gives ±inf."""
    kept = [x for x in values if not math.isnan(x)]
    if len(kept) == 1:  # every quantile of one value is that value
        return [float(kept[0])] * len(qs)
    v = np.asarray(kept, dtype=float)
    if not v.size:
        return [math.nan] * len(qs)
    lo = np.quantile(v, qs, method="lower")
    hi = np.quantile(v, qs, method="higher")
    with np.errstate(invalid="ignore"):
        lin = np.quantile(v, qs)
    return [float(h if np.isinf(h) else (l_ if np.isinf(l_) else q)) for q, l_, h in zip(lin, lo, hi)]


def better(a: float, b: float, goal: str) -> bool:
    """True when `a` beats `b` for the goal (NaN never wins)."""
    if math.isnan(a):
        return False
    if math.isnan(b):
        return True
    return a < b if goal == "min" else a > b


def relative_average_change(grid_values: Sequence[float], reference: float) -> float:
    """|mean over the grid − reference| / |reference| (TFBO paper, Table 2)."""
    v = np.asarray(grid_values, dtype=float)
    if not v.size or not np.all(np.isfinite(v)) or not math.isfinite(reference) or reference == 0:
        return math.inf if v.size and np.any(np.isinf(v)) else math.nan
    return float(abs(v.mean() - reference) / abs(reference))


def log10_spread(grid_values: Sequence[float], floor: float = 0.0) -> float:
    """Decades between the largest and smallest value over the grid, each raised to `floor` first (values below
    the convergence threshold count as converged, not as more or less converged): a step-size sensitivity that does
    not rank a method converging to 1e-22 at one step size and 1e-7 at another as the most sensitive. +inf when a
    value is +inf (a diverged point), NaN when one is not positive (or NaN)."""
    v = np.asarray(grid_values, dtype=float)
    if not v.size or np.any(np.isnan(v)):
        return math.nan
    if np.any(np.isposinf(v)):
        return math.inf
    v = np.maximum(v, floor) if floor > 0 else v
    if np.any(v <= 0):
        return math.nan
    return float(np.log10(v.max()) - np.log10(v.min()))


def converged(records: list[dict[str, Any]], status: str, metric: str, below: float, relative: bool) -> bool:
    """A finished run converged when its final `metric` is at most `below` (times its initial value)."""
    if status != "finished" or not records:
        return False
    values = field(records, metric)
    first, last = values[0], values[-1]
    if not isinstance(last, (int, float)) or not math.isfinite(last):
        return False
    if relative:
        if not isinstance(first, (int, float)) or not math.isfinite(first):
            return False
        return abs(last) <= below * abs(first)
    return last <= below


def first_reach(records: list[dict[str, Any]], metric: str, target: float, x: str, goal: str = "min") -> float:
    """The `x` value (iteration, calls/total, time) of the first record reaching `target`, else NaN."""
    for r in records:
        v = r.get(metric)
        if isinstance(v, (int, float)) and (v <= target if goal == "min" else v >= target):
            return float(r[x])
    return math.nan


def quantile_band(curves: Sequence[tuple[Sequence[float], Sequence[float]]], grid: np.ndarray,
                  log_y: bool = True, quantiles: Sequence[float] = QUANTILES) -> np.ndarray:
    """Quantiles over seeds of curves interpolated on a common x grid (NaN where fewer than one seed).

    Each curve is interpolated (in log y when `log_y`) inside its own x range only, so a run that
    stopped early (diverged, or a shorter budget in calls or time) does not extend past its end.
    """
    rows = []
    for xs, ys in curves:
        xs, ys = np.asarray(xs, dtype=float), np.asarray(ys, dtype=float)
        ok = np.isfinite(xs) & np.isfinite(ys) & ((ys > 0) if log_y else True)
        xs, ys = xs[ok], ys[ok]
        row = np.full(grid.shape, np.nan)
        if xs.size:
            order = np.argsort(xs, kind="stable")
            xs, ys = xs[order], ys[order]
            inside = (grid >= xs[0]) & (grid <= xs[-1])
            vals = np.log(ys) if log_y else ys
            row[inside] = np.interp(grid[inside], xs, vals)
            if log_y:
                row = np.exp(row)
        rows.append(row)
    if not rows:
        return np.full((len(quantiles), grid.size), np.nan)
    data = np.vstack(rows)
    out = np.full((len(quantiles), grid.size), np.nan)
    have = np.any(np.isfinite(data), axis=0)
    if np.any(have):
        out[:, have] = np.nanquantile(data[:, have], quantiles, axis=0)
    return out


def held_band(curves: Sequence[tuple[Sequence[float], Sequence[float], float]], grid: np.ndarray, log_y: bool = True,
              quantiles: Sequence[float] = QUANTILES) -> np.ndarray:
    """Quantiles over runs on a positive (log-spaced) x grid, every run counted at every grid point.

    Each curve is (xs, ys, end): a run's records and the value it keeps once it has ended (its final
    value, or ±inf when it diverged), so a median never jumps when some runs end before others.
    Between records a run is interpolated linearly in log x (and in log y when `log_y`: a straight
    segment on a log–log plot); before its first positive x it has its first value (the start).
    """
    rows = [_held_row(np.asarray(xs, dtype=float), np.asarray(ys, dtype=float), float(end), grid, log_y)
            for xs, ys, end in curves]
    if not rows:
        return np.full((len(quantiles), grid.size), np.nan)
    return column_quantiles(np.vstack(rows), quantiles)


def _held_row(xs: np.ndarray, ys: np.ndarray, end: float, grid: np.ndarray, log_y: bool) -> np.ndarray:
    ok = np.isfinite(xs) & np.isfinite(ys) & ((ys > 0) if log_y else True)
    xs, ys = xs[ok], ys[ok]
    row = np.full(grid.shape, np.nan)
    if not xs.size:
        return row if np.isnan(end) else np.full(grid.shape, end)
    order = np.argsort(xs, kind="stable")
    xs, ys = xs[order], ys[order]
    pos = xs > 0
    if not pos.any():
        return np.full(grid.shape, end)
    px, py = xs[pos], ys[pos]
    inside = (grid >= px[0]) & (grid <= px[-1])
    vals = np.interp(np.log(grid[inside]), np.log(px), np.log(py) if log_y else py)
    row[inside] = np.exp(vals) if log_y else vals
    row[grid < px[0]] = ys[0]
    row[grid > px[-1]] = end
    return row


def column_quantiles(data: np.ndarray, quantiles: Sequence[float] = QUANTILES) -> np.ndarray:
    """Quantiles (linear interpolation) of each column over its non-NaN rows; ±inf rows take part, and an
    interval touching ±inf gives ±inf. Vectorised: np.nanquantile loops over columns when NaNs are present."""
    srt = np.sort(data, axis=0)  # NaNs last, ±inf in order before them
    n = np.sum(~np.isnan(data), axis=0)
    out = np.full((len(quantiles), data.shape[1]), np.nan)
    have = n > 0
    cols = np.nonzero(have)[0]
    for i, q in enumerate(quantiles):
        pos = q * (n[have] - 1)
        lo_i, hi_i = np.floor(pos).astype(int), np.ceil(pos).astype(int)
        lo, hi = srt[lo_i, cols], srt[hi_i, cols]
        with np.errstate(invalid="ignore"):
            lin = lo + (pos - lo_i) * (hi - lo)
        out[i, have] = np.where(np.isinf(hi), hi, np.where(np.isinf(lo), lo, lin))
    return out


def common_grid(curves: Sequence[tuple[Sequence[float], Sequence[float]]], n: int = 100, log_x: bool = True) -> np.ndarray:
    """An x grid spanning every curve (geometric from the smallest positive x when `log_x`)."""
    xs = np.concatenate([np.asarray(c[0], dtype=float) for c in curves]) if curves else np.array([])
    xs = xs[np.isfinite(xs)]
    if log_x:
        xs = xs[xs > 0]
    if not xs.size:
        return np.array([])
    lo, hi = xs.min(), xs.max()
    if lo == hi:
        return np.array([lo])
    return np.geomspace(lo, hi, n) if log_x else np.linspace(lo, hi, n)


def fit_loglog(x: Sequence[float], y: Sequence[float]) -> tuple[float, float, float]:
    """Least-squares fit log y = p log x + c on the finite positive points: (p, c, R²); NaNs if < 2 points."""
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    ok = np.isfinite(x) & np.isfinite(y) & (x > 0) & (y > 0)
    if ok.sum() < 2 or np.unique(x[ok]).size < 2:
        return math.nan, math.nan, math.nan
    lx, ly = np.log(x[ok]), np.log(y[ok])
    p, c = np.polyfit(lx, ly, 1)
    resid = ly - (p * lx + c)
    total = np.sum((ly - ly.mean()) ** 2)
    r2 = 1.0 - float(np.sum(resid ** 2) / total) if total > 0 else 1.0
    return float(p), float(c), r2
