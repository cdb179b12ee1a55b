"""Errors of a study file: one line per problem, each naming the YAML path of the field.

Validation collects every error of a stage before it stops (`Errors`), so a file with three mistakes
gets three lines at once; `SpecError` carries them (at most `MAX_LINES` printed, then a count).
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NoReturn

from problems.shared.errors import ParameterError

#: Errors printed at most; the rest are counted on one more line.
MAX_LINES = 20
#: The most characters of a value an error shows (a 5,000-character name is shown by its start and length).
MAX_SHOWN = 60
#: The longest error line printed (an 'allowed: ...' list fits; a value quoted whole is cut).
MAX_LINE = 500


def short(line: str) -> str:
    """`line`, cut to MAX_LINE characters with its length said."""
    return line if len(line) <= MAX_LINE else f"{line[:MAX_LINE - 40]}… ({len(line):,} characters)"


class SpecError(ParameterError):
    """A bad study: one line per error, each `path: what is wrong`."""

    def __init__(self, lines: list[str]) -> None:
        self.errors = [short(line) for line in lines]
        shown = self.errors[:MAX_LINES]
        more = len(self.errors) - len(shown)
        super().__init__("\n".join(shown + ([f"({more} more errors not shown)"] if more else [])))


def fail(path: str, message: str) -> NoReturn:
    """Raise the one-line error for the field at `path`."""
    raise SpecError([f"{path}: {message}"])


def shown(value: Any) -> str:
    """A value as error messages show it: its repr (its start when long), or 'a mapping' / 'a list' for containers."""
    if isinstance(value, Mapping):
        return "a mapping"
    if isinstance(value, (list, tuple)):
        return "a list"
    text = repr(value)
    if len(text) > MAX_SHOWN:
        return f"{text[:MAX_SHOWN - 10]}… ({len(value) if isinstance(value, str) else len(text):,} characters)"
    return text


def yaml_path(loc: tuple[str | int, ...]) -> str:
    """('algorithms', 1, 'params', 'alpha0') -> 'algorithms[1].params.alpha0'."""
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


class Errors:
    """The errors of one validation stage, in the order found (each line once)."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    def add(self, path: str, message: str) -> None:
        """Record the error of the field at `path`."""
        line = f"{path}: {message}"
        if line not in self.lines:
            self.lines.append(line)

    def extend(self, lines: list[str]) -> None:
        """Record finished lines (e.g. from the schema)."""
        for line in lines:
            if line not in self.lines:
                self.lines.append(line)

    def __bool__(self) -> bool:
        return bool(self.lines)

    def raise_if_any(self) -> None:
        """End the stage: raise every error found so far."""
        if self.lines:
            raise SpecError(self.lines)
