"""Building blocks of the study schema (pydantic v2): checked values and strict blocks.

A checked value keeps exactly what the YAML gave (an integer stays an integer: it ends up in trial
keys), and a bad one gets the platform's message `must be <allowed>, got <value>`; pydantic supplies
the structure: unknown fields (`extra="forbid"`), the path of every error, all errors at once.
"""
from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping
from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, model_validator
from pydantic_core import PydanticCustomError

from sweep.study.errors import shown

#: The pydantic error type of every message written by the platform (others are translated).
ERROR_TYPE = "bisweep"


def invalid(message: str) -> PydanticCustomError:
    """A schema error carrying the platform's own message (braces in it are not a template)."""
    return PydanticCustomError(ERROR_TYPE, "{message}", {"message": message})


def is_int(v: Any) -> bool:
    """An integer that is not a bool."""
    return isinstance(v, int) and not isinstance(v, bool)


def is_number(v: Any) -> bool:
    """An int or float that is not a bool."""
    return isinstance(v, (int, float)) and not isinstance(v, bool)


@dataclasses.dataclass(frozen=True)
class Allowed:
    """What a checked value accepts, in words (read by the generated schema reference)."""

    allowed: str


def checked(allowed: str, ok: Callable[[Any], bool], convert: Callable[[Any], Any] = lambda v: v) -> Any:
    """A value for which `ok` holds (then `convert`ed), else `must be <allowed>, got <value>`."""
    def validate(v: Any) -> Any:
        if not ok(v):
            raise invalid(f"must be {allowed}, got {shown(v)}")
        return convert(v)

    return Annotated[Any, AfterValidator(validate), Allowed(allowed)]


def before(check: Callable[[Any], Any], tp: Any) -> Any:
    """`tp` after `check` (which may reshape the raw value or raise `invalid`)."""
    return Annotated[tp, BeforeValidator(check)]


def after(tp: Any, check: Callable[[Any], Any]) -> Any:
    """`tp`, then `check` on the validated value."""
    return Annotated[tp, AfterValidator(check)]


def nonempty_list(what: str) -> Callable[[Any], Any]:
    """A before-check: the raw value must be a non-empty list (its items are validated next)."""
    def check(v: Any) -> Any:
        if not isinstance(v, list) or not v:
            raise invalid(f"must be a non-empty list of {what}, got {shown(v)}")
        return v

    return check


def no_repeats(what: str = "a value") -> Callable[[list[Any]], list[Any]]:
    """An after-check: list items are distinct."""
    def check(v: list[Any]) -> list[Any]:
        if len(set(map(repr, v))) != len(v):
            raise invalid(f"must not repeat {what}")
        return v

    return check


PositiveNumber = checked("a positive number", lambda v: is_number(v) and v > 0 and math.isfinite(v))
PositiveInt = checked("a positive integer", lambda v: is_int(v) and v > 0)
NonNegativeInt = checked("a non-negative integer", lambda v: is_int(v) and v >= 0)
OptionalPositiveInt = checked("null or a positive integer", lambda v: v is None or (is_int(v) and v > 0))
OptionalNonNegativeInt = checked("null or a non-negative integer", lambda v: v is None or (is_int(v) and v >= 0))
NonNegativeSeconds = checked("a non-negative number", lambda v: is_number(v) and v >= 0 and math.isfinite(v), float)


class Block(BaseModel):
    """A mapping of the study file: unknown fields are errors, and so is anything but a mapping."""

    model_config = ConfigDict(extra="forbid", arbitrary_types_allowed=True)

    @model_validator(mode="before")
    @classmethod
    def _mapping(cls, data: Any) -> Any:
        if not isinstance(data, Mapping):
            raise invalid(f"must be a mapping with {', '.join(cls.model_fields)}, got {shown(data)}")
        return data
