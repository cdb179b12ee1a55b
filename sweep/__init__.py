"""Ray Tune trainables, study specifications, MLflow tracking, reports and the `bisweep` CLI.

    from sweep import trainable_for, load_study, run_study
    study = load_study("quickstart")          # validated completely, no Ray needed
    outcome = run_study(study, "results/quickstart")
    res = load_results("quickstart")          # .runs, .records: pandas DataFrames

Ray and MLflow are imported only when a study runs or a report is attached.
"""
from __future__ import annotations

from typing import Any

from sweep.frames import Results, load_results
from sweep.model import Study
from sweep.report import build_report
from sweep.spec import load as load_study
from sweep.trainable import trainable_for


def run_study(study: Study | str, results_dir: str | None = None, **options: Any) -> Any:
    """Run (or finish) a study; see `sweep.runner.run_study` for the options."""
    from sweep.runner import run_study as _run  # imports Ray: only when a study runs

    return _run(study if isinstance(study, Study) else load_study(study), results_dir, **options)


__all__ = ["Study", "load_study", "run_study", "build_report", "trainable_for", "load_results", "Results"]
