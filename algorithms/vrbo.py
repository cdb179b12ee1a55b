"""VRBO: SPIDER/SARAH recursive estimators with a periodic large-batch refresh (Yang, Ji & Liang 2021).

Yang, Ji & Liang 2021 (NeurIPS), Alg. 2. Two directions are carried along the iterates: u ≈ ∇y g and
w ≈ ∇̂Φ, the Neumann hypergradient of algorithms/recursive_momentum.py. Every `period` (q) outer
iterations both are recomputed at the current point on a large batch S1; in between, every move of
(x, y) updates them by a recursive difference on fresh minibatches S2, taken at the new and at the old
point with the same samples:

    u ← u + ∇y g(x', y'; S2) − ∇y g(x, y; S2),   w ← w + ∇̂Φ(x', y'; S̄2) − ∇̂Φ(x, y; S̄2).

So u and w always estimate the directions at the current point, and with full-batch oracles they are
exact: VRBO then takes one x step along the Neumann hypergradient followed by m gradient steps on y,
for any period, and converges to the Neumann-biased x̂_{Q+1}. benchmark_bilevel's inner loop differs:
its differences are taken at the new x only and its previous y is not reset at a refresh, so the x
move is never tracked (its solvers/vrbo.py); without refreshes its full-batch iterates drift away from x̂.
"""
from __future__ import annotations

import dataclasses

import numpy as np

from algorithms.base import Algorithm, StochasticConfig, register
from algorithms.recursive_momentum import NeumannSamples, neumann_hypergradient
from problems.base import Array, Batch
from problems.shared.errors import ParameterError
from problems.validation import param


@dataclasses.dataclass(frozen=True)
class VRBOConfig(StochasticConfig):
    """VRBO hyperparameters (constant steps 0.1, Q = m = 10 as benchmark_bilevel; q = 3 as the authors' code)."""

    alpha: float = param(0.1, "positive", "inner step α on y (benchmark_bilevel: step_size)")
    gamma: float = param(0.1, "positive", "outer step γ (benchmark_bilevel: step_size/outer_ratio)")
    eta: float = param(0.1, "positive", "Neumann step η (needs η < 2/L_g; benchmark_bilevel: step_size)")
    neumann_terms: int = param(10, "positive_int", "Q: Neumann-series HVPs per estimate (Q + 1 terms)")
    inner_steps: int = param(10, "positive_int", "m: steps on y per outer iteration")
    period: int = param(3, "positive_int", "q: refresh u and w on the large batch every q outer iterations")
    refresh_batch: int | None = param(None, "optional_positive_int",
                                      "S1: minibatch size of the refresh (null: the full finite sum)")


@register
class VRBO(Algorithm):
    """VRBO: an x step and m y steps per outer iteration along SPIDER estimates refreshed every q iterations.

    Outer iteration k (Yang, Ji & Liang 2021, Alg. 2):
        if k mod q = 0: u = ∇y g(x, y; S1), w = ∇̂Φ(x, y; S1)
        x ← x − γ w, then track u, w from the old x to the new one (same y)
        m times: y ← y − α u, then track u, w from the old y to the new one.
    The tracking after the last y step is skipped when the next iteration refreshes (it would be
    discarded). With `batch_size` set the refresh uses the full finite sum unless `refresh_batch` sets
    the paper's large batch S1; on a noise-driven problem (no finite sum) S1 must be given.
    """

    name = "vrbo"
    Config = VRBOConfig
    step_sizes = ("alpha", "eta", "gamma")
    first_order = False
    stochastic = True
    loops = "double"
    state = ("u", "w")
    paper = "Yang, Ji & Liang 2021 (NeurIPS), Alg. 2"

    def __init__(self, problem, config: VRBOConfig, rng: np.random.Generator) -> None:
        super().__init__(problem, config, rng)
        noise_driven = getattr(problem, "stochastic", False) and getattr(problem, "n_samples", None) is None
        if noise_driven and config.batch_size is not None and config.refresh_batch is None:
            raise ParameterError(f"algorithm 'vrbo': 'refresh_batch' must be set on problem '{problem.name}': "
                                 "it has no finite sum for a full-batch refresh")
        self.u: Array | None = None  # set by the refresh of iteration 0
        self.w: Array | None = None

    def refresh_sample(self) -> Batch:
        """A large batch S1 of `refresh_batch` samples, or None (the full batch)."""
        size = self.config.refresh_batch
        if size is None or not getattr(self.problem, "stochastic", False):
            return None
        return self.problem.sample_batch(self.rng, size)

    def refresh(self) -> None:
        """u and w recomputed at the current point on the large batch."""
        p, c = self.problem, self.config
        self.u = p.grad_y_g(self.x, self.y, self.refresh_sample())
        samples = NeumannSamples.draw(self.refresh_sample, c.neumann_terms)
        self.w = neumann_hypergradient(p, self.x, self.y, samples, c.eta)

    def move(self, x: Array, y: Array, track: bool) -> None:
        """Go to (x, y); with `track`, carry u and w along by recursive differences on fresh minibatches."""
        if track:
            p, eta = self.problem, self.config.eta
            draw = self.batch_source(self.config.neumann_terms + 3)  # y's, then the Neumann estimate's
            batch = draw()
            samples = NeumannSamples.draw(draw, self.config.neumann_terms)
            self.u = self.u + p.grad_y_g(x, y, batch) - p.grad_y_g(self.x, self.y, batch)
            self.w = self.w + (neumann_hypergradient(p, x, y, samples, eta)
                               - neumann_hypergradient(p, self.x, self.y, samples, eta))
        self.x, self.y = x, y

    def step(self) -> None:
        c = self.config
        if self.iteration % c.period == 0:
            self.refresh()
        refresh_next = (self.iteration + 1) % c.period == 0
        self.move(self.problem.project_x(self.x - c.gamma * self.w), self.y, track=True)
        for k in range(c.inner_steps):
            last = k == c.inner_steps - 1
            self.move(self.x, self.y - c.alpha * self.u, track=not (last and refresh_next))
