"""BOME (Bilevel Optimization Made Easy): dynamic-barrier descent on the value-function reformulation.

Per outer step, from (x, y): ŷ ← T steps ŷ ← ŷ − α∇y g(x, ŷ) from y; q̂(x, y) = g(x, y) − g(x, ŷ) with ŷ
held constant, so ∇q̂ = (∇x g(x, y) − ∇x g(x, ŷ), ∇y g(x, y)); φ = η‖∇q̂‖² (default) or η q̂;
λ = max((φ − ⟨∇f, ∇q̂⟩)/‖∇q̂‖², 0) (0 when ∇q̂ = 0); (x, y) ← (x, y) − ξ(∇f + λ∇q̂).
Steps are projected on the problem's simple sets (project_x, project_y), which is how the paper's
minimax toy keeps its iterates in a box. The stochastic form draws a fresh minibatch for each inner step
and one shared minibatch for all outer-step oracles, so q̂ and ∇q̂ are differences on the same samples.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from algorithms.base import Algorithm, StochasticConfig, register
from algorithms.search_space import Range
from problems.base import Array
from problems.validation import param


@dataclass(frozen=True)
class BOMEConfig(StochasticConfig):
    """BOME hyperparameters; defaults are the paper's (η 0.5, T 10, α = ξ = 0.05 on its toys)."""

    xi: float = param(0.05, "positive", "outer step ξ on (x, y)")
    alpha: float = param(0.05, "positive", "inner step α of the T steps giving ŷ (paper: α = ξ)")
    T: int = param(10, "positive_int", "inner gradient steps giving ŷ")
    eta: float = param(0.5, "positive", "control coefficient η of the barrier φ")
    phi: str = param("grad_norm", "str", "φ = η‖∇q̂‖² ('grad_norm') or η q̂ ('value')",
                     choices=("grad_norm", "value"))
    eps: float = param(0.0, "nonnegative", "added to ‖∇q̂‖² in λ's denominator (the reference code uses 1e-4)")
    xi_x: float | None = param(None, "optional_positive", "separate outer step on x (null: ξ)")
    xi_y: float | None = param(None, "optional_positive", "separate outer step on y (null: ξ)")
    track_q: bool = param(True, "bool", "evaluate q̂ each step for diagnostics (2 counted g-value calls)")


def bome_lambda(grad_f: Array, grad_q: Array, phi: float, eps: float = 0.0) -> float:
    """λ = max((φ − ⟨∇f, ∇q̂⟩)/(‖∇q̂‖² + eps), 0), and 0 when ∇q̂ = 0."""
    denom = float(grad_q @ grad_q) + eps
    if not np.any(grad_q) or denom == 0.0:
        return 0.0
    return max((phi - float(grad_f @ grad_q)) / denom, 0.0)


@register
class BOME(Algorithm):
    """BOME: first-order value-function method with a dynamic barrier."""

    state = ("lam", "q_hat", "grad_q_norm")
    scalar_state = ("lam", "q_hat", "grad_q_norm")
    name = "bome"
    draws_ahead = True
    Config = BOMEConfig
    step_sizes = ("xi", "alpha")
    tunables = {"T": Range(1, 100, integer=True), "eta": Range(0.05, 5.0)}
    first_order = True
    stochastic = True
    loops = "double"
    paper = "BOME! Bilevel Optimization Made Easy: A Simple First-Order Approach (NeurIPS 2022)"

    def __init__(self, problem, config: BOMEConfig, rng: np.random.Generator) -> None:
        super().__init__(problem, config, rng)
        self.lam: float | None = None
        self.grad_q_norm = 0.0
        self.q_hat: float | None = None

    def inner_point(self, x: Array, y: Array) -> Array:
        """ŷ: T projected gradient steps on g(x, ·) from y."""
        c, p = self.config, self.problem
        y_hat = y.copy()
        for batch in self.batches(c.T):
            y_hat = p.project_y(y_hat - c.alpha * p.grad_y_g(x, y_hat, batch))
        return y_hat

    def step(self) -> None:
        c, p = self.config, self.problem
        x, y = self.x, self.y
        y_hat = self.inner_point(x, y)
        batch = self.batch()
        fx, fy = p.grad_f(x, y, batch)
        gx, gy = p.grad_g(x, y, batch)
        gx_hat, _ = p.grad_g(x, y_hat, batch)
        grad_f = np.concatenate([fx, fy], axis=-1)
        grad_q = np.concatenate([gx - gx_hat, gy], axis=-1)
        q_hat = None
        if c.track_q or c.phi == "value":
            q_hat = p.g(x, y, batch) - p.g(x, y_hat, batch)
        phi = c.eta * (float(grad_q @ grad_q) if c.phi == "grad_norm" else q_hat)
        lam = bome_lambda(grad_f, grad_q, phi, c.eps)
        d = grad_f + lam * grad_q
        n = x.shape[-1]
        self.x = p.project_x(x - (c.xi if c.xi_x is None else c.xi_x) * d[..., :n])
        self.y = p.project_y(y - (c.xi if c.xi_y is None else c.xi_y) * d[..., n:])
        self.lam, self.q_hat = lam, q_hat
        self.grad_q_norm = float(np.linalg.norm(grad_q))

    def diagnostics(self) -> dict[str, float]:
        if self.lam is None:
            return {}
        out = {"lambda": self.lam, "grad_q_norm": self.grad_q_norm}
        if self.q_hat is not None:
            out["q_hat"] = self.q_hat
        return out
