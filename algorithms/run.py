"""The run loop: drive any algorithm on any problem for a budget, yielding metric records.

    import problems, algorithms
    p = problems.make("quadratic", seed=0)
    for record in algorithms.run("soba", p, {"batch_size": None}, seed=0, budget={"iterations": 100}):
        print(record["iteration"], record["grad_F_sq"])

Records come at log-spaced evaluation points. Compute time (`time`, wall-clock seconds of the steps; the
budget's seconds count it) excludes evaluation (reported separately as `eval_time`); `cpu_time` is the
CPU seconds of the stepping thread, which other processes on a busy machine do not inflate (with
multithreaded BLAS it misses the helper threads' work: time studies limit BLAS to one thread). Both clocks
are read once per stretch of steps between evaluation points, not per step (a CPU-clock read is a system
call); under a seconds budget the wall clock, a cheap read, is also read after every step so the run stops
on time. Ground-truth evaluation is never counted as oracle work. A divergence ends the run with status
"diverged" and its last finite record: a non-finite iterate or metric, an overflow or singular solve, or
a watched quantity (F gap or F, ‖∇F‖², ‖y − y*‖², the norms of x and y) grown past `Divergence.factor`
(default 1e6) times its start value (floored at 1); `diverged_metric` in that record says which. A point
where the problem flags g as not strongly convex (metric `gt/not_strongly_convex` = 1) is recorded with
NaN ground truth and the run goes on.
"""
from __future__ import annotations

import copy
import math
import time
from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np

from algorithms.base import Algorithm, AlgorithmConfig, get
# The settings a run is given, imported from here too (algorithms.run.Budget, .Divergence, ...).
from algorithms.run_divergence import DivergenceWatch
from algorithms.run_settings import (DIVERGENCE_NORM, _checked_norm, _NUMERIC_FAILURES,  # noqa: F401
                                     _shared_eval_points, Budget, Divergence, eval_points, generator)
from problems.base import NOT_STRONGLY_CONVEX, Array, BilevelProblem, OnlineProblem, gradient_mapping
from problems.counting import BudgetSpent, counted
from problems.shared.errors import ParameterError


class Run(DivergenceWatch):
    """A resumable run: an algorithm on a problem for a budget; `records()` yields metric dicts."""

    def __init__(
        self,
        algorithm: str,
        problem: BilevelProblem | OnlineProblem,
        config: Mapping[str, Any] | AlgorithmConfig | None = None,
        seed: int = 0,
        budget: Budget | Mapping[str, Any] | None = None,
        n_evals: int = 30,
        divergence: Divergence | Mapping[str, Any] | None = None,
    ) -> None:
        cls = get(algorithm)
        self.online = isinstance(problem, OnlineProblem)
        if cls.online != self.online:
            kind = "an online" if cls.online else "an offline"
            raise ParameterError(f"algorithm '{algorithm}' needs {kind} problem; '{problem.name}' is not one")
        if cls.constrained and getattr(problem, "constraints", None) is None:
            raise ParameterError(f"algorithm '{algorithm}' needs lower-level constraints; '{problem.name}' has none")
        # Only a missing budget gets the default; an explicit empty one is an error, not 100 iterations.
        if budget is None:
            budget = {"iterations": 100}
        self.budget = budget if isinstance(budget, Budget) else Budget.from_dict(budget)
        self.divergence = divergence if isinstance(divergence, Divergence) else Divergence.from_dict(divergence)
        self.problem = problem
        self.view = counted(problem)
        # make_config, with the class already known (no second registry read per run)
        config = config if isinstance(config, cls.Config) else cls.Config.from_dict(config or {})
        self.view.counter.left = self.budget.oracle_calls  # calls made to start count against the budget
        try:
            self.algorithm: Algorithm = cls(self.view, config, generator(seed))
        except BudgetSpent:
            raise ParameterError(f"budget: 'oracle_calls' {self.budget.oracle_calls} is less than the calls "
                                 f"'{algorithm}' makes to start (before its first step)") from None
        horizon = problem.horizon if self.online else None
        if self.online and self.budget.iterations is not None:
            horizon = min(horizon, self.budget.iterations)
        self.horizon = horizon
        self.points = _shared_eval_points(self.budget, n_evals, horizon)
        self.next_point = 0
        self.compute_time = 0.0
        self.cpu_time = 0.0
        self.eval_time = 0.0
        self.status = "running"
        self.last_record: dict[str, Any] | None = None
        self.cumulative_regret = 0.0
        self.last_regret_term = 0.0
        self._f_opt: float | None = None
        self._failed_step: int | None = None
        self.diverged_metric = ""
        #: "batched" when the run's seconds so far are a share of a stack's (algorithms/explicit/call_budget.py).
        self.time_mode: str | None = None
        self.start_values: dict[str, float] = {}  # |value| at the first evaluation, per watched quantity
        if "iterates" in self.divergence.metrics:
            for name, v in (("x", self.algorithm.x), ("y", self.algorithm.y)):
                if v is not None:  # np.linalg.norm's value, its cost (~3 µs) spared where _checked_norm can
                    norm = _checked_norm(v)
                    self.start_values[name] = norm if norm is not None else float(np.linalg.norm(v))
        self._norm_limits = self._limits_of_iterates()

    # ---- stopping ----
    def budget_left(self) -> bool:
        it = self.algorithm.iteration
        b = self.budget
        if self.horizon is not None and it >= self.horizon:
            return False
        if b.iterations is not None and it >= b.iterations:
            return False
        if b.oracle_calls is not None and self.view.counter.total_calls >= b.oracle_calls:
            return False
        return b.seconds is None or self.compute_time < b.seconds

    @property
    def done(self) -> bool:
        """True once the run has finished or diverged."""
        return self.status != "running"

    # ---- the loop ----
    def records(self) -> Iterator[dict[str, Any]]:
        """Step until the budget ends, yielding a record at each evaluation point and at the end."""
        while not self.done:
            rec = self.advance()
            if rec is not None:
                yield rec

    def advance(self) -> dict[str, Any] | None:
        """Run to the next evaluation point (or the end) and return its record."""
        if self.done:
            return None
        rec = self.start()
        if rec is not None:
            return rec
        while self.budget_left():
            rec = self.after_steps(self.step())
            if rec is not None:
                return rec
        return self.finish()

    # ---- the steps of `advance`, public: nothing outside Run touches its private fields ----
    def start(self) -> dict[str, Any] | None:
        """The record at iteration 0, made once (None once made, or when a metric is not finite there)."""
        if self.algorithm.iteration == 0 and self.last_record is None:
            return self.evaluate()
        return None

    def set_f_opt(self, value: float) -> None:
        """F at the known minimiser, computed once for many runs of one problem instance (see `f_opt`)."""
        self._f_opt = value

    def after_steps(self, ok: bool) -> dict[str, Any] | None:
        """The record a stretch of steps ends on (`ok`: no divergence), or None when its budget ended before
        the next evaluation point (then `finish` gives the last record)."""
        if not ok:
            return self._diverged()
        if self.algorithm.iteration < self.target():
            return None
        self.skip_passed_points()
        rec = self.evaluate()
        if rec is None:
            return self._diverged()
        if self.budget_left():
            return rec
        self.status = "finished"
        return {**rec, "status": "finished"}

    def finish(self, metrics: Mapping[str, float] | None = None) -> dict[str, Any]:
        """The final record of a run whose budget is spent (at the point a cut step reached: see `_allow_calls`);
        `metrics`: those of its current point, when computed already (`evaluate`)."""
        self.status = "finished"
        last = self.last_record
        if last is not None and last["iteration"] == self.algorithm.iteration \
                and last.get("calls/total") == self.view.counter.total_calls:
            return {**self.last_record, "status": "finished"}
        rec = self.evaluate(metrics)
        return {**rec, "status": "finished"} if rec is not None else self._diverged()

    def skip_passed_points(self) -> None:
        while self.next_point < len(self.points) and self.points[self.next_point] <= self.algorithm.iteration:
            self.next_point += 1

    def target(self) -> int:
        return self.points[min(self.next_point, len(self.points) - 1)]

    def step(self) -> bool:
        """Step until the next evaluation point or the end of the budget; False on divergence.

        Floating-point errors raise inside steps (a divergence); the error state is set once for the
        whole stretch, as setting it around every step cost several microseconds per step. The clocks are
        read once per stretch too (a CPU-clock read is a system call, ~24 % of a cheap step's cost when read
        twice per step), so compute seconds include the run loop's checks (~2.5 µs per step); under a
        seconds budget the wall clock, a cheap read, is also read after every step to stop on time.
        """
        target = self.target()
        self._allow_calls()
        if self.online:
            return self._online_steps(target)
        alg, timed, base = self.algorithm, self.budget.seconds is not None, self.compute_time
        start, cpu_start = time.perf_counter(), time.thread_time()
        try:
            with np.errstate(over="raise", divide="raise", invalid="raise"):
                while True:
                    try:
                        alg.step()
                    except BudgetSpent:
                        return True  # cut: the budget is spent exactly, and the run ends where the step got
                    except _NUMERIC_FAILURES:
                        # Number the failed step as a completed one would be, like a non-finite iterate after it.
                        self._failed_step = alg.iteration + 1
                        return False
                    alg.iteration += 1
                    if timed:
                        self.compute_time = base + (time.perf_counter() - start)
                    if not self._iterates_ok(alg):
                        return False
                    if alg.iteration >= target or not self.budget_left():
                        return True
        finally:
            self.compute_time = base + (time.perf_counter() - start)
            self.cpu_time += time.thread_time() - cpu_start

    def _allow_calls(self) -> None:
        """Let the counter refuse any call past the oracle-call budget (`problems.counting.BudgetSpent`).

        A step whose calls would pass the budget is cut at the call that would: no run spends more than its
        budget, and the run ends at the point the step's allowed calls reached (its iteration not counted),
        where its last record is made. Set before every stretch, as a batch adds calls to the counter."""
        if self.budget.oracle_calls is not None:
            self.view.counter.left = self.budget.oracle_calls - self.view.counter.total_calls

    def _online_steps(self, target: int) -> bool:
        """`step` online: the regret (evaluation) comes between steps, so each step is timed."""
        outer = np.geterr()
        with np.errstate(over="raise", divide="raise", invalid="raise"):
            while True:
                with np.errstate(**outer):  # the regret is evaluation, under the caller's error state
                    self._accumulate_regret()
                if not self._step():
                    return False
                if self.algorithm.iteration >= target or not self.budget_left():
                    return True

    def _step(self) -> bool:
        """One timed outer iteration (online runs), under the raising error state; False on divergence."""
        alg = self.algorithm
        start, cpu_start = time.perf_counter(), time.thread_time()
        try:
            alg.step()
        except BudgetSpent:
            return True  # cut (see `_allow_calls`): the iteration is not counted
        except _NUMERIC_FAILURES:
            self._failed_step = alg.iteration + 1
            return False
        finally:
            self.compute_time += time.perf_counter() - start
            self.cpu_time += time.thread_time() - cpu_start
        alg.iteration += 1
        return self._iterates_ok(alg)

    def _accumulate_regret(self) -> None:
        start = time.perf_counter()
        t = self.algorithm.iteration + 1
        inst = self.problem.at(t)
        gm = gradient_mapping(self.problem.project_x, self.algorithm.x, inst.grad_F(self.algorithm.x), self.regret_gamma)
        self.last_regret_term = float(gm @ gm)
        self.cumulative_regret += self.last_regret_term
        self.eval_time += time.perf_counter() - start

    @property
    def regret_gamma(self) -> float:
        """γ of the gradient mapping in the regret (the problem's, default 1)."""
        return float(getattr(self.problem, "regret_gamma", 1.0))

    def resume_at(self, iteration: int, counts: tuple[Mapping[str, int], Mapping[str, int]],
                  seconds: Mapping[str, float], last_record: dict[str, Any], start_values: Mapping[str, float]) -> None:
        """Place the run at `iteration` where another engine left it (algorithms/explicit/call_budget.py), its
        algorithm's state set already: its oracle counts (calls, samples by kind), cumulative `time`, `cpu_time`
        and `eval_time`, last record and the divergence watch's start values; no copy is made of them."""
        self.algorithm.iteration = iteration
        self.skip_passed_points()
        self.last_record, self.start_values = last_record, dict(start_values)
        self._norm_limits = self._limits_of_iterates()
        self.compute_time, self.cpu_time, self.eval_time = seconds["time"], seconds["cpu_time"], seconds["eval_time"]
        for into, values in zip((self.view.counter.calls, self.view.counter.samples), counts):
            into.clear()
            into.update(values)

    # ---- metrics ----
    def evaluate(self, metrics: Mapping[str, float] | None = None) -> dict[str, Any] | None:
        """The metric record at the current iterate, or None when a metric is not finite; `metrics`: the point's
        metrics when computed already (many runs' at once: algorithms/explicit/call_budget.py), else computed here."""
        start = time.perf_counter()
        alg = self.algorithm
        try:
            with np.errstate(all="ignore"):
                metrics = self._metrics(alg) if metrics is None else dict(metrics)
        except _NUMERIC_FAILURES:
            metrics = {"F": math.nan}
        self.eval_time += time.perf_counter() - start
        # NaN ground truth where the problem flags g as not strongly convex is a fact about the point,
        # not a divergence (a diverging iterate is caught in _step).
        undefined = metrics.get(NOT_STRONGLY_CONVEX, 0.0) > 0
        if not undefined and not all(math.isfinite(v) for v in metrics.values() if isinstance(v, float)):
            bad = next(k for k, v in metrics.items() if isinstance(v, float) and not math.isfinite(v))
            self.diverged_metric = f"{bad} non-finite"
            return None
        rec: dict[str, Any] = {
            "iteration": alg.iteration,
            "time": self.compute_time,
            "cpu_time": self.cpu_time,
            "eval_time": self.eval_time,
            "status": "running",
            **self.view.counter.snapshot(),
            **metrics,
            **{f"diag/{k}": float(v) for k, v in alg.diagnostics().items()},
        }
        if self.time_mode is not None:
            rec["time_mode"] = self.time_mode
        self.last_record = rec
        return dict(rec) if self._metrics_ok(rec) else None  # the reader's own: a later record repeats this one

    def _metrics(self, alg: Algorithm) -> dict[str, float]:
        if self.online:
            return self._online_metrics(alg)
        p = self.problem
        out = _point_metrics(p, alg.x, alg.y)
        f_opt = self.f_opt()
        if math.isfinite(f_opt):
            out["F_gap"] = out["F"] - f_opt
        for name, point in alg.extra_points().items():
            out[f"{name}/F"] = p.F(point)
            gF = p.grad_F(point)
            out[f"{name}/grad_F_sq"] = float(gF @ gF)
        return out

    def f_opt(self) -> float:
        """F at the problem's known minimiser (NaN when none is known), computed once."""
        if self._f_opt is None:
            x_opt = self.problem.x_opt()
            self._f_opt = self.problem.F(x_opt) if x_opt is not None else math.nan
        return self._f_opt

    def _online_metrics(self, alg: Algorithm) -> dict[str, float]:
        t = max(alg.iteration, 1)
        out = _point_metrics(self.problem.at(t), alg.x, alg.y)
        out["cumulative_regret"] = self.cumulative_regret
        out["regret_term"] = self.last_regret_term
        return out

    # ---- checkpoints ----
    def state_dict(self) -> dict[str, Any]:
        """Everything needed to resume, without the problem (rebuilt from its seed)."""
        keep = ("next_point", "compute_time", "cpu_time", "eval_time", "status", "last_record", "cumulative_regret",
                "last_regret_term", "start_values", "diverged_metric")
        state = {k: copy.deepcopy(getattr(self, k)) for k in keep}
        state["iteration"] = self.algorithm.iteration  # the run loop owns the counter
        state["algorithm"] = self.algorithm.state_dict()
        state["counter"] = (dict(self.view.counter.calls), dict(self.view.counter.samples))
        return state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Resume from `state_dict()` output."""
        for k, v in state.items():
            if k not in ("algorithm", "counter", "iteration"):
                setattr(self, k, copy.deepcopy(v))
        self.algorithm.load_state_dict(state["algorithm"])
        self.algorithm.iteration = int(state["iteration"])
        self._norm_limits = self._limits_of_iterates()
        calls, samples = state["counter"]
        self.view.counter.calls.clear()
        self.view.counter.calls.update(calls)
        self.view.counter.samples.clear()
        self.view.counter.samples.update(samples)


def _point_metrics(p: BilevelProblem, x: Array, y: Array | None) -> dict[str, float]:
    """F, ‖∇F‖², ‖y − y*‖², constraint violation and problem metrics at (x, y)."""
    ys = p.y_star(x)
    gF = p.grad_F(x)
    out = {"F": float(p.f(x, ys)), "grad_F_sq": float(gF @ gF)}
    if y is not None:
        d = y - ys
        out["y_err_sq"] = float(d @ d)
        if p.constraints is not None:
            out["constraint_violation"] = p.constraints.violation(x, y)
    out.update({k: float(v) for k, v in p.metrics(x, y).items()})
    return out


def run(
    algorithm: str,
    problem: BilevelProblem | OnlineProblem,
    config: Mapping[str, Any] | AlgorithmConfig | None = None,
    seed: int = 0,
    budget: Budget | Mapping[str, Any] | None = None,
    n_evals: int = 30,
    divergence: Divergence | Mapping[str, Any] | None = None,
) -> Iterator[dict[str, Any]]:
    """Yield metric records of `algorithm` on `problem` (see module docstring)."""
    return Run(algorithm, problem, config, seed, budget, n_evals, divergence).records()
