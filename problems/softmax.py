"""softmax(z) = exp(z − max z) / Σ exp(z − max z): scipy.special.softmax's formula, bit for bit, without its
array-API dispatch, which was most of a small problem's oracle time (a toy's 5 entries: 21–22 against
10.6–10.8 µs; the coreset toy's BVFSM run spent 58 % of its time there)."""
from __future__ import annotations

import numpy as np

from problems.base import Array


def softmax(z: Array, axis: int | None = None) -> Array:
    """The softmax of `z` along `axis` (over every entry when None)."""
    e = np.exp(z - z.max(axis, keepdims=True))
    return e / e.sum(axis, keepdims=True)
