"""Step-size schedules shared by every algorithm: constant, or c / (t + 1)^e."""
from __future__ import annotations


def decaying(c: float, exponent: float, t: int) -> float:
    """c / (t + 1)^exponent (exponent 0 gives the constant c)."""
    return c / (t + 1) ** exponent if exponent else c
