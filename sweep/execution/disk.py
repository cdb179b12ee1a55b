"""A full disk, wherever it struck (the driver's store, Tune's checkpoints, a worker), as one line that says so
and where, instead of the traceback Tune wraps it in."""
from __future__ import annotations

import errno
import re

#: How an OSError of a full disk reads once Tune has turned it into text (its traceback).
_TEXT = re.compile(r"\[Errno 28\] No space left on device(?:: '(?P<path>[^']+)')?|No space left on device|"
                   r"database or disk is full")  # SQLite's words (the MLflow store in the results directory)


def disk_full(exc: BaseException, results_dir: object = None) -> str | None:
    """One line saying the disk is full and where (the file being written, else the results directory's file
    system), or None for another error."""
    seen: set[int] = set()
    todo: list[BaseException | None] = [exc]
    while todo:
        e = todo.pop()
        if e is None or id(e) in seen:
            continue
        seen.add(id(e))
        if isinstance(e, OSError) and e.errno == errno.ENOSPC:
            return _line(e.filename, results_dir)
        if (m := _TEXT.search(str(e))) is not None:
            return _line(m.group("path"), results_dir)
        todo += [e.__cause__, e.__context__]
    return None


def _line(path: object, results_dir: object) -> str:
    where = f" while writing {path}" if path else (f" on the file system of {results_dir}" if results_dir else "")
    return (f"bisweep: error: the disk is full (no space left on device){where}; free space there, then run the "
            "same command again to resume (the results written so far are kept)")
