"""The stochastic primal–dual lower-level solver of the F2CSA paper's Remark 4.1, and tail averaging.

For min_y g(x, y) s.t. h(x, y) = A x − B y − b ≤ 0 at a fixed x:
    y ← y − η_y (∇y g(x, y; ζ) − Bᵀλ),   λ ← max(0, λ + η_λ h(x, y⁺)),
run until the scaled move ‖Δy‖/η_y + ‖Δλ‖/η_λ ≤ tol or for `cap` iterations. (Remark 4.1 writes the
y step with ∇y g alone, which ignores the constraints; the Lagrangian gradient is the method's intent.)
F2CSA uses it for (ỹ*, λ̃); SSIGD and DS-BLO can use it too (`lower_solver: primal_dual`), since the
F2CSA paper's §6 runs every method with "the same lower-level solver". With noisy gradients the move
never meets a small tolerance, so the loop runs to its cap and returns the mean of the iterates from
`average_from` on (Polyak–Ruppert): the last iterate alone carries the full gradient noise.
"""
from __future__ import annotations

from collections.abc import Callable

import numpy as np

from problems.base import Array


class TailAverage:
    """Mean of the iterates from iteration `start` on (Polyak–Ruppert); the last iterate before that."""

    def __init__(self, start: int | None) -> None:
        self.start, self.total, self.count, self.last = start, None, 0, None

    def add(self, k: int, *values: Array) -> None:
        """Record the iterates of iteration k."""
        self.last = values
        if self.start is not None and k >= self.start:
            if self.total is None:
                self.total = [v.copy() for v in values]
            else:
                self.total = [a + v for a, v in zip(self.total, values)]
            self.count += 1

    def result(self) -> tuple[Array, ...]:
        """The tail average (or the last iterates when nothing was averaged)."""
        if self.count == 0:
            return self.last
        return tuple(a / self.count for a in self.total)


def primal_dual(grad_y: Callable[[Array], Array], h: Callable[[Array], Array], apply_t: Callable[[Array], Array],
                y: Array, lam: Array, eta_y: float, eta_l: float, tol: float, cap: int,
                average_from: int | None) -> tuple[Array, Array, int]:
    """(y, λ, iterations) of the primal–dual iteration from (y, λ).

    `grad_y(y)` is a (fresh, possibly stochastic) ∇y g at y; `h(y)` the constraint values A x − B y − b;
    `apply_t(λ)` is Gᵀλ for the rows G = −B of the lower-level set G y ≤ b − A x, i.e. −Bᵀλ.
    """
    y, lam = y.copy(), lam.copy()
    tail = TailAverage(average_from)
    for k in range(1, cap + 1):
        y_new = y - eta_y * (grad_y(y) + apply_t(lam))
        lam_new = np.maximum(0.0, lam + eta_l * h(y_new))
        moved = np.linalg.norm(y_new - y) / eta_y + np.linalg.norm(lam_new - lam) / eta_l
        y, lam = y_new, lam_new
        if moved <= tol:
            return y, lam, k
        tail.add(k, y, lam)
    y, lam = tail.result()
    return y, lam, cap
