"""Convergence and regret curves: the median over seeds and its 25–75% band against iterations, oracle
calls and compute seconds, one row of panels per axis value (a study without an axis has one row).

Every seed counts at every x: a run that ended is held at its final value, a diverged run at the worst
value (+∞ for a metric to minimise), so a median never jumps when some seeds end before others; the
caption says so. With more than `MANY` configurations in a panel only the best `BEST` of each algorithm
(by median final value) are drawn in colour with a legend entry; the rest are faint grey lines
(at most `FAINT` a panel, evenly spaced).
"""
from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np

from sweep.report import analysis as an
from sweep.report import run_arrays as ra
from sweep.report.figures import (algorithm_colour, algorithm_styles, legend, log_ticks, pyplot, save_figure,
                                  seeds_text, use_log)
from sweep.report.tables import axis_order
from sweep.results.runs import RunData, axis_text, config_label, group, problem_label

X_AXES = (("iteration", "iterations"), ("calls/total", "oracle calls"), ("time", "compute seconds"))
#: Configurations a panel shows in colour before it labels only the best ones.
MANY = 12
BEST = 3
#: Faint lines a panel draws at most: beyond, an evenly spaced sample of the other configurations (10⁵ grey lines
#: are a grey blot that took most of a 10⁵-run report's time and memory).
FAINT = 400
#: Quantiles over configurations drawn for the others of an algorithm when they are more than FAINT: a band between
#: the first and last, the middle one dotted (computed over FAINT of them evenly spaced in rank of final value).
SPREAD = (0.1, 0.5, 0.9)
CAPTION = ("median and 25–75% band over {n}; a run that ended is held at its final value, a diverged run at "
           "the worst value ({worst}; × where it diverged)")


def _rows(runs: list[RunData]) -> list[tuple[Any, list[RunData]]]:
    """The runs by axis value (the reference of a sensitivity study first), in axis order."""
    by: dict[Any, list[RunData]] = defaultdict(list)
    for r in runs:
        by[repr(r.point["coords"].get("axis"))].append(r)
    return sorted(((v[0].point["coords"].get("axis"), v) for v in by.values()),
                  key=lambda t: (t[0] is not None, axis_order(t[0])))


def _row_title(point: dict[str, Any], axis_name: str | None) -> str:
    """The axis value of a row of panels ('step ×2', 'T=100'; the unscaled reference of a sensitivity study)."""
    text = axis_text(point, axis_name)
    return "reference (unscaled step sizes)" if text == "reference" else text


def _end(r: RunData, y: str, goal: str) -> float:
    """What a run counts as after its last record: its final value, or the worst value once diverged."""
    if r.status == "diverged":
        return math.inf if goal == "min" else -math.inf
    last = next((rec[y] for rec in reversed(r.records) if isinstance(rec.get(y), (int, float))), math.nan)
    return float(last)


def _curves(runs: list[RunData], x: str, y: str, goal: str) -> list[tuple[list[float], list[float], float]]:
    out = []
    for r in runs:
        pts = [(rec[x], rec[y]) for rec in r.records if isinstance(rec.get(x), (int, float))
               and isinstance(rec.get(y), (int, float))]
        if pts:
            out.append(([a for a, _ in pts], [b for _, b in pts], _end(r, y, goal)))
    return out


def _finals(runs: list[RunData], y: str, goal: str) -> tuple[np.ndarray, dict[int, int]]:
    """Every run's final `y` (`analysis.final_value`, from the store's columns at once) and each run's place there."""
    return ra.final_values(ra.RunIndex.of(runs), y, goal), {id(r): i for i, r in enumerate(runs)}


def _ranks(series: dict[str, list[RunData]], finals: tuple[np.ndarray, dict[int, int]], goal: str) -> dict[str, float]:
    """Each configuration's median final value (`finals`) as a key to sort by, best first (NaN last)."""
    values, at = finals
    ids = np.repeat(np.arange(len(series)), [len(rs) for rs in series.values()])
    vals = values[np.fromiter((at[id(r)] for rs in series.values() for r in rs), dtype=np.int64, count=len(ids))]
    med = ra.group_medians(ids, vals, len(series))
    key = np.where(np.isnan(med), np.inf, med if goal == "min" else -med)
    return dict(zip(series, key.tolist()))


def _ranked(series: dict[str, list[RunData]], ranks: dict[str, float]) -> set[str]:
    """The configurations drawn in colour: all of them, or the best BEST per algorithm label when many."""
    if len(series) <= MANY:
        return set(series)
    by_label: dict[str, list[tuple[float, str]]] = defaultdict(list)
    for cfg, rs in series.items():
        by_label[rs[0].point["label"]].append((ranks[cfg], cfg))
    return {cfg for ranked in by_label.values() for _, cfg in sorted(ranked)[:BEST]}


def _draw(ax: Any, curves: list, grid: np.ndarray, log_y: bool, style: dict[str, Any] | None) -> np.ndarray:
    """One configuration's median (and band with ≥ 2 seeds); faint and bandless when `style` is None."""
    q = an.held_band(curves, grid, log_y=log_y)
    if style is None:  # drawn by the caller, all faint lines in one collection
        return q
    ax.plot(grid, q[1], linewidth=1.4, zorder=3, **style)
    if len(curves) >= 2:
        ax.fill_between(grid, q[0], q[2], color=style["color"], alpha=0.15, linewidth=0, zorder=2)
    return q


def _mark_divergence(ax: Any, runs: list[RunData], x: str, y: str, color: Any) -> None:
    """An × at the last finite record of every diverged run: where it blew up."""
    for r in runs:
        last = r.records[-1] if r.records else None
        if r.status == "diverged" and last is not None and x in last and y in last and np.isfinite(last[y]):
            ax.plot([last[x]], [last[y]], marker="x", markersize=7, markeredgewidth=2, color=color, linestyle="none",
                    zorder=4)


def _limits(ax: Any, bands: list[np.ndarray], log_y: bool) -> None:
    """The y range of the finite medians and bands drawn (a blow-up or a faint line does not squash the rest)."""
    vals = np.concatenate([b[np.isfinite(b)] for b in bands]) if bands else np.array([])
    vals = vals[vals > 0] if log_y else vals
    if not vals.size:
        return
    lo, hi = float(vals.min()), float(vals.max())
    if log_y:  # 5% of the decades spanned as a margin, so no line runs along the frame
        a, b = np.log10(lo), np.log10(hi)
        pad = 0.05 * (b - a) if b > a else 0.1
        ax.set_ylim(10 ** (a - pad), 10 ** (b + pad))
    elif hi > lo:
        ax.set_ylim(lo - 0.05 * (hi - lo), hi + 0.05 * (hi - lo))


def _panel(ax: Any, series: dict[str, list[RunData]], shown: set[str], style: dict[str, dict[str, Any]],
           x: str, y: str, goal: str, log_y: bool, ranks: dict[str, float]) -> list[np.ndarray]:
    """Draw one panel; the bands of its coloured lines and of the spread of the others (for the shared y range)."""
    curves = {cfg: _curves(series[cfg], x, y, goal) for cfg in drawn(series, shown, ranks)}
    grid = an.common_grid([c[:2] for cs in curves.values() for c in cs], n=120)
    if not grid.size:
        ax.text(0.5, 0.5, f"no records with {x}", transform=ax.transAxes, ha="center", fontsize=8)
        return []
    bands, faint = [], {}
    for cfg in curves:
        q = _draw(ax, curves[cfg], grid, log_y, style[cfg] if cfg in shown else None)
        if cfg in shown:
            bands.append(q)
            _mark_divergence(ax, series[cfg], x, y, style[cfg]["color"])
        else:
            faint[cfg] = q[1]
    if len(series) - len(shown) > FAINT:  # too many to draw one by one: their spread, per algorithm label
        bands += _spread(ax, series, faint, grid)
    elif faint:  # one artist for hundreds of lines, below the coloured ones
        from matplotlib.collections import LineCollection

        lines = [np.column_stack([grid[ok], m[ok]]) for m in faint.values()
                 for ok in [np.isfinite(m) & ((m > 0) if log_y else True)]]
        ax.add_collection(LineCollection(lines, colors="0.75", linewidths=0.6, zorder=1))
    ax.set_xscale("log")
    if log_y:
        ax.set_yscale("log")
    ax.yaxis.set_tick_params(labelleft=True)  # shared y: every panel keeps its tick labels
    return bands


def _spread(ax: Any, series: dict[str, list[RunData]], medians: dict[str, np.ndarray], grid: np.ndarray
            ) -> list[np.ndarray]:
    """The SPREAD quantiles over configurations of the sampled configurations' medians, per algorithm label: a band
    between the outer two in the algorithm's colour and the middle one dotted; returns the bands."""
    by_label: dict[str, list[np.ndarray]] = defaultdict(list)
    algorithm = {}
    for cfg, m in medians.items():
        p = series[cfg][0].point
        by_label[p["label"]].append(m)
        algorithm[p["label"]] = p["algorithm"]
    out = []
    for label, ms in by_label.items():
        q = an.column_quantiles(np.vstack(ms), SPREAD)
        colour = algorithm_colour(algorithm[label])
        ax.fill_between(grid, q[0], q[2], color=colour, alpha=0.12, linewidth=0, zorder=1)
        ax.plot(grid, q[1], color=colour, linewidth=0.9, linestyle=":", zorder=1)
        out.append(q)
    return out


def drawn(series: dict[str, list[RunData]], shown: set[str], ranks: dict[str, float] | None = None) -> list[str]:
    """The configurations a panel draws: the coloured ones and the others, or `FAINT` of them evenly spaced in
    rank of their median final value (`ranks`; in the study's order without), from the best to the worst."""
    faint = [cfg for cfg in series if cfg not in shown]
    if len(faint) > FAINT:
        if ranks is not None:
            faint.sort(key=lambda cfg: ranks[cfg])
        faint = [faint[round(i * (len(faint) - 1) / (FAINT - 1))] for i in range(FAINT)]
    keep = shown | set(faint)
    return [cfg for cfg in series if cfg in keep]


def palette(runs: list[RunData]) -> dict[str, str]:
    """Configuration label -> algorithm name of a study's runs, in the study's order: a configuration is drawn in
    its algorithm's colour (the same in every study) and, among those of that colour, its line style by this
    order (the same in every figure of the study)."""
    return {config_label(p): p["algorithm"] for p in {id(r.point): r.point for r in runs}.values()}


def _styles(shown: Iterable[str], order: dict[str, str]) -> dict[str, dict[str, Any]]:
    """Styles of the configurations shown (`order`: the study's palette). With at most MANY configurations in
    the study a configuration keeps its line style in every figure, whichever subset a figure shows."""
    shown = list(dict.fromkeys(shown))
    if len(order) <= MANY and set(shown) <= set(order):
        full = algorithm_styles(order.items())
        return {cfg: full[cfg] for cfg in shown}
    return algorithm_styles((cfg, order.get(cfg, cfg)) for cfg in shown)


def plot_curves(runs: list[RunData], y: str, goal: str, title: str, path: Path, axis_name: str | None,
                x_axes: tuple[tuple[str, str], ...] = X_AXES, ylabel: str | None = None,
                order: dict[str, str] | None = None) -> Path:
    """`y` against each of `x_axes` (columns), one row per axis value, one line per configuration
    (coloured by its place in `order`, the study's `palette`, when given)."""
    plt = pyplot()
    rows = _rows(runs)
    fig, axes = plt.subplots(len(rows), len(x_axes), figsize=(5 * len(x_axes), 3.3 * len(rows)), squeeze=False,
                             sharey=True)
    log_y = use_log(ra.RunIndex.of(runs).every_number(y))
    finals = _finals(runs, y, goal)
    labels = {id(p): config_label(p) for p in {id(r.point): r.point for r in runs}.values()}
    per_row = [(dict(group(rs, lambda r: labels[id(r.point)])), rs) for _, rs in rows]
    ranks = [_ranks(series, finals, goal) for series, _ in per_row]
    shown_rows = [_ranked(series, rk) for (series, _), rk in zip(per_row, ranks)]
    style = _styles((cfg for (series, _), shown in zip(per_row, shown_rows) for cfg in series if cfg in shown),
                    order if order is not None else palette(runs))
    bands = []
    for (value, rs), (series, _), shown, rk, row_axes in zip(rows, per_row, shown_rows, ranks, axes):
        where = _row_title(rs[0].point, axis_name)
        for ax, (x, xl) in zip(row_axes, x_axes):
            bands += _panel(ax, series, shown, style, x, y, goal, log_y, rk)
            ax.set_xlabel(xl)
            ax.set_ylabel(ylabel or y)
            if where:
                ax.set_title(where, fontsize=9)
    _limits(axes[0][0], bands, log_y)  # one y range for every panel: rows compare at a glance
    for ax in axes.flat:
        log_ticks(ax.xaxis)
    handles, labels, note = _others_legend(plt, style, [(series, shown) for (series, _), shown in zip(per_row, shown_rows)])
    legend(fig, handles, labels)
    n = seeds_text(len(v) for series, _ in per_row for v in series.values())
    fig.suptitle(f"{title}\n" + CAPTION.format(n=n, worst="+∞" if goal == "min" else "−∞") + note, fontsize=10)
    return save_figure(fig, path)


def _others_legend(plt: Any, style: dict[str, dict[str, Any]], panels: list[tuple[dict[str, list[RunData]], set[str]]]
                   ) -> tuple[list[Any], list[str], str]:
    """Legend entries (the coloured configurations, then what stands for the others) and a caption line for the
    others when some row has more than FAINT of them (drawn as their spread, `_spread`)."""
    from matplotlib.patches import Patch

    handles: list[Any] = [plt.Line2D([], [], **style[c]) for c in style]
    labels = list(style)
    few = sum(len(s) - len(shown) for s, shown in panels if len(s) - len(shown) <= FAINT)
    if few:
        handles.append(plt.Line2D([], [], color="0.75", linewidth=0.6))
        labels.append(f"{few} other configurations (not among the {BEST} best of their algorithm)")
    many: dict[str, tuple[str, int]] = {}  # label -> (algorithm, how many others) in the rows drawn as a spread
    for series, shown in panels:
        if len(series) - len(shown) > FAINT:
            for cfg, rs in series.items():
                if cfg not in shown:
                    p = rs[0].point
                    many[p["label"]] = (p["algorithm"], many.get(p["label"], ("", 0))[1] + 1)
    lo, mid, hi = (f"{100 * q:g}%" for q in SPREAD)
    for label, (algorithm, k) in many.items():
        colour = algorithm_colour(algorithm)
        handles.append(Patch(facecolor=colour, alpha=0.3, edgecolor=colour, linestyle=":"))
        labels.append(f"{label}: {k} other configurations, {lo}–{hi} over them (median dotted)")
    note = (f"\nother configurations beyond {FAINT} a panel: the {lo}–{hi} band and the median over configurations "
            f"of their medians, from {FAINT} of them evenly spaced in rank of final value") if many else ""
    return handles, labels, note


def plot_convergence(runs: list[RunData], metric: str, goal: str, title: str, path: Path,
                     axis_name: str | None = None, online: bool = False, order: dict[str, str] | None = None) -> Path:
    """The metric against iterations (time steps of an online problem), oracle calls and compute seconds."""
    x_axes = ((X_AXES[0][0], "time steps t"), *X_AXES[1:]) if online else X_AXES
    return plot_curves(runs, metric, goal, title, path, axis_name, x_axes, order=order)


def plot_regret(runs: list[RunData], title: str, path: Path, axis_name: str | None = None,
                order: dict[str, str] | None = None) -> Path:
    """Cumulative local regret against t, one figure row per axis value, one panel per problem."""
    plt = pyplot()
    problems = list(dict.fromkeys(problem_label(r.point) for r in runs))
    rows = _rows(runs)
    fig, axes = plt.subplots(len(rows), len(problems), figsize=(5.5 * len(problems), 3.3 * len(rows)), squeeze=False,
                             sharey="col")
    shown_all: dict[str, dict[str, Any]] = {}
    cells = []
    finals = _finals(runs, "cumulative_regret", "min")
    for (value, rs), row_axes in zip(rows, axes):
        for ax, prob in zip(row_axes, problems):
            series: dict[str, list[RunData]] = defaultdict(list)
            for r in rs:
                if problem_label(r.point) == prob:
                    series[config_label(r.point)].append(r)
            rk = _ranks(series, finals, "min")
            shown = _ranked(series, rk)
            shown_all.update(dict.fromkeys(c for c in series if c in shown))
            cells.append((ax, series, shown, rk, _row_title(rs[0].point, axis_name), prob))
    style = _styles(shown_all, order if order is not None else palette(runs))
    values = [rec["cumulative_regret"] for r in runs for rec in r.records if isinstance(rec.get("cumulative_regret"), (int, float))]
    log_y = use_log(values)
    bands: dict[str, list[np.ndarray]] = defaultdict(list)
    for ax, series, shown, rk, where, prob in cells:
        if series:
            bands[prob] += _panel(ax, series, shown, style, "iteration", "cumulative_regret", "min", log_y, rk)
        ax.set_title(f"{prob}" + (f" · {where}" if where else ""), fontsize=9)
        ax.set_xlabel("t (time step)")
        ax.set_ylabel("cumulative local regret")
    for ax, prob in zip(axes[0], problems):
        _limits(ax, bands[prob], log_y)
    for ax in axes.flat:
        log_ticks(ax.xaxis)
    handles, labels, note = _others_legend(plt, style, [(series, shown) for _, series, shown, _, _, _ in cells])
    legend(fig, handles, labels)
    n = seeds_text(len(v) for _, series, _, _, _, _ in cells for v in series.values())
    fig.suptitle(f"{title}\n" + CAPTION.format(n=n, worst="+∞") + note, fontsize=10)
    return save_figure(fig, path)
