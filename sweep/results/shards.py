"""Shards: what one Tune report brought (records of many runs, summaries of the runs it ended) in one file, committed
by one line of an index. The store's unit of writing is the report of a trial or a batch, not the run.

    <results>/shards/<seq>.jsonl   a line per record, {"run_key": <run>, <record>}, and per ended run, {"summary": ...}
    <results>/shards.txt           "<seq> <bytes>" per committed shard; "reset <run>" per run started again from scratch

A shard counts once its index line is there, whole (ends with a newline) and naming the shard's exact size; a shard
a killed driver left without one is data no one reads, deleted on resume (`collect`). Index lines are appended in
one write each; a line cut short by a kill is dropped (and ended with a newline before the next append). A `reset`
line drops what earlier shards hold of that run (a run that runs again without a midway checkpoint writes its
records whole). What a shard holds is data only: a line that is not a JSON object of the expected form is skipped.
"""
from __future__ import annotations

import json
import os
import re
from collections.abc import Collection, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

from sweep.results.safe_files import folder, open_file

INDEX = "shards.txt"
SHARDS = "shards"
#: A committed shard's index line: its sequence number (8 digits) and size in bytes.
COMMIT = re.compile(r"(\d{8}) (\d{1,15})")
RESET = "reset "
SHARD_NAME = re.compile(r"(\d{8})\.jsonl")
#: How every record line starts (`shard_lines`): its run key is decoded from there alone when that is enough.
_HEAD = '{"run_key": '
_DECODER = json.JSONDecoder()


def shard_lines(run_key: str, records: Iterable[dict[str, Any]]) -> str:
    """A run's records as a shard's lines (encoded where they are measured: in the trial, off the driver)."""
    return "".join(json.dumps({"run_key": run_key, **r}) + "\n" for r in records)


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
    def commit(self, lines: str, ended: Sequence[tuple[str, dict[str, Any]]]) -> int:
        """Write a shard of record lines and summaries, then its index line (the commit); its sequence number."""
        if self._next is None:
            self._start()
        seq, self._next = self._next, self._next + 1  # type: ignore[operator]
        body = (lines + "".join(json.dumps({"summary": s}, default=repr) + "\n" for _, s in ended)).encode()
        with open_file(os.path.join(self._dir(), f"{seq:08d}.jsonl"), "wb") as fh:
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
        committed = {f"{seq:08d}.jsonl" for kind, v in self.entries() if kind == "shard" for seq in (v[0],)}
        gone = 0
        for name in self._files():
            if SHARD_NAME.fullmatch(name) and name not in committed:
                os.unlink(self.root / SHARDS / name)
                gone += 1
        return gone

    # ---- reading ----
    def _lines(self, seq: int, size: int) -> list[str]:
        """The lines of a committed shard (none when its size is not the committed one)."""
        try:
            data = (self.root / SHARDS / f"{seq:08d}.jsonl").read_bytes()
        except FileNotFoundError:
            return []
        return data.decode(errors="replace").splitlines() if len(data) == size else []

    def rows(self, seq: int, size: int) -> Iterator[dict[str, Any]]:
        """The decoded lines of a committed shard (none when its size is not the committed one)."""
        for line in self._lines(seq, size):
            try:
                row = json.loads(line)
            except json.JSONDecodeError:
                continue
            if isinstance(row, dict):
                yield row

    def last_summaries(self) -> list[dict[str, Any]]:
        """The summaries of the last committed shard (a kill between its commit and ended.txt leaves them unlisted)."""
        shards = [v for kind, v in self.entries() if kind == "shard"]
        if not shards:
            return []
        return [row["summary"] for row in self.rows(*shards[-1]) if _summary_ok(row.get("summary"))]

    def held(self, wanted: Collection[str]) -> tuple[set[str], dict[str, list[dict[str, Any]]]]:
        """The runs committed shards hold records of, and the records of those in `wanted`, resets applied; only
        the run key of other lines is decoded (a resume reads a large store at this cost, not at a full read's)."""
        keys: set[str] = set()
        found: dict[str, list[dict[str, Any]]] = {}
        for kind, value in self.entries():
            if kind == "reset":
                keys.discard(value)
                found.pop(value, None)
                continue
            for line in self._lines(*value):
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
        return keys, found

    def read(self) -> dict[str, tuple[list[dict[str, Any]], dict[str, Any] | None]]:
        """Run key -> (its records as stored, oldest first; its summary or None), resets applied."""
        out: dict[str, tuple[list[dict[str, Any]], dict[str, Any] | None]] = {}
        for kind, value in self.entries():
            if kind == "reset":
                out.pop(value, None)
                continue
            for row in self.rows(*value):
                if "summary" in row:
                    if _summary_ok(s := row["summary"]):
                        out[s["run_key"]] = (out.get(s["run_key"], ([], None))[0], s)
                elif is_record(row):
                    key = row.pop("run_key")
                    out.setdefault(key, ([], None))[0].append(row)
        return out


def _summary_ok(s: Any) -> bool:
    return isinstance(s, dict) and isinstance(s.get("run_key"), str) and isinstance(s.get("status"), str)
