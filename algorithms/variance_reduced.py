"""Variance-reduced SOBA for finite sums: SABA (SAGA memory) and SRBA (SARAH recursion).

Both follow the framework of Dagréou, Ablin, Vaiter & Moreau 2022 (Algorithm 1): y, v and x move
together along the directions (eqs. 4–6, our y is the paper's z)

    D_y = ∇y g,   D_v = ∇²yy g · v + ∇y f,   D_x = ∇²xy g · v + ∇x f,

each a mean over g's samples plus a mean over f's, with v ≈ −H⁻¹∇y f (the paper's and SOBA's sign).
Steps are constant: y −= ρ D_y, v −= ρ D_v, x −= γ D_x. SABA replaces every mean by a SAGA estimate
over a per-sample memory, SRBA by a SARAH recursion refreshed with full-batch directions every q
iterations, so both estimators' variance vanishes as the iterates converge and both reach the exact
solution with constant steps (SOBA's plain minibatch estimates need decaying steps). Defaults follow
benchmark_bilevel (step_size 0.1, outer_ratio 1, batch 64; SRBA period_frac 0.5). SRBA's update is
benchmark_bilevel's solver: minibatches, v not projected.
"""
from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from algorithms.base import Algorithm, StochasticConfig, register
from algorithms.search_space import Range
from algorithms.stochastic_hypergradient import Directions, soba_directions
from problems.base import Array
from problems.shared.errors import ParameterError
from problems.validation import param

@dataclasses.dataclass(frozen=True)
class VarianceReducedConfig(StochasticConfig):
    """Constant steps and minibatch size shared by SABA and SRBA (benchmark_bilevel defaults)."""

    batch_size: int | None = param(64, "optional_positive_int",
                                   "samples per level and iteration (null: every sample; benchmark_bilevel 64)")
    rho: float = param(0.1, "positive", "constant step ρ of y and v (benchmark_bilevel step_size)")
    gamma: float = param(0.1, "positive", "constant outer step γ (benchmark_bilevel step_size / outer_ratio)")


class SOBAFramework(Algorithm):
    """Shared by SABA and SRBA: v, the constant steps and the joint update of Algorithm 1."""

    Config = VarianceReducedConfig
    step_sizes = ("rho", "gamma")
    first_order = False
    stochastic = True
    loops = "single"
    finite_sum = True

    def __init__(self, problem: Any, config: VarianceReducedConfig, rng: np.random.Generator) -> None:
        super().__init__(problem, config, rng)
        self.v = np.zeros(problem.dim_y)  # v ≈ −H⁻¹ ∇y f

    def update(self, d_y: Array, d_v: Array, d_x: Array) -> None:
        """y −= ρ D_y, v −= ρ D_v, x −= γ D_x, all directions taken at the current point."""
        c = self.config
        self.y = self.y - c.rho * d_y
        self.v = self.v - c.rho * d_v
        self.x = self.problem.project_x(self.x - c.gamma * d_x)

    def diagnostics(self) -> dict[str, float]:
        return {"rho": self.config.rho, "gamma": self.config.gamma}


# ---------------------------------------------------------------------------------------------- SABA
#: SAGA terms per level, side by side in that level's table (a level's samples index the rows).
LEVEL_TERMS = {"g": ("grad_y_g", "hvp", "cross"), "f": ("grad_y_f", "grad_x_f")}


def saga(table: Array, mean: Array, idx: Array, fresh: Array) -> Array:
    """SAGA over distinct indices idx: mean + avg_k(fresh_k − table[idx_k]); then table[idx] = fresh.

    `table` and its running `mean` are updated in place. With |idx| = 1 this is the paper's
    S[φ, w]_i = φ_i(w_i^{t+1}) − φ_i(w_i^t) + (1/n) Σ φ_{i'}(w_{i'}^t). Columns are independent (a sum
    over rows adds each column on its own), so terms side by side in one table give each term's values.
    """
    diff = fresh - table.take(idx, axis=0)
    total = diff.sum(axis=0)  # one sum for both: numpy's diff.mean(axis=0) is this sum / len(idx)
    estimate = mean + total / len(idx)
    mean += total / len(table)
    table[idx] = fresh
    return estimate


def _by_level(per_term: dict[str, Array]) -> dict[str, Array]:
    """Tables (or means) kept per term, side by side per level in LEVEL_TERMS' order."""
    return {lvl: np.concatenate([np.asarray(per_term[t]) for t in terms], axis=-1)
            for lvl, terms in LEVEL_TERMS.items()}


@dataclasses.dataclass(frozen=True)
class SABAConfig(VarianceReducedConfig):
    """SABA hyperparameters."""

    memory_init: str = param("full", "str", "initial memory: every sample's terms at the starting point "
                             "(paper: memories are values at points w_i^0) or zeros (benchmark_bilevel)",
                             choices=("full", "zero"))
    memory_limit_gb: float = param(1.0, "positive", "refuse problems whose per-sample tables need more memory")


@register
class SABA(SOBAFramework):
    """SABA: SOBA's directions with a SAGA memory of each per-sample term (eqs. 11a–c).

    Its runs stack through its explicit-state definition (`algorithms.explicit.saba`: the memory tables in the
    state, the finite-sum quadratic's per-sample oracles from problems/pure.py, its indices drawn from the same
    generator as here).
    """

    name = "saba"
    Config = SABAConfig
    state = ("v", "memory", "memory_mean")
    paper = "Dagréou, Ablin, Vaiter & Moreau 2022 (§2.2, eqs. 11a–c)"

    def __init__(self, problem: Any, config: SABAConfig, rng: np.random.Generator) -> None:
        super().__init__(problem, config, rng)
        self.sizes = {"g": problem.sample_counts()[0], "f": problem.sample_counts()[1]}
        self._check_sizes(problem, config)
        dx, dy = problem.dim_x, problem.dim_y
        # One table per level, its terms side by side (LEVEL_TERMS): two SAGA updates per step, not five.
        widths = {"g": 2 * dy + dx, "f": dy + dx}
        self.memory = {lvl: np.zeros((self.sizes[lvl], widths[lvl])) for lvl in LEVEL_TERMS}
        self.memory_mean = {lvl: np.zeros(t.shape[1]) for lvl, t in self.memory.items()}

    def _check_sizes(self, problem: Any, config: SABAConfig) -> None:
        n = min(self.sizes.values())
        if config.batch_size is not None and config.batch_size > n:
            raise ParameterError(f"algorithm 'saba': 'batch_size' must be at most {n} (the smaller sample set "
                                 f"of '{problem.name}'; indices are distinct), got {config.batch_size}")
        dx, dy = problem.dim_x, problem.dim_y
        gb = 8 * (self.sizes["g"] * (2 * dy + dx) + self.sizes["f"] * (dy + dx)) / 2**30
        if gb > config.memory_limit_gb:
            raise ParameterError(f"algorithm 'saba': per-sample memory on '{problem.name}' needs {gb:.2f} GiB, "
                                 f"above 'memory_limit_gb' = {config.memory_limit_gb:g}; raise it or use fewer samples")

    def draw(self) -> dict[str, Array]:
        """Distinct indices into g's and f's samples, drawn independently (all of them for the full batch)."""
        b = self.config.batch_size
        if b is None:
            return {lvl: np.arange(n) for lvl, n in self.sizes.items()}
        return {lvl: self.rng.choice(n, size=b, replace=False) for lvl, n in self.sizes.items()}

    def terms(self, idx: dict[str, Array]) -> dict[str, Array]:
        """Each level's per-sample terms at the current point, side by side: one row per drawn index."""
        p, x, y, v = self.problem, self.x, self.y, self.v
        grad_x_f, grad_y_f = p.grad_f_samples(x, y, idx["f"])
        g = (p.grad_y_g_samples(x, y, idx["g"]), p.hvp_yy_g_samples(x, y, v, idx["g"]),
             p.cross_xy_g_samples(x, y, v, idx["g"]))
        return {"g": np.concatenate(g, axis=-1), "f": np.concatenate((grad_y_f, grad_x_f), axis=-1)}

    def _directions_from(self, means: dict[str, Array]) -> Directions:
        """(D_y, D_v, D_x) from each level's estimate of its terms' means (LEVEL_TERMS' columns)."""
        dy, g, f = self.problem.dim_y, means["g"], means["f"]
        return g[..., :dy], g[..., dy:2 * dy] + f[..., :dy], g[..., 2 * dy:] + f[..., dy:]

    def directions(self) -> Directions:
        """SABA's (D_y, D_v, D_x) at the current point; refreshes the memory of the drawn samples."""
        idx = self.draw()
        fresh = self.terms(idx)
        return self._directions_from({lvl: saga(self.memory[lvl], self.memory_mean[lvl], idx[lvl], fresh[lvl])
                                      for lvl in LEVEL_TERMS})

    def fill_memory(self) -> Directions:
        """Every sample's terms at the current point (one full pass); the directions are their means."""
        every = {lvl: np.arange(n) for lvl, n in self.sizes.items()}
        self.memory = self.terms(every)
        self.memory_mean = {lvl: t.mean(axis=-2) for lvl, t in self.memory.items()}
        return self._directions_from(self.memory_mean)

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Also a state saved with one table per term (before the tables per level): joined side by side."""
        if "grad_y_g" in state["memory"]:  # a midway checkpoint of an earlier version
            state = {**state, "memory": _by_level(state["memory"]), "memory_mean": _by_level(state["memory_mean"])}
        super().load_state_dict(state)

    def step(self) -> None:
        full_start = self.iteration == 0 and self.config.memory_init == "full"
        self.update(*(self.fill_memory() if full_start else self.directions()))


# ---------------------------------------------------------------------------------------------- SRBA
@dataclasses.dataclass(frozen=True)
class SRBAConfig(VarianceReducedConfig):
    """SRBA hyperparameters."""

    period: int | None = param(None, "optional_positive_int",
                               "q: full-batch directions every q iterations (null: from period_frac)")
    period_frac: float = param(0.5, "positive", "q = max(1, ⌊(n_g + n_f) · period_frac / batch_size⌋) when "
                               "period is null (benchmark_bilevel)")


@register
class SRBA(SOBAFramework):
    """SRBA: SOBA's directions by SARAH recursion, recomputed on the full batch every q iterations."""

    name = "srba"
    draws_ahead = True
    Config = SRBAConfig
    # benchmark_bilevel's grid for period_frac spans {0.5, 8, 64, 512}.
    tunables = {"period_frac": Range(0.5, 512.0)}
    state = ("v", "d_y", "d_v", "d_x", "x_prev", "y_prev", "v_prev")
    paper = "Dagréou, Moreau, Vaiter & Ablin 2024 (SRBA; benchmark_bilevel's implementation)"

    def __init__(self, problem: Any, config: SRBAConfig, rng: np.random.Generator) -> None:
        super().__init__(problem, config, rng)
        self.period = config.period if config.period is not None else self.default_period(problem, config)
        self.d_y, self.d_v, self.d_x = np.zeros(problem.dim_y), np.zeros(problem.dim_y), np.zeros(problem.dim_x)
        self.x_prev, self.y_prev, self.v_prev = self.x.copy(), self.y.copy(), self.v.copy()

    @staticmethod
    def default_period(problem: Any, config: SRBAConfig) -> int:
        """benchmark_bilevel's q = ⌊(n_g + n_f) · period_frac / batch⌋, at least 1."""
        n_g, n_f = problem.sample_counts()
        batch = config.batch_size if config.batch_size is not None else n_g
        return max(1, int((n_g + n_f) * config.period_frac / batch))

    def directions(self) -> Directions:
        """Full-batch directions when t ≡ 0 (mod q); else D_t = D_{t−1} + D(z_t; B) − D(z_{t−1}; B).

        The correction uses one minibatch of g's samples and one of f's at both points.
        """
        p = self.problem
        if self.iteration % self.period == 0:
            return soba_directions(p, self.x, self.y, self.v, None, None)
        batch_g, batch_f = self.batches(2)
        now = soba_directions(p, self.x, self.y, self.v, batch_g, batch_f)
        before = soba_directions(p, self.x_prev, self.y_prev, self.v_prev, batch_g, batch_f)
        return tuple(d + a - b for d, a, b in zip((self.d_y, self.d_v, self.d_x), now, before))

    def step(self) -> None:
        self.d_y, self.d_v, self.d_x = self.directions()
        self.x_prev, self.y_prev, self.v_prev = self.x, self.y, self.v
        self.update(self.d_y, self.d_v, self.d_x)

    def diagnostics(self) -> dict[str, float]:
        return {**super().diagnostics(), "period": float(self.period)}
