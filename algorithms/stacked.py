"""What runs of one algorithm must share to run as one stack, and what may differ between them.

Runs stack (algorithms/explicit: the NumPy stack, the JAX engine) when their configs agree in every field that may
not vary (`group_key`: loop counts, flags, batch sizes); the fields that may (`varying_fields`: the step sizes and
their decays, or the class's `batch_params`) become one column per run. `RunBatches` is one minibatch per run of a
stack, in row order.
"""
from __future__ import annotations

import dataclasses
from typing import Any

from algorithms.base import Algorithm

_VARYING: dict[type, frozenset[str]] = {}
_FIXED: dict[tuple[type, type], tuple[str, ...]] = {}


def varying_fields(cls: type[Algorithm]) -> frozenset[str]:
    """Config fields whose values may differ within a batch: those that only scale arithmetic.

    The class's `batch_params` when declared, else its step sizes and their decays (`<step>_decay`).
    """
    if cls not in _VARYING:
        declared = getattr(cls, "batch_params", None)
        names = {f.name for f in dataclasses.fields(cls.Config)}
        _VARYING[cls] = frozenset(declared) if declared is not None else \
            frozenset(cls.step_sizes) | {f"{s}_decay" for s in cls.step_sizes if f"{s}_decay" in names}
    return _VARYING[cls]


def group_key(cls: type[Algorithm], config: Any) -> tuple:
    """What runs in one batch must share: every config field that may not vary (as text, hashable)."""
    fixed = _FIXED.get((cls, type(config)))
    if fixed is None:
        varying = varying_fields(cls)
        fixed = _FIXED[cls, type(config)] = tuple(f.name for f in dataclasses.fields(config) if f.name not in varying)
    return tuple((name, repr(getattr(config, name))) for name in fixed)


class RunBatches(tuple):
    """One minibatch per run (row), in row order: what a stacked algorithm passes its oracles."""

    __slots__ = ()
