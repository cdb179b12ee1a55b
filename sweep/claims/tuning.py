"""A comparator tuned over a grid, so that a comparison rests on a comparator that converges where it can.

A claim names each comparator's `Grid`: the values of its step size (label -> value), the paper's grid with its
section, or this study's own documented grid. `tune` picks, among the grid values whose runs are healthy
(`health`: not diverged, moved), the one with the best median final value of the comparator's own objective — the
quantity it optimises, never the metric a verdict judges — and says why when it cannot: fewer than two grid values
were run (`not tuned`), the best of a grid that asks for it (`edge`) is the smallest or largest value run (`not
tuned`: a better value may lie beyond it), or none is healthy. Any of these makes a comparison with that comparator
`not measured (comparator <name>: <why>)`, whichever way it would have gone. The `tuning` table records the grid,
its source and the pick.
"""
from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from typing import Any

from sweep.report import analysis as an
from sweep.claims.base import final, health, num
from sweep.results.runs import RunData


@dataclasses.dataclass(frozen=True)
class Grid:
    """A comparator's tuning grid: `values` (label -> step size), where it comes from (`source`: the paper's
    section, or this study's reason), and the objective tuning reads (`objective`, `goal`). `edge`: a best value at
    either end of the values run is `not tuned`. `accumulates`: the objective only grows during a run (a cumulative
    regret), so only a run stopped as diverged is unhealthy (`health` would read its growth as divergence)."""

    comparator: str
    param: str
    values: dict[str, float]
    source: str
    objective: str
    goal: str = "min"
    edge: bool = False
    accumulates: bool = False


@dataclasses.dataclass
class Tuned:
    """The tuning's outcome: the picked label (None: nothing to pick), why it is not tuned (None: tuned; a pick at the
    grid's edge has both), and one row per grid value."""

    label: str | None
    why: str | None
    rows: list[dict[str, Any]]


def tune(grid: Grid, by_label: dict[str, Sequence[RunData]], where: str = "") -> Tuned:
    """The grid value with the best median final objective among the healthy ones, over the runs in `by_label`."""
    ran = {lab: list(by_label[lab]) for lab in grid.values if by_label.get(lab)}
    rows, healthy = [], {}
    for lab, rs in sorted(ran.items(), key=lambda kv: grid.values[kv[0]]):
        sick = _sick(grid, rs)
        med = an.median([final(r, grid.objective, grid.goal) for r in rs])
        if sick is None and math.isfinite(med):
            healthy[lab] = med
        rows.append({"comparator": grid.comparator, "where": where, "parameter": grid.param,
                     "value": grid.values[lab], "label": lab, "runs": len(rs),
                     f"median_final_{grid.objective}": med, "health": sick or "ok", "picked": False,
                     "grid_source": grid.source})
    if len(ran) < 2:
        shown = ", ".join(f"{grid.param} {num(grid.values[lab])}" for lab in ran) or "no value"
        why = (f"not tuned (only {shown} of its grid {', '.join(num(v) for v in sorted(grid.values.values()))} run: "
               f"{grid.source})")
        return Tuned(None, why, rows)
    if not healthy:
        return Tuned(None, f"every {grid.param} of its grid diverged or never moved", rows)
    pick = (min if grid.goal == "min" else max)(healthy, key=healthy.__getitem__)
    for row in rows:
        row["picked"] = row["label"] == pick
    edge = _edge(grid, pick, list(ran))
    return Tuned(pick, edge, rows)  # at the edge: the best value run, read but flagged


def _sick(grid: Grid, runs: Sequence[RunData]) -> str | None:
    """Why a grid value's runs are unhealthy (None: healthy)."""
    if not grid.accumulates:
        return health(runs, grid.objective, grid.goal)
    return "diverged (a run stopped as diverged)" if any(r.status == "diverged" for r in runs) else None


def _edge(grid: Grid, pick: str, ran: Sequence[str]) -> str | None:
    """`not tuned (best at the grid's edge …)` when the grid asks for it and the pick is the smallest or largest value
    run: the best value may lie beyond the grid."""
    values = sorted(grid.values[lab] for lab in ran)
    v = grid.values[pick]
    if not grid.edge or v not in (values[0], values[-1]):
        return None
    end = "smallest" if v == values[0] else "largest"
    return (f"not tuned (best at the grid's edge: {grid.param} {num(v)}, the {end} of {', '.join(map(num, values))} "
            f"run: {grid.source})")
