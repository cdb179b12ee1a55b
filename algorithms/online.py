"""Fully first-order online bilevel optimizers: F2OBO (Alg. 1) and AF2OBO (Alg. 2) of Jia & Chen.

Both replace the hypergradient of F_t by that of the penalty value function
L*_λ,t(x) = min_y f_t(x, y) + λ (g_t(x, y) − min_z g_t(x, z)), whose gradient
∇x f_t(x, y_λ) + λ (∇x g_t(x, y_λ) − ∇x g_t(x, z*)) needs gradients only. The multiplier grows as
λ_t = λ_1 t^τ (the paper's λ_{t+1} = (1 + 1/t)^τ λ_t in closed form, free of accumulated rounding).
F2OBO runs K warm-started gradient steps on both inner problems; AF2OBO runs each to a tolerance.

The paper's regret theorem (Lemma 3.3, Theorem 3.4) holds when λ_1 > 2 L_f,1/μ_g, α ≤ 1/L_g,1,
β ≤ 1/(2 λ_T L_g,1) and, for F2OBO, K ≥ ⌈(1+2τ) ln T / (−ln ρ)⌉ with ρ = 1 − μ_g/(4 L_g,1). The constants are
the problem's: `mu_g` and `lipschitz_g` default to 'auto', which measures μ_g and L_g,1 (and L_f,1) as the
extreme curvatures of g and f in y over the region a run visits (`curvature`: central-difference Hessians at the
initial point, the lower-level solutions at X's boundary and on the segments between them; exact on a quadratic).
`theorem_conditions` lists the conditions a configuration breaks on a problem; a study is checked when it is
validated, and a configuration that breaks one runs with a warning.
"""
from __future__ import annotations

import dataclasses
import math
import numbers
from typing import Any, NamedTuple

import numpy as np

from algorithms.base import Algorithm, AlgorithmConfig, register
from algorithms.search_space import Range
from problems.base import Array
from problems.validation import param

AUTO = "auto"


def _is_positive(value: Any, integer: bool = False) -> bool:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        return False
    if integer and not float(value).is_integer():
        return False
    return math.isfinite(value) and value > 0


def check_auto(cfg: AlgorithmConfig, name: str, integer: bool = False) -> None:
    """Field `name` must be 'auto' or a positive number (a positive integer when `integer`)."""
    value = getattr(cfg, name)
    if value == AUTO:
        return
    if not _is_positive(value, integer):
        cfg.fail(name, f"'auto' or a positive {'integer' if integer else 'number'}", value)
    object.__setattr__(cfg, name, int(value) if integer else float(value))


@dataclasses.dataclass(frozen=True)
class PenaltyConfig(AlgorithmConfig):
    """Settings shared by F2OBO and AF2OBO (the paper gives theory conditions, not numbers)."""

    lambda1: Any = param(AUTO, "any", "λ_1, the first multiplier, or 'auto' = max(10, 2.2 L_f,1/μ_g) measured on the "
                                      "problem (theory: > 2 L_f,1/μ_g)")
    tau: float = param(0.5, "nonnegative", "growth exponent τ: λ_t = λ_1 t^τ (0.5 in the paper's §4.3)")
    alpha: Any = param(0.5, "any", "step α of the z-loop on g_t, or 'auto' = 1 / L_g")
    beta: Any = param(AUTO, "any", "step β of the y-loop on f_t + λ_t g_t, or 'auto' = 1 / (2 λ_T L_g)")
    gamma: float = param(0.1, "positive", "outer step γ (projected)")
    lipschitz_g: Any = param(AUTO, "any", "L_g,1 (smoothness of g_t in y), or 'auto' = measured on the problem")

    def validate(self) -> None:
        check_auto(self, "alpha")
        check_auto(self, "beta")
        check_auto(self, "lipschitz_g")
        check_auto(self, "lambda1")


#: Largest dim_y whose curvature 'auto' measures (dim_y + 1 gradients); beyond it 'auto' means 1.
CURVATURE_MAX_DIM = 256


class Curvature(NamedTuple):
    """μ_g and L_g,1 of g_t in y, L_f,1 of f_t in y (measured on the first instance)."""

    mu_g: float
    L_g: float
    L_f: float


def curvature(problem: Any) -> Curvature | None:
    """μ_g, L_g,1 and L_f,1 in y over the region a run visits (None if dim_y is above CURVATURE_MAX_DIM): the
    smallest and largest eigenvalues of ∇²_y g_t and the largest |eigenvalue| of ∇²_y f_t, by central differences,
    at the initial point, at the lower-level solutions y*_t(x) for x at the initial point and on X's boundary
    (`visited`), and along the segments between them — the theorem's constants are bounds over the iterates, not at
    one point. Exact when g_t and f_t are quadratic in y."""
    x, y = problem.initial_point()
    if y.size > CURVATURE_MAX_DIM:
        return None
    # A run's counted view measures afresh (its oracle calls are charged to the run, the same every time); a bare
    # problem (a study's validation) is measured once per fingerprint.
    key = None if hasattr(problem, "counter") else _fingerprint(problem, x, y)
    if key in _MEASURED:
        return _MEASURED[key]
    lo, hi, top = math.inf, -math.inf, 0.0
    for inst, xs, ys in visited(problem):
        eg = np.linalg.eigvalsh(_hessian(inst.grad_y_g, xs, ys))
        ef = np.linalg.eigvalsh(_hessian(inst.grad_y_f, xs, ys))
        lo, hi, top = min(lo, float(eg[0])), max(hi, float(eg[-1])), max(top, float(np.max(np.abs(ef))))
    out = Curvature(lo, hi, top)
    if key is not None:
        if len(_MEASURED) > 4096:
            _MEASURED.clear()
        _MEASURED[key] = out
    return out


#: Curvatures measured, by problem fingerprint: a study's validation builds one problem per point, and a run
#: measures its own again.
_MEASURED: dict[tuple[Any, ...] | None, Curvature] = {}


def _fingerprint(problem: Any, x: Array, y: Array) -> tuple[Any, ...]:
    """The problem's name, parameters and horizon, its initial point and first instance's gradients there (which tell
    seeds apart)."""
    inst = problem.at(1)
    return (type(problem).__name__, getattr(problem, "name", None), repr(getattr(problem, "params", id(problem))),
            problem.horizon, x.tobytes(), y.tobytes(), np.asarray(inst.grad_y_f(x, y)).tobytes(),
            np.asarray(inst.grad_y_g(x, y)).tobytes())


def _hessian(grad: Any, x: Array, y: Array) -> Array:
    """∇_y grad at (x, y) by central differences (symmetrised); the step scales with |y|."""
    n = y.size
    h = 1e-4 * max(1.0, float(np.max(np.abs(y))))
    eye = np.eye(n) * h
    H = np.stack([(grad(x, y + eye[i]) - grad(x, y - eye[i])) / (2 * h) for i in range(n)], axis=1)
    return 0.5 * (H + H.T)


#: Interior points on each segment between two visited y (the midpoint: where the toy's extreme at y = 0 lies).
SEGMENT_POINTS = 1


def visited(problem: Any) -> list[tuple[Any, Array, Array]]:
    """(instance, x, y) where the curvature is measured: instances t = 1, 2 and T; y*_t(x) (gradient descent on g_t)
    at x = the initial point and X's boundary along ±e_1 (X's projection of a far point); at the initial x, the
    initial y, those y* and SEGMENT_POINTS points on each segment between them."""
    x0, y0 = problem.initial_point()
    far = 1e6 * np.eye(x0.size)[0]
    xs = [x0, *(problem.project_x(x0 + s * far) for s in (1.0, -1.0))]
    out = []
    for t in sorted({1, min(2, problem.horizon), problem.horizon}):
        inst = problem.at(t)
        stars = [(x, _inner_solution(inst, x, y0)) for x in xs]
        ys = [y0, *(y for _, y in stars)]
        segs = [ys[i] + w * (ys[j] - ys[i]) for i in range(len(ys)) for j in range(i + 1, len(ys))
                for w in np.linspace(0, 1, SEGMENT_POINTS + 2)[1:-1]]
        out += [(inst, x, y) for x, y in stars] + [(inst, x0, y) for y in [y0, *segs]]
    return out


def _inner_solution(inst: Any, x: Array, y: Array, steps: int = 200) -> Array:
    """y*_t(x) approximately, from oracles only (an algorithm does not see the ground truth): gradient descent on
    g_t(x, ·) with step 1 / (its curvature at y), to a gradient 1e-6 of its first."""
    L = float(np.max(np.abs(np.linalg.eigvalsh(_hessian(inst.grad_y_g, x, y))))) or 1.0
    g0 = None
    for _ in range(steps):
        g = inst.grad_y_g(x, y)
        g0 = float(np.linalg.norm(g)) if g0 is None else g0
        if not np.all(np.isfinite(g)) or np.linalg.norm(g) <= 1e-6 * g0:
            break
        y = y - g / L
    return y


LAMBDA1_MIN = 10.0  # 'auto' λ_1 is never below the former default
#: 'auto' λ_1 is this factor above the theorem's bound 2 L_f,1/μ_g: a larger λ_1 multiplies λ_T = λ_1 T^τ, and with
#: the default γ the outer step then runs away at long horizons (drifting_quadratic, T = 1600: regret 1.5e3 at
#: λ_1 = 16, 9e4 at λ_1 = 30).
LAMBDA1_MARGIN = 1.1


def resolved_constants(cfg: PenaltyConfig, problem: Any) -> tuple[float, float, float]:
    """(μ_g, L_g,1, λ_1) of the configuration on this problem: the given numbers, the measured ones for 'auto'
    (λ_1 = max(10, 1.1 × 2 L_f,1/μ_g): just above the theorem's bound)."""
    mu = getattr(cfg, "mu_g", AUTO if cfg.lambda1 == AUTO else 1.0)  # AF2OBO needs μ_g only for λ_1 = 'auto'
    if AUTO not in (mu, cfg.lipschitz_g, cfg.lambda1):
        return float(mu), float(cfg.lipschitz_g), float(cfg.lambda1)
    c = curvature(problem)
    m = c if c is not None and c.mu_g > 0 else Curvature(1.0, 1.0, 0.0)
    return ((m.mu_g if mu == AUTO else float(mu)), (m.L_g if cfg.lipschitz_g == AUTO else float(cfg.lipschitz_g)),
            (max(LAMBDA1_MIN, LAMBDA1_MARGIN * 2 * m.L_f / m.mu_g) if cfg.lambda1 == AUTO else float(cfg.lambda1)))


def theorem_conditions(cfg: PenaltyConfig, problem: Any) -> list[str]:
    """The conditions of the paper's Lemma 3.3 / Theorem 3.4 that this configuration breaks on `problem` (its true
    μ_g, L_g,1, L_f,1 measured): an empty list when they all hold (γ's bound has constants the paper leaves open)."""
    c = curvature(problem)
    if c is None or c.mu_g <= 0:
        return []
    mu, L, lam1 = resolved_constants(cfg, problem)
    T = problem.horizon
    lam_T = lambda_at(lam1, cfg.tau, T)
    alpha, beta = resolve_steps(cfg, lam_T, L)
    out = []
    if not lam1 > 2 * c.L_f / c.mu_g * (1 + 1e-6):  # strict: equality within the measurement's error breaks it
        out.append(f"lambda1 = {lam1:g} must exceed 2 L_f,1/μ_g = {2 * c.L_f / c.mu_g:.4g}")
    if alpha > 1.0 / c.L_g * (1 + 1e-12):
        out.append(f"alpha = {alpha:g} must be at most 1/L_g,1 = {1 / c.L_g:.4g}")
    if beta > 1.0 / (2.0 * lam_T * c.L_g) * (1 + 1e-12):
        out.append(f"beta = {beta:.4g} must be at most 1/(2 λ_T L_g,1) = {1 / (2 * lam_T * c.L_g):.4g}")
    if mu > c.mu_g * (1 + 1e-9):
        out.append(f"mu_g = {mu:g} is above the problem's μ_g = {c.mu_g:.4g} (K='auto' then runs too few inner steps)")
    if isinstance(cfg, F2OBOConfig) and cfg.K != AUTO:
        need = math.ceil((1 + 2 * cfg.tau) * math.log(max(T, 2)) / -math.log(1 - c.mu_g / (4 * c.L_g)))
        if cfg.K < need:
            out.append(f"K = {cfg.K} is below ⌈(1+2τ) ln T/(−ln ρ)⌉ = {need} for T = {T}")
    return out


def lambda_at(lambda1: float, tau: float, t: int) -> float:
    """λ_t = λ_1 t^τ."""
    return lambda1 * float(t) ** tau


def resolve_steps(cfg: PenaltyConfig, lambda_T: float, lipschitz_g: float) -> tuple[float, float]:
    """(α, β) with 'auto' replaced by the theory values 1/L_g and 1/(2 λ_T L_g)."""
    alpha = 1.0 / lipschitz_g if cfg.alpha == AUTO else cfg.alpha
    beta = 1.0 / (2.0 * lambda_T * lipschitz_g) if cfg.beta == AUTO else cfg.beta
    return alpha, beta


class PenaltyOnline(Algorithm):
    """Common state and outer step of F2OBO and AF2OBO.

    β is not a declared step size: its default is the horizon-dependent theory value ('auto'), which a
    sensitivity study cannot scale; give it a number to fix it.
    """

    state = ("hypergradient",)
    Config = PenaltyConfig
    step_sizes = ("alpha", "gamma")
    tunables: dict[str, Range] = {}  # λ_1 defaults to the theorem's bound measured on the problem ('auto')
    first_order = True
    loops = "double"
    online = True
    paper = "Jia & Chen, Fully First-Order Algorithms for Online Bilevel Optimization"

    def __init__(self, problem: Any, config: PenaltyConfig, rng: np.random.Generator) -> None:
        super().__init__(problem, config, rng)
        self.z = self.y.copy()
        self.mu_g, self.lipschitz_g, self.lambda1 = resolved_constants(config, problem)
        self.alpha, self.beta = resolve_steps(config, lambda_at(self.lambda1, config.tau, problem.horizon),
                                              self.lipschitz_g)
        self.lam = self.lambda1
        self.hypergradient = np.zeros_like(self.x)
        self.inner_total = 0

    def penalty_hypergradient(self, p: Any, x: Array) -> Array:
        """∇̃L*_λ(x) = ∇x f(x, y) + λ (∇x g(x, y) − ∇x g(x, z)) at the current y, z."""
        gxf = p.grad_f(x, self.y)[0]
        return gxf + self.lam * (p.grad_g(x, self.y)[0] - p.grad_g(x, self.z)[0])

    def outer_step(self, p: Any) -> None:
        """Projected step on the penalty hypergradient (line 10–11 of Alg. 1)."""
        self.hypergradient = self.penalty_hypergradient(p, self.x)
        self.x = self.problem.project_x(self.x - self.config.gamma * self.hypergradient)

    @classmethod
    def conditions(cls, config: PenaltyConfig, problem: Any) -> list[str]:
        """The paper's theorem conditions this configuration breaks on `problem` (study validation warns of them)."""
        return theorem_conditions(config, problem)

    def diagnostics(self) -> dict[str, float]:
        return {"lambda": self.lam, "lambda1": self.lambda1, "alpha": self.alpha, "beta": self.beta, "mu_g": self.mu_g,
                "lipschitz_g": self.lipschitz_g, "inner_iterations_total": float(self.inner_total)}


@dataclasses.dataclass(frozen=True)
class F2OBOConfig(PenaltyConfig):
    """F2OBO: K gradient steps on each inner problem per time step."""

    K: Any = param(AUTO, "any", "inner steps per time step, or 'auto' = ⌈(1+2τ) ln T / (−ln ρ)⌉")
    mu_g: Any = param(AUTO, "any", "μ_g used by K='auto' through ρ = 1 − μ_g/(4 L_g), or 'auto' = measured on the "
                                   "problem")

    def validate(self) -> None:
        super().validate()
        check_auto(self, "K", integer=True)
        check_auto(self, "mu_g")
        if AUTO not in (self.mu_g, self.lipschitz_g) and self.mu_g > self.lipschitz_g:
            self.fail("mu_g", f"at most lipschitz_g = {self.lipschitz_g}", self.mu_g)


def auto_inner_steps(tau: float, mu_g: float, lipschitz_g: float, horizon: int) -> int:
    """K = ⌈(1+2τ) ln T / (−ln ρ)⌉ with ρ = 1 − μ_g/(4 L_g) (Lemma 3.3, constant term dropped), ≥ 1."""
    rho = 1.0 - min(mu_g / lipschitz_g, 1.0) / 4.0
    return max(1, math.ceil((1.0 + 2.0 * tau) * math.log(max(horizon, 1)) / -math.log(rho)))


@register
class F2OBO(PenaltyOnline):
    """F2OBO: fully first-order online bilevel optimizer with K warm-started inner steps."""

    state = ("lam", "z", "inner_total")
    name = "f2obo"
    Config = F2OBOConfig

    def __init__(self, problem: Any, config: F2OBOConfig, rng: np.random.Generator) -> None:
        super().__init__(problem, config, rng)
        self.K = (auto_inner_steps(config.tau, self.mu_g, self.lipschitz_g, problem.horizon) if config.K == AUTO
                  else config.K)

    def step(self) -> None:
        t = self.iteration + 1
        p = self.problem.at(t)
        self.lam = lambda_at(self.lambda1, self.config.tau, t)
        x, y, z = self.x, self.y, self.z
        for _ in range(self.K):
            z = z - self.alpha * p.grad_y_g(x, z)
            y = y - self.beta * (p.grad_y_f(x, y) + self.lam * p.grad_y_g(x, y))
        self.y, self.z = y, z
        self.inner_total += self.K
        self.outer_step(p)

    def diagnostics(self) -> dict[str, float]:
        return {**super().diagnostics(), "K": float(self.K)}


@dataclasses.dataclass(frozen=True)
class AF2OBOConfig(PenaltyConfig):
    """AF2OBO: each inner loop runs to its tolerance (capped)."""

    delta_y: Any = param(AUTO, "any", "tolerance on ‖∇y f_t + λ_t ∇y g_t‖, or 'auto' = T^(−1/2)")
    delta_z: Any = param(AUTO, "any", "tolerance on ‖∇y g_t(x_t, z)‖, or 'auto' = T^(−(1+τ)/2)")
    max_inner: int = param(10_000, "positive_int", "cap on each inner loop's iterations per time step")

    def validate(self) -> None:
        super().validate()
        check_auto(self, "delta_y")
        check_auto(self, "delta_z")


@register
class AF2OBO(PenaltyOnline):
    """AF2OBO: F2OBO with inner loops run to tolerances δ_y, δ_z (Alg. 2)."""

    state = ("lam", "z", "inner_total", "y_iters", "z_iters", "y_total", "z_total", "y_cap_hits", "z_cap_hits")
    name = "af2obo"
    Config = AF2OBOConfig

    def __init__(self, problem: Any, config: AF2OBOConfig, rng: np.random.Generator) -> None:
        super().__init__(problem, config, rng)
        T = float(problem.horizon)
        self.delta_y = T ** -0.5 if config.delta_y == AUTO else config.delta_y
        self.delta_z = T ** (-(1.0 + config.tau) / 2.0) if config.delta_z == AUTO else config.delta_z
        self.z_iters = self.y_iters = 0
        self.z_total = self.y_total = 0
        self.z_cap_hits = self.y_cap_hits = 0

    def step(self) -> None:
        t = self.iteration + 1
        p = self.problem.at(t)
        self.lam = lambda_at(self.lambda1, self.config.tau, t)
        x, cap = self.x, self.config.max_inner
        # Line 4–6: z-loop on g_t; the gradient that is tested is the one that is stepped with.
        z, n = self.z, 0
        gz = p.grad_y_g(x, z)
        while np.linalg.norm(gz) > self.delta_z and n < cap:
            z = z - self.alpha * gz
            gz = p.grad_y_g(x, z)
            n += 1
        self.z, self.z_iters = z, n
        self.z_cap_hits += int(np.linalg.norm(gz) > self.delta_z)
        # Line 7–10: y-loop on L_t(x_t, ·, λ_t).
        y, n = self.y, 0
        gy = p.grad_y_f(x, y) + self.lam * p.grad_y_g(x, y)
        while np.linalg.norm(gy) > self.delta_y and n < cap:
            y = y - self.beta * gy
            gy = p.grad_y_f(x, y) + self.lam * p.grad_y_g(x, y)
            n += 1
        self.y, self.y_iters = y, n
        self.y_cap_hits += int(np.linalg.norm(gy) > self.delta_y)
        self.z_total += self.z_iters
        self.y_total += self.y_iters
        self.inner_total = self.z_total + self.y_total
        # Line 11 of the paper's Alg. 2 is a leftover of Alg. 1 and is not executed.
        self.outer_step(p)

    def diagnostics(self) -> dict[str, float]:
        return {**super().diagnostics(), "delta_y": self.delta_y, "delta_z": self.delta_z,
                "z_iterations": float(self.z_iters), "y_iterations": float(self.y_iters),
                "z_iterations_total": float(self.z_total), "y_iterations_total": float(self.y_total),
                "z_cap_hits": float(self.z_cap_hits), "y_cap_hits": float(self.y_cap_hits)}
