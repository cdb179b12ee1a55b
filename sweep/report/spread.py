"""The spread table: what the printed summary shows of a study with more configurations than a reader scans.

Past `SUMMARISE` configurations, per (problem, algorithm label, axis value) it gives the best and the worst
configuration by median final metric over seeds and the quantiles over configurations of those medians; every run
stays in runs.csv and each group's best configuration, as for any study, in best.csv.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from sweep.report import analysis as an
from sweep.report import run_arrays as ra
from sweep.report.tables import named_config
from sweep.results.runs import RunData
from sweep.study.model import ReportOptions

#: Configurations in a study beyond which the summary prints the spread table instead of a table per configuration.
SUMMARISE = 50
#: The quantiles over configurations it gives.
QUANTILES = (0.1, 0.25, 0.5, 0.75, 0.9)


def configurations(runs: Sequence[RunData]) -> int:
    """How many configurations the runs are of."""
    return len({id(r.point) for r in runs})


def spread_table(runs: Sequence[RunData], opts: ReportOptions) -> list[dict[str, Any]]:
    """Per (problem, algorithm label, axis value): its configurations, the best and the worst by median final metric
    over seeds (a diverged seed counting as the worst value, a failed one left out) and the quantiles of those
    medians over the configurations; configurations whose every seed diverged or failed are counted."""
    metric, goal = opts.metric, opts.goal
    cg = ra.ConfigGroups.of(runs, metric, goal)
    varied = cg.varied
    rows = []
    for (prob, label, _), configs in cg.groups.items():
        cfgs = np.asarray(configs)
        med = cg.medians[cfgs]
        known = ~np.isnan(med)
        key = np.where(known, med if goal == "min" else -med, np.nan)
        row: dict[str, Any] = {"problem": prob, "algorithm": label}
        point = cg.runs_of(int(cfgs[0]))[0].point
        axis = point["coords"].get("axis")
        row["axis"] = "reference" if axis is None and point["coords"].get("reference") else axis
        row["configurations"] = len(cfgs)
        for name, pick in (("best", np.nanargmin), ("worst", np.nanargmax)):
            c = int(cfgs[pick(key)]) if known.any() else None
            row[f"{name}_config"] = named_config(cg.runs_of(c)[0].point, varied.get((prob, label), [])) if c is not None else ""
            row[f"{name}_median_{metric}"] = float(cg.medians[c]) if c is not None else np.nan
        qs = an.column_quantiles(med[known][:, None], QUANTILES)[:, 0] if known.any() else [np.nan] * len(QUANTILES)
        row.update((f"q{round(100 * q)}", float(v)) for q, v in zip(QUANTILES, qs))
        row["diverged_configurations"] = int(np.sum(np.isinf(med)))
        row["failed_configurations"] = int(np.sum(~known))
        rows.append(row)
    return rows


def note(n: int, metric: str) -> str:
    """The line above the spread table in the summary."""
    return (f"{n} configurations (more than {SUMMARISE}): per group the best and the worst configuration and the "
            f"quantiles over configurations of their median final {metric}; every run is in runs.csv, each group's "
            "best configuration in best.csv\n")
