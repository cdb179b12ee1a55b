"""Study kinds: one module (or package) per kind in this package, each registered with `@register` (see `base`).

Importing `sweep.kinds` imports every module of the package, so a new built-in kind is one new file;
a kind outside the package registers itself when a study's `imports:` (or your code) imports it.
"""
from __future__ import annotations

import importlib
import pkgutil

from sweep.kinds.base import DEFAULT_KIND, KINDS, Kind, get, names, register

for _module in sorted(m.name for m in pkgutil.iter_modules(__path__)):
    importlib.import_module(f"{__name__}.{_module}")

__all__ = ["DEFAULT_KIND", "KINDS", "Kind", "get", "names", "register"]
