"""The on-disk results of a study: what reports are built from, and what says a run is finished.

    <results>/study.json              the validated study: kind, axis, report options, configurations
    <results>/records/<run>.jsonl     every metric record of a run, appended as it arrives
    <results>/runs/<run>.json         a run's summary, written when it ends (finished, diverged or failed)
    <results>/ended.txt               "<status> <run>" per ended run, appended after its summary (the last wins)
    <results>/resume.txt              "<run> <checkpoint>" for runs checkpointed midway (the last wins)
    <results>/shards/, shards.txt     a shard per Tune report, a Parquet table (or JSON lines): sweep/results/shards.py

A driver writes each Tune report as one shard (the records of its runs, the summaries of the runs it ended) and
commits it with one index line, then notes the ended runs in ended.txt: a few files per report, not two per run.
`records/` and `runs/` are what older drivers wrote (and `append_many`, `finish_many` still write): both are read,
a run's shard summary winning over its file, so an older results directory loads, reports and resumes as it is.

A run counts as done when its summary says finished or diverged; failed runs run again on resume. `ended.txt` lets
a driver learn what ended from one file instead of one per run; a summary written just before a crash but missing
from it is found by listing runs/. Appends are idempotent: a record stored (same iteration and status) is not again.
"""
from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from problems.shared.errors import ParameterError

from sweep.results import columns, environment, study_file
from sweep.results.safe_files import folder, open_file
from sweep.results.shards import ShardLog, plain_data, shard_lines
from sweep.study.model import Point, Study
from sweep.study.record import StudyRecord

DONE_STATUSES = ("finished", "diverged")
#: A key read from disk that names a file: no path separator, no control character, not '.'-led.
PLAIN_NAME = re.compile(r"[^./\\\x00-\x1f][^/\\\x00-\x1f]*")
#: Longest such key in bytes (a file name is at most 255 bytes, with room for a suffix such as '.jsonl').
MAX_NAME_BYTES = 240


def plain(key: Any, field: str) -> str:
    """`key` if it is a plain file name (a crafted results directory must not reach files outside it)."""
    if not isinstance(key, str) or not PLAIN_NAME.fullmatch(key) or len(key.encode()) > MAX_NAME_BYTES:
        raise ParameterError(f"{field}: {str(key)[:80]!r} is not a plain name (no '/', '\\', control "
                             f"characters or leading '.'; at most {MAX_NAME_BYTES} bytes)")
    return key


def study_head(study: Study) -> dict[str, Any]:
    """Everything study.json records of a study but its points."""
    return {
        "name": study.name, "description": study.description, "kind": study.kind, "axis": study.axis,
        "axis_name": study.axis_name, "seeds": study.seeds, "online": study.online,
        "spec_hash": study.spec_hash, "report": vars(study.report),
        "claim": study.claim, "scale": study.scale, "source": study.source,
    }


def records_text(records: Iterable[dict[str, Any]]) -> str:
    """Records as the lines of a run's records file."""
    return "".join(json.dumps(r) + "\n" for r in records)


def one_per_iteration(records: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """Records in storage order as a run's records: one per iteration in iteration order, the first stored for an
    iteration unless it was "running" (the final status wins)."""
    by_it: dict[int, dict[str, Any]] = {}
    for r in records:
        prev = by_it.get(r["iteration"])
        if prev is None or prev["status"] == "running":
            by_it[r["iteration"]] = r
    return [by_it[k] for k in sorted(by_it)]


class ResultStore:
    """Per-run records and summaries of one study under one directory."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root).resolve()
        self._seen: dict[str, set[tuple[int, str]]] = {}
        self._listed: set[str] | None = None  # the records files there were when this store first wrote
        self._ended: dict[str, str] | None = None
        self._made: set[str] = set()  # directories this store made (or found): not asked again per run
        self.shards = ShardLog(self.root)
        self._data: dict[str, tuple[list[dict[str, Any]], dict[str, Any] | None]] | None = None  # shards, as read
        self._prior: dict[str, set[tuple[int, str]]] | None = None  # records in shards of runs resumed midway

    # ---- layout ----
    @property
    def records_dir(self) -> Path:
        return self.root / "records"

    @property
    def runs_dir(self) -> Path:
        return self.root / "runs"

    @property
    def report_dir(self) -> Path:
        return self.root / "report"

    def ensure(self) -> None:
        """Create the directory layout."""
        self.root.mkdir(parents=True, exist_ok=True)
        for name in ("records", "runs"):
            self._dir(name)

    # ---- the study ----
    def write_study(self, study: Study) -> None:
        """Record the validated study (so reports need neither the YAML nor MLflow): sweep/results/study_file.py."""
        self.ensure()
        head = {**study_head(study), "environment": environment.describe()}  # where it ran (sweep/results/environment.py)
        study_file.write(self.root / "study.json", head, study.points)

    def read_study(self) -> StudyRecord:
        """The study recorded by `write_study`."""
        path = self.root / "study.json"
        if not path.exists():
            raise FileNotFoundError(f"no study results in {self.root} (run the study first)")
        record = StudyRecord.from_dict(study_file.read(path))  # checks the points list and the seeds
        for i, point in enumerate(record.points):  # a point's key names its runs' files
            plain(point.get("key") if isinstance(point, dict) else None, f"study.json: points[{i}].key")
        return record

    # ---- records ----
    def _seen_for(self, run_key: str) -> set[tuple[int, str]]:
        if run_key not in self._seen:
            if self._listed is None:  # one listing, not a stat per new run (the driver is this store's only writer)
                self._listed = set(os.listdir(self.records_dir)) if self.records_dir.is_dir() else set()
            on_disk = f"{run_key}.jsonl" in self._listed
            self._seen[run_key] = {(r["iteration"], r["status"]) for r in self._read_lines(run_key)} if on_disk \
                else set()
            self._seen[run_key] |= self._prior_for(run_key)
        return self._seen[run_key]

    def _prior_for(self, run_key: str) -> set[tuple[int, str]]:
        """The records shards hold of a run that continues from a midway checkpoint (the only runs a new driver
        sends records of again: others were reset by `repair`); read from the shards once, on first need."""
        if self._prior is None:
            resumed = self.checkpoints() if self.shards.exists() else {}
            found = self.shards.held(set(resumed))[1] if resumed else {}
            self._prior = {k: {(r["iteration"], r["status"]) for r in rs} for k, rs in found.items()}
        return self._prior.get(run_key, set())

    def write_shard(self, runs: Sequence[tuple[Any, ...]], ended: list[tuple[str, dict[str, Any]]],
                    encoded: bytes | None = None) -> int:
        """Store one report: the runs' records not stored yet ((run key, records, their `shard_lines` or None[, their
        (iteration, status) each])) and the summaries of the runs it ended, as one shard (a Parquet table, or JSON
        lines if it does not fit the columns: sweep/results/columns.py) committed by one index line, then the ended
        runs in ended.txt in one write; how many records were new. `encoded`: the table `columns.encode` makes of all
        these records and summaries (a trial encodes it, off the driver), used when every record is new; a run's
        records may then be None (given by their idents), read from it only when some are not new. A kill before
        the commit loses the whole report (its runs run again on resume); one between the commit and ended.txt is
        repaired from the shard (`repair`)."""
        runs = [(plain(key, "run key"), records, lines,
                 [(int(r["iteration"]), str(r["status"])) for r in records] if not idents or idents[0] is None
                 else idents[0]) for key, records, lines, *idents in runs]
        # A run repeats records when one was stored before or comes twice in the report (or the run does).
        repeats = [bool(self._seen_for(key).intersection(ids)) or len(set(ids)) < len(ids) for key, _, _, ids in runs]
        if len({key for key, _, _, _ in runs}) < len(runs):
            repeats = [True] * len(runs)
        if (any(repeats) or self._data is not None) and any(records is None for _, records, _, _ in runs):
            held = columns.records_by_run(encoded)  # the records the report sent in its shard only
            runs = [(key, held.get(key, []) if records is None else records, lines, ids)
                    for key, records, lines, ids in runs]
        fresh, new_count = [], 0
        for (key, records, lines, idents), repeated in zip(runs, repeats):
            seen = self._seen_for(key)
            if repeated:
                new = [r for r, ident in zip(records, idents) if ident not in seen and not seen.add(ident)]
                lines = encoded = None
            else:
                new = records  # every record new: None when only the shard holds them (it is written as sent)
                seen.update(idents)
            fresh.append((key, new, lines))
            new_count += len(idents) if new is None else len(new)
            if self._data is not None and new:
                self._data.setdefault(key, ([], None))[0].extend(new)
        if not new_count and not ended:
            return 0
        for key, _ in ended:
            plain(key, "run key")
        table = encoded if encoded is not None else columns.encode([(key, new) for key, new, _ in fresh if new], ended)
        text = "" if table is not None else "".join(lines if lines is not None else shard_lines(key, new)
                                                    for key, new, lines in fresh)
        self.shards.commit(text, ended, table)
        if self._data is not None:
            for key, s in ended:  # a configuration as plain data, as JSON reads it back
                kept = {**s, "point": plain_data(s["point"])} if isinstance(s.get("point"), Point) else s
                self._data[key] = (self._data.get(key, ([], None))[0], kept)
        self._note_ended(ended)
        return new_count

    def _shard_data(self, cache: bool = True) -> dict[str, tuple[list[dict[str, Any]], dict[str, Any] | None]]:
        """What the committed shards hold by run (read once and then kept up to date when `cache`)."""
        if self._data is not None:
            return self._data
        data = self.shards.read() if self.shards.exists() else {}
        if cache:
            self._data = data
        return data

    def append(self, run_key: str, record: dict[str, Any]) -> bool:
        """Store one metric record unless it is already stored; True when it was new."""
        return self.append_many(run_key, [record]) == 1

    def append_many(self, run_key: str, records: Sequence[dict[str, Any]], text: str | None = None) -> int:
        """Store a run's records not stored yet, in one write; how many were new. `text`: the records' JSON
        lines as `records_text` makes them (a trial encodes them, off the driver), written when all are new."""
        seen = self._seen_for(run_key)
        idents = [(int(r["iteration"]), str(r["status"])) for r in records]
        if text is None or seen.intersection(idents) or len(set(idents)) < len(idents):
            new = []
            for record, ident in zip(records, idents):
                if ident not in seen:
                    seen.add(ident)
                    new.append(record)
            text = records_text(new)
        else:
            new = list(records)
            seen.update(idents)
        if new:
            with open_file(os.path.join(self._dir("records"), f"{plain(run_key, 'run key')}.jsonl"), "a") as fh:
                fh.write(text)
        return len(new)

    def _dir(self, name: str) -> str:
        """The path of a subdirectory, made (and checked: no link) on first use (a driver writes thousands of
        files into it)."""
        path = os.path.join(self.root, name)
        if name not in self._made:
            folder(self.root, path)
            self._made.add(name)
        return path

    def _read_lines(self, run_key: str) -> list[dict[str, Any]]:
        path = self.records_dir / f"{plain(run_key, 'run key')}.jsonl"
        if not os.path.exists(path):
            return []
        out = []
        for line in path.read_text().splitlines():
            try:
                out.append(json.loads(line))
            except json.JSONDecodeError:
                continue  # a line cut short by a killed driver; the resumed run reports it again
        return out

    def records(self, run_key: str) -> list[dict[str, Any]]:
        """A run's records in iteration order, one per iteration (the final status wins)."""
        stored = self._shard_data().get(run_key, ([], None))[0] if self.shards.exists() else []
        return one_per_iteration([*self._read_lines(run_key), *stored])

    # ---- summaries ----
    def finish(self, run_key: str, summary: dict[str, Any]) -> None:
        """Write a run's summary (status finished, diverged or failed), then note it in ended.txt."""
        self.finish_many([(run_key, summary)])

    def finish_many(self, ended: list[tuple[str, dict[str, Any]]]) -> None:
        """Write runs' summaries (run key, summary), then note them all in ended.txt in one write.

        ended.txt is the commit: a summary a killed driver cut short is not listed there and reads as not
        written (`summary`), so its run runs again and writes it whole. Hence no temporary file and rename
        per summary, which in a directory of 10⁵ of them cost 2-4x the write itself.
        """
        if not ended:
            return
        runs = self._dir("runs")
        for key, summary in ended:
            with open_file(os.path.join(runs, f"{plain(key, 'run key')}.json"), "w") as fh:
                fh.write(json.dumps(summary, default=repr))
        self._note_ended(ended)

    def _note_ended(self, ended: list[tuple[str, dict[str, Any]]]) -> None:
        """The runs' ends in ended.txt, in one write."""
        if not ended:
            return
        with open_file(self.root / "ended.txt", "a") as fh:
            fh.write("".join(f"{summary['status']} {key}\n" for key, summary in ended))
        for key, summary in ended:
            self._seen.pop(key, None)  # an ended run gets no more records: keep memory flat at any N
            if self._ended is not None:
                self._ended[key] = summary["status"]

    def summary(self, run_key: str) -> dict[str, Any] | None:
        """A run's summary, or None when it has not ended (or its summary was cut short by a kill)."""
        if self.shards.exists() and (stored := self._shard_data().get(run_key)) is not None and stored[1] is not None:
            return stored[1]
        return self._file_summary(run_key)

    def _file_summary(self, run_key: str) -> dict[str, Any] | None:
        path = self.runs_dir / f"{plain(run_key, 'run key')}.json"
        try:
            return json.loads(path.read_text())
        except (FileNotFoundError, json.JSONDecodeError):
            return None

    def summaries(self, run_keys: Iterable[str] | None = None) -> list[dict[str, Any]]:
        """Summaries of the given runs (all when None) that have ended."""
        if run_keys is None:
            paths = sorted(self.runs_dir.glob("*.json")) if self.runs_dir.exists() else []
            files = {p.stem: json.loads(p.read_text()) for p in paths}
            stored = {k: s for k, (_, s) in self._shard_data().items() if s is not None}
            return list({**files, **stored}.values())
        return [s for s in (self.summary(k) for k in run_keys) if s is not None]

    def ended(self) -> dict[str, str]:
        """Run key -> status of every ended run (from ended.txt, plus summaries it does not list yet)."""
        return dict(self._load_ended())

    def status(self, run_key: str) -> str | None:
        """How a run ended (finished, diverged, failed), or None while it has not."""
        return self._load_ended().get(run_key)

    def _load_ended(self) -> dict[str, str]:
        if self._ended is None:
            ended: dict[str, str] = {}
            path = self.root / "ended.txt"
            if path.exists():
                for line in path.read_text().splitlines():
                    status, _, key = line.partition(" ")
                    if key:  # a line cut short by a killed driver has no key
                        ended[key] = status
            if self.runs_dir.exists():
                for name in os.listdir(self.runs_dir):
                    key = name[:-5] if name.endswith(".json") else None
                    if key is not None and key not in ended and (s := self._file_summary(key)) is not None:
                        ended[key] = s["status"]
            for key, status in self.shards.last_ended():  # committed, but the driver was killed before ended.txt
                ended.setdefault(key, status)
            self._ended = ended
        return self._ended

    def repair(self, rerun: Iterable[str]) -> tuple[int, int]:
        """Before a session resumes: ended.txt gets every intact summary it does not list (a driver killed between
        the two writes), and each run of `rerun` (runs to run again) without a midway checkpoint loses its records
        and any torn summary, so that its new run writes them whole instead of keeping the old lines
        where the new ones repeat an iteration. (summaries added to ended.txt, runs reset)."""
        listed = set()
        path = self.root / "ended.txt"
        if path.exists():
            listed = {key for status, _, key in (ln.partition(" ") for ln in path.read_text().splitlines()) if key}
        missing = [(k, s) for k, s in self._load_ended().items() if k not in listed]
        if missing:
            with open_file(path, "a") as fh:
                fh.write("".join(f"{status} {key}\n" for key, status in missing))
        resumable = self.checkpoints()
        self.shards.collect()  # a shard no index line commits: a killed driver's last report, run again
        held, found = self.shards.held(set(resumable)) if self.shards.exists() else (set(), {})
        rerun = list(rerun)
        cleared = {k for k in rerun if k not in resumable and k in held}
        self.shards.reset(sorted(cleared))  # their new runs write their records whole
        self._prior = {k: {(r["iteration"], r["status"]) for r in rs} for k, rs in found.items()}
        self._data = None
        on_disk = {name: set(os.listdir(self.root / name)) if (self.root / name).is_dir() else set()
                   for name in ("records", "runs")}
        reset = 0
        for key in rerun:
            if key in resumable:
                continue
            gone = False
            for name, suffix in (("records", ".jsonl"), ("runs", ".json")):
                if f"{key}{suffix}" in on_disk[name] and (name == "records" or self._file_summary(key) is None):
                    os.unlink(self.root / name / f"{plain(key, 'run key')}{suffix}")  # a failed run's summary stays
                    gone = True
            if gone or key in cleared:
                reset += 1
                self._seen.pop(key, None)
                if self._ended is not None:
                    self._ended.pop(key, None)
        self._listed = None
        return len(missing), reset

    def done(self, run_keys: Iterable[str]) -> set[str]:
        """The runs among `run_keys` that finished or diverged."""
        ended = self._load_ended()
        return {k for k in run_keys if ended.get(k) in DONE_STATUSES}

    # ---- midway checkpoints ----
    def note_checkpoint(self, run_key: str, checkpoint: str) -> None:
        """Remember where a running run was last checkpointed (a later driver resumes it from there)."""
        with open_file(self.root / "resume.txt", "a") as fh:
            fh.write(f"{run_key} {checkpoint}\n")

    def checkpoints(self) -> dict[str, str]:
        """Run key -> its last midway checkpoint, for runs not ended."""
        path = self.root / "resume.txt"
        if not path.exists():
            return {}
        ended = self._load_ended()
        out = {}
        for line in path.read_text().splitlines():
            key, _, where = line.partition(" ")
            if where:
                out[key] = where
        return {k: v for k, v in out.items() if k not in ended or ended[k] not in DONE_STATUSES}
