"""Step-size schedules shared by every algorithm: constant, or c / (t + 1)^e."""
from __future__ import annotations

import numpy as np


def decaying(c: float, exponent: float, t: int) -> float:
    """c / (t + 1)^exponent (exponent 0 gives the constant c)."""
    if isinstance(exponent, np.ndarray):  # one exponent per stacked run (algorithms.stacked); 0 gives c too
        return c / (t + 1) ** exponent
    return c / (t + 1) ** exponent if exponent else c
