"""`benchmark`: a fair comparison — every algorithm gets the same tuning protocol, then profiles and a ranking.

The axis block declares the protocol (sweep.compare.tuning): `trials` quasi-random configurations per
algorithm and tuning study (scipy Sobol or Halton, seeded), `studies` independent repetitions, the `small`
and `large` budgets (trials 1..k of each study; budget 0 is the paper default, the one-shot trial 0), the
instance seeds held out from tuning, and the target `metric` and `taus` of the profiles.

Instances are the study's seeds: a benchmark study leaves `instance_seed` null, so each run's seed builds
its problem instance. `held_out` (a count, split off by the protocol's seed, or a list of the seeds) names
the instances no tuning decision sees; the others are the tuning instances. Every configuration runs on
every seed in one trial — so the chosen configurations are already scored on the held-out instances when
the tuning ends, without a second expansion after it. The price is that non-chosen configurations run on
the held-out instances too (a factor (tuning + held-out) / tuning in runs); the gain is that tuning trials
are ordinary trials of one study: resumable, exactly once, and the choice can be made again at any budget.

A configuration drawn in several (study, trial) slots (the paper default is trial 0 of every study) is one
point listing its slots in `coords["tuning"]`.

`sampler: optuna` tunes by sequential model-based search instead (Optuna's TPE through Ray Tune's
`OptunaSearch`, sweep.compare.adaptive): the study grows in rounds of `batch` trials per tuning study, each
round proposed from the results of the earlier ones (`next_points`). Its rounds are ordinary trials of the
same study (one MLflow parent, resumable, exactly once): the runner runs a round, then asks for the next.
"""
from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import Field, model_validator

import problems
from problems.shared.errors import ParameterError
from sweep.study.checks import (Block, NonNegativeInt, PositiveInt, PositiveNumber, after, before, checked, invalid,
                          is_int, is_number, no_repeats, nonempty_list)
from sweep.kinds.base import Kind, Tables, cartesian, register
from sweep.results.runs import RunData
from sweep.study.errors import shown
from sweep.study.expand import Expansion, is_grid, pairs
from sweep.study.model import Point, Study
from sweep.study.record import StudyRecord

#: Metrics the profiles know a lower bound or a start for (sweep.compare.profiles.EXACT).
METRICS = ("F", "grad_F_sq")
# sweep.compare (pandas) is imported where a benchmark study expands or reports, not with the platform: every
# kind is imported by every `bisweep` command. Its constants are restated here and checked by the tests.
SAMPLERS = ("sobol", "halton")  # sweep.compare.tuning.METHODS
ADAPTIVE = ("optuna",)  # sweep.compare.adaptive.SAMPLERS
TAUS = (1e-1, 1e-3, 1e-5)  # sweep.compare.profiles.TAUS


def _tau(v: Any) -> bool:
    return is_number(v) and 0 < v < 1


Taus = before(nonempty_list("levels τ in (0, 1)"),
              after(list[checked("a level τ in (0, 1)", _tau, float)], no_repeats("a level")))
Sampler = checked(f"one of {', '.join(SAMPLERS + ADAPTIVE)}", lambda v: v in SAMPLERS + ADAPTIVE)
Metric = checked(f"one of {', '.join(METRICS)}", lambda v: v in METRICS)


def _held_out(v: Any) -> Any:
    if is_int(v) and v > 0:
        return v
    if isinstance(v, list) and v and all(is_int(s) and s >= 0 for s in v) and len(set(v)) == len(v):
        return v
    raise invalid(f"must be a positive number of held-out instances or a list of distinct seeds, got {shown(v)}")


HeldOut = before(_held_out, Any)


def _reference(v: Any) -> Any:
    """{problem: F_L} or {problem: {instance seed: F_L}}: the study's own reference values."""
    if v is None:
        return v
    if not isinstance(v, dict) or not all(isinstance(k, str) for k in v):
        raise invalid(f"must map problem names to F_L (a number, or instance seed -> number), got {shown(v)}")
    for k, val in v.items():
        inner = val.values() if isinstance(val, dict) else [val]
        if not all(is_number(x) and x == x and abs(x) != float("inf") for x in inner) or \
                (isinstance(val, dict) and not all(is_int(s) or (isinstance(s, str) and s.isdigit()) for s in val)):
            raise invalid(f"{k}: must be a finite number or a map of instance seeds to finite numbers, got {shown(val)}")
    return v


ReferenceValues = before(_reference, Any)


class Budgets(Block):
    """Trials per study at the small and large budgets (1 ≤ small ≤ large ≤ trials)."""

    small: PositiveInt = None
    large: PositiveInt = None


class Weights(Block):
    """Gradient-equivalents per call of each oracle kind (problems.counting.ORACLE_KINDS); unset kinds weigh 1."""

    f: PositiveNumber = None
    g: PositiveNumber = None
    grad_f: PositiveNumber = None
    grad_g: PositiveNumber = None
    hvp: PositiveNumber = None
    cross: PositiveNumber = None
    hessian: PositiveNumber = None


BUDGET_NAMES = ("one-shot", "small", "large")  # sweep.kinds.benchmark.numbers.BUDGETS
TUNE_ON = ("time_to_target", "final")  # sweep.kinds.benchmark.numbers.TUNE_ON
TuneOn = checked(f"one of {', '.join(TUNE_ON)}", lambda v: v in TUNE_ON)
Budget = checked(f"one of {', '.join(BUDGET_NAMES)}", lambda v: v in BUDGET_NAMES)
Name = checked("a problem name (or all: the pooled family)", lambda v: isinstance(v, str) and bool(v))


class Primary(Block):
    """The comparison the study is about: one problem (or the pooled family `all`), budget and τ."""

    problem: Name = "all"
    budget: Budget = "large"
    tau: checked("a level τ in (0, 1)", _tau, float) = None


class BenchmarkAxis(Block):
    """The tuning protocol, the held-out instances and the targets of a benchmark study."""

    trials: PositiveInt = Field(8, description="tuning trials per algorithm and tuning study")
    studies: PositiveInt = Field(3, description="independent tuning studies S")
    budgets: Budgets = Field(Budgets(), description="{small, large}: trials per study (default trials/4, trials)")
    sampler: Sampler = Field("sobol", description="sobol or halton (drawn before the study), or optuna (TPE, "
                                                  "in rounds from the earlier results)")
    batch: PositiveInt = Field(None, description="optuna: trials per tuning study and round (default trials/4)")
    seed: NonNegativeInt = Field(0, description="seed of the draws and of the held-out split")
    held_out: HeldOut = Field(1, description="number of held-out instance seeds, or the list of them")
    metric: Metric = Field("F", description="what tuning minimises (final value) and profiles target")
    taus: Taus = Field(list(TAUS), description="levels τ of the convergence test")
    weights: Weights = Field(Weights(), description="gradient-equivalents per call of an oracle kind, e.g. "
                                                    "{hvp: 2, cross: 2} (default 1 each)")
    tune_on: TuneOn = Field(None, description="what tuning scores: time_to_target (gradient-equivalents to the "
                                              "primary τ; default) or final (the final metric; optuna's default)")
    reference: ReferenceValues = Field(None, description="F_L per problem ({name: value} or {name: {seed: value}}) "
                                                         "where no exact optimum is known; default: a reference "
                                                         "solve of each instance")
    primary: Primary = Field(Primary(), description="{problem, budget, tau}: the declared primary comparison "
                                                    "(default all, large, the middle τ)")

    @model_validator(mode="after")
    def _consistent(self) -> BenchmarkAxis:
        small = self.budgets.small or max(1, self.trials // 4)
        large = self.budgets.large or self.trials
        if not small <= large <= self.trials:
            raise invalid(f"budgets: need 1 <= small <= large <= trials ({self.trials}), got small {small}, "
                          f"large {large}")
        self.budgets = Budgets(small=small, large=large)
        taus = sorted(self.taus, reverse=True)
        tau = taus[len(taus) // 2] if self.primary.tau is None else self.primary.tau
        if tau not in self.taus:
            raise invalid(f"primary.tau: must be one of the taus {self.taus}, got {tau}")
        self.primary = Primary(problem=self.primary.problem, budget=self.primary.budget, tau=tau)
        if self.sampler in ADAPTIVE and self.tune_on == "time_to_target":
            raise invalid(f"tune_on: {self.sampler} is told final values; use tune_on: final with it")
        self.tune_on = self.tune_on or ("final" if self.sampler in ADAPTIVE else "time_to_target")
        if self.sampler in ADAPTIVE:
            self.batch = self.batch or max(1, self.trials // 4)
            if self.batch > self.trials:
                raise invalid(f"batch: need batch <= trials ({self.trials}), got {self.batch}")
        elif self.batch is not None:
            raise invalid(f"batch: only an adaptive sampler ({', '.join(ADAPTIVE)}) runs in rounds; "
                          f"{self.sampler} draws every trial before the study")
        return self


@register
class Benchmark(Kind):
    """Equal tuning budgets, held-out instances, performance and data profiles, a ranking with paired tests."""

    name = "benchmark"
    doc = ("trials, studies, budgets {small, large}, sampler, seed, held_out, metric, taus, weights, primary, "
           "tune_on: every "
           "algorithm tuned alike on the tuning seeds, scored on held-out seeds; profiles, runtime ECDFs and a "
           "ranking by exact paired tests on instances")
    Axis = BenchmarkAxis

    def resolve_axis(self, ctx: Expansion, axis: BenchmarkAxis) -> dict[str, Any]:
        """The protocol as stored: the held-out split made, the entries checked against it."""
        tune, held = self._split(ctx, axis)
        if ctx.instance_seed is not None:
            ctx.errors.add("instance_seed", "must be null in a benchmark study: its seeds are the problem instances")
        for i, (a, cls) in enumerate(zip(ctx.algorithms, ctx.classes)):
            for k, v in a["params"].items():
                if is_grid(v, None):
                    ctx.errors.add(f"algorithms[{i}].params.{k}", "a benchmark study draws the configurations; give "
                                                                   "one value (it is then fixed, not tuned)")
            if not ctx.errors:
                self._check_space(ctx, i, a)
        self._check_finite_sum(ctx, tune)
        names = sorted({p["name"] for p in ctx.problems})
        if axis.primary.problem not in ("all", *names):
            ctx.errors.add("axis.primary.problem", f"must be all or one of the study's problems ({', '.join(names)}), "
                                                   f"got {axis.primary.problem!r}")
        out = axis.model_dump(exclude_none=True)
        out.update(tune=tune, held_out=held, budgets=axis.budgets.model_dump())
        return out

    def _split(self, ctx: Expansion, axis: BenchmarkAxis) -> tuple[list[int], list[int]]:
        seeds = list(ctx.seeds)
        if isinstance(axis.held_out, list):
            outside = [s for s in axis.held_out if s not in seeds]
            if outside:
                ctx.errors.add("axis.held_out", f"seed {outside[0]} is not one of the study's seeds {seeds}")
                return seeds, []
            held = sorted(axis.held_out)
            tune = [s for s in seeds if s not in held]
        else:
            try:
                from sweep.compare import tuning

                tune, held = tuning.split_seeds(seeds, axis.held_out, axis.seed)
            except ValueError:
                tune, held = seeds, seeds
        if not tune or not held or len(held) >= len(seeds):
            ctx.errors.add("axis.held_out", f"must leave at least one of the study's {len(seeds)} seeds for tuning "
                                            f"and hold out at least one (seeds: {seeds})")
        return tune, held

    def _check_space(self, ctx: Expansion, i: int, a: dict[str, Any]) -> None:
        """The fixed values must make a valid configuration with every drawn one (checked on a first draw)."""
        try:
            from sweep.compare import tuning

            tuning.sample_configurations(a["name"], 1, 0, "sobol", a["params"])
        except ParameterError as exc:
            ctx.errors.add(f"algorithms[{i}].params", f"the fixed values and the search space of '{a['name']}' "
                                                      f"conflict: {str(exc).split(': ', 1)[-1]}")

    def _check_finite_sum(self, ctx: Expansion, seeds: list[int]) -> None:
        """Algorithms that need a finite sum run only on finite-sum problems (found before any run)."""
        for j, p in enumerate(ctx.problems):
            needs = [(i, a) for i, (a, c) in enumerate(zip(ctx.algorithms, ctx.classes))
                     if c.finite_sum and pairs(a, p)]
            if not needs or ctx.errors or any(isinstance(v, list) for v in p["params"].values()):
                continue
            try:
                inst = problems.make(p["name"], seed=seeds[0], **p["params"])
            except ParameterError:
                continue  # the expansion reports the bad parameter at its path
            if getattr(inst, "n_samples", None) is None:
                i, a = needs[0]
                ctx.errors.add(f"algorithms[{i}].problems", f"'{a['name']}' needs a finite-sum problem, but problems"
                                                            f"[{j}] '{p['name']}' is not one; list the problems it "
                                                            "runs on")

    def default_metric(self, online: bool) -> str:
        """F: the benchmark tunes and profiles final values."""
        return "F"

    def algorithm_axis(self, ctx: Expansion, axis: dict[str, Any], i: int,
                       base: dict[str, Any]) -> list[tuple[Any, dict[str, Any] | None, dict[str, Any]]]:
        """Every distinct configuration of the protocol, with the (study, trial) slots it fills."""
        a, cls = ctx.algorithms[i], ctx.classes[i]
        out = []
        from sweep.kinds.benchmark import numbers as bench

        if axis["sampler"] in ADAPTIVE:  # round 0: the paper default and the first `batch` Sobol draws
            axis = {**axis, "trials": axis["batch"], "sampler": "sobol"}
        for params, slots in bench.plan_configurations(a["name"], a["params"], axis).items():
            full = ctx.build_on_axis(cls.Config, {**base, **dict(params)}, "axis", f"algorithms[{i}] '{cls.name}'")
            out.append((None, full, {"tuning": slots}))
        return out

    def expand(self, ctx: Expansion, axis: dict[str, Any]) -> list:
        """The protocol's configurations on every problem they pair with (instances: the study's seeds)."""
        return cartesian(self, ctx, axis)

    def growth(self, study: Study) -> str | None:
        """An adaptive sampler's rounds after the first (the paper default and `batch` Sobol draws)."""
        axis = study.axis
        if axis["sampler"] not in ADAPTIVE:
            return None
        rounds = -(-(axis["trials"] - axis["batch"]) // axis["batch"])
        return (f"round 0 of {rounds + 1}: {axis['sampler']} then proposes {axis['batch']} trials per algorithm, "
                f"problem and tuning study a round, up to {axis['trials']}, from the results of the rounds before")

    def next_points(self, study: Study, summary: Callable[[str], dict[str, Any] | None]) -> list[Point] | None:
        """The next round of an adaptive sampler (sweep.compare.adaptive); None when it has none."""
        if self.growth(study) is None:
            return None
        from sweep.compare import adaptive

        return adaptive.next_round(study.points, study.axis, study.algorithms, study.report.goal, summary)

    def report(self, runs: list[RunData], meta: StudyRecord, directory: Path) -> tuple[Tables, list[Path]]:
        """tuning.csv, ranking.csv, pairwise.csv, the profiles and the convergence of the chosen configurations."""
        from sweep.kinds.benchmark import report as bench_report

        return bench_report.report(runs, meta, directory)

    def convergence_runs(self, runs: list[RunData]) -> list[RunData]:
        """None: `report` draws the convergence of the chosen configurations (it knows the protocol)."""
        return []
