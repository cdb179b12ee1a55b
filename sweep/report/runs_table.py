"""The runs table (one row per run: who it is, its status and convergence, every final value, every parameter),
held and written column by column: at 10⁵ runs a dict per row took ~5x the memory and most of a report's time.
"""
from __future__ import annotations

import csv
import re
from collections.abc import Sequence
from itertools import repeat
from operator import itemgetter
from pathlib import Path
from typing import Any

from sweep.report import run_arrays as ra
from sweep.report.tables import KEY_METRICS, PROGRESS, identity, write_csv
from sweep.results.runs import RunData, config_label, problem_label
from sweep.results.safe_files import open_file
from sweep.study.record import StudyRecord


def runs_table(runs: list[RunData], meta: StudyRecord) -> list[dict[str, Any]]:
    """One row per run: who it is, its status and convergence, every final value, every parameter.

    Every row has every column, in groups (identity, final values, parameters, where it ran); a column a
    run does not have (another algorithm's parameter) is None.
    """
    return ColumnRows(runs_columns(runs, meta))


def runs_columns(runs: list[RunData], meta: StudyRecord) -> dict[str, list[Any]]:
    """The runs table column by column (`runs_table`): a configuration's columns made once for its seeds, the final
    values and convergence read from the store's columns for every run at once (`run_arrays`)."""
    opts = meta.report
    index = ra.RunIndex.of(runs)
    points, at = _points(runs)
    head = _identity_columns(points, at, meta)
    head["seed"] = [r.seed for r in runs]
    head["status"] = [r.status for r in runs]
    head["converged"] = ra.converged(index, opts).tolist()
    finals = ra.final_columns(index, (opts.metric, *KEY_METRICS, *PROGRESS))
    params = _parameter_columns(points, at)
    tail = {"node": [r.where.get("node", "") for r in runs], "run_key": [r.key for r in runs],
            "error": [r.error or "" for r in runs]}
    out: dict[str, list[Any]] = {}
    for group in (head, finals, params, tail):  # a name in two groups (none today) has the later group's value
        for k, column in group.items():
            out[k] = column if k not in out else [b if b is not None else a for a, b in zip(out[k], column)]
    return out


def _identity_columns(points: list[dict[str, Any]], at: list[int], meta: StudyRecord) -> dict[str, list[Any]]:
    """`identity` of each run as columns (its seed filled in by the caller)."""
    if any("reference" in p["coords"] for p in points):  # only some rows have it: the columns' order as rows give it
        return _expand([identity(p, 0, meta) for p in points], at, len(points))
    cols = {"study": [meta.name] * len(points), "problem": [problem_label(p) for p in points],
            "algorithm": [p["label"] for p in points], "configuration": [config_label(p) for p in points]}
    if meta.axis_name:
        cols[meta.axis_name] = [p["coords"].get("axis") for p in points]
    cols["seed"] = [0] * len(points)
    return cols if at == list(range(len(points))) else {k: [v[i] for i in at] for k, v in cols.items()}


def _points(runs: list[RunData]) -> tuple[list[dict[str, Any]], list[int]]:
    """The runs' configurations, each once in order of first appearance, and each run's index into them."""
    seen: dict[int, int] = {}
    points: list[dict[str, Any]] = []
    at = []
    for r in runs:
        i = seen.get(id(r.point))
        if i is None:
            i = seen[id(r.point)] = len(points)
            points.append(r.point)
        at.append(i)
    return points, at


def _parameter_columns(points: list[dict[str, Any]], at: list[int]) -> dict[str, list[Any]]:
    """The columns after the final values: each configuration's names, instance seed, parameters and budget, in the
    order one dict per configuration would give them (made per kind of configuration, not per configuration)."""
    shapes = dict.fromkeys((tuple(p["algorithm_params"]), tuple(p["problem_params"]),
                            tuple(k for k, v in p["budget"].items() if v is not None)) for p in points)
    names: dict[str, tuple[str, str | None]] = {"algorithm_name": ("algorithm", None),
                                                "problem_name": ("problem", None), "instance_seed": ("instance_seed", None)}
    for alg, prob, budget in shapes:
        names.update((f"alg.{k}", ("algorithm_params", k)) for k in alg)
        names.update((f"problem.{k}", ("problem_params", k)) for k in prob)
        names.update((f"budget.{k}", ("budget", k)) for k in budget)
    cols = {name: list(map(dict.get, points, repeat(part))) if key is None
            else list(map(dict.get, map(itemgetter(part), points), repeat(key))) for name, (part, key) in names.items()}
    if at != list(range(len(points))):
        cols = {k: [v[i] for i in at] for k, v in cols.items()}
    return cols


def _expand(rows: list[dict[str, Any]], at: list[int], n: int) -> dict[str, list[Any]]:
    """Per-configuration rows as per-run columns (None where a configuration has no such column)."""
    keys = dict.fromkeys(k for row in rows for k in row)
    cols = {k: [row.get(k) for row in rows] for k in keys}
    if at == list(range(n)):  # one run per configuration
        return cols
    return {k: [v[i] for i in at] for k, v in cols.items()}


class ColumnRows(Sequence):
    """Rows of a table held column by column, each row made a dict when read."""

    def __init__(self, columns: dict[str, list[Any]]) -> None:
        self.columns = columns
        self._n = len(next(iter(columns.values()))) if columns else 0

    def __len__(self) -> int:
        return self._n

    def __getitem__(self, i: Any) -> Any:
        if isinstance(i, slice):
            return [self[k] for k in range(*i.indices(self._n))]
        if not -self._n <= i < self._n:
            raise IndexError("row index out of range")
        return {k: v[i] for k, v in self.columns.items()}

    def __eq__(self, other: Any) -> bool:
        return list(self) == list(other) if isinstance(other, Sequence) else NotImplemented


def write_columns(path: Path, columns: dict[str, Sequence[Any]], chunk: int = 2_000) -> None:
    """A table held column by column, written as `write_csv` writes its rows (the csv module's minimal quoting,
    CRLF line ends), each column formatted at once: at 10⁵ runs the csv module took seconds."""
    n = len(next(iter(columns.values()))) if columns else 0
    with open_file(path, "w", newline="") as fh:
        fh.write(",".join(_csv_column(list(columns))) + "\r\n")
        for a in range(0, n, chunk):  # a chunk of rows at a time: 10⁵ rows' fields at once took ~300 MB, 5,000 ~30 MB
            cells = [_csv_column(column[a:a + chunk]) for column in columns.values()]
            fh.write("".join(",".join(row) + "\r\n" for row in zip(*cells)))


_SPECIAL = re.compile(r'[,"\r\n]')


def _csv_column(column: list[Any]) -> list[str]:
    """A column's CSV fields as the csv module writes `cell(v)`: numbers by repr (a non-finite float as 'nan',
    'inf', '-inf', which repr gives too), None as '', text quoted when it holds a comma, quote or line end."""
    if len(column) > 1 and column.count(column[0]) == len(column) and len(set(map(id, column))) == 1:
        return _csv_column(column[:1]) * len(column)  # one object throughout: a value every configuration shares
    kinds = set(map(type, column))
    if kinds <= {float, int}:
        return list(map(repr, column))
    if kinds <= {float, int, bool, type(None)}:  # a parameter some configurations lack; bool's repr is its str
        return ["" if v is None else repr(v) for v in column]
    if kinds <= {str} and not _SPECIAL.search("".join(column)):
        return column
    return [_csv_field(v) for v in column]


def _csv_field(v: Any) -> str:
    if v is None:
        return ""
    text = repr(v) if isinstance(v, float) else str(v)
    return f'"{text.replace(chr(34), chr(34) * 2)}"' if _SPECIAL.search(text) else text


class WrittenRows(Sequence):
    """A table already written, its rows read back from the CSV file when first asked (as text, as a report that
    is up to date gives every table): the runs table is written as soon as it is made and let go, so that the
    report's later figures and claims do not hold it (at 10⁵ runs ~100 MB)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._rows: list[dict[str, str]] | None = None

    def _read(self) -> list[dict[str, str]]:
        if self._rows is None:
            self._rows = read_table(self.path)
        return self._rows

    def __len__(self) -> int:
        return len(self._read())

    def __getitem__(self, i: Any) -> Any:
        return self._read()[i]


def read_table(path: Path) -> list[dict[str, str]]:
    """A report table's rows as its CSV file holds them (text)."""
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


def write_table(path: Path, rows: Sequence[dict[str, Any]]) -> None:
    """A report table as CSV: the runs table column by column, any other row by row (`write_csv`)."""
    if isinstance(rows, WrittenRows):
        return
    if isinstance(rows, ColumnRows):
        write_columns(path, rows.columns)
    else:
        write_csv(path, rows)
