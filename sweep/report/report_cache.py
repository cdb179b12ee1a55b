"""Whether a study's report is up to date: a fingerprint of everything it is built from.

A report depends on the validated study (study.json), on which runs ended and how (ended.txt, or the
run summaries of results written before it existed), on the report's options and on the code that
draws it (the sweep package and the study's plugin modules). Re-running a finished study, or
`bisweep report` with nothing changed, then costs milliseconds instead of a rebuild; `--force` rebuilds.
"""
from __future__ import annotations

import dataclasses
import hashlib
import sys
import json
from pathlib import Path

from sweep.results.safe_files import write_text
from sweep.results.store import ResultStore
from sweep.study.model import ReportOptions
from sweep.study.record import StudyRecord

FINGERPRINT = ".fingerprint"
_PACKAGE = Path(__file__).resolve().parents[1]  # the sweep package


def _code_stamp(imports: list[str]) -> str:
    """Sizes and modification times of the sweep package's modules and the study's plugin modules that are
    imported (looked up in sys.modules only: finding a module's file may import its package)."""
    files = sorted(_PACKAGE.rglob("*.py"))
    for name in imports:
        module = sys.modules.get(name) if isinstance(name, str) else None
        if getattr(module, "__file__", None):
            files.append(Path(module.__file__))
    return "\n".join(f"{f}:{f.stat().st_size}:{f.stat().st_mtime_ns}" for f in files if f.exists())


def fingerprint(store: ResultStore, meta: StudyRecord, options: ReportOptions | None = None) -> str:
    """The fingerprint of a report built now from `store` (with `options`, e.g. its metric and goal)."""
    h = hashlib.sha1()
    h.update((store.root / "study.json").read_bytes())
    ended = store.root / "ended.txt"
    if ended.exists():
        h.update(ended.read_bytes())
    elif store.runs_dir.exists():
        for p in sorted(store.runs_dir.glob("*.json")):
            st = p.stat()
            h.update(f"{p.name}:{st.st_size}:{st.st_mtime_ns}\n".encode())
    # the options as study.json records them: the same study keeps its fingerprint
    h.update(json.dumps(dataclasses.asdict(options) if options else {}, sort_keys=True, default=repr).encode())
    h.update(_code_stamp(meta.imports).encode())
    return h.hexdigest()


def up_to_date(directory: Path, fp: str) -> bool:
    """Whether the report in `directory` was built from inputs with this fingerprint."""
    path = directory / FINGERPRINT
    return path.exists() and path.read_text().strip() == fp and (directory / "summary.txt").exists()


def remember(directory: Path, fp: str) -> None:
    """Note the fingerprint of the report just built in `directory`."""
    write_text(directory / FINGERPRINT, fp + "\n")


def forget(directory: Path) -> None:
    """The report in `directory` is being rebuilt: until it is complete it matches no fingerprint."""
    (directory / FINGERPRINT).unlink(missing_ok=True)
