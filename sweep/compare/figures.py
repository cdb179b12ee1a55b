"""The benchmark report's figures besides the profiles: the chosen configurations' convergence as F − F_L,
the runtime ECDFs, and the tuning-budget curve (best-so-far against the number of trials)."""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from sweep.report import figures, tables

#: Smallest F − F_L drawn on a log axis (a run at the exact optimum up to rounding).
FLOOR = 1e-16
#: Most algorithms whose interquartile bands are drawn (more stack into one grey area).
MAX_BANDS = 8


def _band(ax: Any, x: np.ndarray, values: np.ndarray, label: str, style: dict[str, Any], band: bool) -> None:
    """Median line (and, with `band`, the interquartile band) of `values` (runs × x), NaN ignored."""
    with np.errstate(all="ignore"):
        med = np.nanmedian(values, axis=0)
        lo, hi = np.nanpercentile(values, [25, 75], axis=0)
    ax.plot(x, med, label=label, **style)
    if band:
        ax.fill_between(x, lo, hi, color=style["color"], alpha=0.12, linewidth=0)


def convergence(histories: pd.DataFrame, bounds: pd.DataFrame, metric: str, title: str, caption: str,
                path: Path) -> Path:
    """F − F_L against gradient-equivalents, per algorithm the median and IQR over its runs (log axes).

    `histories`: `profiles.history_frame` rows of one problem; `bounds`: `instance_bounds` (F_L per instance).
    Each run's gap at a cost is its value at its last record within that cost (a step curve).
    """
    h = histories.merge(bounds[["problem", "instance", "lower"]], on=["problem", "instance"])
    h = h.assign(gap=np.maximum((h[metric] - h["lower"]).to_numpy(float), FLOOR))
    positive = h.loc[h["calls"] > 0, "calls"]
    grid = np.geomspace(max(positive.min(), 1.0), max(positive.max(), 2.0), 80) if len(positive) else np.ones(1)
    names = sorted(h["algorithm"].unique())
    style = figures.styles(names)
    plt = figures.pyplot()
    fig, ax = plt.subplots(figsize=(7.0, 4.2))
    for name in names:
        curves = []
        for _, run in h[h["algorithm"] == name].groupby(["instance", "seed"], sort=True):
            run = run.sort_values("calls")
            idx = np.searchsorted(run["calls"].to_numpy(float), grid, side="right") - 1
            y = run["gap"].to_numpy(float)[np.clip(idx, 0, None)]
            curves.append(np.where(idx >= 0, y, np.nan))
        _band(ax, grid, np.array(curves), name, style[name], len(names) <= MAX_BANDS)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("gradient-equivalents")
    ax.set_ylabel(f"{metric} − F_L")
    ax.set_title(title, fontsize=9)
    ax.grid(True, alpha=0.3)
    figures.legend(fig, *ax.get_legend_handles_labels())
    if len(names) > MAX_BANDS:
        caption += f"\nmedians only: interquartile bands are drawn for at most {MAX_BANDS} algorithms"
    fig.text(0.5, -0.02, caption, ha="center", va="top", fontsize=8)
    return figures.save_figure(fig, path)


def runtime_ecdf(curves: Mapping[str, pd.DataFrame], budget: float, title: str, caption: str, path: Path,
                 cost_label: str = "gradient-equivalents") -> Path:
    """One panel per problem (and the aggregate): `runtime.ecdf` step curves, the budget marked."""
    fig, axes = figures.panels(len(curves), width=4.6, height=3.4, cols=3)
    names = sorted({a for c in curves.values() for a in c["algorithm"]})
    style = figures.styles(names)
    solved = [c["x"].min() for c in curves.values() if len(c)]
    left = max(1.0, 10 ** np.floor(np.log10(min(solved)))) if solved else 1.0  # from the decade of the first solve
    for ax, (problem, c) in zip(axes, curves.items()):
        for name in names:
            g = c[c["algorithm"] == name]  # an algorithm that reaches no target stays at 0
            last = g["fraction"].iloc[-1] if len(g) else 0.0
            xs = np.concatenate([[left], g["x"].to_numpy(float), [budget]])
            ys = np.concatenate([[0.0], g["fraction"].to_numpy(float), [last]])
            ax.step(xs, ys, where="post", label=name, **style[name])
        ax.axvline(budget, color="0.3", linewidth=0.8, linestyle="--")
        ax.set_xscale("log")
        ax.set_xlim(left, budget * 1.05)
        ax.set_ylim(-0.02, 1.02)
        ax.set_title(problem if problem != "all" else "all (pooled)", fontsize=9)
        ax.set_xlabel(f"{cost_label} (dashed: budget)")
        ax.set_ylabel("fraction of (run, target) pairs")
        ax.grid(True, alpha=0.3)
    figures.legend(fig, *axes[0].get_legend_handles_labels())
    fig.suptitle(title, fontsize=10)
    fig.text(0.5, -0.01, caption, ha="center", va="top", fontsize=8)
    return figures.save_figure(fig, path)


def tuning_curve(curve: pd.DataFrame, title: str, caption: str, path: Path) -> Path:
    """Per problem: best-so-far (median and IQR over tuning studies) against trials k = 1..n, one line per
    algorithm. `curve`: columns problem, algorithm, k, median, q25, q75."""
    problems_ = sorted(curve["problem"].unique())
    fig, axes = figures.panels(len(problems_), width=4.6, height=3.4, cols=2)
    names = sorted(curve["algorithm"].unique())
    style = figures.styles(names)
    curve = curve.assign(**{c: np.maximum(curve[c].to_numpy(float), FLOOR) for c in ("median", "q25", "q75")})
    for ax, prob in zip(axes, problems_):
        for name, g in curve[curve["problem"] == prob].groupby("algorithm", sort=True):
            ax.plot(g["k"], g["median"], label=name, marker="o", markersize=3, **style[name])
            if len(names) <= MAX_BANDS:
                ax.fill_between(g["k"], g["q25"], g["q75"], color=style[name]["color"], alpha=0.1, linewidth=0)
        values = curve.loc[curve["problem"] == prob, ["median", "q25", "q75"]].to_numpy(float).ravel()
        if figures.use_log(values):  # gaps at the exact optimum are drawn at FLOOR
            ax.set_yscale("log")
        figures.axis_ticks(ax, curve["k"].unique())
        ax.set_title(prob, fontsize=9)
        ax.set_xlabel("trials k per tuning study")
        ax.set_ylabel("best-so-far mean F − F_L (tuning)")
        ax.grid(True, alpha=0.3)
    handles: dict[str, Any] = {}
    for ax in axes:
        handles.update(zip(*reversed(ax.get_legend_handles_labels())))
    figures.legend(fig, list(handles.values()), list(handles))
    fig.suptitle(title, fontsize=10)
    if len(names) > MAX_BANDS:
        caption += f"; medians only: interquartile bands are drawn for at most {MAX_BANDS} algorithms"
    fig.text(0.5, -0.01, caption, ha="center", va="top", fontsize=8)
    return figures.save_figure(fig, path)


def slug_path(directory: Path, stem: str, problem: str) -> Path:
    """`<stem>_<problem slug>.png` in the report directory."""
    return directory / f"{stem}_{tables.slug(problem)}.png"


def best_so_far(frame: pd.DataFrame, bounds: pd.DataFrame, tune: Sequence[int]) -> pd.DataFrame:
    """The tuning-budget curve: per problem, algorithm and k, the median and IQR over studies of the best mean
    F − F_L on the tuning instances among trials 1..k (a failed run counts as +inf).

    `frame`: `benchmark.run_frame`; `bounds`: `benchmark.instance_bounds`.
    """
    t = frame[frame["instance"].isin(tune) & (frame["trial"] >= 1)]
    t = t.merge(bounds[["problem", "instance", "lower"]], on=["problem", "instance"])
    t = t.assign(gap=(t["score"] - t["lower"]).fillna(np.inf))
    with np.errstate(invalid="ignore"):
        per_trial = t.groupby(["problem", "algorithm", "study", "trial"], sort=True)["gap"].mean().fillna(np.inf)
    best = per_trial.groupby(level=["problem", "algorithm", "study"]).cummin().rename("best").reset_index()
    rows = []
    for (prob, name, k), g in best.groupby(["problem", "algorithm", "trial"], sort=True):
        q25, med, q75 = np.percentile(g["best"].to_numpy(float), [25, 50, 75], method="inverted_cdf")
        rows.append({"problem": prob, "algorithm": name, "k": int(k), "median": med, "q25": q25, "q75": q75,
                     "studies": len(g)})
    return pd.DataFrame(rows, columns=["problem", "algorithm", "k", "median", "q25", "q75", "studies"])
