"""`dimension_scaling`: a dimension parameter of every problem; cost and time to target against it, with
fitted log–log exponents (`scaling.csv`, `scaling.png`)."""
from __future__ import annotations

import math
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import Field

from sweep.kinds.base import Tables, register
from sweep.kinds.param_axis import ParamAxis, ParamAxisKind
from sweep.report import analysis as an, figures, tables
from sweep.results.runs import RunData
from sweep.study.checks import PositiveNumber, after, before, invalid, no_repeats, nonempty_list
from sweep.study.model import ReportOptions
from sweep.study.record import StudyRecord


def _two_or_more(values: list[Any]) -> list[Any]:
    if len(values) < 2:
        raise invalid("needs at least 2 dimensions to fit a scaling exponent")
    return values


Dimensions = before(nonempty_list("values"), after(after(list[PositiveNumber], no_repeats()), _two_or_more))


class DimensionAxis(ParamAxis):
    """`param` and at least two positive `values`."""

    values: Dimensions = Field(None, validate_default=True)


@register
class DimensionScaling(ParamAxisKind):
    """`axis: {param: [dim_x, dim_y], values: [10, 100, 1000]}`; scaling exponents in the report."""

    name = "dimension_scaling"
    doc = "param (or [dim_x, dim_y]), values (>= 2): a dimension parameter of every problem"
    Axis = DimensionAxis
    timed = True  # seconds per iteration and seconds to the target against d

    def report(self, runs: list[RunData], meta: StudyRecord, directory: Path) -> tuple[Tables, list[Path]]:
        """`scaling.csv` (medians at each dimension, fitted exponents) and `scaling.png`."""
        rows = scaling_table(runs, meta.report, meta.axis_name)
        return {"scaling": rows}, [plot_scaling(rows, meta.axis_name, directory / "scaling.png")]


def scaling_table(runs: list[RunData], opts: ReportOptions, axis_name: str) -> list[dict[str, Any]]:
    """Per algorithm and quantity: medians over seeds at each dimension and the fitted log–log exponent."""
    rows = []
    for (prob, cfg), rs in tables.by_problem_and_config(runs).items():
        by_dim: dict[float, list[RunData]] = defaultdict(list)
        for r in rs:
            by_dim[float(r.point["coords"]["axis"])].append(r)
        dims = sorted(by_dim)
        for quantity, fn in _scaling_quantities(opts).items():
            ys = [an.median([fn(r) for r in by_dim[d]]) for d in dims]
            p, c, r2 = an.fit_loglog(dims, ys)
            row = {"problem": prob, "algorithm": cfg, "quantity": quantity, "exponent": p, "r2": r2}
            row.update({f"{axis_name}={d:g}": y for d, y in zip(dims, ys)})
            rows.append(row)
    return rows


def _scaling_quantities(opts: ReportOptions) -> dict[str, Any]:
    def per_iter(r: RunData) -> float:
        f = r.final or {}
        it = f.get("iteration") or 0
        return f["time"] / it if r.status == "finished" and it else math.nan

    out = {"seconds_per_iteration": per_iter}
    if opts.target is not None:
        for x, name in (("calls/total", "calls_to_target"), ("time", "seconds_to_target"), ("iteration", "iterations_to_target")):
            out[name] = (lambda r, x=x: an.first_reach(r.records, opts.metric, opts.target, x, opts.goal)
                         if r.status == "finished" else math.nan)
    return out


def plot_scaling(rows: list[dict[str, Any]], axis_name: str, path: Path) -> Path:
    """Log–log scaling of each quantity (one panel each) with the fitted line and exponent per configuration."""
    quantities = sorted({r["quantity"] for r in rows})
    labels = [f"{r['algorithm']} on {r['problem']}" for r in rows]
    style = figures.styles(labels)
    fig, axes = figures.panels(len(quantities), width=5.5, height=4.2, cols=3)
    handles: dict[str, Any] = {}
    for ax, qn in zip(axes, quantities):
        dims_seen = []
        for r in (r for r in rows if r["quantity"] == qn):
            dims = [(float(k.split("=", 1)[1]), v) for k, v in r.items() if k.startswith(f"{axis_name}=")]
            xs, ys = np.array([d for d, _ in dims]), np.array([v for _, v in dims], dtype=float)
            dims_seen += list(xs)
            lab = f"{r['algorithm']} on {r['problem']}"
            st = {k: v for k, v in style[lab].items() if k in ("color",)}
            ax.plot(xs, ys, "o", **st)
            line = None
            if math.isfinite(r["exponent"]):
                _, c, _ = an.fit_loglog(xs, ys)
                line = ax.plot(xs, np.exp(c) * xs ** r["exponent"], linestyle=style[lab]["linestyle"], **st)[0]
            where = f" in {qn}" if len(quantities) > 1 else ""
            handles.setdefault(f"{lab}: p = {tables.fmt(r['exponent'])}{where}",
                               line or ax.plot([], [], "o", **st)[0])
        ax.set_xscale("log")
        ax.set_yscale("log")
        figures.axis_ticks(ax, dims_seen)
        ax.set_xlabel(axis_name)
        ax.set_ylabel(qn.replace("_", " "))
        ax.set_title(qn, fontsize=9)
    figures.legend(fig, list(handles.values()), list(handles), title="points: median over seeds; lines: log–log fit")
    return figures.save_figure(fig, path)
