"""Minibatch rows gathered once: the oracles that share a minibatch share its gathered rows.

An algorithm typically evaluates several oracles on one minibatch (SOBA: ∇y g, H v and J v on the
same batch), and each would copy the same rows of the per-sample arrays. `RowCache` keeps the rows of
the latest index array and hands them out again while that same array object comes back.

Identity stands for equal contents only when the indices cannot change, so only read-only integer
index arrays whose data is theirs or a read-only array's (as `sample_batch` draws them, see
`frozen_indices`) are remembered; any other index (a writable array or a view of one, a list, a
boolean mask) is gathered afresh on every call, exactly as plain indexing would. The cache holds the array it remembers, so its identity is not reused.
Blocks under CACHE_BYTES are never remembered: copying them again is as cheap as remembering them.

Large blocks are gathered into a buffer kept per array name rather than a fresh array: a fresh block
of a megabyte or more comes from mmap or from a heap that was trimmed when the last one was freed,
and its page faults cost several times the copy (D-TFBO at d = 1000 spent most of its time there).
"""
from __future__ import annotations

from threading import get_ident

import numpy as np

Array = np.ndarray  # as problems.base, which imports this module

#: Blocks of at least this many bytes are remembered (a smaller copy costs about what remembering does).
CACHE_BYTES = 1 << 15
#: Blocks of at least this many bytes are gathered into a reused buffer (glibc's initial mmap threshold).
BUFFER_BYTES = 1 << 17


def frozen_indices(idx: Array) -> Array:
    """`idx` marked read-only (in place): a minibatch whose rows a RowCache may remember."""
    idx.setflags(write=False)
    return idx


def _frozen(idx: Array) -> bool:
    """True when idx's contents cannot change: read-only, and its data a read-only array's own."""
    if idx.flags.writeable:
        return False
    base = idx.base
    return base is None or (type(base) is np.ndarray and base.base is None and not base.flags.writeable)


class RowCache:
    """Rows `array[idx]` of named per-sample arrays at the latest read-only index array.

    Rows handed out for a remembered index array are read-only and stay valid until the cache is
    asked for another index array (a buffered block is then overwritten): use them within one oracle.
    The cache serves the first thread that asks; any other thread gets freshly gathered rows, so a
    problem shared between threads stays correct (only the first thread saves the copies).
    """

    __slots__ = ("_idx", "_rows", "_in_range", "_buffers", "_claim", "_thread")

    def __init__(self) -> None:
        self._idx: Array | None = None
        self._rows: dict[str, Array] = {}
        self._in_range: dict[int, bool] = {}
        self._buffers: dict[str, Array] = {}
        self._claim: dict[str, int] = {}  # {"thread": id}: setdefault makes the first claim atomic
        self._thread: int | None = None

    def rows(self, name: str, array: Array, idx) -> Array:
        """`array[idx]`, gathered once per read-only index array and name when the block is large."""
        if idx is self._idx and self._thread == get_ident():
            out = self._rows.get(name)
            if out is None:
                out = self._rows[name] = self._gathered(name, array, idx)
            return out
        if type(idx) is not np.ndarray or idx.dtype.kind not in "iu":
            return array[idx]  # a list or a boolean mask: plain indexing, never remembered
        # Small blocks are copied afresh: remembering them costs about what the copy does.
        if idx.size * array.strides[0] < CACHE_BYTES or not _frozen(idx) or not self._owned():
            return array.take(idx, axis=0)
        self._idx, self._in_range = idx, {}
        out = self._gathered(name, array, idx)
        self._rows = {name: out}
        return out

    def _owned(self) -> bool:
        """True for the thread the cache serves (the first one to ask)."""
        self._thread = self._claim.setdefault("thread", get_ident())
        return self._thread == get_ident()

    def _gathered(self, name: str, array: Array, idx: Array) -> Array:
        # strides[0] · len is the block's size for the C-ordered per-sample arrays (an upper bound otherwise).
        if idx.size * array.strides[0] < BUFFER_BYTES or not self._indices_in_range(idx, len(array)):
            out = array.take(idx, axis=0)
        else:
            shape = idx.shape + array.shape[1:]
            buf = self._buffers.get(name)
            if buf is None or buf.shape != shape or buf.dtype != array.dtype:
                buf = self._buffers[name] = np.empty(shape, array.dtype)
            # mode="clip" writes straight into `out` ("raise" copies through a temporary); the indices
            # were checked to lie in [0, len(array)), so clipping never changes one.
            np.take(array, idx, axis=0, out=buf, mode="clip")
            out = buf.view()
        out.setflags(write=False)
        return out

    def _indices_in_range(self, idx: Array, n: int) -> bool:
        """True for integer indices all in [0, n) (checked once per index array and n)."""
        ok = self._in_range.get(n)
        if ok is None:
            ok = self._in_range[n] = bool(idx.dtype.kind in "iu" and idx.size and 0 <= idx.min() and idx.max() < n)
        return ok

    def __reduce__(self) -> tuple:
        # A copy or a pickle (a problem sent to another process) starts empty and unclaimed.
        return (RowCache, ())

    def clear(self) -> None:
        """Forget the remembered rows, buffers and owning thread."""
        self.__init__()
