"""One algorithm object advancing K runs at once: row k of every iterate and state array is run k's.

A batchable algorithm's `step()` body runs unchanged on stacked arrays: its problem is a `StackedView`
(oracles on (K, d) points, one counted call for the whole group), its config a `StackedConfig` (a
hyperparameter that differs between runs is a (K, 1) column, so `rho * grad` scales each row by its run's
value), and its minibatches are drawn per run, each from that run's own algorithm object and stream, so
run k gets the very minibatches it draws alone (`StackedDraws`). `stack` builds the stacked object from
the runs' own algorithm objects; `unstack` writes row k back into run k's; `take` keeps some rows.
"""
from __future__ import annotations

import copy
import dataclasses
import operator
from collections import deque
from collections.abc import Sequence
from typing import Any

import numpy as np

from algorithms.base import Algorithm
from problems.base import GROUND_TRUTH, Array, Batch
from problems.counting import OracleCounter
from problems.shared.errors import ParameterError


_FIELDS: dict[type, tuple[str, ...]] = {}


def _fields(cls: type[Algorithm]) -> tuple[str, ...]:
    """cls.state_fields(), kept per class (it walks the class hierarchy)."""
    if cls not in _FIELDS:
        _FIELDS[cls] = cls.state_fields()
    return _FIELDS[cls]


_VARYING: dict[type, frozenset[str]] = {}
_FIXED: dict[tuple[type, type], tuple[str, ...]] = {}


def varying_fields(cls: type[Algorithm]) -> frozenset[str]:
    """Config fields whose values may differ within a batch: those that only scale arithmetic.

    The class's `batch_params` when declared, else its step sizes and their decays (`<step>_decay`).
    """
    if cls not in _VARYING:
        declared = getattr(cls, "batch_params", None)
        names = {f.name for f in dataclasses.fields(cls.Config)}
        _VARYING[cls] = frozenset(declared) if declared is not None else \
            frozenset(cls.step_sizes) | {f"{s}_decay" for s in cls.step_sizes if f"{s}_decay" in names}
    return _VARYING[cls]


def group_key(cls: type[Algorithm], config: Any) -> tuple:
    """What runs in one batch must share: every config field that may not vary (as text, hashable)."""
    fixed = _FIXED.get((cls, type(config)))
    if fixed is None:
        varying = varying_fields(cls)
        fixed = _FIXED[cls, type(config)] = tuple(f.name for f in dataclasses.fields(config) if f.name not in varying)
    return tuple((name, repr(getattr(config, name))) for name in fixed)


class StackedConfig:
    """The runs' configs as one: a field equal in all is itself, a varying one a (K, 1) float column."""

    def __init__(self, configs: Sequence[Any], varying: frozenset[str]) -> None:
        self._columns: list[str] = []
        self._wide: dict[tuple[str, int], Array] = {}
        for f in dataclasses.fields(configs[0]):
            values = [getattr(c, f.name) for c in configs]
            if all(v == values[0] for v in values):
                setattr(self, f.name, values[0])
            elif f.name in varying:
                setattr(self, f.name, np.array(values, dtype=float)[:, None])
                self._columns.append(f.name)
            else:
                raise ParameterError(f"batched runs: config field '{f.name}' differs between runs; only "
                                     f"{', '.join(sorted(varying)) or 'none'} may")

    def take(self, rows: Array) -> None:
        """Keep only `rows` of every varying column."""
        for name in self._columns:
            setattr(self, name, getattr(self, name)[rows])
        self._wide.clear()

    def wide(self, name: str, width: int) -> Any:
        """Field `name` as a (K, width) array when it is a column (else its one value), made once: scaling a
        (K, width) stack by it is one elementwise pass, where a (K, 1) column is broadcast row by row (~4x
        slower at width 10); the same numbers."""
        if name not in self._columns:
            return getattr(self, name)
        key = (name, width)
        if key not in self._wide:
            self._wide[key] = np.repeat(getattr(self, name), width, axis=1)
        return self._wide[key]


class RunBatches(tuple):
    """One minibatch per run (row), in row order: what a stacked algorithm passes its oracles."""

    __slots__ = ()


def _rows(a: Array, count: int) -> Array:
    """`a` with a leading run axis: a shared vector (an algorithm's fresh zeros) is repeated per run."""
    return np.broadcast_to(a, (count, a.shape[0])) if a.ndim == 1 else a


class StackedView:
    """A problem's oracles on stacked points, counted once per call for the whole group (every run makes the
    same calls); ground truth hidden, as in problems.counting."""

    def __init__(self, problem: Any, count: int) -> None:
        self._problem = problem
        self.count = count
        self.counter = OracleCounter()  # calls every run made
        # Calls only some runs made (an HIA factor past another run's length), per kind: one count per row.
        self.row_calls: dict[str, Array] = {}
        self.row_samples: dict[str, Array] = {}
        touched = getattr(problem, "samples_touched", None)
        self._touched = touched if touched is not None else lambda kind, batch: problem.batch_size(batch)

    def __getattr__(self, name: str) -> Any:
        if name in GROUND_TRUTH:
            raise AttributeError(f"'{name}' is ground truth and is not available to algorithms")
        if name in ("hessian_yy_g", "jacobian_xy_g"):
            raise TypeError(f"'{name}' has no stacked form: this algorithm cannot run batched")
        return getattr(self._problem, name)

    def _count(self, kind: str, batches: RunBatches | None) -> None:
        if self.counter.left is not None:  # the budget of the row with the fewest calls left (algorithms.batched)
            self.counter.spend()
        self.counter.calls[kind] += 1  # one call per run: added to each run's own counter when it leaves
        self.counter.samples[kind] += self._touched(kind, None if batches is None else batches[0])

    def hvp_yy_g_on(self, rows: Array, x: Array, y: Array, v: Array, batch: RunBatches | None = None) -> Array:
        """∇²yy g · v of `rows` alone (v: theirs), counted for those runs only."""
        x, y = self._xy(x, y)
        kind = "hvp"
        if self.counter.left is not None:  # counted against every row's budget: no row passes its own
            self.counter.spend()
        calls = self.row_calls.setdefault(kind, np.zeros(self.count, dtype=np.int64))
        samples = self.row_samples.setdefault(kind, np.zeros(self.count, dtype=np.int64))
        calls[rows] += 1
        samples[rows] += self._touched(kind, None if batch is None else batch[0])
        return self._problem.hvp_yy_g_rows(x[rows], y[rows], v, batch)

    def row_total_calls(self) -> Array | int:
        """Per row, the calls it made beyond those of every run."""
        return sum(self.row_calls.values()) if self.row_calls else 0

    def take(self, rows: Array) -> None:
        """Keep the per-row counts of `rows` only."""
        self.row_calls = {k: v[rows] for k, v in self.row_calls.items()}
        self.row_samples = {k: v[rows] for k, v in self.row_samples.items()}
        self.count = len(rows)

    def _xy(self, x: Array, y: Array) -> tuple[Array, Array]:
        return _rows(x, self.count), _rows(y, self.count)

    def f(self, x: Array, y: Array, batch: RunBatches | None = None) -> Array:
        self._count("f", batch)
        return self._problem.f_rows(*self._xy(x, y), batch)[:, None]

    def g(self, x: Array, y: Array, batch: RunBatches | None = None) -> Array:
        self._count("g", batch)
        return self._problem.g_rows(*self._xy(x, y), batch)[:, None]

    def grad_f(self, x: Array, y: Array, batch: RunBatches | None = None) -> tuple[Array, Array]:
        self._count("grad_f", batch)
        return self._problem.grad_f_rows(*self._xy(x, y), batch)

    def grad_g(self, x: Array, y: Array, batch: RunBatches | None = None) -> tuple[Array, Array]:
        self._count("grad_g", batch)
        return self._problem.grad_g_rows(*self._xy(x, y), batch)

    def grad_y_f(self, x: Array, y: Array, batch: RunBatches | None = None) -> Array:
        self._count("grad_f", batch)
        return self._problem.grad_y_f_rows(*self._xy(x, y), batch)

    def grad_y_g(self, x: Array, y: Array, batch: RunBatches | None = None) -> Array:
        self._count("grad_g", batch)
        return self._problem.grad_y_g_rows(*self._xy(x, y), batch)

    def hvp_yy_g(self, x: Array, y: Array, v: Array, batch: RunBatches | None = None) -> Array:
        self._count("hvp", batch)
        return self._problem.hvp_yy_g_rows(*self._xy(x, y), _rows(v, self.count), batch)

    def cross_xy_g(self, x: Array, y: Array, v: Array, batch: RunBatches | None = None) -> Array:
        self._count("cross", batch)
        return self._problem.cross_xy_g_rows(*self._xy(x, y), _rows(v, self.count), batch)

    # Per-sample oracles: one call of their kind per run, touching one sample per index of a row.
    def grad_f_samples(self, x: Array, y: Array, idx: Array) -> tuple[Array, Array]:
        self.counter.add("grad_f", idx.shape[-1])
        return self._problem.grad_f_samples_rows(*self._xy(x, y), idx)

    def grad_y_g_samples(self, x: Array, y: Array, idx: Array) -> Array:
        self.counter.add("grad_g", idx.shape[-1])
        return self._problem.grad_y_g_samples_rows(*self._xy(x, y), idx)

    def hvp_yy_g_samples(self, x: Array, y: Array, v: Array, idx: Array) -> Array:
        self.counter.add("hvp", idx.shape[-1])
        return self._problem.hvp_yy_g_samples_rows(*self._xy(x, y), _rows(v, self.count), idx)

    def cross_xy_g_samples(self, x: Array, y: Array, v: Array, idx: Array) -> Array:
        self.counter.add("cross", idx.shape[-1])
        return self._problem.cross_xy_g_samples_rows(*self._xy(x, y), _rows(v, self.count), idx)

    def project_x(self, x: Array) -> Array:
        return self._problem.project_x_rows(x)

    def project_y(self, y: Array) -> Array:
        return self._problem.project_y_rows(y)


class StackedDraws:
    """Minibatches of a stacked algorithm: each run's drawn by its own algorithm object, as it draws alone."""

    _members: list[Algorithm]
    _batch_size: int | None

    def batch(self) -> Batch:
        return self.batches(1)[0]

    def batches(self, count: int) -> list[Any]:
        if self._batch_size is None or count == 0:
            return [None] * count
        drawn = [m.batches(count) for m in self._members]
        return [RunBatches(d[j] for d in drawn) for j in range(count)]

    def random_integer(self, high: int) -> int:
        raise TypeError(f"algorithm '{self.name}' draws numbers per run: it cannot run batched")

    @property
    def rng(self) -> np.random.Generator:
        raise TypeError(f"algorithm '{self.name}' draws from its generator directly: it cannot run batched")


_CLASSES: dict[type, type] = {}


def stacked_class(cls: type[Algorithm]) -> type[Algorithm]:
    """`cls` with its draws made per run (built once per class)."""
    if cls not in _CLASSES:
        own = getattr(cls, "Stacked", None)  # the class's own stacked forms of what differs per run
        bases = (StackedDraws, cls) if own is None else (StackedDraws, own, cls)
        _CLASSES[cls] = type(f"Stacked{cls.__name__}", bases, {"__module__": __name__})
    return _CLASSES[cls]


def stack(members: Sequence[Algorithm], varying: frozenset[str]) -> Algorithm:
    """One stacked algorithm object over `members` (same class, iteration and structural config).

    It shares the first member's attributes that are not state (constants of the config and the problem),
    so nothing of the class's `__init__` runs again (no oracle calls, no draws).
    """
    first = members[0]
    stacked = object.__new__(stacked_class(type(first)))
    stacked.__dict__.update(first.__dict__)
    stacked.problem = StackedView(first.problem._problem, len(members))
    stacked.config = StackedConfig([m.config for m in members], varying)
    stacked._rng, stacked._stream, stacked._members = None, None, list(members)
    for name in _fields(type(first)):
        setattr(stacked, name, _stack([getattr(m, name) for m in members], name))
    return stacked


def _stack(values: list[Any], path: str) -> Any:
    first = values[0]
    if isinstance(first, np.ndarray):
        return np.stack(values)
    if isinstance(first, (list, tuple, deque)):
        if any(len(v) != len(first) for v in values):
            raise TypeError(f"{path}: lengths differ between runs; cannot stack")
        items = [_stack([v[i] for v in values], f"{path}[{i}]") for i in range(len(first))]
        return deque(items, maxlen=first.maxlen) if isinstance(first, deque) else type(first)(items)
    if isinstance(first, dict):
        return {k: _stack([v[k] for v in values], f"{path}.{k}") for k in first}
    if all(v is first or v == first for v in values):
        return first
    if isinstance(first, (int, float)) and not isinstance(first, bool):
        return np.array(values, dtype=float)[:, None]  # a per-run number: a column, like a hyperparameter
    raise TypeError(f"{path}: {type(first).__name__} values differ between runs; cannot stack")


def unstack(stacked: Algorithm, row: int, member: Algorithm) -> None:
    """Write run `row`'s iterates and state into its own algorithm object."""
    scalars = type(member).scalar_state
    for name in _fields(type(member)):
        _unstack_field(stacked, row, member, name, scalars)
    member.iteration = stacked.iteration


def unstack_all(stacked: Algorithm, members: Sequence[Algorithm]) -> dict[str, list[Array]] | None:
    """`unstack` of every row into `members` (row order), a field at a time: an array field whose members all
    hold arrays takes its row views in one pass (as `_row` would, field by field per run).

    Returns the row views given, by field, when every field was such an array (else None): while each member
    still holds them, the stack is those members' state as it is (`restack`)."""
    cls = type(members[0])
    scalars = cls.scalar_state
    views: dict[str, list[Array]] | None = {}
    states = [m.__dict__ for m in members]
    for name in _fields(cls):
        value = getattr(stacked, name)
        if (type(value) is np.ndarray and name not in scalars and value.ndim > 1
                and all([type(d.get(name)) is np.ndarray for d in states])):
            rows = list(value)  # iterating a stack yields the row views value[i]
            for d, row in zip(states, rows):
                d[name] = row
            if views is not None:
                views[name] = rows
        else:
            for i, m in enumerate(members):
                _unstack_field(stacked, i, m, name, scalars)
            views = None
    for m in members:
        m.iteration = stacked.iteration
    return views


def restack(stacked: Algorithm, views: dict[str, list[Array]], members: Sequence[Algorithm]) -> bool:
    """Make `stacked` (whose rows `unstack_all` gave `members` as `views`) ready to step on: True when every
    member still holds exactly those rows at the stack's iteration (then the stack is their state, with fresh
    counts), False when it must be built again."""
    if len(members) != stacked.problem.count or any(m.iteration != stacked.iteration for m in members):
        return False
    for name, rows in views.items():
        if not all(map(operator.is_, [m.__dict__.get(name) for m in members], rows)):
            return False
    stacked.problem = StackedView(stacked.problem._problem, len(members))
    return True


def _unstack_field(stacked: Algorithm, row: int, member: Algorithm, name: str, scalars: tuple[str, ...]) -> None:
    value = getattr(stacked, name)
    if name in scalars and isinstance(value, np.ndarray):
        number = type(getattr(member, name))  # int or float, as the run alone keeps it
        setattr(member, name, (number if number in (int, float) else float)(value[row, 0]))
    else:
        setattr(member, name, _row(value, row, getattr(member, name)))


def _row(value: Any, row: int, like: Any) -> Any:
    if type(value) is np.ndarray and type(like) is np.ndarray:  # the common case first
        return value[row]  # a view: the stack is rebuilt (copied) before it steps again
    if isinstance(value, np.ndarray):
        picked = value[row].copy()
        return picked.item() if isinstance(like, (int, float)) and not isinstance(like, bool) else picked
    if isinstance(value, (list, tuple, deque)):
        likes = like if isinstance(like, (list, tuple, deque)) and len(like) == len(value) else [None] * len(value)
        items = [_row(v, row, lk) for v, lk in zip(value, likes)]
        return deque(items, maxlen=value.maxlen) if isinstance(value, deque) else type(value)(items)
    if isinstance(value, dict):
        likes = like if isinstance(like, dict) else {}
        return {k: _row(v, row, likes.get(k)) for k, v in value.items()}
    return copy.deepcopy(value)


def take(stacked: Algorithm, rows: Array) -> None:
    """Keep only `rows` (indices into the current rows) of every stacked array, column and member."""
    for name in _fields(type(stacked)):
        setattr(stacked, name, _take(getattr(stacked, name), rows, stacked.problem.count))
    stacked.config.take(rows)
    stacked._members = [stacked._members[i] for i in rows]
    stacked.problem.take(rows)


def _take(value: Any, rows: Array, count: int) -> Any:
    if isinstance(value, np.ndarray):
        return value[rows] if value.ndim and value.shape[0] == count else value
    if isinstance(value, (list, tuple, deque)):
        items = [_take(v, rows, count) for v in value]
        return deque(items, maxlen=value.maxlen) if isinstance(value, deque) else type(value)(items)
    if isinstance(value, dict):
        return {k: _take(v, rows, count) for k, v in value.items()}
    return value


def stacked_arrays(stacked: Algorithm) -> list[Array]:
    """Every per-run array of the state (x, y first): what must stay finite."""
    out: list[Array] = []

    def collect(value: Any) -> None:
        if isinstance(value, np.ndarray):
            if value.ndim and value.shape[0] == stacked.problem.count and value.dtype.kind == "f":
                out.append(value)
        elif isinstance(value, (list, tuple, deque)):
            for v in value:
                collect(v)
        elif isinstance(value, dict):
            for v in value.values():
                collect(v)

    for name in _fields(type(stacked)):
        collect(getattr(stacked, name))
    return out
