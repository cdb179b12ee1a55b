"""F_L of each benchmark instance, which no compared run sets (targets.csv).

Where the problem knows its minimiser, F_L is exact. Elsewhere it is a reference solve of the instance
(`problems.reference.reference_solve`: an accurate deterministic solver on the problem's ground truth, with its
own convergence check), or the value the study gives (axis `reference`: per problem label a number, or per
instance seed a number). A reference solve runs once per instance: its result is cached in the results
directory (references.json; an entry that is not a number is solved again).

A compared run that ends below the reference (by more than `BELOW`·max(1, |F_L|)) does not become F_L: the
reference is improved by a solve from more starts, and where a run is still below, targets.csv says by how much
(`run_below`) and the report prints one line. Columns: problem, instance, start, lower, lower_exact,
lower_source (the solver and its stopping rule, or "exact optimum", "given in the study"), lower_gap (a bound on
F_L − min F where one is known: 0 exact, the solver's local bound, NaN none), best_run (the lowest final value of
any compared run), run_below (best_run below F_L by this much, else 0).
"""
from __future__ import annotations

import json
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pandas as pd

import problems
from problems.reference import Reference, reference_solve
from sweep.compare import profiles
from sweep.results.runs import RunData, problem_label

#: Relative margin below F_L that counts as a compared run beating the reference (rounding is not).
BELOW = 1e-9
#: Starts of the improved reference solve (x0 and seeded perturbations of it).
RESTARTS = 2
CACHE = "references.json"
COLUMNS = [*profiles.FUNCTION, "start", "lower", "lower_exact", "lower_source", "lower_gap", "best_run", "run_below"]


def instance_bounds(runs: list[RunData], axis: Mapping[str, Any], directory: Path | None = None,
                    units: list[dict[str, Any]] | None = None) -> pd.DataFrame:
    """F(x0) and F_L of every (problem, instance) (module docstring); `units`: the run frames, made from `runs`
    when not given (`numbers.instance_bounds`)."""
    metric = axis["metric"]
    if not units:
        return pd.DataFrame(columns=COLUMNS)
    hist = profiles.history_frame(units, _weights(axis), values=(metric,))
    base = profiles.lower_bounds(hist, metric)
    solved = hist[hist["status"].isin(profiles.SOLVING)]
    best = solved.groupby(list(profiles.FUNCTION))[metric].min().rename("best_run")
    base = base.join(best, on=list(profiles.FUNCTION))
    base["best_run"] = base["best_run"].fillna(math.inf)
    base["lower_gap"] = base["lower_exact"].map(lambda e: 0.0 if e else math.nan)
    base["run_below"] = 0.0
    if metric != "F":  # ‖∇F‖²: F_L = 0 is known on every problem
        return base[COLUMNS]
    points = {(problem_label(r.point), r.seed): r.point for r in runs}
    cache = _Cache(directory / CACHE if directory is not None else None)
    given = axis.get("reference") or {}
    for i, row in base[~base["lower_exact"]].iterrows():
        point = points.get((row["problem"], int(row["instance"])))
        if point is None:
            continue
        ref = _given(given, row["problem"], point["problem"], int(row["instance"]))
        if ref is None:
            ref = cache.solve(point, int(row["instance"]), 0)
            if row["best_run"] < ref.value - BELOW * max(1.0, abs(ref.value)):  # try harder before saying so
                better = cache.solve(point, int(row["instance"]), RESTARTS)
                ref = better if better.value < ref.value else ref
        base.loc[i, ["lower", "lower_source", "lower_gap"]] = [ref.value, ref.source, ref.gap]
        below = ref.value - row["best_run"]
        base.loc[i, "run_below"] = below if below > BELOW * max(1.0, abs(ref.value)) else 0.0
    cache.save()
    return base[COLUMNS]


def below_note(bounds: pd.DataFrame) -> str:
    """One line when a compared run ended below F_L somewhere, else ""."""
    below = bounds[bounds["run_below"] > 0] if "run_below" in bounds else bounds.iloc[:0]
    if below.empty:
        return ""
    worst = below.loc[below["run_below"].idxmax()]
    return (f"a compared run ended below the reference F_L on {len(below)} of {len(bounds)} instances (at most "
            f"{worst['run_below']:.3g} below, {worst['problem']} instance {worst['instance']}); the reference was "
            f"re-solved from {RESTARTS + 1} starts and kept: those runs meet every target there")


def _weights(axis: Mapping[str, Any]) -> dict[str, float]:
    return {**profiles.GRADIENT_EQUIVALENTS, **{k: float(v) for k, v in (axis.get("weights") or {}).items()}}


def _given(given: Mapping[str, Any], label: str, name: str, instance: int) -> Reference | None:
    """The study's own F_L for this instance (axis `reference`, by problem label or name), if it gives one."""
    value = given.get(label, given.get(name))
    if isinstance(value, Mapping):
        value = value.get(instance, value.get(str(instance)))
    if value is None:
        return None
    return Reference(float(value), math.nan, "given in the study (axis reference)", True)


class _Cache:
    """Reference solves by (problem, parameters, instance, restarts), kept in a JSON file."""

    def __init__(self, path: Path | None) -> None:
        self.path, self.entries, self.changed = path, {}, False
        if path is not None and path.is_file():
            try:
                loaded = json.loads(path.read_text())
            except (OSError, ValueError):
                loaded = {}
            self.entries = loaded if isinstance(loaded, dict) else {}

    def solve(self, point: Mapping[str, Any], instance: int, restarts: int) -> Reference:
        key = json.dumps([point["problem"], point.get("problem_params") or {}, instance, restarts], sort_keys=True,
                         default=str)
        e = self.entries.get(key)
        if isinstance(e, dict) and all(isinstance(e.get(k), (int, float)) for k in ("value", "gap")) \
                and isinstance(e.get("source"), str):
            return Reference(float(e["value"]), float(e["gap"]), e["source"], bool(e.get("converged", True)))
        p = problems.make(point["problem"], seed=instance, **(point.get("problem_params") or {}))
        ref = reference_solve(p, restarts=restarts, seed=instance)
        self.entries[key] = {"value": ref.value, "gap": ref.gap, "source": ref.source, "converged": ref.converged}
        self.changed = True
        return ref

    def save(self) -> None:
        if self.path is not None and self.changed:
            self.path.write_text(json.dumps(self.entries, indent=1, allow_nan=True))
