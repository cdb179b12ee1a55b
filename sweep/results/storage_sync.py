"""A results directory mirrored to `--storage`, so that it outlives the machine it was written on (a cluster's
head, removed by `ray down`): a directory path (a shared disk) or a URI of a file system pyarrow opens, as Ray
Tune's storage does (s3://bucket/prefix, gs://bucket/prefix, ...).

    <storage>/results/<results directory's name>/...    the results directory, file by file

While a study runs, the files that changed are copied every `PERIOD` seconds and once more at the end: the
summaries, records, ended.txt, resume.txt, the report, and the MLflow store (a SQLite file, copied whole, at most
every `DB_PERIOD` seconds, through SQLite's backup: a consistent snapshot even while it is written). Another machine gets the directory back with
`pull` (`bisweep report --storage`, `bisweep run --storage --resume`). Only regular files under the directory
travel (no link is followed either way), and a name read from storage that is not a plain relative path is
refused: what storage holds is data, never a place to write to.
"""
from __future__ import annotations

import contextlib
import os
import sqlite3
import stat
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path, PurePosixPath
from typing import Any

from problems.shared.errors import ParameterError

#: Seconds between two copies of what changed while a study runs.
PERIOD = 10.0
#: Seconds between two copies of a changing SQLite store while a study runs (it is copied whole; the end copies it
#: once more).
DB_PERIOD = 300.0
#: The entry of a results directory that stays local, beside its '.'-led files (the lock and process records of
#: this machine's driver): Tune's own storage when there is no --storage (with one, checkpoints go there).
TUNE_DIR = "ray"


#: A SQLite store's journal files: its backup copies what they hold.
SQLITE_SIDE_FILES = ("-journal", "-wal", "-shm")


def _local_only(top_name: str) -> bool:
    return top_name == TUNE_DIR or top_name.startswith(".")


def remote(storage: str, root: Path) -> tuple[Any, str]:
    """The file system of `storage` and the directory the results directory `root` goes to in it."""
    import pyarrow.fs

    if "://" not in storage:
        storage = str(Path(storage).resolve())
    fs, base = pyarrow.fs.FileSystem.from_uri(storage)
    return fs, f"{base.rstrip('/')}/results/{root.name}"


def local_files(root: Path, skip: str | None = None) -> Iterator[tuple[str, os.stat_result]]:
    """(relative POSIX path, stat) of every regular file under `root`, links not followed (nor the entry `skip`)."""
    for top, dirs, files in os.walk(root):
        rel_top = Path(top).relative_to(root)
        if rel_top == Path("."):
            dirs[:] = [d for d in dirs if not _local_only(d) and d != skip]
        for name in files:
            path = Path(top) / name
            st = path.lstat()
            if rel_top == Path(".") and _local_only(name) or not _regular(st) or name.endswith(SQLITE_SIDE_FILES):
                continue
            yield (rel_top / name).as_posix(), st


def _regular(st: os.stat_result) -> bool:
    return stat.S_ISREG(st.st_mode)


class Mirror:
    """Copies what changed in a results directory to storage: `push()` now, or every `period` s in a thread."""

    def __init__(self, root: Path, storage: str, period: float = PERIOD, say: Callable[[str], None] | None = None):
        self.root, self.storage, self.period, self.say = Path(root), storage, period, say
        self.fs, self.base = remote(storage, self.root)
        # a storage directory inside the results directory is not copied into itself
        inside = Path(storage).resolve() if "://" not in storage else None
        self.skip = inside.relative_to(self.root.resolve()).parts[0] \
            if inside is not None and self.root.resolve() in inside.parents else None
        self._sent: dict[str, tuple[int, int]] = {}  # relative path -> (size, mtime_ns) last copied
        self._db_sent: dict[str, float] = {}  # relative path of a SQLite store -> when it was last copied
        self._lock = threading.Lock()
        self._done = threading.Event()
        self._thread: threading.Thread | None = None
        self.error: str | None = None  # the last copy's failure (the study goes on; the end says it)

    def push(self, final: bool = True) -> int:
        """Copy every file that changed since the last push (a SQLite store at most every DB_PERIOD s unless
        `final`); how many were copied."""
        with self._lock:
            copied = 0
            made: set[str] = set()
            now = time.monotonic()
            for rel, st in list(local_files(self.root, self.skip)):
                stamp = (st.st_size, st.st_mtime_ns)
                if self._sent.get(rel) == stamp:
                    continue
                if rel.endswith(".db") and not final and now - self._db_sent.get(rel, -DB_PERIOD) < DB_PERIOD:
                    continue
                if rel.endswith(".db"):
                    self._db_sent[rel] = now
                target = f"{self.base}/{rel}"
                parent = target.rsplit("/", 1)[0]
                if parent not in made:
                    self.fs.create_dir(parent, recursive=True)
                    made.add(parent)
                self._copy(self.root / rel, target)
                self._sent[rel] = stamp
                copied += 1
            return copied

    def _copy(self, path: Path, target: str) -> None:
        """One file to storage; a SQLite database through SQLite's backup (consistent while it is written)."""
        if path.suffix == ".db":
            with tempfile.TemporaryDirectory() as d:
                snapshot = Path(d) / path.name
                with contextlib.closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True)) as src, \
                        contextlib.closing(sqlite3.connect(snapshot)) as dst:
                    src.backup(dst)
                self._upload(snapshot, target)
            return
        self._upload(path, target)

    def _upload(self, path: Path, target: str) -> None:
        with open(path, "rb") as fh, self.fs.open_output_stream(target) as out:
            while block := fh.read(1 << 20):
                out.write(block)

    # ---- while a study runs ----
    def __enter__(self) -> Mirror:
        self._thread = threading.Thread(target=self._loop, name="bisweep-storage-mirror", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._done.set()
        if self._thread is not None:
            self._thread.join()
        self._try_push(final=True)
        if self.say is not None:
            self.say(f"bisweep: results copied to {self.storage}" if self.error is None else
                     f"bisweep: warning: results not all copied to {self.storage} ({self.error}); they are in "
                     f"{self.root}")

    def _loop(self) -> None:
        while not self._done.wait(self.period):
            self._try_push(final=False)

    def _try_push(self, final: bool) -> None:
        try:
            self.push(final)
            self.error = None
        except (OSError, sqlite3.Error) as exc:  # storage unreachable for a while: the next copy tries again
            self.error = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:300]


def pull(root: Path, storage: str) -> int:
    """Copy the results directory back from storage into `root` (files missing here or longer there: results
    files only grow); how many files were copied. Nothing in storage names a place outside `root`."""
    import pyarrow.fs

    fs, base = remote(storage, Path(root))
    info = fs.get_file_info(base)
    if info.type == pyarrow.fs.FileType.NotFound:
        return 0
    copied = 0
    for entry in fs.get_file_info(pyarrow.fs.FileSelector(base, recursive=True)):
        if entry.type != pyarrow.fs.FileType.File:
            continue
        rel = PurePosixPath(entry.path[len(base):].lstrip("/"))
        if rel.is_absolute() or not rel.parts or any(p in ("", ".", "..") for p in rel.parts):
            raise ParameterError(f"storage: {entry.path!r} is not a plain path under {base}")
        if _local_only(rel.parts[0]):
            continue
        path = _inside(Path(root), rel.parts)
        if path.exists() and path.stat().st_size >= entry.size:  # results only grow: a longer file here is newer
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        with fs.open_input_stream(entry.path) as src, open(path, "wb") as out:
            while block := src.read(1 << 20):
                out.write(block)
        copied += 1
    return copied


def _inside(root: Path, parts: tuple[str, ...]) -> Path:
    """root/parts, refusing a link on the way (it could lead out of the results directory)."""
    path = root
    for part in parts:
        path = path / part
        if path.is_symlink():
            raise ParameterError(f"storage: {path} is a link; results are copied only into plain directories")
    return path
