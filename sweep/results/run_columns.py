"""Every stored record of a study as columns (NumPy arrays sorted by run), and each run's records read from them only
when asked: what reports load instead of a list of dicts per run (10⁵ runs' records as dicts took GBs).

The records of a run are, as `ResultStore.records` gives them, one per iteration in iteration order (the final
status wins over `running`): the records files of older drivers first, then the committed shards in index order,
resets applied. A run whose iterations repeat (a resumed run's replays) is read by `ResultStore.records` itself.
"""
from __future__ import annotations

import array
from collections.abc import Collection, Iterator, MutableMapping, Sequence
from typing import Any

import numpy as np

from sweep.results import columns, record_tables
from sweep.results.store import one_per_iteration


class RunRecords(Sequence):
    """One run's records, each made a dict when read (a report reads most runs' first and last records only)."""

    __slots__ = ("_source", "_start", "_stop")

    def __init__(self, source: RunColumns, start: int, stop: int) -> None:
        self._source, self._start, self._stop = source, start, stop

    def __len__(self) -> int:
        return self._stop - self._start

    def __getitem__(self, i: Any) -> Any:
        if isinstance(i, slice):
            return [self._source.row(self._start + k) for k in range(*i.indices(len(self)))]
        n = len(self)
        if not -n <= i < n:
            raise IndexError("run record index out of range")
        return self._source.row(self._start + (i % n))

    def __iter__(self) -> Iterator[dict[str, Any]]:
        return iter(self._source.rows(self._start, self._stop))

    def __eq__(self, other: Any) -> bool:
        return list(self) == list(other) if isinstance(other, Sequence) else NotImplemented

    def column(self, name: str) -> list[Any]:
        """The run's values of one field, record by record (None where a record has none): no dict made."""
        return self._source.column(name, self._start, self._stop)

    def bounds(self) -> tuple[RunColumns, int, int]:
        """The columns holding the run's records and its rows there (start, stop)."""
        return self._source, self._start, self._stop

    def __repr__(self) -> str:
        return repr(list(self))


class RunColumns:
    """The records of every run as columns: `records(key)` a run's (lazily), `summary(key)` its end."""

    def __init__(self, names: list[str], blocks: list[np.ndarray], where: list[tuple[int, int]],
                 missing: np.ndarray | None, spans: Spans,
                 summaries: MutableMapping[str, dict[str, Any]]) -> None:
        """Columns of one dtype side by side (`blocks`, (records, columns) each: a record is a row of each block,
        made Python values in one call each); `where[k]` the (block, column) of names[k]; `missing` (records,
        names) True where a record has no such field (None: none is missing)."""
        self.names, self.spans, self.summaries = names, spans, summaries
        self._fallback: dict[str, list[dict[str, Any]]] = {}
        self._blocks, self._where, self._missing = blocks, where, missing
        self._index = {n: i for i, n in enumerate(names)}

    def row(self, i: int) -> dict[str, Any]:
        """Record i as the store holds it (a field the record did not have is left out)."""
        got = [b[i].tolist() for b in self._blocks]
        if self._missing is None:
            return {n: got[b][j] for n, (b, j) in zip(self.names, self._where)}
        gone = self._missing[i].tolist()
        return {n: got[b][j] for n, (b, j), g in zip(self.names, self._where, gone) if not g}

    def rows(self, start: int, stop: int) -> list[dict[str, Any]]:
        return [self.row(i) for i in range(start, stop)]

    def column(self, name: str, start: int, stop: int) -> list[Any]:
        """Records start..stop's values of one field (None where a record has none)."""
        k = self._index.get(name)
        if k is None:
            return [None] * (stop - start)
        b, j = self._where[k]
        got = self._blocks[b][start:stop, j].tolist()
        if self._missing is None:
            return got
        return [None if g else v for v, g in zip(got, self._missing[start:stop, k].tolist())]

    def take(self, name: str, rows: np.ndarray) -> list[Any]:
        """The values of one field at the given rows, as Python values (None where a record has none)."""
        k = self._index.get(name)
        if k is None:
            return [None] * len(rows)
        b, j = self._where[k]
        got = self._blocks[b][rows, j].tolist()
        if self._missing is None:
            return got
        return [None if g else v for v, g in zip(got, self._missing[rows, k].tolist())]

    def taken(self, name: str, rows: np.ndarray) -> TakenColumn | None:
        """`take(name, rows)` made Python values only slice by slice as read (None when no such row has the field):
        a report's runs table holds ~20 such columns, at 10⁵ runs ~40 MB as lists."""
        k = self._index.get(name)
        if k is None or (self._missing is not None and bool(self._missing[rows, k].all())):
            return None
        return TakenColumn(self, name, rows)

    def numbers(self, name: str, rows: np.ndarray) -> np.ndarray:
        """The values of one field at the given rows as floats: NaN where a record has none or it is not a number."""
        k = self._index.get(name)
        if k is None:
            return np.full(len(rows), np.nan)
        b, j = self._where[k]
        block = self._blocks[b]
        if block.dtype.kind not in "fiu":
            return np.full(len(rows), np.nan)
        out = block[rows, j].astype(float)
        if self._missing is not None:
            out[self._missing[rows, k]] = np.nan
        return out

    def ends(self, keys: Sequence[str]) -> tuple[list[str | None], np.ndarray]:
        """For each run whose summary is a shard's end row read from these columns: its status and the row of its
        last record (-1: it has none), its final record; (None, -1) for any other run (read it by `summary`)."""
        status_of = getattr(self.summaries, "column_status", None)  # a plain mapping holds whole summaries
        statuses: list[str | None] = [None] * len(keys)
        rows = np.full(len(keys), -1, dtype=np.int64)
        if status_of is None:
            return statuses, rows
        for i, key in enumerate(keys):
            if key not in self._fallback and (status := status_of(key)) is not None:
                statuses[i] = status
                start, stop = self.spans.get(key)
                if stop > start:
                    rows[i] = stop - 1
        return statuses, rows

    def flag_and_number_columns(self, rows: np.ndarray) -> dict[str, tuple[np.ndarray, np.ndarray]]:
        """Each field holding numbers or flags at the given rows (-1: no record) as (floats, whether the record
        has it), for the fields some of these records have."""
        out = {}
        valid = rows >= 0
        at = np.where(valid, rows, 0)
        for k, (name, (b, j)) in enumerate(zip(self.names, self._where)):
            block = self._blocks[b]
            if block.dtype.kind not in "fiub":
                continue
            present = valid if self._missing is None else valid & ~self._missing[at, k]
            if present.any():
                out[name] = (np.where(present, block[at, j].astype(float), np.nan), present)
        return out

    def number_names(self) -> list[str]:
        """The fields holding numbers (ints or floats, not booleans), in stored order."""
        return [n for n, (b, _) in zip(self.names, self._where) if self._blocks[b].dtype.kind in "fiu"]

    def records(self, key: str) -> Sequence[dict[str, Any]]:
        if key in self._fallback:
            return self._fallback[key]
        start, stop = self.spans.get(key)
        return RunRecords(self, start, stop)

    def summary(self, key: str) -> dict[str, Any] | None:
        """A run's summary (status, where, error, span ...); its `final` the last record unless it has its own."""
        s = self.summaries.get(key)
        if s is None:
            return None
        if "final" not in s:
            recs = self.records(key)
            s = {**s, "final": recs[-1] if len(recs) else None}
        return s


class Spans:
    """Run key -> the (start, stop) of its records in the sorted columns; (0, 0) for a run with none. An index per
    key into two arrays, not a tuple of two ints (at 10⁵ runs 22 → 14 MB)."""

    def __init__(self, keys: list[str], starts: np.ndarray, stops: np.ndarray) -> None:
        self._at = dict(zip(keys, range(len(keys))))
        self._starts, self._stops = array.array("q", starts.tolist()), array.array("q", stops.tolist())  # int reads

    def get(self, key: str) -> tuple[int, int]:
        j = self._at.get(key)
        return (0, 0) if j is None else (self._starts[j], self._stops[j])


class TakenColumn(Sequence):
    """One field of a store's records at given rows, read as Python values when indexed or sliced (`RunColumns.taken`)."""

    def __init__(self, source: RunColumns, name: str, rows: np.ndarray) -> None:
        self.source, self.name, self.rows = source, name, rows

    def __len__(self) -> int:
        return len(self.rows)

    def __getitem__(self, i: Any) -> Any:
        if isinstance(i, slice):
            return self.source.take(self.name, self.rows[i])
        return self.source.take(self.name, self.rows[[i]])[0]

    def __eq__(self, other: Any) -> bool:
        return list(self) == list(other) if isinstance(other, Sequence) else NotImplemented


def load(store: Any, runs: Collection[str] | None = None, last_only: bool = False) -> RunColumns:
    """The records and summaries of every run a store holds, as columns: of the runs `runs` only, or only each
    run's latest record (`last_only`: what its summary and final values need; its `records` are then that one)."""
    import pyarrow as pa

    tables, summaries, irregular = record_tables.read(store, runs, last_only)
    out = build(tables, summaries, irregular, store, last_only)
    del tables
    pa.default_memory_pool().release_unused()  # the shards' tables are NumPy blocks now: ~80 MB at 10⁵ runs
    return out


def build(tables: list[Any], summaries: MutableMapping[str, dict[str, Any]], irregular: set[str], store: Any,
          last_only: bool = False) -> RunColumns:
    """RunColumns from record tables in storage order (pyarrow, each with run_key and `_order`), the runs'
    summaries, the runs read record by record instead (`irregular`) and the store they are read from; of each
    run its latest record only when `last_only`.

    Sorted column by column into blocks made at their full size first: at 10⁵ runs a sorted copy of the whole
    table, every column as an array and the blocks stacked from them were ~230 MB alive at once."""
    import pyarrow as pa
    import pyarrow.compute as pc

    tables = [t for t in tables if t.num_rows]
    if not tables:
        out = RunColumns([], [], [], None, Spans([], np.zeros(0, int), np.zeros(0, int)), summaries)
        out._fallback.update((k, store.records(k)) for k in irregular)
        return out
    table = pa.concat_tables(tables, promote_options="permissive")
    order = pc.sort_indices(table, [("run_key", "ascending"), ("iteration", "ascending"), ("_order", "ascending")])
    keys = table.column("run_key").take(order).combine_chunks()
    its = table.column("iteration").take(order).to_numpy(zero_copy_only=False)
    same_key = pc.equal(keys[1:], keys[:-1]).to_numpy(zero_copy_only=False)
    starts = np.flatnonzero(np.r_[True, ~same_key])
    stops = np.r_[starts[1:], len(keys)]
    repeated = np.flatnonzero(same_key & (its[1:] == its[:-1]))
    again = set(keys.take(pa.array(repeated)).to_pylist()) - irregular
    if last_only:  # a run's latest: its last row by iteration, then by table (a replayed iteration's later one)
        order, keys = order.take(pa.array(stops - 1)), keys.take(pa.array(stops - 1))
        starts = np.arange(len(keys))
        stops = starts + 1
    names = [n for n in table.column_names if n not in ("run_key", "_order")]
    kinds = [_kind(table.column(n).type) for n in names]
    blocks = {k: np.empty((len(keys), kinds.count(k)), dtype=_DTYPES[k]) for k in dict.fromkeys(kinds)}
    where, filled = [], dict.fromkeys(blocks, 0)
    missing = np.zeros((len(keys), len(names)), bool) if any(table.column(n).null_count for n in names) else None
    for i, (n, k) in enumerate(zip(names, kinds)):
        col = table.column(n).take(order)
        if col.null_count:
            missing[:, i] = col.is_null().to_numpy(zero_copy_only=False)
            if k != "o" or not (pa.types.is_string(col.type) or pa.types.is_large_string(col.type)
                                or pa.types.is_null(col.type)):
                col = col.fill_null(False if k == "b" else 0)
        b = list(blocks).index(k)
        blocks[k][:, filled[k]] = columns.python_values(col)
        where.append((b, filled[k]))
        filled[k] += 1
    spans = Spans(keys.take(pa.array(starts)).to_pylist(), starts, stops)
    out = RunColumns(names, list(blocks.values()), where, missing, spans, summaries)
    out._fallback.update(_one_per_iteration(table, order, spans, again))
    out._fallback.update((k, store.records(k)) for k in irregular)
    return out


def _one_per_iteration(table: Any, order: Any, spans: Spans, keys: set[str]) -> dict[str, list[dict[str, Any]]]:
    """The records of runs that stored an iteration twice, as `ResultStore.records` keeps them, from the table
    already read (not by reading every shard again into Python dicts: most of a report's load when one run had
    repeated an iteration)."""
    out = {}
    for key in keys:
        start, stop = spans.get(key)
        rows = table.take(order[start:stop]).drop_columns(["run_key", "_order"]).to_pylist()
        out[key] = one_per_iteration({k: v for k, v in row.items() if v is not None} for row in rows)
    return out


#: A block's dtype by the kind of its columns (float, integer, boolean, anything else as Python objects).
_DTYPES = {"f": np.float64, "i": np.int64, "b": np.bool_, "o": object}


def _kind(t: Any) -> str:
    """The block a column of Arrow type `t` goes to."""
    import pyarrow as pa

    return ("f" if pa.types.is_floating(t) else "i" if pa.types.is_integer(t) else "b" if pa.types.is_boolean(t)
            else "o")
