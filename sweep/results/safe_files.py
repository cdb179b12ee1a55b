"""Writing in a results directory: never through a link, never outside the directory.

A results directory may come from anywhere (a colleague's archive, a shared disk), so what it holds is data: a
symbolic link planted in it (`report/summary.txt` → a file elsewhere, `runs` → `../../outside`) must not make a
driver or a report write there. The folders the platform writes into are checked when made or first used (`folder`);
every file is opened with O_NOFOLLOW, refused when another name links to it (a hard link) or when it is not a
regular file (a FIFO would block the writer), and truncated only after these checks (`open_file`). What Ray and
MLflow write themselves (`ray/`, `mlartifacts/`, `mlflow.db`) is checked before they start (`check_tree`).
A refusal is one line naming the path (exit code 2).
"""
from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import stat
from pathlib import Path
from collections.abc import Iterator
from typing import IO, Any

from problems.shared.errors import ParameterError

#: What Ray and MLflow write under a results directory by themselves: no link anywhere below these.
THIRD_PARTY = ("ray", "mlartifacts", "mlflow_synced", "mlflow.db", "mlflow.db-journal", "mlflow.db-wal",
               "mlflow.db-shm")


class UnsafePath(ParameterError):
    """A link (or something else not written by the platform) where a results directory's file or folder goes."""


def _refuse(path: str | os.PathLike, what: str) -> UnsafePath:
    return UnsafePath(f"results-dir: {str(path)[:300]} {what}; bisweep never writes through a link or outside "
                      "the results directory (remove it)")


@contextlib.contextmanager
def _loop_refused(path: str) -> Iterator[None]:
    """The block, with a symbolic link loop at `path` (ELOOP) turned into the one-line refusal."""
    try:
        yield
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise _refuse(path, "is a symbolic link loop") from None
        raise


def _inside(root: str, path: str) -> bool:
    real_root, real = os.path.realpath(root), os.path.realpath(path)
    return real == real_root or real.startswith(real_root.rstrip(os.sep) + os.sep)


def folder(root: str | os.PathLike, path: str | os.PathLike) -> Path:
    """`path`, a folder inside `root`, made if missing (with the folders between); refused when it or a folder
    between is a symbolic link, not a folder, or resolves outside `root`. `root` itself may be a link."""
    root, path = os.path.abspath(root), os.path.abspath(path)
    rel = os.path.relpath(path, root)
    if rel == os.pardir or rel.startswith(os.pardir + os.sep):
        raise _refuse(path, f"is outside {root}")
    current = root
    for part in ([] if rel == os.curdir else Path(rel).parts):
        current = os.path.join(current, part)
        with _loop_refused(current):
            with contextlib.suppress(FileExistsError):
                os.mkdir(current)
        mode = os.lstat(current).st_mode
        if stat.S_ISLNK(mode):
            raise _refuse(current, "is a symbolic link")
        if not stat.S_ISDIR(mode):
            raise _refuse(current, "is not a folder")
    if not _inside(root, path):
        raise _refuse(path, f"resolves outside {root}")
    return Path(path)


def open_file(path: str | os.PathLike, mode: str = "w", **kwargs: Any) -> IO[Any]:
    """`open(path, mode, **kwargs)` for writing ('w', 'a', 'wb', 'ab') in a folder `folder` checked, refusing a
    symbolic link, a file with other names (a hard link) and anything but a regular file, before any byte changes."""
    if mode.rstrip("bt") not in ("w", "a"):
        raise ValueError(f"open_file writes ('w' or 'a'), got mode {mode!r}")
    flags = os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC | \
        (os.O_APPEND if mode.startswith("a") else 0)
    try:
        fd = os.open(path, flags, 0o644)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise _refuse(path, "is a symbolic link") from None
        if exc.errno == errno.ENXIO:  # a FIFO no one reads: opening it would have blocked
            raise _refuse(path, "is not a regular file") from None
        raise
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise _refuse(path, "is not a regular file")
        if st.st_nlink > 1:
            raise _refuse(path, f"has {st.st_nlink - 1} other name(s) (a hard link)")
        fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) & ~os.O_NONBLOCK)
        if mode.startswith("w"):
            os.ftruncate(fd, 0)
        return os.fdopen(fd, mode, **kwargs)
    except BaseException:
        os.close(fd)
        raise


def write_text(path: str | os.PathLike, text: str) -> None:
    """`Path(path).write_text(text)`, through `open_file`."""
    with open_file(path, "w") as fh:
        fh.write(text)


def check_tree(root: str | os.PathLike) -> None:
    """Refuse a results directory holding a symbolic link at its top, or anywhere below what Ray and MLflow write
    there by themselves (`THIRD_PARTY`) or in a report folder (whose old files a report deletes first), before
    anything is written; a top that is a link loop is refused too."""
    root = os.path.abspath(root)
    if not os.path.lexists(root):
        return
    with _loop_refused(root):
        entries = list(os.scandir(root))
    for entry in entries:
        if entry.is_symlink():
            raise _refuse(entry.path, "is a symbolic link")
        if (entry.name in THIRD_PARTY or entry.name.startswith("report")) and entry.is_dir(follow_symlinks=False):
            for top, dirs, files in os.walk(entry.path):
                for name in dirs + files:
                    if os.path.islink(os.path.join(top, name)):
                        raise _refuse(os.path.join(top, name), "is a symbolic link")
