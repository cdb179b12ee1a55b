"""The on-disk results of a study: what reports are built from, and what says a run is finished.

    <results>/study.json              the validated study: kind, axis, report options, configurations
    <results>/records/<run>.jsonl     every metric record of a run, appended as it arrives
    <results>/runs/<run>.json         a run's summary, written when it ends (finished, diverged or failed)

A run counts as done when its summary says finished or diverged; failed runs run again on resume.
Appends are idempotent: a record already stored (same iteration and status) is not stored twice.
"""
from __future__ import annotations

import json
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from sweep.model import Study

DONE_STATUSES = ("finished", "diverged")


def study_meta(study: Study) -> dict[str, Any]:
    """The study as study.json records it and reports read it."""
    return {
        "name": study.name, "description": study.description, "kind": study.kind, "axis": study.axis,
        "axis_name": study.axis_name, "seeds": study.seeds, "online": study.online,
        "spec_hash": study.spec_hash, "report": vars(study.report),
        "claim": study.claim, "scale": study.scale,
        "points": [p.to_dict() for p in study.points], "source": study.source,
    }


def _atomic_write(path: Path, text: str) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


class ResultStore:
    """Per-run records and summaries of one study under one directory."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root).resolve()
        self._seen: dict[str, set[tuple[int, str]]] = {}

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
        for d in (self.root, self.records_dir, self.runs_dir):
            d.mkdir(parents=True, exist_ok=True)

    # ---- the study ----
    def write_study(self, study: Study) -> None:
        """Record the validated study (so reports need neither the YAML nor MLflow)."""
        self.ensure()
        _atomic_write(self.root / "study.json", json.dumps(study_meta(study), indent=1, default=repr))

    def read_study(self) -> dict[str, Any]:
        """The study recorded by `write_study`."""
        path = self.root / "study.json"
        if not path.exists():
            raise FileNotFoundError(f"no study results in {self.root} (run the study first)")
        return json.loads(path.read_text())

    # ---- records ----
    def _seen_for(self, run_key: str) -> set[tuple[int, str]]:
        if run_key not in self._seen:
            self._seen[run_key] = {(r["iteration"], r["status"]) for r in self._read_lines(run_key)}
        return self._seen[run_key]

    def append(self, run_key: str, record: dict[str, Any]) -> bool:
        """Store one metric record unless it is already stored; True when it was new."""
        ident = (int(record["iteration"]), str(record["status"]))
        seen = self._seen_for(run_key)
        if ident in seen:
            return False
        self.records_dir.mkdir(parents=True, exist_ok=True)
        with open(self.records_dir / f"{run_key}.jsonl", "a") as fh:
            fh.write(json.dumps(record) + "\n")
        seen.add(ident)
        return True

    def _read_lines(self, run_key: str) -> list[dict[str, Any]]:
        path = self.records_dir / f"{run_key}.jsonl"
        if not path.exists():
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
        by_it: dict[int, dict[str, Any]] = {}
        for r in self._read_lines(run_key):
            prev = by_it.get(r["iteration"])
            if prev is None or prev["status"] == "running":
                by_it[r["iteration"]] = r
        return [by_it[k] for k in sorted(by_it)]

    # ---- summaries ----
    def finish(self, run_key: str, summary: dict[str, Any]) -> None:
        """Write a run's summary (status finished, diverged or failed)."""
        self.runs_dir.mkdir(parents=True, exist_ok=True)
        _atomic_write(self.runs_dir / f"{run_key}.json", json.dumps(summary, default=repr))

    def summary(self, run_key: str) -> dict[str, Any] | None:
        """A run's summary, or None when it has not ended."""
        path = self.runs_dir / f"{run_key}.json"
        return json.loads(path.read_text()) if path.exists() else None

    def summaries(self, run_keys: Iterable[str] | None = None) -> list[dict[str, Any]]:
        """Summaries of the given runs (all when None) that have ended."""
        if run_keys is None:
            paths = sorted(self.runs_dir.glob("*.json")) if self.runs_dir.exists() else []
            return [json.loads(p.read_text()) for p in paths]
        return [s for s in (self.summary(k) for k in run_keys) if s is not None]

    def done(self, run_keys: Iterable[str]) -> set[str]:
        """The runs among `run_keys` that finished or diverged."""
        return {s["run_key"] for s in self.summaries(run_keys) if s["status"] in DONE_STATUSES}
