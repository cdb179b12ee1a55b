"""What makes a study time its runs (a batched run's seconds are a share of its batch's: see
sweep.execution.batching): a kind or a claim that compares compute seconds, a seconds budget, a report target."""
from __future__ import annotations

from sweep.study import plugins
from sweep.study.model import Study


def timed_by(study: Study) -> str:
    """What makes the study time its runs (empty: nothing)."""
    if plugins.KINDS[study.kind].timed:
        return f"a {study.kind} study compares seconds"
    if any(p.budget.get("seconds") is not None for p in study.points):
        return "a seconds budget"
    if study.report.target is not None:
        return "report.target times runs to the target"
    if study.claim is not None and getattr(plugins.CLAIMS.get(study.claim), "timed", False):
        return f"claim {study.claim} reads compute seconds"
    return ""
