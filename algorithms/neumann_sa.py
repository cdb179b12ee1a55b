"""Stochastic approximation with a randomized truncated Neumann hypergradient: BSA, TTSA and SUSTAIN.

All three estimate ∇F = ∇x f − J H⁻¹ ∇y f with Ghadimi & Wang's Hessian-inverse approximation (HIA,
algorithms/hypergradient.py `hia`): p ~ U{0..N−1} factors, v = N η Π_{i=1}^{p} (I − η H_i) ∇y f on
fresh minibatches, then ∇̂F = ∇x f − ∇²xy g · v with one more minibatch. No v is stored: the estimate
is rebuilt at every iteration, so the methods differ only in how they move y and x:

- BSA: T SGD steps on y at x_k, then one outer step (double loop);
- TTSA: one SGD step on y, then one outer step at the new y, two time scales (single loop);
- SUSTAIN: STORM momentum on both directions, the HIA sharing p and its minibatches between the
  current and the previous point (single loop, single time scale).

E_p[v] = M_N ∇y f with M_N = H⁻¹(I − (I − ηH)^N) (Ghadimi & Wang 2018, Alg. 3), so even with exact oracles
the methods converge to a zero of ∇x f − J M_N ∇y f (the Neumann-biased point x̂_N), which tends to x* as N
grows.
`hia_mode: expected` replaces the random p by its average (N − 1 HVPs, deterministic given the
minibatches) for tests of that fixed point. Defaults follow benchmark_bilevel (all steps 0.1, N = 10,
its decay exponents); the Neumann step η is a separate field here (benchmark_bilevel ties it to the
inner step), since the HIA diverges for η ≥ 2/L_g whatever the other steps are.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Callable

import numpy as np

from algorithms.aid import DoubleLoop, InnerOuterConfig
from algorithms.base import Algorithm, BatchSource, StochasticConfig, register
from algorithms.hypergradient import hia, hia_expected, joint_hia, joint_hia_expected
from algorithms.schedules import decaying
from algorithms.search_space import Range
from problems.base import Array, Batch
from problems.validation import param


@dataclasses.dataclass(frozen=True)
class HIAConfig(StochasticConfig):
    """The HIA fields shared by the family."""

    hia_terms: int = param(10, "positive_int", "N: the HIA multiplies p ~ U{0..N−1} factors (I − ηH_i)")
    eta: float = param(0.1, "positive", "Neumann step η of the HIA (needs η < 2/L_g; the papers take 1/L_g)")
    hia_mode: str = param("sampled", "str", "sampled: random p (the papers); expected: the mean over p "
                          "(N − 1 HVPs, for tests)", choices=("sampled", "expected"))


class HIASolver:
    """Mixin: v ≈ H⁻¹ b by the HIA (or its mean over p), keeping the length p as a diagnostic."""

    config: HIAConfig
    random_integer: Callable[[int], int]  # an Algorithm's
    #: HVP factors of the last HIA (p; N − 1 in expected mode; 0 before the first step).
    hia_length: int
    tunables = {"hia_terms": Range(1, 100, integer=True)}

    def factor_batches(self, then: int = 0, source: BatchSource | None = None) -> BatchSource:
        """Sets `hia_length` (p drawn now; N − 1 in expected mode) and returns a source of its p minibatches,
        then of the `then` fresh ones the iteration takes next, all drawn together (the same batches as
        drawing each where it is used: p comes first either way); served after what `source` holds ahead."""
        c = self.config
        self.hia_length = c.hia_terms - 1 if c.hia_mode == "expected" else self.random_integer(c.hia_terms)
        source = source or self.batch_source(0)  # type: ignore[attr-defined]  (an Algorithm's)
        source.draw_ahead(self.hia_length + then)
        return source

    def inverse_hvp(self, hvp: Callable[[Array, Batch], Array], b: Array, draw: BatchSource) -> Array:
        """H⁻¹ b by one HIA draw on `hvp(u, batch)`, a fresh minibatch per factor (from `draw`, made by
        `factor_batches`)."""
        c = self.config

        def factor(u: Array) -> Array:
            return hvp(u, draw())

        if c.hia_mode == "expected":
            return hia_expected(factor, b, c.eta, c.hia_terms)
        return hia(factor, b, c.eta, c.hia_terms, length=self.hia_length)[0]

    def joint_inverse_hvp(self, hvp_pair: Callable[[Array, Array, Batch], tuple[Array, Array]], b: Array,
                          b_prev: Array, draw: BatchSource) -> tuple[Array, Array]:
        """HIA at two points with one p and one minibatch per factor shared by both (from `draw`, made by
        `factor_batches`)."""
        c = self.config

        def factor(u: Array, u_prev: Array) -> tuple[Array, Array]:
            return hvp_pair(u, u_prev, draw())

        if c.hia_mode == "expected":
            return joint_hia_expected(factor, b, b_prev, c.eta, c.hia_terms)
        v, v_prev, _ = joint_hia(factor, b, b_prev, c.eta, c.hia_terms, length=self.hia_length)
        return v, v_prev


# ---------------------------------------------------------------------------------------------- BSA

@dataclasses.dataclass(frozen=True)
class BSAConfig(InnerOuterConfig, HIAConfig):
    """BSA hyperparameters (benchmark_bilevel defaults: steps 0.1 decaying as (t+1)^{-1/2}, T = N = 10)."""

    alpha_decay: float = param(0.5, "nonnegative", "e in α_t = α/(t+1)^e, inner step of outer iteration t")
    gamma_decay: float = param(0.5, "nonnegative", "e in γ_t = γ/(t+1)^e (paper: constant ∝ 1/√K)")


@register
class BSA(HIASolver, DoubleLoop):
    """BSA: T SGD steps on y at x_k, an HIA hypergradient at (x_k, y), x_{k+1} = Proj_X(x_k − γ_k ∇̂F).

    Ghadimi & Wang 2018, the BSA method (Sec. 3) with the HIA estimate of H⁻¹ (Alg. 3): each outer
    iteration runs T warm-started SGD steps y ← y − α_k ∇y g(x_k, y; B) on fresh minibatches, draws
    an outer minibatch for (∇x f, ∇y f), the HIA on p fresh minibatches and an independent minibatch for
    the cross term ∇²xy g · v (the paper's ζ^(0)), then steps x. This is the paper's order; the
    benchmark_bilevel solver steps x first and runs the inner loop at the new x: the same sequence
    shifted by half an iteration, except that its first hypergradient is taken at y0 and its inner
    step α_t serves the loop at x_{t+1}. The paper grows T and N with the target accuracy; here both
    are fixed, as in benchmark_bilevel.
    """

    name = "bsa"
    draws_ahead = True
    Config = BSAConfig
    step_sizes = ("alpha", "eta", "gamma")
    state = ("v", "hia_length")
    paper = "Ghadimi & Wang 2018 (arXiv:1802.02246; BSA with the HIA Hessian-inverse estimate)"

    def __init__(self, problem, config: BSAConfig, rng: np.random.Generator) -> None:
        super().__init__(problem, config, rng)
        self.hia_length = 0

    def solve(self, x: Array, grad_y_f: Array, draw: BatchSource) -> Array:
        p, y = self.problem, self.y
        # The HIA's length, then its minibatches and the cross term's (the next one `draw` serves), together.
        return self.inverse_hvp(lambda u, batch: p.hvp_yy_g(x, y, u, batch), grad_y_f,
                                self.factor_batches(then=1, source=draw))

    def diagnostics(self) -> dict[str, float]:
        return {**super().diagnostics(), "hia_length": self.hia_length}


# ------------------------------------------------------------------------------ single-loop methods

class SingleLoopHIA(HIASolver, Algorithm):
    """Shared by TTSA and SUSTAIN: flags and the HIA hypergradient at one or two points."""

    first_order = False
    stochastic = True
    loops = "single"

    def __init__(self, problem, config: HIAConfig, rng: np.random.Generator) -> None:
        super().__init__(problem, config, rng)
        self.hia_length = 0

    def hia_batches(self) -> BatchSource:
        """The HIA's length p, then a source of its minibatches and, unless the y-step one is reused, the
        cross term's (drawn together with them: it is the next one the iteration takes)."""
        return self.factor_batches(then=0 if self.config.reuse_y_batch else 1)

    def cross_batch(self, batch_y: Batch, draw: BatchSource) -> Batch:
        """The minibatch of ∇²xy g · v: the y-step one (benchmark_bilevel), or a fresh one from `draw` (the
        papers)."""
        return batch_y if self.config.reuse_y_batch else draw()

    def hypergradient(self, x: Array, y: Array, batch_f: Batch, batch_y: Batch) -> Array:
        """∇̂F(x, y) = ∇x f − ∇²xy g · HIA(∇y f) on batch_f, p fresh HVP minibatches and a cross batch."""
        p = self.problem
        grad_x_f, grad_y_f = p.grad_f(x, y, batch_f)
        draw = self.hia_batches()
        v = self.inverse_hvp(lambda u, batch: p.hvp_yy_g(x, y, u, batch), grad_y_f, draw)
        return grad_x_f - p.cross_xy_g(x, y, v, self.cross_batch(batch_y, draw))

    def hypergradient_pair(
        self, z: tuple[Array, Array], z_prev: tuple[Array, Array], batch_f: Batch, batch_y: Batch,
    ) -> tuple[Array, Array]:
        """∇̂F at z and z_prev with every minibatch and the HIA length p shared between the two."""
        p = self.problem
        grad_x_f, grad_y_f = p.grad_f(*z, batch_f)
        grad_x_f_prev, grad_y_f_prev = p.grad_f(*z_prev, batch_f)

        def hvp_pair(u: Array, u_prev: Array, b: Batch) -> tuple[Array, Array]:
            return p.hvp_yy_g(*z, u, b), p.hvp_yy_g(*z_prev, u_prev, b)  # one minibatch for both points

        draw = self.hia_batches()
        v, v_prev = self.joint_inverse_hvp(hvp_pair, grad_y_f, grad_y_f_prev, draw)
        batch_c = self.cross_batch(batch_y, draw)
        return grad_x_f - p.cross_xy_g(*z, v, batch_c), grad_x_f_prev - p.cross_xy_g(*z_prev, v_prev, batch_c)


# --------------------------------------------------------------------------------------------- TTSA

@dataclasses.dataclass(frozen=True)
class TTSAConfig(HIAConfig):
    """TTSA hyperparameters (benchmark_bilevel defaults: steps 0.1, decays 2/5 on y and 3/5 on x)."""

    alpha: float = param(0.1, "positive", "initial step on y (the paper's β)")
    alpha_decay: float = param(0.4, "nonnegative", "e in α_t = α/(t+1)^e (the paper's y rate: 2/5)")
    gamma: float = param(0.1, "positive", "initial step on x (the paper's α)")
    gamma_decay: float = param(0.6, "nonnegative", "e in γ_t = γ/(t+1)^e (the paper's x rate: 3/5)")
    reuse_y_batch: bool = param(False, "bool", "cross term on the y-step minibatch (benchmark_bilevel) "
                                "instead of an independent one (the paper)")


@register
class TTSA(SingleLoopHIA):
    """TTSA: y^{k+1} = y^k − α_k ∇y g(x^k, y^k); x^{k+1} = Proj_X(x^k − γ_k ∇̂F(x^k, y^{k+1})).

    Hong, Wai, Wang & Yang 2023 (SIAM J. Optim. 33(1); arXiv:2007.05170), Algorithm 1 with the HIA
    estimate h_f^k of ∇F at (x^k, y^{k+1}) (Sec. 2): the y step is the fast time scale (α_t decays
    slower than γ_t). The cross term uses an independent minibatch by default, as in the paper;
    `reuse_y_batch` takes benchmark_bilevel's choice (the y-step minibatch, evaluated at the new y, which
    correlates the cross term with y^{k+1}). The paper lets N grow like log k; here N is fixed.
    """

    name = "ttsa"
    draws_ahead = True
    Config = TTSAConfig
    step_sizes = ("alpha", "eta", "gamma")
    state = ("hia_length",)
    scalar_state = ("hia_length",)
    paper = "Hong, Wai, Wang & Yang 2023 (SIAM J. Optim.; arXiv:2007.05170, Alg. 1)"

    def steps_now(self) -> tuple[float, float]:
        """(α_t, γ_t)."""
        c, t = self.config, self.iteration
        return decaying(c.alpha, c.alpha_decay, t), decaying(c.gamma, c.gamma_decay, t)

    def step(self) -> None:
        p, x = self.problem, self.x
        alpha, gamma = self.steps_now()
        batch_y, batch_f = self.batches(2)  # drawn together: the HIA draws its length only after both
        self.y = self.y - alpha * p.grad_y_g(x, self.y, batch_y)  # h_g^k at (x^k, y^k)
        h_f = self.hypergradient(x, self.y, batch_f, batch_y)  # h_f^k at (x^k, y^{k+1})
        self.x = p.project_x(x - gamma * h_f)

    def diagnostics(self) -> dict[str, float]:
        alpha, gamma = self.steps_now()
        return {"alpha": alpha, "gamma": gamma, "hia_length": self.hia_length}


# ------------------------------------------------------------------------------------------ SUSTAIN

@dataclasses.dataclass(frozen=True)
class SUSTAINConfig(HIAConfig):
    """SUSTAIN hyperparameters (benchmark_bilevel defaults: steps 0.1 decaying as (t+1)^{-1/3},
    momentum 0.5 decaying as (t+1)^{-2/3})."""

    alpha: float = param(0.1, "positive", "initial step on y (the paper's β = c_β α)")
    alpha_decay: float = param(1 / 3, "nonnegative", "e in α_t = α/(t+1)^e (paper: 1/3)")
    gamma: float = param(0.1, "positive", "initial step on x (the paper's α)")
    gamma_decay: float = param(1 / 3, "nonnegative", "e in γ_t = γ/(t+1)^e (paper: 1/3)")
    momentum: float = param(0.5, "probability", "m in m_t = m/(t+1)^e, weight of the fresh estimate (paper's η)")
    momentum_decay: float = param(2 / 3, "nonnegative", "e in m_t (paper: η_{t+1} = c_η α_t², i.e. 2/3)")
    reuse_y_batch: bool = param(False, "bool", "cross term on the y-direction minibatch (benchmark_bilevel) "
                                "instead of an independent one (the paper's ζ^(0))")


@register
class SUSTAIN(SingleLoopHIA):
    """SUSTAIN: STORM directions h_g ≈ ∇y g and h_f ≈ ∇F, then y −= α_t h_g and x −= γ_t h_f together.

    Khanduri, Zeng, Hong, Wai, Wang & Yang 2021 (NeurIPS; arXiv:2102.07367), Algorithm 1. At iteration
    t ≥ 1, with z_t = (x_t, y_t) and one set of minibatches used at z_t and z_{t−1}:
        h_g^t = ∇y g(z_t; ζ) + (1 − m_t)(h_g^{t−1} − ∇y g(z_{t−1}; ζ)),
        h_f^t = ∇̂F(z_t; ξ̄) + (1 − m_t)(h_f^{t−1} − ∇̂F(z_{t−1}; ξ̄)),
    where ∇̂F is the HIA hypergradient and ξ̄ holds the ∇f minibatch, p, the p HVP minibatches and the
    cross-term minibatch (all shared by the two points); at t = 0 both directions are the plain
    estimates at z_0 (the paper's initialization; benchmark_bilevel starts from zero memories at (0, 0),
    which biases the first directions). Schedules c/(t+1)^e with t from 0: the paper's α_t ∝ (w+t)^{-1/3}
    and η_{t+1} = c_η α_t² without the offset w; m = 1 with no decay gives plain single-loop SGD with HIA.
    """

    name = "sustain"
    draws_ahead = True
    Config = SUSTAINConfig
    step_sizes = ("alpha", "eta", "gamma")
    tunables = {"momentum": Range(0.1, 1.0, log=False)}
    state = ("h_g", "h_f", "x_prev", "y_prev", "hia_length")
    paper = "Khanduri, Zeng, Hong, Wai, Wang & Yang 2021 (NeurIPS; arXiv:2102.07367, Alg. 1)"

    def __init__(self, problem, config: SUSTAINConfig, rng: np.random.Generator) -> None:
        super().__init__(problem, config, rng)
        self.h_g: Array | None = None
        self.h_f: Array | None = None
        self.x_prev: Array | None = None
        self.y_prev: Array | None = None

    def steps_now(self) -> tuple[float, float, float]:
        """(α_t, γ_t, m_t); m_0 = 1 since the first directions are the plain estimates."""
        c, t = self.config, self.iteration
        m = decaying(c.momentum, c.momentum_decay, t) if t > 0 else 1.0
        return decaying(c.alpha, c.alpha_decay, t), decaying(c.gamma, c.gamma_decay, t), m

    def step(self) -> None:
        p, z = self.problem, (self.x, self.y)
        alpha, gamma, m = self.steps_now()
        batch_y, batch_f = self.batches(2)
        grad_y_g = p.grad_y_g(*z, batch_y)
        if self.x_prev is None:
            self.h_g, self.h_f = grad_y_g, self.hypergradient(*z, batch_f, batch_y)
        else:
            z_prev = (self.x_prev, self.y_prev)
            hyper, hyper_prev = self.hypergradient_pair(z, z_prev, batch_f, batch_y)
            self.h_g = grad_y_g + (1 - m) * (self.h_g - p.grad_y_g(*z_prev, batch_y))
            self.h_f = hyper + (1 - m) * (self.h_f - hyper_prev)
        self.x_prev, self.y_prev = z
        self.y = self.y - alpha * self.h_g
        self.x = p.project_x(self.x - gamma * self.h_f)

    def diagnostics(self) -> dict[str, float]:
        alpha, gamma, m = self.steps_now()
        return {"alpha": alpha, "gamma": gamma, "momentum": m, "hia_length": self.hia_length}
