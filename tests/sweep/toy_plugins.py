"""A study kind and a paper claim registered from outside the platform (what the README's recipe describes).

`budget_scaling` runs every configuration at several iteration budgets (it makes its own points, as a
tuning-protocol kind would) and reports the final metric against the budget with a fitted exponent;
`toy_more_budget_helps` checks that the final metric falls as the budget grows.
"""
from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from pydantic import Field

from sweep.claims import Measured, Verdict, claim
from sweep.kinds import Kind, register
from sweep.kinds.base import Tables, cartesian
from sweep.report import analysis as an, figures, tables
from sweep.results.runs import RunData, config_label, group, problem_label
from sweep.study.checks import Block, PositiveInt, after, before, no_repeats, nonempty_list
from sweep.study.expand import Expansion
from sweep.study.model import Point
from sweep.study.record import StudyRecord

Budgets = before(nonempty_list("iteration budgets"), after(list[PositiveInt], no_repeats()))


class BudgetAxis(Block):
    """The iteration budgets every configuration runs at."""

    values: Budgets = Field(None, validate_default=True)


@register
class BudgetScaling(Kind):
    """`axis: {values: [10, 20, 40]}`: each configuration at each iteration budget."""

    name = "budget_scaling"
    doc = "values: iteration budgets"
    Axis = BudgetAxis

    def axis_name(self, axis: dict[str, Any]) -> str | None:
        return "iterations"

    def expand(self, ctx: Expansion, axis: dict[str, Any]) -> list[Point]:
        return [dataclasses.replace(p, budget={**p.budget, "iterations": v}, coords={**p.coords, "axis": v})
                for p in cartesian(self, ctx, axis) for v in axis["values"]]

    def report(self, runs: list[RunData], meta: StudyRecord, directory: Path) -> tuple[Tables, list[Path]]:
        metric = meta.report.metric
        rows = []
        for (prob, cfg), rs in tables.by_problem_and_config(runs).items():
            budgets = sorted({r.point["coords"]["axis"] for r in rs})
            finals = [an.median([an.final_value({"status": r.status, "final": r.final}, metric)
                                 for r in rs if r.point["coords"]["axis"] == b]) for b in budgets]
            row = {"problem": prob, "algorithm": cfg, "exponent": an.fit_loglog(budgets, finals)[0]}
            row.update({f"iterations={b}": v for b, v in zip(budgets, finals)})
            rows.append(row)
        plot = figures.plot_axis(tables.axis_table(runs, meta.report, "iterations"), "iterations", metric,
                                 f"final {metric} against the budget", directory / "budget.png")
        return {"budget": rows}, [plot]


@claim("toy_more_budget_helps", kind="budget_scaling", title="more iterations, lower final metric (toy)",
       statement="the final metric falls with every doubling of the iteration budget.")
def more_budget_helps(meta: StudyRecord, runs: list[RunData], directory: Path) -> Measured:
    metric = meta.report.metric
    rows, verdicts = [], []
    for (prob, cfg), rs in group(runs, lambda r: (problem_label(r.point), config_label(r.point))).items():
        budgets = sorted({r.point["coords"]["axis"] for r in rs})
        finals = [an.median([r.final[metric] for r in rs if r.point["coords"]["axis"] == b]) for b in budgets]
        falls = all(b < a for a, b in zip(finals, finals[1:]))
        rows.append({"problem": prob, "algorithm": cfg, **{f"iterations={b}": v for b, v in zip(budgets, finals)}})
        verdicts.append(Verdict(f"{cfg} on {prob}: final {metric} falls as the budget grows", "it falls",
                                ", ".join(f"{v:.4g}" for v in finals), "agrees" if falls else "disagrees"))
    return Measured(f"median final {metric} over {len(meta.seeds)} seeds at each budget.", {"measured": rows},
                    verdicts)
