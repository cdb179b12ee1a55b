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
import importlib.abc
import importlib.util
import sys
from types import ModuleType
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


#: The flat modules of 0.1.0 → where they live now: plugins written against the old paths (e.g.
#: `from sweep.checks import Block`, `from sweep import figures, tables`) import the same module objects.
_MOVED = {f"sweep.{old}": f"sweep.{new}" for old, new in (
    ("analysis", "report.analysis"), ("curves", "report.curves"), ("figures", "report.figures"),
    ("frames", "report.frames"), ("report_cache", "report.report_cache"), ("tables", "report.tables"),
    ("environment", "results.environment"), ("store", "results.store"), ("checks", "study.checks"),
    ("compat", "study.entry_checks"), ("errors", "study.errors"), ("expand", "study.expand"),
    ("limits", "study.limits"), ("model", "study.model"), ("schema", "study.schema"), ("sources", "study.sources"),
    ("spec", "study.spec"), ("masking", "tracking.masking"), ("mlflow_sinks", "tracking.mlflow_sinks"),
    ("mlflow_store", "tracking.mlflow_store"), ("ui_server", "tracking.ui_server"),
    ("mlflow_writer", "execution.mlflow_writer"), ("cluster_check", "execution.cluster_check"),
    ("ctrl_c", "execution.ctrl_c"), ("disk", "execution.disk"), ("dispatch", "execution.dispatch"),
    ("experiment", "execution.experiment"), ("lock", "execution.lock"), ("node_watch", "execution.node_watch"),
    ("options", "execution.options"), ("processes", "execution.processes"), ("progress", "execution.progress"),
    ("ray_session", "execution.ray_cluster"), ("recording", "execution.recording"), ("rounds", "execution.rounds"),
    ("runner", "execution.runner"), ("session", "execution.session"), ("trainable", "execution.trainable"))}


class _MovedModules(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Imports a module of `_MOVED` at its old path as the module at its new one (nothing loaded twice)."""

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        return importlib.util.spec_from_loader(fullname, self) if fullname in _MOVED else None

    def create_module(self, spec: Any) -> ModuleType:
        return importlib.import_module(_MOVED[spec.name])

    def exec_module(self, module: ModuleType) -> None:
        """Already executed at its new path."""


sys.meta_path.append(_MovedModules())


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
