"""Ray Tune trainables, study specifications, MLflow tracking, reports and the `bisweep` CLI.

    from sweep import trainable_for, load_study, run_study
    study = load_study("quickstart")          # validated completely, no Ray needed
    outcome = run_study(study, "results/quickstart")
    res = load_results("quickstart")          # .runs, .records: pandas DataFrames

Ray and MLflow are imported only when a study runs or a report is attached; the names below are loaded
when first used, so a trial process that imports `sweep.execution.trainable` loads only the run loop.
"""
from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from sweep.execution.runner import run_study
    from sweep.execution.user_api import trainable_for
    from sweep.report.build import build_report
    from sweep.report.frames import Results, load_results
    from sweep.study.model import Study
    from sweep.study.spec import load as load_study

#: Public name → (module, attribute).
_LAZY = {"Results": ("sweep.report.frames", "Results"), "load_results": ("sweep.report.frames", "load_results"),
         "Study": ("sweep.study.model", "Study"), "build_report": ("sweep.report.build", "build_report"),
         "load_study": ("sweep.study.spec", "load"), "trainable_for": ("sweep.execution.user_api", "trainable_for"),
         "run_study": ("sweep.execution.runner", "run_study")}


def __getattr__(name: str) -> Any:
    if name not in _LAZY:
        raise AttributeError(f"module 'sweep' has no attribute {name!r}")
    module, attr = _LAZY[name]
    value = getattr(importlib.import_module(module), attr)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))


__all__ = ["Study", "load_study", "run_study", "build_report", "trainable_for", "load_results", "Results"]
