"""Validated parameter records shared by problems and algorithm configs.

A parameter record is a frozen dataclass whose fields carry a check in their metadata. Building one
from a dict validates every field up front and raises `ParameterError` with a one-line message that
names the owner, the field and what is allowed.
"""
from __future__ import annotations

import dataclasses
import math
import numbers
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar, TypeVar

import numpy as np

from problems.shared.errors import ParameterError, did_you_mean

T = TypeVar("T", bound="Params")


#: The most characters of a value an error shows (a nested list of 5,000 characters is shown by its start).
MAX_SHOWN = 80


def _describe(value: Any) -> str:
    text = repr(value) if not isinstance(value, str) else f"'{value}'"
    if len(text) <= MAX_SHOWN:
        return text
    # Its start and its end (a path's file name is at its end), and how long it was.
    return f"{text[:MAX_SHOWN // 2 - 10]}…{text[-(MAX_SHOWN // 2 - 10):]} ({len(text):,} characters)"


def _is_int(value: Any) -> bool:
    # An exact int first: the ABC test costs ~0.5 µs, and a sweep validates thousands of configs.
    kind = type(value)
    return kind is int or (kind is not float and isinstance(value, numbers.Integral) and not isinstance(value, bool))


def _is_real(value: Any) -> bool:
    return type(value) in (float, int) or (isinstance(value, numbers.Real) and not isinstance(value, bool))


# Each check returns None when the value is fine, or the phrase "must be ..." otherwise.
_CHECKS = {
    "positive_int": lambda v: None if _is_int(v) and v > 0 else "a positive integer",
    "nonnegative_int": lambda v: None if _is_int(v) and v >= 0 else "a non-negative integer",
    "positive": lambda v: None if _is_real(v) and math.isfinite(v) and v > 0 else "a positive number",
    "nonnegative": lambda v: None if _is_real(v) and math.isfinite(v) and v >= 0 else "a non-negative number",
    "probability": lambda v: None if _is_real(v) and 0.0 <= v <= 1.0 else "a probability in [0, 1]",
    "real": lambda v: None if _is_real(v) and math.isfinite(v) else "a finite number",
    "bool": lambda v: None if isinstance(v, bool) else "true or false",
    "str": lambda v: None if isinstance(v, str) else "a string",
    "any": lambda v: None,
    "optional_path": lambda v: None if v is None or isinstance(v, str) else "a file path (string) or null",
    "optional_positive_int": lambda v: None if v is None or (_is_int(v) and v > 0) else "a positive integer or null",
    "optional_positive": lambda v: None if v is None or (_is_real(v) and v > 0) else "a positive number or null",
    "real_vector": lambda v: None if _is_real_vector(v) else "a list of finite numbers",
    "optional_vector": lambda v: None if v is None or _array_of(v, 1) is not None else "a list of finite numbers or null",
    "optional_matrix": lambda v: None if v is None or _array_of(v, 2) is not None
    else "a matrix (a list of equally long rows of finite numbers) or null",
}

#: Checks whose values are stored as nested lists of floats (a NumPy array given in Python included), so
#: that a configuration holding one serialises and hashes like any other.
ARRAY_CHECKS = {"optional_vector": 1, "optional_matrix": 2}


def _is_array_like(value: Any) -> bool:
    return isinstance(value, (list, tuple, np.ndarray))


def _is_real_vector(value: Any) -> bool:
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence):
        return False
    return all(_is_real(v) and math.isfinite(v) for v in value)


def _array_of(value: Any, ndim: int) -> np.ndarray | None:
    """`value` as a float array of `ndim` dimensions with finite entries (none empty), else None."""
    if isinstance(value, (str, bytes, bool)) or value is None:
        return None
    try:
        arr = np.asarray(value, dtype=float)
    except (TypeError, ValueError):  # ragged rows, strings inside
        return None
    if arr.ndim != ndim or arr.size == 0 or not np.all(np.isfinite(arr)):
        return None
    return arr


def shape_text(value: Any) -> str:
    """A short description of an array-like value for error messages (never the whole matrix)."""
    try:
        arr = np.asarray(value, dtype=float)
    except (TypeError, ValueError):
        return "rows of different lengths" if isinstance(value, (list, tuple)) else _describe(value)
    bad = "" if np.all(np.isfinite(arr)) else " with non-finite entries"
    if arr.ndim == 1:
        return f"a vector of length {arr.shape[0]}{bad}"
    if arr.ndim == 2:
        return f"a {arr.shape[0]} × {arr.shape[1]} matrix{bad}"
    return f"an array of shape {arr.shape}"


def param(default: Any, check: str, doc: str = "", choices: Sequence[Any] | None = None,
          omit_at_default: bool = False) -> Any:
    """A dataclass field with a named check (see _CHECKS) or a set of allowed choices.

    `omit_at_default`: the field is left out of `Params.recorded()` while it holds its default — for a field
    added after studies were recorded, so that their runs keep their keys (and resume) with it at its default.
    """
    if check not in _CHECKS:
        raise KeyError(f"unknown check {check!r}")
    meta = {"check": check, "doc": doc, "choices": tuple(choices) if choices else None,
            "omit_at_default": omit_at_default}
    if isinstance(default, (list, dict)):
        return dataclasses.field(default_factory=lambda d=default: type(d)(d), metadata=meta)
    return dataclasses.field(default=default, metadata=meta)


#: Each parameter class's fields, kept (a sweep builds thousands of configs).
_FIELDS: dict[type, tuple[dataclasses.Field, ...]] = {}
#: Each parameter class's field names (`from_dict` tests a mapping's keys against them).
_NAMES: dict[type, frozenset[str]] = {}
#: (field, type, value) of plain values that passed their field's check as they are (nothing converted): the
#: many configs of a sweep or batch repeat most of their values, and a check costs ~10x a lookup. A check is
#: a function of the value alone, so a pass holds for every equal value of the same type.
_PASSED: set[tuple[dataclasses.Field, type, Any]] = set()
_PASSED_MAX = 1 << 14  # then forgotten at once (a sweep of many distinct values does not grow it unbounded)
_MEMO_TYPES = frozenset({int, float, str, bool, type(None)})


def _fields_of(cls: type) -> tuple[dataclasses.Field, ...]:
    fields = _FIELDS.get(cls)
    if fields is None:  # dataclasses.fields walks the class's fields each call (~1.5 µs for a config)
        fields = _FIELDS[cls] = dataclasses.fields(cls)
    return fields


@dataclasses.dataclass(frozen=True)
class Params:
    """Base of every validated parameter record (problem parameters, algorithm configs)."""

    owner: ClassVar[str] = "parameters"

    def __post_init__(self) -> None:
        for f in _fields_of(type(self)):
            value = getattr(self, f.name)
            kind = type(value)
            if kind not in _MEMO_TYPES:
                self._check_field(f, value)
                continue
            key = (f, kind, value)
            if key in _PASSED:
                continue
            self._check_field(f, value)
            if getattr(self, f.name) is value:  # passed unconverted (a converted value is checked each time)
                if len(_PASSED) >= _PASSED_MAX:
                    _PASSED.clear()
                _PASSED.add(key)
        self.validate()

    def _check_field(self, f: dataclasses.Field, value: Any) -> None:
        choices = f.metadata.get("choices")
        if choices is not None:
            if value not in choices:
                allowed = ", ".join(_describe(c) for c in choices)
                self.fail(f.name, f"one of {allowed}", value)
            return
        check = f.metadata.get("check", "any")
        # Accept whole floats where the user wrote "10.0" for an integer field (YAML, CLI).
        if check.endswith("int") and isinstance(value, float) and value.is_integer():
            object.__setattr__(self, f.name, int(value))
            value = int(value)
        if check in ("positive", "nonnegative", "probability", "real") and _is_int(value):
            object.__setattr__(self, f.name, float(value))
        problem = _CHECKS[check](value)
        if problem is not None:
            shown = shape_text(value) if check in ARRAY_CHECKS and _is_array_like(value) else None
            self.fail(f.name, problem, value, shown)
        if check in ARRAY_CHECKS and value is not None:
            object.__setattr__(self, f.name, np.asarray(value, dtype=float).tolist())

    def validate(self) -> None:
        """Cross-field checks; override and call `self.fail` on a bad combination."""

    def array_bytes(self) -> float | None:
        """About how many bytes the arrays of an instance built from these parameters take (None: not estimated).

        Counted from the sizes alone, before anything is built: a study is refused when one instance
        cannot fit in a node's memory. A problem family with arrays whose size its parameters set overrides it.
        """
        return None

    def fail(self, field: str, allowed: str, value: Any, shown: str | None = None) -> None:
        """Raise the one-line error for `field` (`shown`: how to name the value instead of its repr)."""
        raise ParameterError(f"{self.owner}: '{field}' must be {allowed}, got {shown or _describe(value)}")

    @classmethod
    def from_dict(cls: type[T], values: Mapping[str, Any] | None = None) -> T:
        """Build from a mapping, rejecting unknown names with the list of allowed ones."""
        values = dict(values or {})
        known = _NAMES.get(cls)
        if known is None:
            known = _NAMES[cls] = frozenset(f.name for f in _fields_of(cls))
        if not values.keys() <= known:
            names = [f.name for f in _fields_of(cls)]
            unknown = sorted(set(values) - set(names))
            raise ParameterError(f"{cls.owner}: unknown parameter '{unknown[0]}';{did_you_mean(unknown[0], names)} "
                                 f"allowed: {', '.join(names)}")
        return cls(**cls.implied(values))

    @classmethod
    def implied(cls, values: dict[str, Any]) -> dict[str, Any]:
        """`values` with the fields they imply filled in when not given (e.g. a dimension from a matrix)."""
        return values

    @classmethod
    def describe(cls) -> dict[str, dict[str, Any]]:
        """Each field with its default, check and doc, for listings."""
        out: dict[str, dict[str, Any]] = {}
        for f in dataclasses.fields(cls):
            default = f.default if f.default is not dataclasses.MISSING else f.default_factory()  # type: ignore[misc]
            entry = {"default": default, "check": f.metadata.get("check", "any"), "doc": f.metadata.get("doc", "")}
            if f.metadata.get("choices"):
                entry["choices"] = list(f.metadata["choices"])
            out[f.name] = entry
        return out

    def as_dict(self) -> dict[str, Any]:
        """Plain dict of the field values."""
        return {f.name: getattr(self, f.name) for f in _fields_of(type(self))}

    def recorded(self) -> dict[str, Any]:
        """The field values a study records (part of a run's identity): `as_dict()` without the fields
        marked `omit_at_default` that hold their default."""
        return {f.name: getattr(self, f.name) for f in _fields_of(type(self))
                if not (f.metadata.get("omit_at_default") and getattr(self, f.name) == f.default)}

    def replace(self: T, **changes: Any) -> T:
        """A validated copy with some fields changed."""
        return type(self).from_dict({**self.as_dict(), **changes})
