"""The runs table (one row per run: who it is, its status and convergence, every final value, every parameter),
held and written column by column: at 10⁵ runs a dict per row took ~5x the memory and most of a report's time.
"""
from __future__ import annotations

import csv
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from sweep.report import analysis as an
from sweep.report.tables import KEY_METRICS, PROGRESS, cell, final_columns, identity, write_csv
from sweep.results.runs import RunData
from sweep.results.safe_files import open_file


def runs_table(runs: list[RunData], meta: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per run: who it is, its status and convergence, every final value, every parameter.

    Every row has every column, in groups (identity, final values, parameters, where it ran); a column a
    run does not have (another algorithm's parameter) is None.
    """
    return ColumnRows(runs_columns(runs, meta))


def runs_columns(runs: list[RunData], meta: dict[str, Any]) -> dict[str, list[Any]]:
    """The runs table column by column (`runs_table`): 10⁵ runs as a dict per row took ~5x the memory."""
    opts = meta["report"]
    groups: list[dict[str, list[Any]]] = [{}, {}, {}, {}]
    last: tuple[Any, dict[str, Any], dict[str, Any]] = (None, {}, {})  # a configuration's columns, made once
    n = 0  # for its seeds (which follow one another); kept for one configuration only: 10⁵ took ~150 MB
    for r in runs:
        p = r.point
        if last[0] is not p:
            last = (p, identity(p, 0, meta), {
                "algorithm_name": p["algorithm"], "problem_name": p["problem"], "instance_seed": p.get("instance_seed"),
                **{f"alg.{k}": v for k, v in p["algorithm_params"].items()},
                **{f"problem.{k}": v for k, v in p["problem_params"].items()},
                **{f"budget.{k}": v for k, v in p["budget"].items() if v is not None}})
        _, ident, params = last
        head = {**ident, "seed": r.seed, "status": r.status,
                "converged": an.converged(r.records, r.status, opts["converged_metric"], opts["converged_below"],
                                          opts["converged_relative"])}
        tail = {"node": r.where.get("node", ""), "run_key": r.key, "error": r.error or ""}
        for group, part in zip(groups, (head, final_columns(r.final, opts["metric"]), params, tail)):
            for k, v in part.items():
                column = group.get(k)
                if column is None:
                    column = group[k] = [None] * n
                column.append(v)
        n += 1
        for group in groups:
            for column in group.values():
                if len(column) < n:
                    column.append(None)
    first = [k for k in (opts["metric"], *KEY_METRICS, *PROGRESS) if k in groups[1]]
    groups[1] = {k: groups[1][k] for k in dict.fromkeys(first + list(groups[1]))}
    out: dict[str, list[Any]] = {}
    for group in groups:  # a name in two groups (none today) has the later group's value, as one merged row had
        for k, column in group.items():
            out[k] = column if k not in out else [b if b is not None else a for a, b in zip(out[k], column)]
    return out


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


def write_columns(path: Path, columns: dict[str, list[Any]]) -> None:
    """A table held column by column, written as `write_csv` writes its rows."""
    cells = [[cell(v) if isinstance(v, float) else v for v in column] for column in columns.values()]
    with open_file(path, "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(list(columns))
        w.writerows(zip(*cells))


def write_table(path: Path, rows: Sequence[dict[str, Any]]) -> None:
    """A report table as CSV: the runs table column by column, any other row by row (`write_csv`)."""
    if isinstance(rows, ColumnRows):
        write_columns(path, rows.columns)
    else:
        write_csv(path, rows)
