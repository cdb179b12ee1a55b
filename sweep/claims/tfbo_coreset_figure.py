"""The figure of the `tfbo_coreset` claim (sweep.claims.tfbo_coreset): TFBO Table 1's A_T and FGT_T per stream,
Table 2's A_T against the initial value and Fig. 3's upper loss against running time."""
from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np

from sweep.claims.base import clock, initial, num
from sweep.claims.tfbo_coreset_setup import DEFAULT_VALUE, SCENARIOS
from sweep.report import analysis as an, figures
from sweep.results.runs import RunData


def plot_tables(t1: list[dict[str, Any]], t2: list[dict[str, Any]], curves: dict[str, dict[int, RunData]], path: Path) -> Path:
    """Table 1's bars (measured beside the paper's), Table 2's A_T against the initial value, Fig. 3's F."""
    plt = figures.pyplot()
    fig, axes = plt.subplots(2, 3, figsize=(15, 8))
    for j, (metric, unit) in enumerate((("A_T", "_%"), ("FGT_T", ""))):
        for i, scen in enumerate(SCENARIOS):
            ax = axes[j][i]
            _bars(ax, [r for r in t1 if r["scenario"] == scen], metric, unit)
            ax.set_title(f"Table 1, {scen}: {metric} (bars: measured, ×: paper)", fontsize=9)
    _table2_panel(axes[0][2], [r for r in t2 if r["scenario"] == "balanced"])
    _fig3_panel(axes[1][2], curves)
    return figures.save_figure(fig, path, dpi=80)


def _not_run_panel(ax: Any) -> None:
    ax.text(0.5, 0.5, "not run at this scale", ha="center", va="center", transform=ax.transAxes)
    ax.set_xticks([])
    ax.set_yticks([])


def _bars(ax: Any, rows: list[dict[str, Any]], metric: str, unit: str) -> None:
    if not rows:
        return _not_run_panel(ax)
    labs = [r["algorithm"] for r in rows]
    vals = [r[f"{metric}{unit}"] for r in rows]
    err = [[r[f"{metric}{unit}"] - r[f"{metric}_low"] for r in rows], [r[f"{metric}_high"] - r[f"{metric}{unit}"] for r in rows]]
    xs = np.arange(len(rows))
    ax.bar(xs, vals, yerr=err, color=[figures.algorithm_colour(lab) for lab in labs], alpha=0.8, capsize=3)
    ax.plot(xs, [r[f"paper_{metric}{unit}"] for r in rows], "kx", ms=8)
    ax.set_xticks(xs, labs, rotation=30, fontsize=7)
    ax.set_ylabel(metric + (" (%)" if unit else ""))


def _table2_panel(ax: Any, rows: list[dict[str, Any]]) -> None:
    ax.set_title("Table 2, balanced: A_T against the initial value", fontsize=9)
    if not any(math.isfinite(r["rel_avg_change_%"]) for r in rows):
        return _not_run_panel(ax)
    for r in rows:
        keys = [k for k in r if k.startswith("A_T_%_at_")]
        xs = [float(k.rsplit("_", 1)[1]) for k in keys]
        ax.plot(xs, [r[k] for k in keys], "o-", color=figures.algorithm_colour(r["algorithm"]),
                label=f"{r['algorithm']} ({num(r['rel_avg_change_%'])}%; paper {num(r['paper_rel_avg_change_%'])}%)")
    ax.axvline(DEFAULT_VALUE, color="k", lw=0.6, ls=":")
    ax.set_xlabel("initial value (α0 = β0 = γ0; BCSR's rates)")
    ax.set_ylabel("A_T (%), mean over instances")
    figures.panel_legend(ax)


def _fig3_panel(ax: Any, curves: dict[str, dict[int, RunData]]) -> None:
    ax.set_title("Fig. 3, balanced (sum over tasks): F against running time", fontsize=9)
    if not curves:
        return _not_run_panel(ax)
    starts = [initial(r, "F") for by in curves.values() for r in by.values()]
    for lab, by in curves.items():
        rs = list(by.values())
        its = sorted({rec["iteration"] for r in rs for rec in r.records if rec["iteration"] > 0})
        F = [an.median([rec["F"] for r in rs for rec in r.records if rec["iteration"] == i and "F" in rec]) for i in its]
        t = [an.median([rec[clock(r)] for r in rs for rec in r.records if rec["iteration"] == i]) for i in its]
        ax.plot(t, F, "o-", ms=3, color=figures.algorithm_colour(lab), label=lab)
    if starts:
        ax.axhline(an.median(starts), color="k", lw=0.8, ls=":", label="F at the start")
    ax.set_xscale("log")
    ax.set_xlabel("CPU seconds (stepping thread), log scale")
    ax.set_ylabel("upper loss F, median over instances")
    figures.panel_legend(ax)
