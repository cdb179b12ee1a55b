"""The run loop's divergence rule (algorithms.run.Divergence: its factor and watched quantities) for engines over
stacks.

After every step (`watch_iterates`, written against `xp`, so it compiles with the step): a run whose x or y is
non-finite or past 1e100 in norm, or, when the rule watches the iterates, past `factor` · max(‖start‖, 1), fails at
that step; its later values are computed on (its row cannot leave a compiled stack) but not recorded. At every
evaluation point (`first_bad_point`, NumPy, once at the end): a non-finite metric (any), or a watched metric (the
rule's, "objective" being F_gap where the optimum is known, else F) past `factor` · max(|value at the start|, 1),
ends the run there, as in the run loop.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from algorithms.run import DIVERGENCE_NORM, Divergence
from algorithms.run_settings import sum_of_squares

DEFAULT = Divergence()
FACTOR = DEFAULT.factor
NEVER = -1.0  # `failed` of a run whose iterates stayed in bounds


def iterate_limits(state: Any, xp: Any, rule: Divergence = DEFAULT) -> Any:
    """Squared norm limits of x and y from the start state: (factor · max(‖·‖, 1))², keepdims columns (infinite
    when the rule does not watch the iterates: then only their non-finite values and the 1e100 bound end a run)."""
    if "iterates" not in rule.metrics:
        return tuple(xp.full(v.shape[:-1] + (1,), xp.inf) for v in (state.x, state.y))
    return tuple((rule.factor * xp.maximum(xp.sqrt((v * v).sum(-1, keepdims=True)), 1.0)) ** 2
                 for v in (state.x, state.y))


#: Why a run's iterates failed, by code (`watch_iterates`' reason), in the run loop's words (its checks' order).
ITERATE_REASONS = {1.0: "x non-finite", 2.0: "‖x‖", 3.0: "y non-finite", 4.0: "‖y‖"}


def watch_iterates(state: Any, failed: Any, reason: Any, limits: Any, xp: Any) -> tuple[Any, Any]:
    """(`failed` with the iteration (state.t) set where a run's x or y is out of bounds for the first time, `reason`
    with its code there: x non-finite or past 1e100, ‖x‖ past its limit, then the same of y, the first that holds)."""
    why = xp.zeros_like(failed)
    for code, v, limit in ((1.0, state.x, limits[0]), (3.0, state.y, limits[1])):
        s = (v * v).sum(-1, keepdims=True)
        nonfinite = ~(s < DIVERGENCE_NORM * DIVERGENCE_NORM)  # NaN fails the test too
        here = xp.where(nonfinite, code, xp.where(s > limit, code + 1.0, 0.0))
        why = xp.where(why == 0.0, here, why)
    first = (failed == NEVER) & (why > 0.0)
    return xp.where(first, xp.reshape(state.t, why.shape), failed), xp.where(first, why, reason)


class NumpyWatch:
    """`watch_iterates` on NumPy (one run's 1-D iterates or a stack's rows) in fewer array operations, with the same
    result in every case: a step passes a screen when no run can have failed at it, and only the others go through
    `watch_iterates` itself.

    The screens (why: the check's own (x·x).sum and `where`s were a third of a SOBA stack's time at d = 10):
    while no run has failed, x's and y's squares summed over the whole stack (one BLAS dot each) below every run's
    bound; after that, each run's (one einsum each) below its own bound or the run failed before. A bound is the
    smaller of the run's limit and 1e100², shrunk by a margin larger than the rounding by which a sum of n squares
    in another order can differ (n·ε), so a screen never passes a value the check would stop."""

    def __init__(self, state: Any, limits: Any, failed: Any = None) -> None:
        self.limits = limits
        eps, bound = np.finfo(float).eps, DIVERGENCE_NORM * DIVERGENCE_NORM
        iterates = (np.asarray(state.x), np.asarray(state.y))
        self.bounds = tuple(np.minimum(np.ravel(lim), bound) * (1.0 - 4.0 * v.shape[-1] * eps)
                            for v, lim in zip(iterates, limits))
        self.screens = tuple(float(b.min()) * (1.0 - 4.0 * v.size * eps) for v, b in zip(iterates, self.bounds))
        going = None if failed is None else np.ravel(failed == NEVER)  # `failed`: a resumed stack's runs
        self.going: np.ndarray | None = None if going is None or going.all() else going  # None: none failed

    def __call__(self, state: Any, failed: Any, reason: Any) -> tuple[Any, Any]:
        """`watch_iterates(state, failed, reason, limits, np)`."""
        iterates = (state.x, state.y)
        if self.going is None and all(sum_of_squares(v) < s for v, s in zip(iterates, self.screens)):
            return failed, reason
        x_in, y_in = (np.einsum("...i,...i->...", v, v) < b for v, b in zip(iterates, self.bounds))
        if ((x_in & y_in) if self.going is None else (x_in & y_in) | ~self.going).all():
            return failed, reason
        failed, reason = watch_iterates(state, failed, reason, self.limits, np)
        self.going = np.ravel(failed == NEVER)
        return failed, reason


def watched(values: dict[str, np.ndarray], rule: Divergence = DEFAULT) -> list[str]:
    """The metrics `rule` watches among `values`, in the run loop's order (`Divergence.watched`: by name)."""
    return list(rule.watched({n: 0.0 for n in values if not n.startswith("diag/")}))


def first_bad_point(values: dict[str, np.ndarray], rule: Divergence = DEFAULT) -> tuple[np.ndarray, np.ndarray]:
    """Per run: the first evaluation point with a non-finite metric (len(points): none), and the first point
    where a metric `rule` watches grew past its limit (len(points): none)."""
    metrics = [n for n in values if not n.startswith("diag/")]
    n_points = next(iter(values.values())).shape[0]
    nonfinite = np.zeros(values[metrics[0]].shape, dtype=bool)
    for n in metrics:
        nonfinite |= ~np.isfinite(values[n])
    grown = np.zeros_like(nonfinite)
    with np.errstate(invalid="ignore"):
        for n in watched(values, rule):
            grown |= np.abs(values[n]) > rule.factor * np.maximum(np.abs(values[n][:1]), 1.0)
    first = [np.where(b.any(axis=0), np.argmax(b, axis=0), n_points) for b in (nonfinite, grown)]
    return first[0], first[1]
