"""User-supplied matrices and vectors of a problem's parameters: shapes, symmetry, definiteness.

A problem family that accepts its matrices from the user (quadratic, constrained_quadratic) declares
them as `optional_matrix` / `optional_vector` parameters (None: drawn from the seed). These checks run
in the parameter record's `validate`, so a bad matrix is a one-line error naming the field before any
instance is built; `given` reads a validated value back as an array.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from problems.validation import Params, shape_text

#: Relative tolerance of the symmetry check: |M − Mᵀ| ≤ SYMMETRY_RTOL · max(1, max |M|). Products such as
#: G Gᵀ computed in floating point are symmetric to ~1e-16; the constructor symmetrises what passes.
SYMMETRY_RTOL = 1e-10


def given(value: Any) -> np.ndarray | None:
    """A validated matrix or vector parameter as a float array (None when not given)."""
    return None if value is None else np.asarray(value, dtype=float)


def symmetric(value: Any) -> np.ndarray:
    """(M + Mᵀ)/2 of a matrix that passed `require_symmetric` (exactly symmetric for the factorisations)."""
    m = np.asarray(value, dtype=float)
    return 0.5 * (m + m.T)


def rows_of(value: Any) -> int | None:
    """The number of rows (or the length) of a well-formed array parameter, else None."""
    try:
        arr = np.asarray(value, dtype=float)
    except (TypeError, ValueError):
        return None
    return int(arr.shape[0]) if arr.ndim in (1, 2) and arr.size else None


def cols_of(value: Any) -> int | None:
    """The number of columns of a well-formed matrix parameter, else None."""
    try:
        arr = np.asarray(value, dtype=float)
    except (TypeError, ValueError):
        return None
    return int(arr.shape[1]) if arr.ndim == 2 and arr.size else None


def require_shape(p: Params, name: str, shape: tuple[int, ...], meaning: str) -> None:
    """The parameter `name`, when given, has `shape`; `meaning` says what the dimensions are."""
    value = getattr(p, name)
    if value is not None and np.shape(value) != shape:
        want = f"a vector of length {shape[0]}" if len(shape) == 1 else f"a {shape[0]} × {shape[1]} matrix"
        p.fail(name, f"{want} ({meaning})", value, shape_text(value))


def require_symmetric(p: Params, name: str) -> None:
    """The matrix `name`, when given, equals its transpose (to SYMMETRY_RTOL)."""
    value = getattr(p, name)
    if value is None:
        return
    m = np.asarray(value, dtype=float)
    gap = float(np.max(np.abs(m - m.T)))
    if gap > SYMMETRY_RTOL * max(1.0, float(np.max(np.abs(m)))):
        p.fail(name, "a symmetric matrix", value, f"{shape_text(value)} with max |{name} − {name}ᵀ| = {gap:.3g}")


def require_positive_definite(p: Params, name: str, why: str) -> None:
    """The (symmetric) matrix `name`, when given, is positive definite; `why` says what needs it."""
    value = getattr(p, name)
    if value is None:
        return
    m = symmetric(value)
    try:
        np.linalg.cholesky(m)
    except np.linalg.LinAlgError:
        low = float(np.linalg.eigvalsh(m)[0])
        p.fail(name, f"positive definite ({why})", value, f"{shape_text(value)} with smallest eigenvalue {low:.3g}")


def require_full_row_rank(p: Params, name: str, why: str) -> None:
    """The matrix `name`, when given, has linearly independent rows; `why` says what needs it."""
    value = getattr(p, name)
    if value is None:
        return
    m = np.asarray(value, dtype=float)
    rank = int(np.linalg.matrix_rank(m))
    if rank < m.shape[0]:
        p.fail(name, f"a matrix of full row rank ({why})", value, f"{shape_text(value)} of rank {rank}")
