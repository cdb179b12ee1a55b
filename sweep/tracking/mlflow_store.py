"""A study's MLflow store, ready fast: a new SQLite store is a copy of an empty, fully migrated one.

Creating an MLflow SQLite store runs every one of MLflow's schema migrations (42% of a 1-trial study's
start-up once measured); the migrated empty store is made once per MLflow version, kept in the user's
cache directory (`$XDG_CACHE_HOME/bisweep`, else `~/.cache/bisweep`), and copied. The connection itself
is made on a thread (sweep.execution.background) while the driver starts Ray.
"""
from __future__ import annotations

import importlib.metadata
import os
import shutil
import sqlite3
import threading
import time
import uuid
from pathlib import Path


def cache_dir() -> Path:
    """The user's bisweep cache directory: the migrated empty store, JAX's compiled programs (execution/jax_cache.py)."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "bisweep"


def template() -> Path | None:
    """The migrated empty SQLite store of this MLflow version (made on first use), or None if it cannot be kept."""
    path = cache_dir() / f"mlflow-{importlib.metadata.version('mlflow')}.db"
    if path.exists():
        return path
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{uuid.uuid4().hex}.db")
        from mlflow.store.tracking.sqlalchemy_store import SqlAlchemyStore

        store = SqlAlchemyStore(f"sqlite:///{tmp}", (path.parent / "mlartifacts").as_uri())
        store.engine.dispose()
        os.replace(tmp, path)  # atomic: concurrent drivers each make one, the last wins
    except OSError:
        return None
    return path


def prepare(uri: str, artifact_location: str | None) -> None:
    """Put a copy of the migrated empty store at a `sqlite:///` URI whose file does not exist yet."""
    if not uri.startswith("sqlite:///"):
        return
    path = Path(uri[len("sqlite:///"):])
    if path.exists():
        return
    src = template()
    if src is None:
        return  # MLflow makes the store itself, migrations and all
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex}")
    shutil.copyfile(src, tmp)
    if artifact_location is not None:  # the Default experiment's artifacts beside this store, as MLflow would
        with sqlite3.connect(tmp) as db:
            db.execute("UPDATE experiments SET artifact_location = ? WHERE experiment_id = 0",
                       (artifact_location.rstrip("/") + "/0",))
        db.close()
    os.replace(tmp, path)


#: How long the MLflow store may go without answering before the driver gives up on it (seconds): a store that
#: takes TCP but never speaks the protocol (a listener on a database port) would otherwise keep it waiting for ever.
STALL_SECONDS = 60.0


class Answers:
    """When the MLflow store last answered a call of this driver (monotonic seconds)."""

    def __init__(self) -> None:
        self.last = time.monotonic()

    def mark(self) -> None:
        """The store just answered."""
        self.last = time.monotonic()

    def silent_for(self, since: float) -> float:
        """Seconds without an answer, counted from `since` at the earliest."""
        return time.monotonic() - max(self.last, since)


def wait_answering(thread: threading.Thread, answers: Answers, stall: float | None = None) -> bool:
    """Wait for `thread` to end while the store keeps answering; False when it went `stall` seconds without."""
    stall = STALL_SECONDS if stall is None else stall
    since = time.monotonic()
    while thread.is_alive():
        thread.join(timeout=min(0.2, stall))
        if thread.is_alive() and answers.silent_for(since) > stall:
            return False
    return True
