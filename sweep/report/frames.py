"""A study's results as pandas DataFrames, read from its results directory (no Ray, no MLflow).

    import sweep
    res = sweep.load_results("quickstart")            # or a results directory, or a Study
    res.runs.groupby(["algorithm", "step_size_factor"])["grad_F_sq"].median()

`runs` has one row per ended run with the same columns as the report's runs.csv: study, problem,
algorithm (its label), configuration, the axis value (a column named after the axis), seed, status,
converged, every number of the final record, algorithm_name, problem_name, instance_seed, every algorithm
parameter as `alg.<name>`, every problem parameter as `problem.<name>`, the budget, node, run_key, error.
`records` has one row per run and evaluation point: run_key, the same identifying columns, and the record
(iteration, status, time = compute seconds, eval_time, calls/<oracle>, samples/<oracle>, every metric).
`tables` holds every CSV of the study's report directory by file stem (`best`, and for a benchmark study
`ranking`, `tuning`, `choices`, `pairwise`, `profiles`; a claim's `verdicts`, ...): empty before a report.
"""
from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from sweep.report import run_arrays
from sweep.report.runs_table import runs_columns
from sweep.report.tables import records_table
from sweep.results.runs import load_runs
from sweep.results.store import ResultStore
from sweep.study.model import Study
from sweep.study.record import StudyRecord
from sweep.study.sources import results_dir, study_name


@dataclasses.dataclass
class Results:
    """A study's results: its recorded definition, one row per run, one row per record."""

    directory: Path
    study: StudyRecord
    runs: Any  # pandas.DataFrame
    records: Any  # pandas.DataFrame
    tables: dict[str, Any] = dataclasses.field(default_factory=dict)  # report CSVs by stem, as DataFrames


def locate(path_or_study: str | Path | Study, scale: str | None = None) -> Path:
    """The results directory of a study: a directory holding study.json, or ./results/<study>[-<scale>]."""
    if isinstance(path_or_study, Study):
        return results_dir(path_or_study.name, scale or path_or_study.scale)
    path = Path(path_or_study)
    if (path / "study.json").exists():
        return path.resolve()
    return results_dir(study_name(str(path_or_study)), scale)


def load_results(path_or_study: str | Path | Study, scale: str | None = None) -> Results:
    """The runs and records of a study as DataFrames (see the module docstring for the columns)."""
    import pandas as pd  # a dependency of reading results only, not of running studies

    root = locate(path_or_study, scale)
    store = ResultStore(root)
    meta = store.read_study()
    runs = load_runs(store, meta)
    try:
        frame = pd.DataFrame({k: [_tuple(v) for v in column] for k, column in runs_columns(runs, meta).items()})
    finally:
        run_arrays.forget()  # the index holds the runs: not past this call
    records = pd.DataFrame(records_table(runs, meta))
    report = root / "report"
    tables = {path.stem: _read_csv(pd, path) for path in sorted(report.glob("*.csv"))} if report.is_dir() else {}
    return Results(root, meta, frame, records, tables)


def _read_csv(pd: Any, path: Path) -> Any:
    """A report table; an empty file (a table with no rows) as an empty DataFrame."""
    try:
        return pd.read_csv(path)
    except pd.errors.EmptyDataError:
        return pd.DataFrame()


def _tuple(v: Any) -> Any:
    """A list-valued parameter (vertices, matrices) as a tuple, so DataFrames can group by it."""
    return tuple(_tuple(x) for x in v) if isinstance(v, list) else v
