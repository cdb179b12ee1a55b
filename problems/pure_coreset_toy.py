"""The BOME coreset toy's arrays and oracles in pure form, for the compiled engine (problems/toys.py `CoresetToy`).

g(x, y) = ‖y − X σ(x)‖², f(x, y) = s‖y − x0‖², σ the softmax; operators and the arrays' own namespace only, the
oracles only (its ground truth and metrics, the distances to the hull's nearest point, stay the problem's own, on the
host: problems/pure_data.py). Deterministic: a minibatch is the full batch.
"""
from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

from problems.pure_logistic import _exp
from problems.toys import CoresetToy


def _softmax(x: Any) -> Any:
    e = _exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


class PureCoresetToy(NamedTuple):
    """The hull's vertices X (2, m), the target x0, the scale s, y's start."""

    X: Any
    x0: Any
    s: Any
    y_start: Any

    def initial_point(self, zeros: Any) -> tuple[Any, Any]:
        return zeros(self.X.shape[1]), zeros(2) + self.y_start

    def _residual(self, x: Any, y: Any) -> tuple[Any, Any]:
        sig = _softmax(x)
        return y - sig @ self.X.T, sig

    @staticmethod
    def _jac_sigma(sig: Any, v: Any) -> Any:
        """(diag σ − σσᵀ) v."""
        return sig * v - sig * (sig * v).sum(-1, keepdims=True)

    def g(self, x: Any, y: Any) -> Any:
        r, _ = self._residual(x, y)
        return (r * r).sum(-1, keepdims=True)

    def grad_y_g(self, x: Any, y: Any) -> Any:
        return 2 * self._residual(x, y)[0]

    def grad_x_g(self, x: Any, y: Any) -> Any:
        r, sig = self._residual(x, y)
        return -2 * self._jac_sigma(sig, r @ self.X)

    def hvp_yy_g(self, x: Any, y: Any, v: Any) -> Any:
        return 2 * v

    def cross_xy_g(self, x: Any, y: Any, v: Any) -> Any:
        return -2 * self._jac_sigma(_softmax(x), v @ self.X)

    def grad_x_f(self, x: Any, y: Any) -> Any:
        return x * 0.0

    def grad_y_f(self, x: Any, y: Any) -> Any:
        return 2 * self.s * (y - self.x0)

    def project_x(self, x: Any) -> Any:
        return x

    def project_y(self, y: Any) -> Any:
        return y


def pure_coreset_toy(problem: CoresetToy) -> PureCoresetToy:
    """The pure form of a coreset toy (NumPy arrays)."""
    return PureCoresetToy(np.asarray(problem.X, dtype=float), np.asarray(problem.x0, dtype=float), float(problem.s),
                          np.asarray(problem.y_start, dtype=float))
