"""A shard as a Parquet table: a Tune report's records and the ends of the runs it ended, column by column.

One row per record (`run_key`, then the record's fields: iteration, status, time, calls/<oracle>, metrics ...) and
one row per ended run (`run_key`, `status`, `end.trial_key`, `end.node`, `end.host`, `end.span_start`,
`end.span_end`; its `iteration` is null). A run's summary is not stored whole: its final record is the run's last
record, its seed ends its run key and its configuration is in study.json, so an end row is ~20 bytes where the
summary it stands for was ~1.5 KB of JSON. `summary` puts the summary back together as the JSON shards hold it.

A report that does not fit these columns (a value that is a list or a mapping, ints and floats in one field, a
summary with more in it than an end row holds, a final record that is not the run's last record in the report, a
record field named run_key or end.*) is written as JSON lines instead
(`encode` returns None): both kinds of shard are read alike.
"""
from __future__ import annotations

import io
import os
import sys
from collections.abc import Sequence
from typing import Any

import numpy as np

#: The columns of an end row besides run_key and status, and where each comes from in a summary.
END = {"end.trial_key": ("trial_key",), "end.node": ("where", "node"), "end.host": ("where", "host"),
       "end.span_start": ("span", 0), "end.span_end": ("span", 1)}
#: Summary keys an end row holds or that are derived on reading (seed, final) or from study.json (point).
SUMMARY_KEYS = {"run_key", "trial_key", "seed", "status", "final", "where", "span", "point"}
#: Column types a shard may hold (anything else goes to a JSON-lines shard).
PLAIN_TYPES = ("null", "bool", "int64", "double", "string", "large_string")
_WHERE = frozenset({"node", "host"})


def use_system_allocator() -> None:
    """Arrow's buffers in this process, and in the Ray workers it starts, from the C library's allocator instead of
    the mimalloc pool pyarrow defaults to, unless ARROW_DEFAULT_MEMORY_POOL already names one. A driver or a report
    reads every shard in turn, and mimalloc kept much of each one read after `release_unused` (10⁵ tiny runs: the
    driver's peak 697 -> 606 MB, medians of 3). Arrow reads the variable when its default pool is first used,
    and Parquet's writer keeps to that pool whatever `pyarrow.set_memory_pool` says: call this before; a pool
    already in use is replaced for reading and compute, which follow `set_memory_pool`."""
    if os.environ.get("ARROW_DEFAULT_MEMORY_POOL"):
        return
    os.environ["ARROW_DEFAULT_MEMORY_POOL"] = "system"
    if "pyarrow" in sys.modules:
        import pyarrow as pa

        pa.set_memory_pool(pa.system_memory_pool())


def seed_of(run_key: str) -> int | None:
    """The seed a run key ends with (`<configuration>.s<seed>`), or None."""
    head, sep, tail = run_key.rpartition(".s")
    return int(tail) if sep and tail.isdigit() else None


def _end_row(key: str, summary: dict[str, Any], last: dict[str, Any] | None) -> dict[str, Any] | None:
    """The end row of a run's summary, or None when the summary holds more than an end row can give back."""
    where, span, final = summary.get("where") or {}, summary.get("span"), summary.get("final")
    if (not SUMMARY_KEYS.issuperset(summary) or summary.get("run_key") != key or last is None
            or (final is not last and final != last)  # the driver's summaries hold the record itself: no compare
            or summary.get("status") != last.get("status") or summary.get("seed") != seed_of(key)
            or not _WHERE.issuperset(where) or not all(isinstance(v, str) for v in where.values())
            or "trial_key" in summary and not isinstance(summary["trial_key"], str)
            or span is not None and not (isinstance(span, (list, tuple)) and len(span) == 2
                                         and isinstance(span[0], float) and isinstance(span[1], float))):
        return None
    return {"run_key": key, "status": summary["status"], "end.trial_key": summary.get("trial_key"),
            "end.node": where.get("node"), "end.host": where.get("host"),
            "end.span_start": span[0] if span else None, "end.span_end": span[1] if span else None}


def encode(runs: Sequence[tuple[str, Sequence[dict[str, Any]]]], ended: Sequence[tuple[str, dict[str, Any]]]
           ) -> bytes | None:
    """A report's new records (run key, records) and ended runs (run key, summary) as Parquet bytes; None when
    they do not fit the columns (module docstring)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    last = {key: records[-1] for key, records in runs if records}
    ends = [_end_row(key, summary, last.get(key)) for key, summary in ended]
    if any(row is None for row in ends):
        return None
    flat = [r for _, records in runs for r in records]
    shapes = dict.fromkeys(tuple(r) for r in flat)
    names = ordered(shapes)
    if names is None or "run_key" in names or any(k in names for k in END):
        return None
    values: dict[str, list[Any]] = {"run_key": [key for key, records in runs for _ in records]}
    if len(shapes) == 1:  # every record has the same fields (the usual report): transposed in one pass
        values.update(zip(names, map(list, zip(*map(dict.values, flat)))) if flat else ())
    else:
        values.update((k, [r.get(k) for r in flat]) for k in names)
    names = ["run_key", *names, *(k for k in ("iteration", "status", *END) if k not in names)]
    ends_of = {k: [e[k] for e in ends] for k in ("run_key", "status", *END)}  # every end row has these keys
    try:
        columns = {k: _column(values.get(k), ends_of.get(k), len(flat), len(ends)) for k in names}
    except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, OverflowError):
        return None  # mixed or unsupported values
    if any(str(c.type) not in PLAIN_TYPES for c in columns.values()):
        return None
    if any(str(columns[k].type) == "double" and int in set(map(type, values[k])) for k in values):
        return None  # ints and floats in one field: a table would read its ints back as floats
    buf = io.BytesIO()
    pq.write_table(pa.table(columns), buf, compression="zstd")
    return buf.getvalue()


def _column(records: list[Any] | None, ends: list[Any] | None, n_records: int, n_ends: int) -> Any:
    """A column of the records' values then the end rows' (None: the rows have no such field, all nulls), as one
    array of the type pyarrow finds for the values: only the two fields both kinds of row have are joined as lists,
    the others padded with typed nulls (the values of each field are not copied into a padded list per report)."""
    import pyarrow as pa

    if records is not None and ends is not None:
        return pa.array(records + ends)
    if records is None and ends is None:
        return pa.nulls(n_records + n_ends)
    values = pa.array(records if records is not None else ends)
    pad = pa.nulls(n_ends if records is not None else n_records, values.type)
    if not len(pad):
        return values
    return pa.concat_arrays([values, pad] if records is not None else [pad, values])


def ordered(shapes: Sequence[tuple[str, ...]]) -> list[str] | None:
    """Column names in which every record's keys keep their order (a record reads back as it was sent), each new
    key placed right after the key before it in its record; None when two records order their keys differently."""
    names: list[str] = []
    for shape in shapes:
        pos = -1
        for key in shape:
            if key in names:
                pos = names.index(key)
            else:
                pos += 1
                names.insert(pos, key)
    where = {k: i for i, k in enumerate(names)}
    if any(where[a] > where[b] for shape in shapes for a, b in zip(shape, shape[1:])):
        return None
    return names


def decode(data: bytes) -> Any:
    """The pyarrow Table of a shard's Parquet bytes, or None when they are not a readable shard."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        table = pq.ParquetFile(pa.BufferReader(data)).read()  # not read_table: it imports pyarrow.dataset (~1 s)
    except (pa.ArrowException, OSError, ValueError):
        return None
    names = set(table.column_names)
    return table if {"run_key", "iteration", "status"} <= names and set(END) <= names else None


def is_end(table: Any) -> Any:
    """A boolean mask of a shard table's end rows."""
    import pyarrow.compute as pc

    return pc.is_null(table.column("iteration"))


def split(table: Any) -> tuple[list[tuple[str, dict[str, Any]]], list[dict[str, Any]]]:
    """A shard table as (run key, record) pairs in order and its end rows as dicts (plain Python values)."""
    import pyarrow.compute as pc

    ends = is_end(table)
    recs = table.filter(pc.invert(ends)).drop_columns(list(END))
    names = [n for n in recs.column_names if n != "run_key"]
    cols = [recs.column(n).to_pylist() for n in names]
    keys = recs.column("run_key").to_pylist()
    pairs = [(k, {n: v for n, v in zip(names, vals) if v is not None}) for k, *vals in zip(keys, *cols)]
    end_rows = table.filter(ends).select(["run_key", "status", *END]).to_pylist()
    return pairs, end_rows


def records_by_run(data: bytes) -> dict[str, list[dict[str, Any]]]:
    """The records of a shard's Parquet bytes by run key, in order (as the store reads them back)."""
    table = decode(data)
    if table is None:
        raise ValueError("a report's shard is not a readable shard table")
    out: dict[str, list[dict[str, Any]]] = {}
    for key, record in split(table)[0]:
        out.setdefault(key, []).append(record)
    return out


def summary(end: dict[str, Any], final: dict[str, Any] | None) -> dict[str, Any]:
    """A run's summary as the JSON shards hold it, from its end row and its final record."""
    where = {k: end[f"end.{k}"] for k in ("node", "host") if end.get(f"end.{k}") is not None}
    span = [end["end.span_start"], end["end.span_end"]] if end.get("end.span_start") is not None else None
    out = {"run_key": end["run_key"], "status": end["status"], "final": final, "where": where, "span": span}
    if end.get("end.trial_key") is not None:
        out["trial_key"] = end["end.trial_key"]
    seed = seed_of(end["run_key"])
    if seed is not None:
        out["seed"] = seed
    return out


def python_values(col: Any) -> Any:
    """An Arrow column's values as a NumPy array (Python objects for text); of a text column equal strings are one object (one each took
    ~57 B: 3×10⁵ record statuses 17 MB)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if not (pa.types.is_string(col.type) or pa.types.is_large_string(col.type)):
        return col.to_numpy(zero_copy_only=False)
    coded = pc.dictionary_encode(col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col)
    words = np.array([*coded.dictionary.to_pylist(), None], dtype=object)
    return words[coded.indices.fill_null(len(words) - 1).to_numpy(zero_copy_only=False)]
