"""Scalar reductions that also work on stacked runs (algorithms.stacked): a 1-D vector gives the Python
float the sequential code always computed, a (K, d) stack gives a (K, 1) column, one value per run."""
from __future__ import annotations

import math

import numpy as np

from problems.base import Array

Number = float | Array


def dot(a: Array, b: Array) -> Number:
    """float(a @ b), or each row's a·b as a column."""
    if a.ndim == 1:
        return float(a @ b)
    return np.einsum("ij,ij->i", a, b)[:, None]


def norm(a: Array) -> Number:
    """float(‖a‖), or each row's norm as a column."""
    if a.ndim == 1:
        return float(np.linalg.norm(a))
    return np.sqrt(dot(a, a))


def sqrt(s: Number) -> Number:
    """math.sqrt for a number, np.sqrt for a column."""
    return np.sqrt(s) if isinstance(s, np.ndarray) else math.sqrt(s)


def all_at_most(a: Number, bound: float) -> bool:
    """a ≤ bound for a number (a plain comparison: np.all costs ~10 µs a call), every row's for a column."""
    return bool((a <= bound).all()) if isinstance(a, np.ndarray) else a <= bound


def maximum(a: Number, b: Number) -> Number:
    """max(a, b) for numbers, elementwise for columns."""
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return np.maximum(a, b)
    return max(a, b)
