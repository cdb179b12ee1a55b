"""`stepsize_sensitivity`: every declared initial step size scaled by factors (or set to values), against
the unscaled configuration (the TFBO paper's Table 2: `sensitivity.csv`, `sensitivity.png`)."""
from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import model_validator

from sweep.kinds.base import Kind, Tables, register
from sweep.report import analysis as an, figures, tables
from sweep.results.runs import RunData, config_label
from sweep.study.checks import Block, PositiveNumber, after, before, invalid, is_number, no_repeats, nonempty_list
from sweep.study.expand import Expansion
from sweep.study.model import ReportOptions
from sweep.study.record import StudyRecord

Steps = before(nonempty_list("values"), after(list[PositiveNumber], no_repeats()))


class StepAxis(Block):
    """Exactly one of `factors` (scale the initial step sizes) or `values` (set them)."""

    factors: Steps | None = None
    values: Steps | None = None

    @model_validator(mode="after")
    def _one(self) -> StepAxis:
        if (self.factors is None) == (self.values is None):
            raise invalid("give exactly one of factors (scale the initial step sizes) or values (set them)")
        return self


@register
class StepsizeSensitivity(Kind):
    """`axis: {factors: [0.5, 1, 2]}` or `{values: [2, 4, 6, 8]}`; the unscaled configuration is the reference."""

    name = "stepsize_sensitivity"
    doc = ("factors or values: every declared initial step size of every algorithm is scaled by each factor, "
           "or set to each value; the unscaled configuration is always run as the reference")
    Axis = StepAxis

    def resolve_axis(self, ctx: Expansion, axis: StepAxis) -> dict[str, Any]:
        """Every algorithm declares step sizes, and none of them is gridded (the axis sweeps them)."""
        for i, (a, cls) in enumerate(zip(ctx.algorithms, ctx.classes)):
            if not cls.step_sizes:
                ctx.errors.add(f"algorithms[{i}].name", f"'{a['name']}' declares no initial step sizes to sweep")
            for s in cls.step_sizes:
                if isinstance(a["params"].get(s), list):
                    ctx.errors.add(f"algorithms[{i}].params.{s}", "is an initial step size swept by the axis; give one value")
        return axis.model_dump(exclude_none=True)

    def default_metric(self, online: bool) -> str:
        """F offline (Table 2 compares final values)."""
        return "cumulative_regret" if online else "F"

    def axis_name(self, axis: dict[str, Any]) -> str | None:
        """step_size_factor or initial_step_size."""
        return "step_size_factor" if "factors" in axis else "initial_step_size"

    def algorithm_axis(self, ctx: Expansion, axis: dict[str, Any], i: int,
                       base: dict[str, Any]) -> list[tuple[Any, dict[str, Any] | None, dict[str, Any]]]:
        """One config per axis entry, plus the unscaled reference when no entry leaves it unchanged."""
        cls = ctx.classes[i]
        field = "factors" if "factors" in axis else "values"
        if field == "factors":
            bad = [s for s in cls.step_sizes if not is_number(base[s])]
            for s in bad:
                ctx.errors.add(f"algorithms[{i}].params.{s}", f"is {base[s]!r}, not a number, so axis factors cannot "
                                                               "scale it; give a number here or use axis values")
            if bad:
                return []
        out = []
        for k, v in enumerate(axis[field]):
            changes = {s: (base[s] * v if field == "factors" else v) for s in cls.step_sizes}
            full = ctx.build_on_axis(cls.Config, {**base, **changes}, f"axis.{field}[{k}]", f"algorithms[{i}] '{cls.name}'")
            out.append((v, full, {"reference": full == base, "in_grid": True}))
        if not any(extra["reference"] for _, _, extra in out):
            out.append((None, base, {"reference": True, "in_grid": False}))  # the reference of the table
        return out

    def report(self, runs: list[RunData], meta: StudyRecord, directory: Path) -> tuple[Tables, list[Path]]:
        """`sensitivity.csv` and `sensitivity.png` (the final metric at each step size of the grid)."""
        opts, axis_name = meta.report, meta.axis_name
        rows = tables.axis_table([r for r in runs if r.point["coords"].get("in_grid")], opts, axis_name)
        plot = figures.plot_axis(rows, axis_name, opts.metric, "step-size sensitivity", directory / "sensitivity.png",
                                 algorithms={config_label(r.point): r.point["algorithm"] for r in runs})
        return {"sensitivity": sensitivity_table(runs, opts, axis_name)}, [plot]

    def convergence_runs(self, runs: list[RunData]) -> list[RunData]:
        """The grid and the reference."""
        return [r for r in runs if r.point["coords"].get("reference") or r.point["coords"].get("in_grid")]


def sensitivity_table(runs: list[RunData], opts: ReportOptions, axis_name: str) -> list[dict[str, Any]]:
    """Median final metric per step size; the sensitivity, with the measure it is (`sensitivity_measure`); the
    relative average change vs the reference (TFBO Table 2), fraction converged.

    A minimised positive metric (‖∇F‖², errors) reaches machine precision at good step sizes, where a relative
    change of tiny numbers is noise: its sensitivity is the log10 spread of the medians over the grid, values below
    the convergence threshold counted at it. Other metrics (accuracy, F) keep the relative average change."""
    rows = []
    for (prob, cfg), rs in tables.by_problem_and_config(runs).items():
        by = tables.by_point(rs)
        grid = sorted(((v[0].point["coords"]["axis"], tables.stats(v, opts)) for v in by.values()
                       if v[0].point["coords"].get("in_grid")), key=lambda t: tables.axis_order(t[0]))
        refs = [tables.stats(v, opts) for v in by.values() if v[0].point["coords"].get("reference")]
        ref = refs[0]["median"] if refs else math.nan
        row = {"problem": prob, "algorithm": cfg}
        row.update({f"{axis_name}={a}": st["median"] for a, st in grid})
        grid_runs = [r for v in by.values() if v[0].point["coords"].get("in_grid") for r in v]
        conv = sum(tables.stats([r], opts)["converged"] for r in grid_runs)
        medians = [st["median"] for _, st in grid]
        change = an.relative_average_change(medians, ref)
        if opts.goal == "min" and medians and all(m > 0 for m in medians):
            row.update(sensitivity=an.log10_spread(medians, _converged_floor(grid_runs, opts)),
                       sensitivity_measure="log10_spread")
        else:
            row.update(sensitivity=change, sensitivity_measure="relative_average_change")
        row.update({"reference": ref, "relative_average_change": change,
                    "converged_fraction": conv / len(grid_runs) if grid_runs else math.nan,
                    "diverged_runs": sum(r.status == "diverged" for r in grid_runs), "grid_runs": len(grid_runs)})
        rows.append(row)
    return rows


def _converged_floor(runs: list[RunData], opts: ReportOptions) -> float:
    """The value below which the report's metric counts as converged (0 when convergence is judged on another
    metric): converged_below, times the median initial value when relative."""
    if opts.converged_metric != opts.metric:
        return 0.0
    if not opts.converged_relative:
        return float(opts.converged_below)
    starts = [r.records[0].get(opts.metric) for r in runs if r.records]
    starts = [float(s) for s in starts if isinstance(s, (int, float)) and math.isfinite(s) and s > 0]
    return float(opts.converged_below * np.median(starts)) if starts else 0.0
