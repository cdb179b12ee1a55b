"""Shards: what one Tune report brought (records of many runs, the ends of the runs it ended) in one file, committed
by one line of an index. The store's unit of writing is the report of a trial or a batch, not the run.

    <results>/shards/<seq>.parquet the report as a table: a row per record and per ended run (sweep/results/columns.py)
    <results>/shards/<seq>.jsonl   the same as JSON lines, {"run_key": <run>, <record>} and {"summary": ...}: what
                                   earlier drivers wrote, and a report whose values do not fit the table's columns
    <results>/shards.txt           "<seq> <bytes>" per committed shard; "reset <run>" per run started again from scratch

A shard counts once its index line is there, whole (ends with a newline) and naming the shard's exact size; a shard
a killed driver left without one is data no one reads, deleted on resume (`collect`). Index lines are appended in
one write each; a line cut short by a kill is dropped (and ended with a newline before the next append). A `reset`
line drops what earlier shards hold of that run (a run that runs again without a midway checkpoint writes its
records whole). What a shard holds is data only: a line that is not a JSON object of the expected form is skipped,
a table without the expected columns is not read.
"""
from __future__ import annotations

import json
import os
import re
from collections.abc import Collection, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

from sweep.results import columns
from sweep.results.safe_files import folder, open_file
from sweep.study.model import Point

INDEX = "shards.txt"
SHARDS = "shards"
#: A committed shard's index line: its sequence number (8 digits) and size in bytes.
COMMIT = re.compile(r"(\d{8}) (\d{1,15})")
RESET = "reset "
SHARD_NAME = re.compile(r"(\d{8})\.(jsonl|parquet)")
SUFFIXES = (".parquet", ".jsonl")
#: How every record line starts (`shard_lines`): its run key is decoded from there alone when that is enough.
_HEAD = '{"run_key": '
_DECODER = json.JSONDecoder()


def shard_lines(run_key: str, records: Iterable[dict[str, Any]]) -> str:
    """A run's records as a shard's lines (encoded where they are measured: in the trial, off the driver)."""
    return "".join(json.dumps({"run_key": run_key, **r}) + "\n" for r in records)


def plain_data(value: Any) -> Any:
    """What JSON holds of a value it has no type for: a configuration (`Point`, which a driver's summaries carry
    as itself: a table shard does not store it) as its plain data, anything else as its repr."""
    return value.to_dict() if isinstance(value, Point) else repr(value)


def is_record(row: Any) -> bool:
    """Whether a decoded shard line is a record of a run: a run key, an integer iteration and a status."""
    return (isinstance(row, dict) and isinstance(row.get("run_key"), str) and isinstance(row.get("status"), str)
            and isinstance(row.get("iteration"), int) and not isinstance(row["iteration"], bool))


class ShardLog:
    """The shards of one results directory: committed ones read in index order, new ones appended."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._next: int | None = None
        self._made = False

    @property
    def index_path(self) -> Path:
        return self.root / INDEX

    def exists(self) -> bool:
        return self.index_path.exists()

    # ---- the index ----
    def entries(self) -> list[tuple[str, Any]]:
        """The index, in order: ("shard", (seq, size)) or ("reset", run key); lines cut short or malformed dropped."""
        try:
            text = self.index_path.read_text()
        except FileNotFoundError:
            return []
        lines = text.split("\n")[:-1]  # the last piece has no newline: cut short by a kill (or empty)
        out: list[tuple[str, Any]] = []
        for line in lines:
            if (m := COMMIT.fullmatch(line)) is not None:
                out.append(("shard", (int(m[1]), int(m[2]))))
            elif line.startswith(RESET) and line[len(RESET):]:
                out.append(("reset", line[len(RESET):]))
        return out

    def _append_index(self, text: str) -> None:
        if self._next is None:
            self._start()
        with open_file(self.index_path, "a") as fh:
            fh.write(text)

    def _start(self) -> None:
        """Before the first write: the index ends with a newline (a kill may have cut its last line), and new
        sequence numbers follow every shard file there is, committed or not (none is overwritten)."""
        if self.index_path.exists():
            with open(self.index_path, "rb") as fh:
                fh.seek(0, os.SEEK_END)
                torn = fh.tell() > 0 and (fh.seek(-1, os.SEEK_END) or fh.read(1)) != b"\n"
            if torn:
                with open_file(self.index_path, "a") as fh:
                    fh.write("\n")
        seqs = [seq for kind, (seq, _) in ((k, v) for k, v in self.entries() if k == "shard")]
        seqs += [int(m[1]) for name in self._files() if (m := SHARD_NAME.fullmatch(name))]
        self._next = max(seqs, default=-1) + 1

    def _files(self) -> list[str]:
        d = self.root / SHARDS
        return os.listdir(d) if d.is_dir() else []

    def _dir(self) -> str:
        if not self._made:
            folder(self.root, self.root / SHARDS)
            self._made = True
        return str(self.root / SHARDS)

    # ---- writing ----
    def commit(self, lines: str, ended: Sequence[tuple[str, dict[str, Any]]], table: bytes | None = None) -> int:
        """Write a shard, then its index line (the commit); its sequence number. `table`: the report as Parquet
        bytes (`columns.encode`); without it, record lines and summaries as JSON lines."""
        if self._next is None:
            self._start()
        seq, self._next = self._next, self._next + 1  # type: ignore[operator]
        if table is not None:
            body, suffix = table, ".parquet"
        else:
            body = (lines + "".join(json.dumps({"summary": s}, default=plain_data) + "\n" for _, s in ended)).encode()
            suffix = ".jsonl"
        with open_file(os.path.join(self._dir(), f"{seq:08d}{suffix}"), "wb") as fh:
            fh.write(body)
        self._append_index(f"{seq:08d} {len(body)}\n")
        return seq

    def reset(self, run_keys: Iterable[str]) -> None:
        """Drop what committed shards hold of these runs (they run again from their start)."""
        text = "".join(f"{RESET}{k}\n" for k in run_keys)
        if text:
            self._append_index(text)

    def collect(self) -> int:
        """Delete shard files no whole index line commits (a killed driver's last); how many."""
        committed = {f"{v[0]:08d}{suffix}" for kind, v in self.entries() if kind == "shard" for suffix in SUFFIXES}
        gone = 0
        for name in self._files():
            if SHARD_NAME.fullmatch(name) and name not in committed:
                os.unlink(self.root / SHARDS / name)
                gone += 1
        return gone

    # ---- reading ----
    def _bytes(self, seq: int, size: int) -> tuple[str, bytes] | None:
        """(suffix, bytes) of a committed shard; None when missing or its size is not the committed one."""
        for suffix in SUFFIXES:
            try:
                data = (self.root / SHARDS / f"{seq:08d}{suffix}").read_bytes()
            except FileNotFoundError:
                continue
            return (suffix, data) if len(data) == size else None
        return None

    def _lines(self, data: bytes) -> list[str]:
        return data.decode(errors="replace").splitlines()

    def _rows(self, data: bytes) -> Iterator[dict[str, Any]]:
        """The decoded lines of a JSON-lines shard that are objects."""
        for line in self._lines(data):
            try:
                row = json.loads(line)
            except json.JSONDecodeError:
                continue
            if isinstance(row, dict):
                yield row

    def shards(self) -> Iterator[tuple[str, Any]]:
        """The index in order as ("reset", run key), ("jsonl", bytes) or ("parquet", its table); a shard that is
        missing, not of its committed size or not a readable table is left out."""
        for kind, value in self.entries():
            if kind == "reset":
                yield kind, value
            elif (shard := self._shard(*value)) is not None:
                yield shard

    def _shard(self, seq: int, size: int) -> tuple[str, Any] | None:
        found = self._bytes(seq, size)
        if found is None:
            return None
        if found[0] == ".jsonl":
            return "jsonl", found[1]
        table = columns.decode(found[1])
        return None if table is None else ("parquet", table)

    def _pairs(self, kind: str, shard: Any) -> tuple[list[tuple[str, dict[str, Any]]], list[dict[str, Any]]]:
        """A shard's (run key, record) pairs and its summaries, whatever its format."""
        if kind == "parquet":
            pairs, ends = columns.split(shard)
            last = {k: r for k, r in pairs}
            return pairs, [columns.summary(e, last.get(e["run_key"])) for e in ends]
        pairs, summaries = [], []
        for row in self._rows(shard):
            if "summary" in row:
                if _summary_ok(s := row["summary"]):
                    summaries.append(s)
            elif is_record(row):
                pairs.append((row.pop("run_key"), row))
        return pairs, summaries

    def last_ended(self) -> list[tuple[str, str]]:
        """(run key, status) of each run the last committed shard ended (a kill between its commit and ended.txt
        leaves them unlisted); of a Parquet shard only the end rows' two columns are read (its records, 10⁴ runs'
        at 10⁵ tiny runs, took ~70 MB and 0.4 s as dicts)."""
        shards = [v for kind, v in self.entries() if kind == "shard"]
        shard = self._shard(*shards[-1]) if shards else None
        if shard is None:
            return []
        kind, value = shard
        if kind == "parquet":
            ends = value.filter(columns.is_end(value))
            return list(zip(ends.column("run_key").to_pylist(), ends.column("status").to_pylist()))
        return [(s["run_key"], s["status"]) for s in self._pairs(kind, value)[1]]

    def held(self, wanted: Collection[str]) -> tuple[set[str], dict[str, list[dict[str, Any]]]]:
        """The runs committed shards hold records of, and the records of those in `wanted`, resets applied; only
        the run key of other records is decoded (a resume reads a large store at this cost, not at a full read's)."""
        keys: set[str] = set()
        found: dict[str, list[dict[str, Any]]] = {}
        for kind, value in self.shards():
            if kind == "reset":
                keys.discard(value)
                found.pop(value, None)
            elif kind == "parquet":
                ran = set(value.filter(_not(columns.is_end(value))).column("run_key").unique().to_pylist())
                keys.update(ran)
                if not ran.isdisjoint(wanted):
                    for key, rec in columns.split(value)[0]:
                        if key in wanted:
                            found.setdefault(key, []).append(rec)
            else:
                self._held_lines(value, wanted, keys, found)
        return keys, found

    def _held_lines(self, data: bytes, wanted: Collection[str], keys: set[str],
                    found: dict[str, list[dict[str, Any]]]) -> None:
        for line in self._lines(data):
            try:
                key = _DECODER.raw_decode(line, len(_HEAD))[0] if line.startswith(_HEAD) else None
            except ValueError:
                continue
            if not isinstance(key, str):
                continue
            if key in wanted:
                try:
                    row = json.loads(line)
                except ValueError:
                    continue
                if not is_record(row):
                    continue
                found.setdefault(key, []).append({k: v for k, v in row.items() if k != "run_key"})
            keys.add(key)

    def read(self) -> dict[str, tuple[list[dict[str, Any]], dict[str, Any] | None]]:
        """Run key -> (its records as stored, oldest first; its summary or None), resets applied."""
        out: dict[str, tuple[list[dict[str, Any]], dict[str, Any] | None]] = {}
        for kind, value in self.shards():
            if kind == "reset":
                out.pop(value, None)
                continue
            pairs, summaries = self._pairs(kind, value)
            for key, rec in pairs:
                out.setdefault(key, ([], None))[0].append(rec)
            for s in summaries:
                out[s["run_key"]] = (out.get(s["run_key"], ([], None))[0], s)
        return out


def _not(mask: Any) -> Any:
    import pyarrow.compute as pc

    return pc.invert(mask)


def _summary_ok(s: Any) -> bool:
    return isinstance(s, dict) and isinstance(s.get("run_key"), str) and isinstance(s.get("status"), str)
