"""F2CSA (Phan & Wang): fully first-order method for stochastic bilevel problems whose lower level has
linear constraints h(x, y) = A x − B y − b ≤ 0 (f2csa_constrained_stochastic_bilevel.txt).

Oracle (Alg. 1) at x with accuracy α: α1 = c1 α⁻², α2 = c2 α⁻⁴, δ = cδ α³.
1. (ỹ*, λ̃) ≈ lower-level primal–dual pair to accuracy δ: either the stochastic primal–dual method of
   Remark 4.1 (`primal_dual`: y −= η_y ∇y(g + λᵀh), λ = max(0, λ + η_λ h)), or the `exact` option
   for deterministic use (accelerated projected gradient run to 1e-12, multipliers by least squares
   on the active rows). Both use only gradients of g. (Remark 4.1 writes the y step with ∇y g alone,
   which ignores the constraints; the Lagrangian gradient is the method's intent.)
2. ρ_i = σ_h(h_i(x, ỹ*)) σ_λ(λ̃_i): σ_h ramps 0 → 1 on [−τδ, 0], σ_λ on [0, ε_λ] (§4.1). The paper
   takes τ = Θ(δ), a ramp of width Θ(δ²), narrower than the accuracy δ of ỹ*: an active row whose ỹ*
   sits inside by more than δ² (any primal–dual or noisy solve) would be switched off and lose its
   α2 penalty. The default τ = 1 makes the ramp as wide as that accuracy; τ = δ is the paper's.
3. L(x, y) = f + α1 (g + λ̃ᵀh − g(x, ỹ*)) + (α2/2) Σ ρ_i h_i², and ỹ ≈ argmin_y L by accelerated
   gradient steps (adaptive restart) to ‖∇y L‖ ≤ α1 δ.
4. Estimate: mean over N_g samples of ∇x L(x, ỹ) = ∇x f(x, ỹ) + α1 (∇x g(x, ỹ) − ∇x g(x, ỹ*))
   + α2 Aᵀ(ρ ⊙ h(x, ỹ)). Here g(x, ỹ*(x)) stands for the lower-level value function, whose gradient
   is ∇x g(x, ỹ*) + Aᵀλ̃ (envelope theorem), so the α1 Aᵀλ̃ from λ̃ᵀh cancels: keeping it alone
   would add an O(α⁻²) error whenever A ≠ 0.
Step sizes of the inner loops are 1/L̂ with L̂ from a few warm-started power iterations on gradient
differences (first-order, counted as gradient calls); the α2 penalty's curvature is known exactly.
All inner loops warm-start from the previous call. With noisy oracles their tolerances are below the
noise floor, so they run to their caps (default 300 each, about Lemma 4.5's Õ(α⁻²) at α = 0.1) and
return the mean of the last half of their iterates (Polyak–Ruppert): the last iterate alone carries
noise that α1 = α⁻² amplifies in step 4 (measured: 15× larger mean-squared error of the estimate).

Outer loop (Alg. 2): s_t ~ U[0, 1]; x_t = x_{t−1} + Δ_t; z_t = x_{t−1} + s_t Δ_t; g_t = oracle(z_t);
Δ_{t+1} = clip_D(Δ_t − η g_t). The output is the average of z over blocks of M = ⌊δ_G/D⌋ steps;
`extra_points()` reports the latest complete block average (the running one before the first
completes). `y` is the lower-level estimate ỹ* from the latest oracle call (taken at z_t).
Defaults: η = 1e-5 is the paper's §6 value; D, δ_G, α, N_g and the inner settings are not reported
there and are set here (D = 0.01, δ_G = 0.1, α = 0.1, N_g = 10).
"""
from __future__ import annotations

import dataclasses
from collections.abc import Callable

import numpy as np

from algorithms.base import Algorithm, StochasticConfig, register
from algorithms.primal_dual import TailAverage, primal_dual
from problems.base import Array
from problems.qp import Polyhedron
from problems.validation import param

Gradient = Callable[[Array], Array]


def sigma_h(z: Array, width: float) -> Array:
    """0 below −width, linear on [−width, 0], 1 from 0 on (paper §4.1, width = τδ)."""
    return np.clip(1.0 + z / width, 0.0, 1.0)


def sigma_lambda(lam: Array, eps: float) -> Array:
    """0 at λ ≤ 0, linear on [0, ε_λ], 1 from ε_λ on (paper §4.1)."""
    return np.clip(lam / eps, 0.0, 1.0)


def clip_norm(v: Array, radius: float) -> Array:
    """clip_D(v) = min(1, D/‖v‖) v."""
    n = float(np.linalg.norm(v))
    return v if n <= radius else v * (radius / n)


def accelerated_descent(grad: Gradient, y: Array, step: float, tol: float, max_iter: int,
                        project: Callable[[Array], Array] | None = None,
                        average_from: int | None = None) -> tuple[Array, int]:
    """FISTA with gradient-based adaptive restart from y; stops when ‖(w − y⁺)/step‖ ≤ tol.

    `project` makes it projected gradient (then the residual is the gradient mapping). With a step
    1/L it needs no strong-convexity constant. When the loop runs to `max_iter` (noisy gradients
    never meet tol), the iterates from `average_from` on are averaged. Returns (y, iterations).
    """
    proj = project if project is not None else (lambda v: v)
    y = proj(y)
    w, t = y.copy(), 1.0
    tail = TailAverage(average_from)
    for k in range(1, max_iter + 1):
        y_new = proj(w - step * grad(w))
        residual = (w - y_new) / step
        if float(np.linalg.norm(residual)) <= tol:
            return y_new, k
        t_new = 0.5 * (1.0 + np.sqrt(1.0 + 4.0 * t * t))
        if residual @ (y_new - y) > 0:  # momentum points uphill: restart (O'Donoghue & Candès)
            w, t_new = y_new.copy(), 1.0
        else:
            w = y_new + ((t - 1.0) / t_new) * (y_new - y)
        y, t = y_new, t_new
        tail.add(k, y)
    return tail.result()[0], max_iter


def power_lipschitz(grad_diff: Callable[[Array], Array], v: Array, iters: int) -> tuple[float, Array]:
    """Largest curvature from power iterations v ← (∇(y + v) − ∇(y))/‖v‖ (first-order). Returns (L̂, v)."""
    est = 0.0
    for _ in range(iters):
        v = v / np.linalg.norm(v)
        w = grad_diff(v)
        est = float(np.linalg.norm(w))
        if est == 0.0:
            return 0.0, v
        v = w
    return est, v


@dataclasses.dataclass(frozen=True)
class F2CSAConfig(StochasticConfig):
    """F2CSA hyperparameters (η from the paper's §6; the rest are not reported there)."""

    batch_size: int | None = param(1, "optional_positive_int",
                                   "samples per gradient call in the inner loops (null: exact oracles)")
    eta: float = param(1e-5, "positive", "η: step on the direction Δ (paper §6: 1e-5)")
    clip: float = param(0.01, "positive", "D: clipping radius of Δ")
    goldstein: float = param(0.1, "positive", "δ_G: Goldstein radius; blocks of M = ⌊δ_G/D⌋ steps")
    alpha: float = param(0.1, "positive", "α: oracle accuracy (α1 = c1 α⁻², α2 = c2 α⁻⁴, δ = cδ α³)")
    c1: float = param(1.0, "positive", "constant in α1 = c1 α⁻²")
    c2: float = param(1.0, "positive", "constant in α2 = c2 α⁻⁴")
    c_delta: float = param(1.0, "positive", "constant in δ = cδ α³")
    tau: float = param(1.0, "positive", "τ: σ_h ramps on [−τδ, 0] (paper: τ = Θ(δ))")
    eps_lambda: float = param(1e-3, "positive", "ε_λ: σ_λ ramps on [0, ε_λ]")
    n_g: int = param(10, "positive_int", "N_g: samples averaged in the final ∇x L estimate")
    lower_solver: str = param("primal_dual", "str", "lower-level pair (ỹ*, λ̃): Remark 4.1 or exact",
                              choices=("primal_dual", "exact"))
    lower_max_iter: int = param(300, "positive_int", "cap on lower-level iterations per oracle call")
    inner_max_iter: int = param(300, "positive_int", "cap on penalty-minimisation iterations per call")
    inner_tol: float = param(1.0, "positive", "stop the ỹ loop at ‖∇y L‖ ≤ inner_tol · α1 δ")
    power_iters: int = param(3, "positive_int", "power iterations per call for the curvature estimates")
    tail_average: bool = param(True, "bool", "with noisy oracles, return the mean of the last half of the "
                                             "inner iterates (Polyak–Ruppert) instead of the last one")

    def validate(self) -> None:
        if self.goldstein < self.clip:
            self.fail("goldstein", f"at least clip = {self.clip} (M = ⌊δ_G/D⌋ ≥ 1)", self.goldstein)


@register
class F2CSA(Algorithm):
    """F2CSA: smoothed-penalty first-order hypergradient with clipped online-to-nonconvex steps."""

    state = ("lam", "L_f", "L_g", "v_f", "v_g", "y_pen", "direction", "block_sum", "block_count", "block_average",
             "stats")
    name = "f2csa"
    Config = F2CSAConfig
    step_sizes = ("eta", "clip")
    first_order = True
    stochastic = True
    loops = "double"
    constrained = True
    paper = "Phan & Wang, F2CSA (f2csa_constrained_stochastic_bilevel.txt)"

    def __init__(self, problem, config: F2CSAConfig, rng: np.random.Generator) -> None:
        super().__init__(problem, config, rng)
        cons = problem.constraints
        self.A, self.B, self.b = cons.A, cons.B, cons.b
        self.A_zero = not np.any(self.A)
        self.poly = Polyhedron(-self.B)  # h ≤ 0  ⇔  (−B) y ≤ b − A x
        self.b_norm_sq = self.poly.max_weighted_eig(np.ones(len(self.b)))
        self.direction = np.zeros_like(self.x)
        self.lam = np.zeros(len(self.b))
        self.y_pen = self.y.copy()
        self.v_f = self.rng.standard_normal(problem.dim_y)
        self.v_g = self.rng.standard_normal(problem.dim_y)
        self.L_f = self.L_g = 0.0
        self.block_size = int(np.floor(config.goldstein / config.clip + 1e-9))
        self.block_sum = np.zeros_like(self.x)
        self.block_count = 0
        self.block_average: Array | None = None
        self.stats: dict[str, float] = {}

    # ---- accuracy schedule ----
    @property
    def alpha1(self) -> float:
        """α1 = c1 α⁻²."""
        return self.config.c1 / self.config.alpha ** 2

    @property
    def alpha2(self) -> float:
        """α2 = c2 α⁻⁴."""
        return self.config.c2 / self.config.alpha ** 4

    @property
    def delta(self) -> float:
        """δ = cδ α³."""
        return self.config.c_delta * self.config.alpha ** 3

    def h(self, x: Array, y: Array) -> Array:
        """Constraint values A x − B y − b."""
        ax = 0.0 if self.A_zero else self.A @ x
        return ax + self.poly.apply(y) - self.b

    def _rhs(self, x: Array) -> Array:
        """h_vec with {y : −B y ≤ h_vec} the lower-level set at x."""
        return self.b if self.A_zero else self.b - self.A @ x

    # ---- Alg. 2 ----
    def step(self) -> None:
        x_prev = self.x
        s = self.rng.uniform()
        self.x = x_prev + self.direction
        z = x_prev + s * self.direction
        g = self.oracle(z)
        self.direction = clip_norm(self.direction - self.config.eta * g, self.config.clip)
        self._accumulate(z)

    def _accumulate(self, z: Array) -> None:
        self.block_sum += z
        self.block_count += 1
        if self.block_count == self.block_size:
            self.block_average = self.block_sum / self.block_size
            self.block_sum = np.zeros_like(self.block_sum)
            self.block_count = 0

    def extra_points(self) -> dict[str, Array]:
        if self.block_average is not None:
            return {"block_average": self.block_average}
        if self.block_count:
            return {"block_average": self.block_sum / self.block_count}
        return {}

    # ---- Alg. 1 ----
    def oracle(self, x: Array) -> Array:
        """The smoothed-penalty hypergradient estimate ∇F̃(x) (Alg. 1)."""
        self._estimate_curvature(x)
        y_low, lam, lower_iters = self._lower(x)
        rho = sigma_h(self.h(x, y_low), self.config.tau * self.delta) * sigma_lambda(lam, self.config.eps_lambda)
        self.y_pen, inner_iters = self._penalty_minimiser(x, y_low, lam, rho)
        self.y, self.lam = y_low, lam
        self.stats = {"lower_iters": lower_iters, "inner_iters": inner_iters, "active": float(np.sum(rho > 0))}
        return self._estimate(x, y_low, self.y_pen, rho)

    def _final_batch(self):
        if self.batch_size_now() is None:
            return None
        return self.problem.sample_batch(self.rng, self.config.n_g)

    def _estimate(self, x: Array, y_low: Array, y_pen: Array, rho: Array) -> Array:
        p, batch = self.problem, self._final_batch()
        gx = p.grad_f(x, y_pen, batch)[0]
        gap = p.grad_g(x, y_pen, batch)[0] - p.grad_g(x, y_low, batch)[0]
        est = gx + self.alpha1 * gap
        if not self.A_zero:
            est = est + self.alpha2 * (self.A.T @ (rho * self.h(x, y_pen)))
        return est

    def _estimate_curvature(self, x: Array) -> None:
        """Refresh L̂_g, L̂_f (largest curvature of g and f in y) by warm-started power iterations."""
        p, y = self.problem, self.y
        iters = self.config.power_iters if self.L_g > 0 else max(self.config.power_iters, 20)
        batch = self.batch()
        base_g, base_f = p.grad_y_g(x, y, batch), p.grad_y_f(x, y, batch)
        self.L_g, self.v_g = power_lipschitz(lambda v: p.grad_y_g(x, y + v, batch) - base_g, self.v_g, iters)
        self.L_f, self.v_f = power_lipschitz(lambda v: p.grad_y_f(x, y + v, batch) - base_f, self.v_f, iters)
        # Power iteration approaches the top eigenvalue from below: keep a margin.
        self.L_g, self.L_f = 1.1 * self.L_g, 1.1 * self.L_f

    def _lower(self, x: Array) -> tuple[Array, Array, int]:
        """(ỹ*, λ̃, iterations) for the lower level at x."""
        if self.config.lower_solver == "exact":
            return self._lower_exact(x)
        return self._lower_primal_dual(x)

    def _lower_primal_dual(self, x: Array) -> tuple[Array, Array, int]:
        eta_y = 1.0 / self.L_g
        # Dual step scaled by ‖B‖² so the coupled iteration stays stable for any constraint scale.
        eta_l = eta_y / max(1.0, self.b_norm_sq)
        cap = self.config.lower_max_iter
        return primal_dual(lambda y: self.problem.grad_y_g(x, y, self.batch()), lambda y: self.h(x, y),
                           self.poly.apply_t, self.y, self.lam, eta_y, eta_l, self.delta, cap, self._average_from(cap))

    def _lower_exact(self, x: Array) -> tuple[Array, Array, int]:
        p, poly, rhs = self.problem, self.poly, self._rhs(x)
        tol = 1e-12 * (1.0 + float(np.linalg.norm(self.y)))
        cap = self.config.lower_max_iter
        y, iters = accelerated_descent(lambda v: p.grad_y_g(x, v, self.batch()), self.y, 1.0 / self.L_g, tol, cap,
                                       project=lambda v: poly.project(v, rhs), average_from=self._average_from(cap))
        lam = poly.multipliers(y, p.grad_y_g(x, y, self.batch()), rhs)
        return y, lam, iters

    def _penalty_minimiser(self, x: Array, y_low: Array, lam: Array, rho: Array) -> tuple[Array, int]:
        p, poly, a1, a2 = self.problem, self.poly, self.alpha1, self.alpha2
        lag_shift = poly.apply_t(lam)  # −Bᵀλ̃

        def grad(y: Array) -> Array:
            batch = self.batch()
            # ∇y of λ̃ᵀh is −Bᵀλ̃; of ½ρ_i h_i² is −ρ_i h_i B_iᵀ, i.e. Gᵀ(ρ ⊙ h) with G = −B.
            return (p.grad_y_f(x, y, batch) + a1 * (p.grad_y_g(x, y, batch) + lag_shift)
                    + a2 * poly.apply_t(rho * self.h(x, y)))

        curvature = self.L_f + a1 * self.L_g + a2 * poly.max_weighted_eig(rho)
        tol = self.config.inner_tol * a1 * self.delta
        cap = self.config.inner_max_iter
        return accelerated_descent(grad, self.y_pen, 1.0 / curvature, tol, cap, average_from=self._average_from(cap))

    def _average_from(self, cap: int) -> int | None:
        """First averaged iteration of a stochastic inner loop (None: keep the last iterate)."""
        if not self.config.tail_average or self.batch_size_now() is None:
            return None
        return cap // 2 + 1

    def batch_size_now(self) -> int | None:
        """The inner-loop batch size, or None when oracles are exact."""
        if self.config.batch_size is None or not getattr(self.problem, "stochastic", False):
            return None
        return self.config.batch_size

    def diagnostics(self) -> dict[str, float]:
        return {"alpha1": self.alpha1, "alpha2": self.alpha2, "delta": self.delta, "L_g": self.L_g,
                "L_f": self.L_f, "direction_norm": float(np.linalg.norm(self.direction)),
                "block_size": float(self.block_size), **self.stats}
