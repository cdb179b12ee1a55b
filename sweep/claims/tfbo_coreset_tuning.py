"""BCSR as the tfbo_coreset claim's comparator, tuned over its grid on each stream (sweep.claims.tuning, BCSR_GRID):
Table 1 and Fig. 3 compare BCSR at the picked rate; where it could not be tuned their BCSR comparisons are
`not measured (comparator bcsr: <why>)`."""
from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from sweep.claims.tfbo_coreset_setup import BCSR_GRID, SCENARIOS
from sweep.claims.tuning import Tuned, tune
from sweep.results.runs import RunData


def scenario(r: RunData) -> str:
    """The stream a run's problem draws."""
    return r.point.get("problem_params", {}).get("scenario", "balanced")


def untuned_bcsr(untuned: dict[str, str] | None, scenario: str, by_label: dict[str, Any]) -> dict[str, str]:
    """BCSR as a comparator that was not tuned on this stream (name -> why), when it is among the runs."""
    why = (untuned or {}).get(scenario)
    return {"bcsr": why} if why and "bcsr" in by_label else {}


def tuned_bcsr(runs: Sequence[RunData]) -> dict[str, Tuned]:
    """Per stream: BCSR tuned over its grid (BCSR_GRID) on the upper loss F it optimises."""
    out = {}
    for scen in SCENARIOS:
        by_label: dict[str, list[RunData]] = {}
        for r in runs:
            if scenario(r) == scen and r.point["label"] in BCSR_GRID.values:
                by_label.setdefault(r.point["label"], []).append(r)
        if by_label:
            out[scen] = tune(BCSR_GRID, by_label, scen)
    return out


def with_tuned(runs: Sequence[RunData], tuned: dict[str, Tuned]) -> list[RunData]:
    """The runs Table 1 and Fig. 3 compare: on each stream where tuning picked a rate, BCSR's runs at that rate under
    the label 'bcsr' (its other grid values left out); elsewhere the runs as they are."""
    out = []
    for r in runs:
        pick = tuned[scenario(r)].label if scenario(r) in tuned else None
        lab = r.point["label"]
        if pick is None or lab not in BCSR_GRID.values:
            out.append(r)
        elif lab == pick:
            out.append(dataclasses.replace(r, point={**r.point, "label": "bcsr"}))
    return out
