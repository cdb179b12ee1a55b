"""The constrained quadratic's arrays and oracles in pure form, for the compiled engine (problems/constrained.py).

f(x, y) = ½ xᵀQ_u x + c_uᵀx + ½ yᵀP y + xᵀP y,  g(x, y) = ½ yᵀQ_l y + c_lᵀy + xᵀy: the exact oracles, which the
algorithms without a constraint step use; the lower-level constraints enter the ground truth only (y* and ∇F from
the problem's QP solver, on the host: problems/pure_data.py). Full batch only: a minibatch of this problem is a draw
of noise on its matrices, the NumPy engines' (a study refuses `batch_size` on it for the JAX backend).
"""
from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

from problems.constrained import ConstrainedQuadratic


class PureConstrained(NamedTuple):
    """Q_u, c_u, P, Q_l, c_l."""

    Q_u: Any
    c_u: Any
    P: Any
    Q_l: Any
    c_l: Any

    def initial_point(self, zeros: Any) -> tuple[Any, Any]:
        return zeros(self.Q_u.shape[0]), zeros(self.Q_l.shape[0])

    def g(self, x: Any, y: Any) -> Any:
        return (0.5 * y @ (self.Q_l @ y) + self.c_l @ y + x @ y)[..., None]

    def grad_y_g(self, x: Any, y: Any) -> Any:
        return self.Q_l @ y + self.c_l + x

    def grad_x_g(self, x: Any, y: Any) -> Any:
        return y * 1.0

    def hvp_yy_g(self, x: Any, y: Any, v: Any) -> Any:
        return self.Q_l @ v

    def cross_xy_g(self, x: Any, y: Any, v: Any) -> Any:
        return v * 1.0  # ∇²xy g = I for the coupling xᵀy

    def grad_x_f(self, x: Any, y: Any) -> Any:
        return self.Q_u @ x + self.c_u + self.P @ y

    def grad_y_f(self, x: Any, y: Any) -> Any:
        return self.P @ (x + y)

    def project_x(self, x: Any) -> Any:
        return x

    def project_y(self, y: Any) -> Any:
        return y


def pure_constrained(problem: ConstrainedQuadratic) -> PureConstrained:
    """The pure form of a constrained_quadratic instance (NumPy arrays)."""
    return PureConstrained(*(np.asarray(getattr(problem, n), dtype=float) for n in ("Q_u", "c_u", "P", "Q_l", "c_l")))
