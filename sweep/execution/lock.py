"""One study, one driver: an exclusive lock on the results directory.

`fcntl.flock` on `<results>/.lock` is held for the driver's lifetime. The kernel drops it when the
process dies however it dies (SIGKILL included), so a lock left by a killed driver is simply taken
over; a live one makes a second driver fail at once with one line naming the holder's PID.
"""
from __future__ import annotations

import errno
import fcntl
import os
import stat
import time
from types import TracebackType

LOCK_FILE = ".lock"


class StudyLocked(RuntimeError):
    """Another live driver holds the results directory."""


class StudyLock:
    """Exclusive, non-blocking lock on a results directory (a context manager)."""

    def __init__(self, results_dir: str) -> None:
        self.path = os.path.join(results_dir, LOCK_FILE)
        self._fd: int | None = None

    def acquire(self) -> None:
        """Take the lock or raise StudyLocked naming the PID that holds it."""
        try:  # never through a link planted in the results directory: this file is truncated below
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, 0o644)
        except OSError as exc:
            if exc.errno not in (errno.ELOOP, errno.ENXIO):
                raise
            raise StudyLocked(f"results-dir: {self.path} is a symbolic link or a FIFO; bisweep never writes "
                              "through a link in a results directory (remove it)") from None
        if not stat.S_ISREG(os.fstat(fd).st_mode) or os.fstat(fd).st_nlink > 1:
            os.close(fd)
            raise StudyLocked(f"results-dir: {self.path} is not a regular file of its own (a hard link or a "
                              "device); remove it")
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 200, 0).decode(errors="replace").strip() or "unknown"
            os.close(fd)
            raise StudyLocked(f"results-dir: {os.path.dirname(self.path)} is in use by another bisweep driver "
                              f"({holder}); wait for it to end or stop it") from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"PID {os.getpid()} since {time.strftime('%Y-%m-%d %H:%M:%S')}\n".encode(), 0)
        self._fd = fd

    def release(self) -> None:
        """Drop the lock (the file stays; an unlocked file means nothing)."""
        if self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None

    def __enter__(self) -> StudyLock:
        self.acquire()
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.release()
