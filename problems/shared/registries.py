"""How the registries of algorithms, problems, study kinds and claims are filled and read.

Three sources fill them, in this order: the modules of the package itself (`discover`, called by each
package's `__init__`, so a built-in algorithm, problem, kind or claim is one new file), the packages a user
installed that declare an entry point in the group `bisweep.plugins` (loaded once, when a registry is first
read), and the modules a study names in `imports:` (`import_modules`). Every registry reports an unknown name
the same way: a `ParameterError` naming the field, the nearest known name and every allowed one.

It lives in `problems.shared`, the bottom package's shared infrastructure, so that `algorithms` and `sweep` use
the same one.
"""
from __future__ import annotations

import importlib
import importlib.metadata
import os
import pkgutil
import sys
import threading
from collections.abc import Iterable, Iterator, Sequence
from typing import Generic, TypeVar

from problems.shared.errors import ParameterError, did_you_mean

#: The entry-point group of installed plugins: `mypackage = "mypackage.plugin"` under
#: `[project.entry-points."bisweep.plugins"]` of a package's pyproject.toml.
PLUGIN_GROUP = "bisweep.plugins"

T = TypeVar("T")


def discover(package: str, path: Iterable[str], skip: Sequence[str] = ()) -> None:
    """Import every module of `package` (its `__path__`) but `skip`, in sorted order: each registers itself."""
    for name in sorted(m.name for m in pkgutil.iter_modules(path)):
        if name not in skip:
            importlib.import_module(f"{package}.{name}")


def import_modules(modules: Sequence[str], field: str = "imports") -> None:
    """Import modules a user named (a study's `imports:`, `report --import`), from the current directory as
    `python -m` would; every one that fails is one line `field[i]: cannot import module ...`."""
    if modules and os.getcwd() not in sys.path:
        sys.path.append(os.getcwd())
    lines = []
    for i, name in enumerate(modules):
        try:
            importlib.import_module(name)
        except Exception as exc:  # noqa: BLE001  a plugin's own error, shown as one line of the user's input
            lines.append(f"{field}[{i}]: cannot import module {name!r}: {_one_line(exc)}")
    if lines:
        raise ParameterError("\n".join(lines))


class _Installed:
    """The installed plugins, loaded once (a failure is kept and raised again on every later read)."""

    def __init__(self) -> None:
        self.lock = threading.RLock()  # re-entrant: a plugin being loaded may read a registry
        self.started = False
        self.loaded = False  # every plugin imported without error: later reads need not take the lock
        self.error: ParameterError | None = None

    def load(self) -> None:
        if self.loaded:
            return
        with self.lock:
            if not self.started:
                self.started = True
                try:
                    _load_entry_points()
                except ParameterError as exc:
                    self.error = exc
                else:
                    self.loaded = True
            if self.error is not None:
                raise self.error


def _load_entry_points() -> None:
    """Import every entry point of `PLUGIN_GROUP`, by name."""
    for ep in sorted(importlib.metadata.entry_points(group=PLUGIN_GROUP), key=lambda e: (e.name, e.value)):
        try:
            ep.load()
        except Exception as exc:  # noqa: BLE001  whatever it raised, one line naming the entry point
            raise ParameterError(f"plugin: entry point {ep.name!r} ({ep.value}) of {PLUGIN_GROUP} cannot be "
                                 f"imported: {_one_line(exc)}") from exc


def _one_line(exc: BaseException) -> str:
    text = (str(exc).strip().splitlines() or [""])[0]
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


INSTALLED = _Installed()


class Registry(Generic[T]):
    """Items of one sort by name, in the order registered. Reading it (`in`, `[name]`, iterating) first loads
    the installed plugins; `[name]` of an unknown name raises `ParameterError` with the nearest known name.

    `builtin`: the package whose modules register the built-in items, imported on the first read (before the
    installed plugins), as an entry point is: a registry owned by a lower layer than the package that fills it
    (sweep.study's registries of kinds and claims) never imports that package's code at its own import.
    """

    def __init__(self, field: str, builtin: str | None = None) -> None:
        self.field = field  # what an error names: algorithm, problem, kind, claim
        self.builtin = builtin
        self._items: dict[str, T] = {}
        self._builtin_loaded = builtin is None

    def _load(self) -> None:
        """The built-in items (once), then the installed plugins."""
        if not self._builtin_loaded:
            # No lock of ours: the import system's own per-module lock makes another thread wait for an import in
            # progress, and lets a module being imported read the registry (what is registered so far). Marked
            # only once imported, so a broken built-in module fails every read, not just the first.
            importlib.import_module(self.builtin)
            self._builtin_loaded = True
        INSTALLED.load()

    def add(self, name: str, item: T) -> T:
        """Register `item` under `name` (a name registers once)."""
        if name in self._items:
            raise ParameterError(f"{self.field}: {name!r} is registered twice")
        self._items[name] = item
        return item

    def pop(self, name: str) -> T:
        """Remove `name` and return its item (a throwaway registration, such as a test's)."""
        return self._items.pop(name)

    def __delitem__(self, name: str) -> None:
        self.pop(name)

    def __getitem__(self, name: object) -> T:
        self._load()
        if not isinstance(name, str) or name not in self._items:
            known = sorted(self._items)
            raise ParameterError(f"{self.field}: unknown name {name!r};{did_you_mean(name, known)} "
                                 f"allowed: {', '.join(known)}")
        return self._items[name]

    def get(self, name: object, default: T | None = None) -> T | None:
        """The item of `name`, or `default` when there is none (as a dict's `get`)."""
        self._load()
        return self._items.get(name, default) if isinstance(name, str) else default

    def __contains__(self, name: object) -> bool:
        self._load()
        return isinstance(name, str) and name in self._items

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def __len__(self) -> int:
        return len(self.names())

    def names(self) -> list[str]:
        """Every name, in the order registered (built-in ones first)."""
        self._load()
        return list(self._items)

    def items(self) -> list[tuple[str, T]]:
        """(name, item) pairs sorted by name."""
        self._load()
        return sorted(self._items.items())
