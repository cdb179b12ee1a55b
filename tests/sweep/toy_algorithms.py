"""Small algorithms and an online problem registered for the sweep tests (imported by name in trials).

`toy_aid` is approximate implicit differentiation with fixed inner loops: on the quadratic its iterates
are a linear recursion, so tests can compute them independently with matrix algebra.
"""
from __future__ import annotations

import dataclasses
import json
import os
import time

import numpy as np

from algorithms.base import Algorithm, StochasticConfig, register
from problems.base import BilevelProblem, OnlineProblem
from problems.registry import register as register_problem
from problems.validation import Params, param


def blas_thread_counts() -> list[int]:
    """Threads of every BLAS library loaded in this process (what a trial's runs compute with)."""
    from threadpoolctl import threadpool_info

    return [i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"]


@dataclasses.dataclass(frozen=True)
class ToyAidConfig(StochasticConfig):
    """Step sizes and loop lengths of toy_aid, plus test hooks."""

    lr: float = param(0.5, "positive", "outer step size")
    inner_lr: float = param(0.5, "positive", "inner step size (y and v)")
    inner_steps: int = param(3, "positive_int", "inner steps per outer step")
    fail_at: int | None = param(None, "optional_positive_int", "raise RuntimeError at this iteration (test hook)")
    sleep: float = param(0.0, "nonnegative", "seconds to sleep per step (test hook for slow trials)")
    trace: str | None = param(None, "optional_path", "append a line per construction and step here (test hook)")
    fail_once: str | None = param(None, "optional_path", "with fail_at: fail only if this marker file is absent")

    def validate(self) -> None:
        if self.lr > 100:
            self.fail("lr", "at most 100 (a cross-field bound to test axis errors)", self.lr)


@register
class ToyAid(Algorithm):
    """AID with fixed-length gradient loops for y and v (v ≈ H⁻¹∇y f), then x −= lr (∇x f − J v)."""

    name = "toy_aid"
    Config = ToyAidConfig
    state = ("v",)
    step_sizes = ("lr", "inner_lr")
    stochastic = True
    loops = "double"
    paper = "test helper"

    def __init__(self, problem, config, rng) -> None:
        super().__init__(problem, config, rng)
        self.v = np.zeros(problem.dim_y)
        if config.trace:
            # The untouched generator state identifies the seed: tests map lines back to runs.
            with open(config.trace, "a") as fh:
                fh.write(json.dumps({"event": "init", "lr": config.lr, "pid": os.getpid(),
                                     "rng": int(rng.bit_generator.state["state"]["state"]),
                                     "blas": blas_thread_counts()}) + "\n")

    def step(self) -> None:
        c, p = self.config, self.problem
        if c.trace:
            with open(c.trace, "a") as fh:
                fh.write(json.dumps({"event": "step", "iteration": self.iteration, "pid": os.getpid()}) + "\n")
        if c.fail_at is not None and self.iteration + 1 >= c.fail_at:
            if c.fail_once is None or not os.path.exists(c.fail_once):
                if c.fail_once is not None:
                    open(c.fail_once, "w").close()
                raise RuntimeError(f"toy_aid: failing at iteration {self.iteration + 1} as asked")
        if c.sleep:
            time.sleep(c.sleep)
        for _ in range(c.inner_steps):
            self.y = self.y - c.inner_lr * p.grad_y_g(self.x, self.y, self.batch())
        b = self.batch()
        gy = p.grad_y_f(self.x, self.y, b)
        for _ in range(c.inner_steps):
            self.v = self.v - c.inner_lr * (p.hvp_yy_g(self.x, self.y, self.v, b) - gy)
        gx = p.grad_f(self.x, self.y, b)[0]
        self.x = p.project_x(self.x - c.lr * (gx - p.cross_xy_g(self.x, self.y, self.v, b)))

    def diagnostics(self) -> dict[str, float]:
        return {"lr": self.config.lr}


# ---------------------------------------------------------------- a tiny online problem
@dataclasses.dataclass(frozen=True)
class ToyDriftParams(Params):
    """A 1-D quadratic whose inner target moves by `drift` per step."""

    horizon: int = param(50, "positive_int", "T")
    drift: float = param(0.1, "nonnegative", "speed of the inner target")


class _Slice(BilevelProblem):
    """g = ½(y − x − s)², f = ½(y − 1)² + ½x²: y* = x + s, F = ½(x + s − 1)² + ½x²."""

    dim_x = dim_y = 1

    def __init__(self, s: float) -> None:
        self.s = s

    def f(self, x, y, batch=None):
        return float(0.5 * (y[0] - 1) ** 2 + 0.5 * x[0] ** 2)

    def g(self, x, y, batch=None):
        return float(0.5 * (y[0] - x[0] - self.s) ** 2)

    def grad_f(self, x, y, batch=None):
        return x.copy(), y - 1.0

    def grad_g(self, x, y, batch=None):
        r = y - x - self.s
        return -r, r

    def hvp_yy_g(self, x, y, v, batch=None):
        return v.copy()

    def cross_xy_g(self, x, y, v, batch=None):
        return -v

    def initial_point(self):
        return np.zeros(1), np.zeros(1)

    def y_star(self, x):
        return x + self.s

    def grad_F(self, x):
        return (x + self.s - 1.0) + x


class ToyDrift(OnlineProblem):
    """Instances t = 1..T with target s_t = drift · t."""

    dim_x = dim_y = 1

    def __init__(self, p: ToyDriftParams) -> None:
        self.horizon, self.drift = p.horizon, p.drift

    def at(self, t: int) -> BilevelProblem:
        return _Slice(self.drift * t)

    def initial_point(self):
        return np.zeros(1), np.zeros(1)


@register_problem("toy_drift", ToyDriftParams, online=True)
def build_toy_drift(p: ToyDriftParams, seed: int) -> ToyDrift:
    """A 1-D drifting quadratic (test helper)."""
    return ToyDrift(p)


@dataclasses.dataclass(frozen=True)
class ToyOgdConfig(StochasticConfig):
    """Online gradient steps."""

    lr: float = param(0.3, "positive", "outer step size")


@register
class ToyOgd(Algorithm):
    """Online: one inner step then one hypergradient step on the instance at t."""

    name = "toy_ogd"
    Config = ToyOgdConfig
    step_sizes = ("lr",)
    online = True
    paper = "test helper"

    def step(self) -> None:
        inst = self.problem.at(self.iteration + 1)
        self.y = self.y - inst.grad_y_g(self.x, self.y)
        gx, gy = inst.grad_f(self.x, self.y)
        self.x = self.x - self.config.lr * (gx - inst.cross_xy_g(self.x, self.y, gy))


@dataclasses.dataclass(frozen=True)
class ToyGrowthConfig(StochasticConfig):
    """A constructed blow-up: x ← rate·x + 1 and y ← rate·y + 1 (elementwise) each step."""

    rate: float = param(2.0, "positive", "factor applied to x and y each step")


@register
class ToyGrowth(Algorithm):
    """x ← rate·x + 1, y ← rate·y + 1: from zero, ‖x_t‖ = √d_x (rate^t − 1)/(rate − 1) (closed form)."""

    name = "toy_growth"
    Config = ToyGrowthConfig
    step_sizes = ("rate",)
    paper = "test helper"

    def step(self) -> None:
        self.x = self.config.rate * self.x + 1.0
        self.y = self.config.rate * self.y + 1.0


@dataclasses.dataclass(frozen=True)
class ToyThreadsConfig(StochasticConfig):
    """A step that is never taken: the algorithm only reports the BLAS threads it runs with."""

    lr: float = param(0.1, "positive", "unused step size")


@register
class ToyThreads(Algorithm):
    """Does not move; `diag/blas_threads` is the largest thread count of the BLAS libraries loaded."""

    name = "toy_threads"
    Config = ToyThreadsConfig
    step_sizes = ("lr",)
    paper = "test helper"

    def step(self) -> None:
        pass

    def diagnostics(self) -> dict[str, float]:
        from threadpoolctl import threadpool_info

        return {"blas_threads": float(max(i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"))}
