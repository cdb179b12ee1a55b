"""The record tables of a store, as `run_columns.load` reads them: older per-run files, then each shard in commit
order (Parquet tables, JSON lines read as tables), resets applied, with every run's summary; of some runs only, or
a run's latest record only, kept so as each table is read."""
from __future__ import annotations

import os
from collections.abc import Collection, MutableMapping
from typing import Any

import numpy as np

from sweep.results import columns
from sweep.results.summaries import Summaries


def read(store: Any, runs: Collection[str] | None = None, last_only: bool = False
         ) -> tuple[list[Any], MutableMapping[str, dict[str, Any]], set[str]]:
    """The record tables of a store (older per-run files, then each shard, resets applied), every summary, and the
    runs whose records are not plain values (lists, mappings: read record by record); `runs`, `last_only`: the
    records and summaries of those runs only, each table's latest record of a run only (`load`), kept so as each
    table is read."""
    import pyarrow as pa
    import pyarrow.compute as pc

    tables = _Kept(runs, last_only)
    irregular: set[str] = set()
    files = {k: v for k, v in _file_summaries(store).items() if runs is None or k in runs}
    summaries = Summaries(files)
    _add_rows(tables, irregular, [(k, r) for k, rs in _file_records(store).items() for r in rs], -1)
    position = 0
    dropped: dict[str, int] = {}  # run key -> the position of its last reset
    for kind, value in (store.shards.shards() if store.shards.exists() else ()):
        position += 1
        if kind == "reset":
            dropped[value] = position
            if value in files:
                summaries[value] = files[value]  # a reset drops what shards said of the run, not its file
            else:
                summaries.pop(value, None)
            continue
        if kind == "parquet":
            ends = columns.is_end(value)
            recs = value.filter(pc.invert(ends)).drop_columns(list(columns.END))
            tables.append(recs.append_column("_order", pa.array(np.full(recs.num_rows, position))))
            summaries.add_rows(tables.of_runs(value.filter(ends).select(["run_key", "status", *columns.END])))
        else:
            pairs, found = store.shards._pairs(kind, value)
            _add_rows(tables, irregular, pairs, position)
            summaries.update((s["run_key"], s) for s in found if runs is None or s["run_key"] in runs)
    if dropped:
        tables = [_drop_reset(t, dropped) for t in tables]
    return tables, summaries, irregular


class _Kept(list):
    """A list of record tables that keeps, of each table appended, the rows of `runs` (all when None) and, when
    `last_only`, a run's last row in the table only (a run's records are in order within a table; its latest of
    all is then the last of these by iteration and table, as `build` sorts them)."""

    def __init__(self, runs: Collection[str] | None, last_only: bool) -> None:
        super().__init__()
        self.runs, self.last_only = runs, last_only
        self._wanted: Any = None  # `runs` as an Arrow array, made once

    def of_runs(self, table: Any) -> Any:
        """The rows of `table` of the runs kept."""
        import pyarrow as pa
        import pyarrow.compute as pc

        if self.runs is None:
            return table
        if self._wanted is None:
            self._wanted = pa.array(list(self.runs), pa.string())
        return table.filter(pc.is_in(table.column("run_key"), value_set=self._wanted))

    def append(self, table: Any) -> None:
        import pyarrow as pa

        if self.runs is None and not self.last_only:
            super().append(table)
            return
        table = self.of_runs(table)
        if self.last_only and table.num_rows:
            keys = table.column("run_key").to_numpy(zero_copy_only=False)
            _, last = np.unique(keys[::-1], return_index=True)
            table = table.take(pa.array(np.sort(len(keys) - 1 - last)))
        super().append(table)
        pa.default_memory_pool().release_unused()  # the whole table read is freed: Arrow's pool gives it back now


def _file_summaries(store: Any) -> dict[str, dict[str, Any]]:
    """The summaries in runs/ (failed runs; every run of an older driver) by run key, torn ones left out."""
    names = os.listdir(store.runs_dir) if store.runs_dir.is_dir() else []
    found = ((name[:-5], store._file_summary(name[:-5])) for name in names if name.endswith(".json"))
    return {k: s for k, s in found if s is not None}


def _file_records(store: Any) -> dict[str, list[dict[str, Any]]]:
    """The records in records/ (an older driver's) by run key, as stored."""
    names = os.listdir(store.records_dir) if store.records_dir.is_dir() else []
    return {name[:-6]: store._read_lines(name[:-6]) for name in names if name.endswith(".jsonl")}


def _add_rows(tables: list[Any], irregular: set[str], pairs: list[tuple[str, dict[str, Any]]], position: int) -> None:
    """Records given one by one (JSON lines) as a table; the runs of one that is not plain values as irregular."""
    import pyarrow as pa

    if not pairs:
        return
    rows = [{"run_key": k, **r, "_order": position} for k, r in pairs]
    try:
        table = pa.Table.from_pylist(rows)
    except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, OverflowError):
        table = None
    if table is None or any(str(t) not in columns.PLAIN_TYPES for t in table.schema.types):
        irregular.update(k for k, _ in pairs)
        return
    tables.append(table)


def _drop_reset(table: Any, dropped: dict[str, int]) -> Any:
    """A table without the rows of runs reset after them."""
    import pyarrow as pa

    keys = table.column("run_key").to_pylist()
    order = table.column("_order").to_pylist()
    return table.filter(pa.array([dropped.get(k, -2) < o for k, o in zip(keys, order)]))
