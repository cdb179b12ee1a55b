"""Study kinds: one module (or package) per kind in this package, each registered with `@register` (see `base`).

Importing `sweep.kinds` imports every module of the package, so a new built-in kind is one new file;
a kind outside the package registers itself when a study's `imports:` (or your code) imports it, or when
its installed package declares it as a `bisweep.plugins` entry point (problems.shared.registries). The registry is
`sweep.study.plugins.KINDS`, which imports this package at its first read.
"""
from __future__ import annotations

from problems.shared.registries import discover
from sweep.kinds.base import DEFAULT_KIND, KINDS, Kind, get, names, register

discover(__name__, __path__)  # every module of the package, each registering itself

__all__ = ["DEFAULT_KIND", "KINDS", "Kind", "get", "names", "register"]
