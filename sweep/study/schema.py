"""The study file's schema (pydantic v2): every field, its check, and one study model per `kind`.

Each registered kind has its model: the common fields plus `kind` (its name) and `axis` (its `Axis`
model). `parse` returns the typed study or the one-line errors of every bad field,
named by YAML path. Algorithm configs and problem parameters stay mappings here: the registries' own
records (problems.validation.Params) check them when the study is expanded (sweep.study.expand). Pydantic would
not make those simpler: they already check every field with the one-line message wanted here, describe
themselves for `bisweep list`, hold cross-field rules, and serve plain-Python use without the sweep.
"""
from __future__ import annotations

import re
import types
import typing
from collections.abc import Mapping
from typing import Annotated, Any, Literal, Union

from pydantic import BaseModel, Field, ValidationError, ValidationInfo, create_model, model_validator

import algorithms
import problems
from problems.registry import entry as problem_entry
from problems.shared.errors import ParameterError, did_you_mean
from sweep.study import plugins
from sweep.study.checks import (ERROR_TYPE, Block, NonNegativeInt, NonNegativeSeconds, OptionalNonNegativeInt,
                          OptionalPositiveInt, PositiveNumber, after, before, checked, invalid, is_int, is_number,
                          nonempty_list)
from sweep.study.errors import shown, yaml_path

GOALS = ("min", "max")
METRIC = "a metric name such as F, grad_F_sq, y_err_sq"
ENTRIES = "{name, params} entries"
#: The longest study name or label: both end up in file names (a file name has at most 255 bytes).
MAX_NAME = 64
#: The most evaluation points of a run (a record each; the built-in studies use at most 40).
MAX_EVALS = 10_000


# ---------------------------------------------------------------- algorithm and problem entries
def _known(kind: str, names: typing.Callable[[], Mapping[str, Any]], get: typing.Callable[[str], Any]) -> Any:
    def check(v: Any) -> Any:
        if not isinstance(v, str):
            raise invalid(f"must be a name, got {v!r}")
        try:
            get(v)
        except ParameterError:
            raise invalid(f"unknown {kind} {v!r};{did_you_mean(v, list(names()))} allowed: {', '.join(names())}") from None
        return v

    return after(Any, check)


def _params(v: Any) -> dict[str, Any]:
    if v is None:
        return {}
    if not isinstance(v, Mapping):
        raise invalid(f"must be a mapping of parameter names to values or grids, got {shown(v)}")
    return dict(v)


ProblemName = _known("problem", problems.available, problem_entry)
AlgorithmName = _known("algorithm", algorithms.available, algorithms.get)
ParamValues = before(_params, dict[str, Any])


class Entry(Block):
    """A problem entry: a registered name and its parameters (a list value is a grid)."""

    name: ProblemName
    params: ParamValues = Field(None, validate_default=True)

    @model_validator(mode="before")
    @classmethod
    def _bare_name(cls, data: Any) -> Any:
        if isinstance(data, str):
            return {"name": data}
        if not isinstance(data, Mapping):
            raise invalid(f"must be a name or a mapping with {', '.join(cls.model_fields)}, got {shown(data)}")
        return data


Label = checked(f"a name of at most {MAX_NAME} letters, digits, '_', '.', '+', '-'",
                lambda v: isinstance(v, str) and len(v) <= MAX_NAME and bool(re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.+-]*", v)))


def _problem_names(v: list[Any]) -> list[Any]:
    if not all(isinstance(n, str) for n in v):
        raise invalid(f"must be a non-empty list of problem names, got {shown(v)}")
    return v


ProblemNames = before(nonempty_list("problem names"), after(list[Any], _problem_names))


def _entry_budget(v: Any) -> Any:
    if v is not None and not isinstance(v, Mapping):
        raise invalid(f"must be a mapping with iterations, oracle_calls and/or seconds, got {shown(v)}")
    return None if v is None else dict(v)


class ProblemEntry(Entry):
    """A problem entry: name, params and optionally its own budget (merged over the study's, key by key)."""

    budget: before(_entry_budget, dict[str, Any] | None) = None


class AlgorithmEntry(Entry):
    """An algorithm entry: name, params, a label (default: the name) and optionally the problems it runs on."""

    name: AlgorithmName
    label: Label = None
    problems: ProblemNames = None

    @model_validator(mode="after")
    def _label(self) -> AlgorithmEntry:
        if self.label is None:
            self.label = self.name
        return self

    def as_dict(self) -> dict[str, Any]:
        """{name, label, params[, problems]} as the expansion reads it."""
        out = {"name": self.name, "label": self.label, "params": self.params}
        if self.problems is not None:
            out["problems"] = list(self.problems)
        return out


def _required(what: str) -> Any:
    def check(v: Any) -> Any:
        if v is None:
            raise invalid(f"is required: {what}")
        return v

    return check


Problems = before(_required(f"a non-empty list of {ENTRIES}"), before(nonempty_list(ENTRIES), list[ProblemEntry]))
Algorithms = before(_required(f"a non-empty list of {ENTRIES}"), before(nonempty_list(ENTRIES), list[AlgorithmEntry]))


# ---------------------------------------------------------------- blocks
Metric = checked(METRIC, lambda v: isinstance(v, str) and bool(v))
Goal = checked("one of min, max", lambda v: v in GOALS)
Flag = checked("true or false", lambda v: isinstance(v, bool))
OptionalNumber = checked("null or a number", lambda v: v is None or is_number(v))
CPUs = checked("a positive number", lambda v: is_number(v) and v > 0, float)
GPUs = checked("a non-negative number (a fraction shares a GPU)", lambda v: is_number(v) and v >= 0, float)


BestBy = checked("one of robust, median", lambda v: v in ("robust", "median"))


class ReportSpec(Block):
    """How reports compare final results (metric defaults depend on the kind and on online problems)."""

    metric: Metric = Field(None, examples=["grad_F_sq"],
                           description="the final value tables compare (default: the kind's)")
    goal: Goal = Field("min", examples=["max"], description="whether lower or higher metric is better")
    converged_metric: Metric = Field(None, examples=["F_gap"], description="the value that decides 'converged' "
                                     "(default: grad_F_sq offline, cumulative_regret online)")
    converged_below: PositiveNumber = Field(1e-3, examples=[1e-6], description="converged: the final value at most "
                                            "this (times the initial value when converged_relative)")
    converged_relative: Flag = Field(True, examples=[False], description="converged_below is relative to the "
                                     "initial value (true) or absolute (false)")
    target: OptionalNumber = Field(None, examples=[1e-3], description="scaling studies: the value whose reaching "
                                   "is timed (oracle calls, iterations, seconds)")
    best_by: BestBy = Field("robust", examples=["median"], description="the best configuration: robust (best median "
                            "among those stable on every seed) or median (best median, whatever its seeds did)")


class Resources(Block):
    """Per trial."""

    cpu: CPUs = Field(1.0, examples=[2], description="CPUs per trial")
    gpu: GPUs = Field(0.0, examples=[1], description="GPUs per trial (Ray sets CUDA_VISIBLE_DEVICES for it)")


def _seeds(v: Any, info: ValidationInfo) -> Any:
    if is_int(v):
        if v <= 0:
            raise invalid(f"must be a positive number of seeds or a list of seeds, got {v!r}")
        most = (info.context or {}).get("max_runs")
        if most is not None and v > most:  # counted before the list is made (10⁹ seeds took 22 GB)
            raise invalid(f"{v:,} seeds make more than the limit of {most:,} runs; give fewer seeds or raise the "
                          "limit with --max-runs")
        return list(range(v))
    if not isinstance(v, list) or not v:
        raise invalid(f"must be a positive number of seeds or a non-empty list of seeds, got {shown(v)}")
    return v


def _distinct_seeds(v: list[int]) -> list[int]:
    if len(set(v)) != len(v):
        raise invalid("must not repeat a seed")
    return v


def _budget(v: Any) -> Any:
    if v is None:
        raise invalid("is required: a mapping with iterations, oracle_calls and/or seconds")
    if not isinstance(v, Mapping):
        raise invalid(f"must be a mapping with iterations, oracle_calls and/or seconds, got {shown(v)}")
    return dict(v)


def _divergence(v: Any) -> Any:
    if v is not None and not isinstance(v, Mapping):
        raise invalid(f"must be a mapping with factor and/or metrics, got {shown(v)}")
    return None if v is None else dict(v)


def _imports(v: Any) -> Any:
    if not isinstance(v, list) or not all(isinstance(m, str) for m in v):
        raise invalid(f"must be a list of module names, got {shown(v)}")
    return v


StudyName = checked(f"a name of at most {MAX_NAME} letters, digits, '_', '.', '-'",
                    lambda v: isinstance(v, str) and len(v) <= MAX_NAME and bool(re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]*", v)))
Text = checked("a string", lambda v: isinstance(v, str))
Seeds = before(_seeds, after(list[NonNegativeInt], _distinct_seeds))
Budget = before(_budget, dict[str, Any])
Divergence = before(_divergence, dict[str, Any] | None)
NEvals = checked(f"an integer from 2 to {MAX_EVALS:,}", lambda v: is_int(v) and 2 <= v <= MAX_EVALS)
Imports = before(_imports, list[str])
ClaimName = checked("a claim name or null", lambda v: v is None or isinstance(v, str))
# YAML 1.1 reads a bare `off` as false: that is `off` too.
MlflowChildren = checked("a positive integer or all", lambda v: v == "all" or (is_int(v) and v >= 1))
BatchedMode = checked("one of auto, off", lambda v: v is False or v in ("auto", "off"),
                      lambda v: "off" if v is False else v)
#: The values of the study field `backend` (sweep/study/backend.py says what each runs).
BACKENDS = ("numpy", "jax")
Backend = checked(f"one of {', '.join(BACKENDS)}", lambda v: v in BACKENDS)


class StudyBase(Block):
    """The fields every study has, in the order `unknown study field` errors list them."""

    name: StudyName = Field(None, validate_default=True, examples=["my_study"],  description="study name (default: the file name)")
    description: Text = Field("", examples=["SOBA and D-TFBO, step sizes x0.5 to x2"],  description="one line shown by `bisweep list studies`")
    kind: str = Field(plugins.DEFAULT_KIND, examples=["stepsize_sensitivity"],  description="the study kind (sweep/kinds/)")
    axis: Any = Field(None, examples=[{"factors": [0.5, 1, 2]}],  description="the kind's axis (see README)")
    problems: Problems = Field(None, validate_default=True, examples=[[{"name": "quadratic", "params": {"dim_x": 20, "dim_y": 20}}]],  description="list of {name, params}; a list value is a grid")
    algorithms: Algorithms = Field(None, validate_default=True, examples=[["dtfbo", {"name": "soba", "params": {"batch_size": [32, 64]}}]],  description="list of {name, label, params, problems}")
    seeds: Seeds = Field(3, validate_default=True, examples=[5, [3, 7, 11]],  description="number of seeds, or a list")
    instance_seed: OptionalNonNegativeInt = Field(None, examples=[0],  description="null: each run's seed builds the problem; an integer fixes it")
    seeds_per_trial: OptionalPositiveInt = Field(None, examples=[4],  description="older name of runs_per_trial (when that is not set)")
    runs_per_trial: OptionalPositiveInt = Field(None, examples=[10],  description="runs one trial runs one after another (null: as many "
                                                                  "as take about 2 s, judged from the runs done so far)")
    budget: Budget = Field(None, validate_default=True, examples=[{"iterations": 1000}, {"oracle_calls": 100000, "seconds": 60}],  description="{iterations, oracle_calls, seconds}")
    divergence: Divergence = Field(None, examples=[{"factor": 1e6, "metrics": ["F"]}],  description="{factor, metrics}: when a run counts as diverged")
    n_evals: NEvals = Field(20, examples=[40],  description="log-spaced evaluation points")
    resources: Resources = Field(Resources(), examples=[{"cpu": 2}],  description="{cpu, gpu}: CPUs and GPUs per trial")
    max_concurrent: OptionalPositiveInt = Field(None, examples=[4],  description="limit on concurrently running trials")
    max_failures: NonNegativeInt = Field(2, examples=[0],  description="retries of a failed trial")
    batched: BatchedMode = Field(
        "auto", examples=["off"], description="auto: runs sharing an algorithm, problem instance and budget step "
        "together as one batch (off where runs are timed: dimension_scaling, a seconds budget, a target); off: one by one")
    backend: Backend = Field(
        "numpy", examples=["jax"], description="numpy: batches step on the stacked NumPy engine; jax: each batch is one "
        "compiled JAX program (the [jax] extra; explicit algorithms on the quadratic, the BOME toys, the real-data "
        "problems and simulated, iteration budgets; runs that draw take JAX's own streams)")
    mlflow_children: MlflowChildren = Field(
        10_000, examples=[1000, "all"], description="most runs that each get an MLflow child run; a larger study gets "
        "children for what a reader browses (each configuration's summary, its best and worst seeds) and a table of "
        "every run on the parent; all: a child per run")
    blas_threads: OptionalPositiveInt = Field(
        None, examples=[1], description="BLAS threads inside each trial (threadpoolctl); null: the libraries' default")
    checkpoint_seconds: NonNegativeSeconds = Field(10.0, examples=[30],  description="seconds between checkpoints of a running trial; 0 (meant): a checkpoint with every report, "
        "for runs whose every report is worth keeping")
    report_seconds: NonNegativeSeconds = Field(1.0, examples=[5],  description="seconds between a trial's reports to Tune")
    imports: Imports = Field([], examples=[["mypackage.algos"]],  description="modules imported on the driver and in every trial")
    report: ReportSpec = Field(ReportSpec(), examples=[{"metric": "F", "goal": "min"}],  description="{metric, goal, converged_metric, converged_below, ...}")
    claim: ClaimName = Field(
        None, examples=["tfbo_table2"], description="the paper claim the report checks (sweep/claims/)")
    scales: Any = Field(None, examples=[{"ci": {"seeds": 1, "budget": {"iterations": 50}}}],  description="named overrides of these fields merged in by --scale")


#: Study fields a scale may override.
OVERRIDABLE = tuple(n for n in StudyBase.model_fields if n not in ("name", "scales"))


def study_models() -> dict[str, type[StudyBase]]:
    """One study model per registered kind: the common fields with that `kind` and its `axis`."""
    out = {}
    for name in plugins.KINDS.names():
        axis_type, axis_default = plugins.KINDS[name].axis_field()
        out[name] = create_model(f"Study_{name}", __base__=StudyBase, kind=(Literal[name], ...),
                                 axis=(axis_type, axis_default))
    return out


def parse(data: Mapping[str, Any], max_runs: int | None = None) -> tuple[StudyBase | None, list[str]]:
    """The typed study, or None and one line per error (`path: message`).

    An unknown kind does not hide the other fields' errors: they are checked against the fields every
    kind has (the axis, whose schema is the kind's, is then left unchecked).
    """
    models = study_models()
    data = {"kind": plugins.DEFAULT_KIND, **data}
    kind = data["kind"]
    context = {"max_runs": max_runs}
    if not isinstance(kind, str) or kind not in models:
        lines = [f"kind: must be one of {', '.join(models)}, got {shown(kind)};{did_you_mean(kind, list(models))}".rstrip(";")]
        try:
            StudyBase.model_validate({**data, "kind": str(kind)}, context=context)
        except ValidationError as exc:
            lines += [_line(err, StudyBase) for err in exc.errors()]
        return None, lines
    try:
        return models[kind].model_validate(data, context=context), []
    except ValidationError as exc:
        return None, [_line(err, models[kind]) for err in exc.errors()]


def _line(err: Any, model: type[BaseModel]) -> str:
    """A pydantic error as the platform's line: the YAML path, then what is allowed and what was given."""
    loc = tuple(err["loc"])
    path = yaml_path(loc)
    if err["type"] == ERROR_TYPE:
        return f"{path}: {err['msg']}"
    if err["type"] == "extra_forbidden":
        allowed = list(_model_at(model, loc[:-1]).model_fields)
        return (f"{path}: unknown {'study ' if len(loc) == 1 else ''}field;{did_you_mean(loc[-1], allowed)} "
                f"allowed: {', '.join(allowed)}")
    return f"{path}: {err['msg'][0].lower()}{err['msg'][1:]}, got {shown(err.get('input'))}"


def _model_at(model: type[BaseModel], loc: tuple[str | int, ...]) -> type[BaseModel]:
    """The model class describing the mapping at `loc` below `model`."""
    tp: Any = model
    for part in loc:
        tp = _unwrap(tp)
        if isinstance(part, int):
            tp = typing.get_args(tp)[0]
        else:
            tp = tp.model_fields[part].annotation
    return _unwrap(tp)


def _unwrap(tp: Any) -> Any:
    """The model or list type inside Annotated[...] and Optional[...]."""
    while True:
        origin = typing.get_origin(tp)
        if origin is Annotated:
            tp = typing.get_args(tp)[0]
        elif origin in (Union, types.UnionType):
            tp = next(a for a in typing.get_args(tp) if a is not type(None))
        else:
            return tp
