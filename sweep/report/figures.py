"""Report figures: shared style rules (matplotlib on the file-only Agg backend, imported only when a figure
is drawn) and the final metric along a study's axis. Convergence and regret curves are in `sweep.report.curves`.

Rules every figure follows: every panel has both axis labels; a caption says what the line and band are
and over how many seeds; legends sit outside the axes, right of the figure; more than 10 series get
distinct colours and line styles; a log y axis only when the values span more than 1.5 decades.
"""
from __future__ import annotations

import functools
import math
import re
import zlib
from collections import defaultdict
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from sweep.results.safe_files import open_file

#: Line styles that, combined with the 10 tab10 colours, tell up to 60 series apart.
LINESTYLES: tuple[Any, ...] = ("-", "--", ":", "-.", (0, (5, 1, 1, 1, 1, 1)), (0, (1, 4)))
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*")
#: The colours algorithms are drawn in: tab10, then Dark2 and two more (20 that tell apart).
PALETTE: tuple[str, ...] = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
                            "#bcbd22", "#17becf", "#1b9e77", "#d95f02", "#7570b3", "#e7298a", "#66a61e", "#e6ab02",
                            "#a6761d", "#000000", "#6a3d9a", "#b15928")
#: Each built-in algorithm's colour (an index into PALETTE) in every figure of every study: no two algorithms of a
#: built-in study of at most 20 share one. Other algorithms get one from their name.
ALGORITHM_COLOURS = {
    "soba": 0, "dtfbo": 1, "stfbo": 2, "aid_cg": 3, "aid_fp": 4, "amigo": 5, "bome": 6, "bsa": 7, "bsg1": 8,
    "bvfsm": 9, "f2ba": 10, "f2sa": 11, "fsla": 12, "itd": 13, "mrbo": 14, "penalty": 15, "saba": 16, "srba": 17,
    "stocbio": 18, "sustain": 19, "ttsa": 3, "vrbo": 4, "af2obo": 0, "dsblo": 1, "f2csa": 3, "f2obo": 1, "oagd": 2,
    "obbo": 3, "ogd": 0, "sobow": 4, "ssigd": 4, "bcsr": 0, "uniform": 7, "kmeans_features": 8, "greedy_coreset": 9,
}
#: A log y axis only when max / min of the (positive) values is at least this (1.5 decades).
LOG_SPAN = 30.0


def pyplot() -> Any:
    """matplotlib.pyplot on the file-only Agg backend (imported late: trials never need it)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


#: A log axis spanning more decades than this gets no minor ticks: unlabelled marks too dense to read there, and
#: drawing them was most of a report's time (hundreds of tick objects per axis, laid out at every draw).
MINOR_TICK_DECADES = 3


def save_figure(fig: Any, path: Path, dpi: int = 90) -> Path:
    """Lay out, write (legends outside the axes included) and close a figure; returns its path."""
    _thin_minor_ticks(fig)
    _plain_log_labels(fig)
    fig.tight_layout()
    with open_file(path, "wb") as fh:  # never through a link planted in the results directory
        fig.savefig(fh, format=Path(path).suffix.lstrip(".") or "png", dpi=dpi, bbox_inches="tight")
    pyplot().close(fig)
    return path


def _thin_minor_ticks(fig: Any) -> None:
    """No minor ticks on the log axes that span more than MINOR_TICK_DECADES decades."""
    from matplotlib import ticker

    for ax in fig.axes:
        for axis in (ax.xaxis, ax.yaxis):
            lo, hi = sorted(axis.get_view_interval())
            if axis.get_scale() == "log" and lo > 0 and math.log10(hi / lo) > MINOR_TICK_DECADES:
                axis.set_minor_locator(ticker.NullLocator())


_SUPERSCRIPTS = str.maketrans("-0123456789", "\u207b\u2070\u00b9\u00b2\u00b3\u2074\u2075\u2076\u2077\u2078\u2079")
_POWER = re.compile(r"\^\{(-?[0-9]+)\}")


def plain_label(label: str) -> str:
    """A log axis's mathtext tick label as the same text in plain characters: `$\\mathdefault{10^{-3}}$` ->
    10⁻³, `2\\times10^{-3}` -> 2×10⁻³; anything else unchanged."""
    if not (label.startswith("$\\mathdefault{") and label.endswith("}$")):
        return label
    text = _POWER.sub(lambda m: m.group(1).translate(_SUPERSCRIPTS), label[14:-2]).replace("\\times", "\u00d7")
    return label if any(c in text for c in "\\{}$^") else text.replace("-", "\u2212")


@functools.cache
def _plain_log_formatter() -> type:
    """matplotlib's log-axis formatter, its labels in plain characters (defined when a figure is first drawn)."""
    from matplotlib import ticker

    class PlainLogFormatter(ticker.LogFormatterSciNotation):
        def __call__(self, x: float, pos: int | None = None) -> str:
            return plain_label(super().__call__(x, pos))

    return PlainLogFormatter


def _plain_log_labels(fig: Any) -> None:
    """Log axes labelled in plain characters instead of mathtext: the same labels, without matplotlib's mathtext
    parser, which was a third of a report's figure time (~18 ms a distinct label)."""
    from matplotlib import ticker

    plain = _plain_log_formatter()
    for ax in fig.axes:
        for axis in (ax.xaxis, ax.yaxis):
            for get, put in ((axis.get_major_formatter, axis.set_major_formatter),
                             (axis.get_minor_formatter, axis.set_minor_formatter)):
                old = get()
                if type(old) is not ticker.LogFormatterSciNotation:  # a formatter a figure chose: kept
                    continue
                try:
                    put(plain(base=old._base, labelOnlyBase=old.labelOnlyBase, minor_thresholds=old.minor_thresholds,
                              linthresh=old._linthresh))
                except AttributeError:  # a matplotlib that keeps these elsewhere: its mathtext labels stay
                    continue


def styles(labels: Iterable[str]) -> dict[str, dict[str, Any]]:
    """Colour and line style per label, the same in every panel: up to 10 colours with solid lines, then
    each further block of 10 in the next line style (and, past 60, markers)."""
    plt = pyplot()
    out = {}
    for i, lab in enumerate(dict.fromkeys(labels)):
        style: dict[str, Any] = {"color": plt.cm.tab10(i % 10), "linestyle": LINESTYLES[(i // 10) % len(LINESTYLES)]}
        if i >= 10 * len(LINESTYLES):
            style["marker"] = MARKERS[(i // 60) % len(MARKERS)]
            style["markevery"] = 0.2
        out[lab] = style
    return out


def algorithm_colour(algorithm: str) -> str:
    """The algorithm's colour, the same in every study (SOBA is never green in one report and blue in the next)."""
    index = ALGORITHM_COLOURS.get(algorithm)
    return PALETTE[index if index is not None else zlib.crc32(algorithm.encode()) % len(PALETTE)]


def algorithm_styles(configs: Iterable[tuple[str, str]]) -> dict[str, dict[str, Any]]:
    """Style per configuration label from (label, algorithm name) pairs: the colour is the algorithm's; the
    configurations that share a colour (one algorithm's grid, or two algorithms of one colour) differ by line
    style, then by markers."""
    out: dict[str, dict[str, Any]] = {}
    used: dict[str, int] = defaultdict(int)
    for label, algorithm in configs:
        if label in out:
            continue
        colour = algorithm_colour(algorithm)
        i = used[colour]
        used[colour] += 1
        style: dict[str, Any] = {"color": colour, "linestyle": LINESTYLES[i % len(LINESTYLES)]}
        if i >= len(LINESTYLES):
            style["marker"] = MARKERS[(i // len(LINESTYLES) - 1) % len(MARKERS)]
            style["markevery"] = 0.2
        out[label] = style
    return out


def colors(labels: Iterable[str]) -> dict[str, Any]:
    """One colour per label, the same in every panel (tab10; tab20 past 10 labels)."""
    plt = pyplot()
    labs = list(dict.fromkeys(labels))
    cmap, n = (plt.cm.tab10, 10) if len(labs) <= 10 else (plt.cm.tab20, 20)
    return {lab: cmap(i % n) for i, lab in enumerate(labs)}


def legend(fig: Any, handles: Sequence[Any], labels: Sequence[str], title: str | None = None) -> None:
    """One legend for the whole figure, right of its panels (never over the data)."""
    if not handles:
        return
    per_column = 30
    fig.legend(handles, labels, loc="upper left", bbox_to_anchor=(1.0, 0.92), fontsize=8, title=title,
               title_fontsize=8, ncol=max(1, -(-len(labels) // per_column)), frameon=False)


def panel_legend(ax: Any, fontsize: int = 7) -> None:
    """A panel's own legend (entries that differ per panel, such as fitted exponents) below the panel."""
    handles, labels = ax.get_legend_handles_labels()
    if handles:
        ax.legend(handles, labels, fontsize=fontsize, loc="upper center", bbox_to_anchor=(0.5, -0.2),
                  ncol=2 if len(labels) > 3 else 1, frameon=False)


def use_log(values: Iterable[float]) -> bool:
    """Whether a y axis should be logarithmic: every finite value positive, spanning ≥ LOG_SPAN."""
    v = np.asarray([x for x in values if x is not None], dtype=float)
    v = v[np.isfinite(v)]
    return bool(v.size) and bool(np.all(v > 0)) and float(v.max() / v.min()) >= LOG_SPAN


def seeds_text(counts: Iterable[int]) -> str:
    """'3 seeds', '2–3 seeds' or '1 seed (no band)' for the numbers of runs behind each line."""
    c = sorted(set(counts))
    if not c:
        return "no seeds"
    if c[-1] == 1:
        return "1 seed (no band)"
    return f"{c[0]} seeds" if len(c) == 1 else f"{c[0]}–{c[-1]} seeds (a band where at least 2)"


def axis_ticks(ax: Any, values: Iterable[float]) -> None:
    """Ticks at the axis values themselves (at most 12), written plainly: 10, 20, 40 rather than 2×10¹."""
    vals = sorted(set(values))
    if 0 < len(vals) <= 12:
        ax.set_xticks(vals)
        ax.set_xticklabels([f"{v:g}" for v in vals])
        ax.xaxis.set_minor_formatter(pyplot().NullFormatter())


def log_ticks(axis: Any) -> None:
    """Readable ticks on a log axis: labelled 1-2-5 ticks when it spans under 1.5 decades, else powers of
    ten only (matplotlib otherwise labels minor ticks of a short range, and they overlap)."""
    from matplotlib import ticker

    lo, hi = sorted(axis.get_view_interval())
    if lo > 0 and hi / lo < 10 ** 1.5:
        axis.set_major_locator(ticker.LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
        axis.set_major_formatter(ticker.FuncFormatter(lambda v, _: f"{v:g}"))
    axis.set_minor_formatter(ticker.NullFormatter())


def panels(n: int, width: float = 4.6, height: float = 3.6, cols: int = 2) -> tuple[Any, list[Any]]:
    """A figure with n panels, at most `cols` per row."""
    plt = pyplot()
    cols = max(1, min(n, cols))
    rows = -(-n // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(width * cols, height * rows), squeeze=False)
    flat = [ax for row in axes for ax in row]
    for ax in flat[n:]:
        ax.set_visible(False)
    return fig, flat[:n]


def plot_axis(rows: list[dict[str, Any]], axis_name: str, metric: str, title: str, path: Path,
              log_x: bool = True, algorithms: dict[str, str] | None = None) -> Path:
    """Median final metric and its 25–75% range along the study axis: one panel per problem, one line per
    configuration (the band only where it has at least two seeds), in its algorithm's colour (`algorithms`:
    configuration label -> algorithm name; a label not in it is taken for an algorithm's name)."""
    key = f"median_{metric}"
    probs = list(dict.fromkeys(r["problem"] for r in rows)) or ["(no runs)"]
    style = algorithm_styles((r["algorithm"], (algorithms or {}).get(r["algorithm"], r["algorithm"])) for r in rows)
    fig, axes = panels(len(probs), width=5.2, height=3.8, cols=3)
    handles: dict[str, Any] = {}
    for ax, prob in zip(axes, probs):
        groups: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for r in rows:
            if r["problem"] == prob and isinstance(r[axis_name], (int, float)) and not isinstance(r[axis_name], bool):
                groups[r["algorithm"]].append(r)
        for alg, rs in groups.items():
            pts = sorted((float(r[axis_name]), r[key], r["q25"], r["q75"], r["seeds"]) for r in rs)
            xs, ys, lo, hi, n = (np.array(v, dtype=float) for v in zip(*pts))
            handles[alg] = ax.plot(xs, ys, marker="o", markersize=4, **{k: v for k, v in style[alg].items()
                                                                          if k != "markevery"})[0]
            if np.max(n) >= 2:
                ax.fill_between(xs, lo, hi, color=style[alg]["color"], alpha=0.15, linewidth=0)
        if log_x:
            ax.set_xscale("log")
        axis_ticks(ax, [float(r[axis_name]) for r in rows if r["problem"] == prob
                        and isinstance(r[axis_name], (int, float)) and not isinstance(r[axis_name], bool)])
        if use_log(r[key] for r in rows if r["problem"] == prob):
            ax.set_yscale("log")
        ax.set_title(prob, fontsize=9)
        ax.set_xlabel(axis_name)
        ax.set_ylabel(f"final {metric}")
    legend(fig, list(handles.values()), list(handles))
    fig.suptitle(f"{title}\nmedian and 25–75% over {seeds_text(r['seeds'] for r in rows)} "
                 "(a diverged run counts as the worst value)", fontsize=10)
    return save_figure(fig, path)
