"""A study's run summaries as reports read them: those of the Parquet shards' end rows kept as columns and made a
dict only when read, the others (files, JSON shards) as dicts."""
from __future__ import annotations

import bisect
from collections.abc import Iterator, MutableMapping
from typing import Any

from sweep.results import columns


class Summaries(MutableMapping):
    """Run key -> summary: those of the Parquet shards' end rows kept as the rows' columns and made a dict only
    when read (10⁵ summaries as dicts took seconds and ~150 MB), the others (files, JSON shards) as dicts."""

    def __init__(self, dicts: dict[str, dict[str, Any]]) -> None:
        self._dicts = dict(dicts)
        self._rows: dict[str, int] = {}  # run key -> its end row's position over the end tables in turn
        self._tables: list[dict[str, Any]] = []  # each end table's columns: run keys a list, the others arrays
        self._firsts: list[int] = []  # each end table's first position
        self._places: dict[tuple[Any, Any], dict[str, Any]] = {}  # (node, host) -> one `where` for its runs

    def add_rows(self, table: Any) -> None:
        """The end rows of one shard (run_key, status and the END columns), later ones replacing earlier ones."""
        # run keys are each other's (nothing to share); the rest NumPy arrays, read as Python values one at a time
        # (as lists of Python numbers, 10⁵ runs' END columns were 18 MB)
        cols = {n: table.column(n).to_pylist() if n == "run_key" else columns.python_values(table.column(n))
                for n in table.column_names}
        first = self._firsts[-1] + len(self._tables[-1]["run_key"]) if self._tables else 0
        self._tables.append(cols)
        self._firsts.append(first)
        for p, key in enumerate(cols["run_key"], first):
            self._rows[key] = p
            self._dicts.pop(key, None)

    def _row(self, p: int) -> tuple[dict[str, Any], int]:
        """(end table, row) of position p."""
        t = bisect.bisect_right(self._firsts, p) - 1
        return self._tables[t], p - self._firsts[t]

    def __getitem__(self, key: str) -> dict[str, Any]:
        if key in self._dicts:
            return self._dicts[key]
        cols, i = self._row(self._rows[key])
        end = {n: c[i] if isinstance(c, list) else c.item(i) for n, c in cols.items()}  # item: a Python value
        return {k: v for k, v in columns.summary(end, None).items() if k != "final"}

    def __setitem__(self, key: str, value: dict[str, Any]) -> None:
        self._rows.pop(key, None)
        self._dicts[key] = value

    def __delitem__(self, key: str) -> None:
        if self._rows.pop(key, None) is None:
            del self._dicts[key]

    def __iter__(self) -> Iterator[str]:
        yield from self._dicts
        yield from self._rows

    def __len__(self) -> int:
        return len(self._dicts) + len(self._rows)

    def column_status(self, key: str) -> str | None:
        """The status of a run whose summary is a shard's end row (it has no final record of its own: its last
        record is), or None for any other run."""
        at = self._rows.get(key)
        if at is None:
            return None
        cols, i = self._row(at)
        return cols["status"][i]

    def brief(self, key: str) -> tuple[str, dict[str, Any], str | None, Any] | None:
        """(status, where, error, final) of a run without making its summary (final: `MISSING` when the summary
        has none, the run's last record then being its final one); None when it has not ended."""
        at = self._rows.get(key)
        if at is None:
            s = self._dicts.get(key)
            return None if s is None else (s["status"], s.get("where") or {}, s.get("error"), s.get("final", MISSING))
        cols, i = self._row(at)
        place = (cols["end.node"][i], cols["end.host"][i])
        where = self._places.get(place)
        if where is None:  # one dict for the runs of a place: a report reads it, never changes it
            where = self._places[place] = {k: v for k, v in zip(("node", "host"), place) if v is not None}
        return cols["status"][i], where, None, MISSING


#: `Summaries.brief`'s final when a summary has no final record of its own.
MISSING: Any = object()
