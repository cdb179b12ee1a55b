"""The one error type of bad input, shared by every package: a `ParameterError` is one line that names the
field and what is allowed, and `did_you_mean` adds the nearest known name to it."""
from __future__ import annotations

import difflib
from collections.abc import Sequence
from typing import Any


class ParameterError(ValueError):
    """A bad parameter: the message names the field and what is allowed."""


def did_you_mean(name: Any, names: Sequence[str]) -> str:
    """" did you mean 'x'?" for the known name nearest to a mistyped one (difflib's ratio >= 0.6), else ""."""
    if not isinstance(name, str):
        return ""
    close = difflib.get_close_matches(name, list(names), n=1)
    return f" did you mean '{close[0]}'?" if close else ""
