"""Study specifications: the YAML schema, its complete validation, and the expansion into trials.

A study is validated in full before anything starts (no Ray, no MLflow): every grid point of every
algorithm config and problem parameter record is built, so a bad value gets the one-line error of the
record, prefixed with the path of the field in the YAML (e.g. ``algorithms[1].params.alpha0``).
"""
from __future__ import annotations

import dataclasses
import hashlib
import importlib
import itertools
import json
import math
import os
import re
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

import algorithms
import problems
from algorithms.base import Algorithm
from algorithms.run import Budget
from problems.registry import entry as problem_entry
from problems.validation import ParameterError, Params

STUDIES_DIR = Path(__file__).parent / "studies"
KINDS = ("comparison", "stepsize_sensitivity", "dimension_scaling", "noise", "drift")
GOALS = ("min", "max")
#: Top-level fields of a study and a short description (for listings and error messages).
FIELDS = {
    "name": "study name (default: the file name)",
    "description": "one line shown by `bisweep list studies`",
    "kind": f"one of {', '.join(KINDS)}",
    "axis": "the study's sweep axis (see README)",
    "problems": "list of {name, params}; a list value is a grid",
    "algorithms": "list of {name, label, params}; a list value is a grid",
    "seeds": "number of seeds, or a list of non-negative integers",
    "instance_seed": "null: each run's seed also builds the problem instance; an integer fixes the instance",
    "seeds_per_trial": "seeds run one after another inside one trial (null: all seeds of a configuration)",
    "budget": "{iterations, oracle_calls, seconds}: the first reached ends a run",
    "n_evals": "number of log-spaced evaluation points per run",
    "resources": "{cpu}: CPUs per trial",
    "max_concurrent": "limit on concurrently running trials (null: as many as fit)",
    "max_failures": "retries of a failed trial",
    "checkpoint_seconds": "seconds between checkpoints of a running trial (always at the end of a seed)",
    "report_seconds": "seconds between a trial's reports to Tune (records in between travel together)",
    "imports": "modules imported on the driver and in every trial (to register more algorithms/problems)",
    "report": "{metric, goal, converged_metric, converged_below, converged_relative, target}",
    "claim": "name of the paper claim the report checks against the measurements (sweep.claims)",
    "scales": "named overrides of these fields (e.g. ci, full) merged in by `bisweep run NAME --scale S`",
}
#: The scale a study runs at when none is named (its fields as written, without overrides).
DEFAULT_SCALE = "default"
REPORT_FIELDS = ("metric", "goal", "converged_metric", "converged_below", "converged_relative", "target")


class _Loader(yaml.SafeLoader):
    """YAML loader that reads 1e-6 as a float (YAML 1.1 needs a dot in the mantissa)."""


_Loader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"^[-+]?(?:\d+\.?\d*|\.\d+)[eE][-+]?\d+$|^[-+]?\d+\.\d*$|^[-+]?\.\d+$|^[-+]?\.(?:inf|Inf|INF)$|^\.(?:nan|NaN|NAN)$"),
    list("-+0123456789."),
)


def fail(path: str, message: str) -> None:
    """Raise the one-line error for the field at `path`."""
    raise ParameterError(f"{path}: {message}")


def _kind_of(value: Any) -> str:
    if isinstance(value, Mapping):
        return "a mapping"
    if isinstance(value, (list, tuple)):
        return "a list"
    return repr(value)


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


# ---------------------------------------------------------------- records of a validated study
@dataclasses.dataclass(frozen=True)
class Point:
    """One configuration: an algorithm config on a problem instance family, run for several seeds."""

    algorithm: str
    label: str
    algorithm_params: dict[str, Any]
    problem: str
    problem_params: dict[str, Any]
    instance_seed: int | None
    budget: dict[str, Any]
    n_evals: int
    coords: dict[str, Any]  # what varies across points: "grid" values, "axis" value, "reference" flag

    @property
    def key(self) -> str:
        """Deterministic identity of the configuration (seed excluded)."""
        ident = [self.algorithm, self.algorithm_params, self.problem, self.problem_params,
                 self.instance_seed, self.budget, self.n_evals]
        digest = hashlib.sha1(json.dumps(ident, sort_keys=True, default=repr).encode()).hexdigest()[:10]
        return f"{self.label}.{self.problem}.{digest}"

    def run_key(self, seed: int) -> str:
        """Identity of one run (configuration, seed): the MLflow child-run key."""
        return f"{self.key}.s{seed}"


@dataclasses.dataclass(frozen=True)
class Trial:
    """One Ray Tune trial: a configuration and the seeds it runs one after another."""

    point: Point
    seeds: tuple[int, ...]

    @property
    def key(self) -> str:
        """Deterministic trial identity."""
        return f"{self.point.key}.s{'-'.join(map(str, self.seeds))}"

    def config(self, checkpoint_seconds: float, imports: Sequence[str], done_registry: str | None = None,
               report_seconds: float = 0.0) -> dict[str, Any]:
        """The plain-dict Tune config of this trial (what `sweep.trainable.run_trial` reads)."""
        p = self.point
        return {
            "key": self.key,
            "algorithm": p.algorithm,
            "algorithm_params": p.algorithm_params,
            "problem": p.problem,
            "problem_params": p.problem_params,
            "instance_seed": p.instance_seed,
            "seeds": list(self.seeds),
            "run_keys": [p.run_key(s) for s in self.seeds],
            "budget": p.budget,
            "n_evals": p.n_evals,
            "checkpoint_seconds": checkpoint_seconds,
            "report_seconds": report_seconds,
            "imports": list(imports),
            "done_registry": done_registry,
        }


@dataclasses.dataclass(frozen=True)
class ReportOptions:
    """How final results are compared in reports."""

    metric: str
    goal: str = "min"
    converged_metric: str = "grad_F_sq"
    converged_below: float = 1e-3
    converged_relative: bool = True
    target: float | None = None


@dataclasses.dataclass(frozen=True)
class Study:
    """A validated study."""

    name: str
    description: str
    kind: str
    axis: dict[str, Any]
    problems: list[dict[str, Any]]
    algorithms: list[dict[str, Any]]
    seeds: list[int]
    instance_seed: int | None
    seeds_per_trial: int
    budget: dict[str, Any]
    n_evals: int
    resources: dict[str, float]
    max_concurrent: int | None
    max_failures: int
    checkpoint_seconds: float
    report_seconds: float
    imports: list[str]
    report: ReportOptions
    points: list[Point]
    online: bool
    source: dict[str, Any]
    claim: str | None = None
    scale: str = DEFAULT_SCALE

    @property
    def trials(self) -> list[Trial]:
        """Every trial: each configuration with its seeds split into chunks of seeds_per_trial."""
        out = []
        k = self.seeds_per_trial
        for p in self.points:
            for i in range(0, len(self.seeds), k):
                out.append(Trial(p, tuple(self.seeds[i:i + k])))
        return out

    @property
    def run_keys(self) -> list[str]:
        """Every (configuration, seed) run key."""
        return [p.run_key(s) for p in self.points for s in self.seeds]

    @property
    def spec_hash(self) -> str:
        """Identity of the set of trials (changes when anything that defines a run changes)."""
        keys = sorted(t.key for t in self.trials)
        return hashlib.sha1("\n".join(keys).encode()).hexdigest()[:12]

    @property
    def axis_name(self) -> str | None:
        """Name of the sweep axis shown in tables and plots."""
        if self.kind == "comparison":
            return None
        if self.kind == "stepsize_sensitivity":
            return "step_size_factor" if "factors" in self.axis else "initial_step_size"
        return "+".join(self.axis["param"])


# ---------------------------------------------------------------- loading
def builtin_studies() -> dict[str, Path]:
    """Built-in study names and their files."""
    return {p.stem: p for p in sorted(STUDIES_DIR.glob("*.yaml"))}


def resolve(study: str) -> Path:
    """The YAML file of a built-in name or a path."""
    path = Path(study)
    if path.suffix in (".yaml", ".yml") or path.exists():
        if not path.is_file():
            fail("study", f"file {str(path)!r} does not exist")
        return path
    known = builtin_studies()
    if study not in known:
        fail("study", f"unknown study {study!r}; built-in: {', '.join(known)} (or give a .yaml file)")
    return known[study]


def load(study: str | Path | Mapping[str, Any], scale: str | None = None) -> Study:
    """Load and validate a study from a built-in name, a YAML path or a mapping, at a named scale."""
    if isinstance(study, Mapping):
        return validate(study, scale=scale)
    path = resolve(str(study))
    try:
        data = yaml.load(path.read_text(), Loader=_Loader)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" line {mark.line + 1}" if mark is not None else ""
        fail("study", f"{path} is not valid YAML{where}: {getattr(exc, 'problem', exc)}")
    if not isinstance(data, Mapping):
        fail("study", f"{path} must hold a mapping of study fields, got {_kind_of(data)}")
    return validate(data, default_name=path.stem, scale=scale)


# ---------------------------------------------------------------- scales
def scale_names(data: Mapping[str, Any]) -> list[str]:
    """The scales a study mapping offers: the default, then its named overrides."""
    scales = data.get("scales") or {}
    return [DEFAULT_SCALE] + [str(k) for k in scales] if isinstance(scales, Mapping) else [DEFAULT_SCALE]


def apply_scale(data: Mapping[str, Any], scale: str | None) -> dict[str, Any]:
    """The study fields at `scale`: the overrides of `scales[scale]` merged in (mappings recursively)."""
    scales = data.get("scales", {}) or {}
    if not isinstance(scales, Mapping):
        fail("scales", f"must be a mapping of scale names to field overrides, got {_kind_of(scales)}")
    for name, over in scales.items():
        if not isinstance(name, str) or name == DEFAULT_SCALE or not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_-]*", name):
            fail("scales", f"scale names are letters, digits, '_', '-' (not {DEFAULT_SCALE!r}), got {name!r}")
        if not isinstance(over, Mapping):
            fail(f"scales.{name}", f"must be a mapping of study fields to override, got {_kind_of(over)}")
        bad = sorted(set(map(str, over)) - (set(FIELDS) - {"name", "scales"}))
        if bad:
            fail(f"scales.{name}.{bad[0]}", "cannot be overridden by a scale; allowed: every study field but name, scales")
    base = {k: v for k, v in data.items() if k != "scales"}
    if scale is None or scale == DEFAULT_SCALE:
        return base
    if scale not in scales:
        fail("scale", f"unknown scale {scale!r}; this study has: {', '.join(scale_names(data))}")
    return _merge(base, scales[scale])


def _merge(base: Mapping[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    """`base` with `over` merged in: mappings key by key, anything else (lists too) replaced."""
    out = dict(base)
    for k, v in over.items():
        out[k] = _merge(out[k], v) if isinstance(v, Mapping) and isinstance(out.get(k), Mapping) else v
    return out


# ---------------------------------------------------------------- validation
def validate(data: Mapping[str, Any], default_name: str | None = None, scale: str | None = None) -> Study:
    """Validate a study mapping completely (at `scale`, default: as written) and expand it into configurations."""
    if not isinstance(data, Mapping):
        fail("study", f"must be a mapping of study fields, got {_kind_of(data)}")
    unknown = sorted(set(map(str, data)) - set(FIELDS))
    if unknown:
        fail(unknown[0], f"unknown study field; allowed: {', '.join(FIELDS)}")
    data = apply_scale(data, scale)
    _imports(data.get("imports", []))
    name = data.get("name", default_name)
    if not isinstance(name, str) or not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]*", name):
        fail("name", f"must be a name of letters, digits, '_', '.', '-', got {name!r}")
    description = data.get("description", "")
    if not isinstance(description, str):
        fail("description", f"must be a string, got {_kind_of(description)}")
    kind = data.get("kind", "comparison")
    if kind not in KINDS:
        fail("kind", f"must be one of {', '.join(KINDS)}, got {kind!r}")
    probs = _entries(data, "problems")
    algs = _entries(data, "algorithms")
    classes = [_algorithm_class(a, i) for i, a in enumerate(algs)]
    for i, p in enumerate(probs):
        _problem_entry(p, i)
    _check_pairing(probs, algs)
    seeds = _seeds(data.get("seeds", 3))
    instance_seed = data.get("instance_seed")
    if instance_seed is not None and not (_is_int(instance_seed) and instance_seed >= 0):
        fail("instance_seed", f"must be null or a non-negative integer, got {instance_seed!r}")
    spt = data.get("seeds_per_trial")
    if spt is None:
        spt = len(seeds)
    elif not (_is_int(spt) and spt > 0):
        fail("seeds_per_trial", f"must be null or a positive integer, got {spt!r}")
    budget = _budget(data.get("budget"))
    n_evals = data.get("n_evals", 20)
    if not (_is_int(n_evals) and n_evals >= 2):
        fail("n_evals", f"must be an integer >= 2, got {n_evals!r}")
    online = _check_online(probs, algs, classes, kind)
    axis = _axis(kind, data.get("axis"), probs, algs, classes)
    points = _points(kind, axis, probs, algs, classes, budget, n_evals, instance_seed)
    _check_constraints(probs, algs, classes, seeds, instance_seed)
    claim = _claim(data.get("claim"), kind)
    return Study(
        name=name, description=description, kind=kind, axis=axis, problems=probs, algorithms=algs,
        seeds=seeds, instance_seed=instance_seed, seeds_per_trial=min(spt, len(seeds)), budget=budget,
        n_evals=n_evals, resources=_resources(data.get("resources", {})),
        max_concurrent=_optional_positive_int(data, "max_concurrent", None),
        max_failures=_nonnegative_int(data, "max_failures", 2),
        checkpoint_seconds=_nonnegative_number(data, "checkpoint_seconds", 10.0),
        report_seconds=_nonnegative_number(data, "report_seconds", 1.0),
        imports=list(data.get("imports", [])), report=_report(data.get("report", {}), kind, online),
        points=points, online=online, source=_plain({**data, "name": name}), claim=claim,
        scale=scale or DEFAULT_SCALE,
    )


def _claim(name: Any, kind: str) -> str | None:
    """The paper claim the report checks (None: none); it must exist and fit the study's kind."""
    if name is None:
        return None
    from sweep import claims  # imported here: claims builds on reports, which build on this module

    if not isinstance(name, str) or name not in claims.CLAIMS:
        fail("claim", f"must be one of {', '.join(claims.CLAIMS)} or null, got {name!r}")
    need = claims.CLAIMS[name].kind
    if need != kind:
        fail("claim", f"{name!r} checks a {need} study, but this study's kind is {kind}")
    return name


def _plain(value: Any) -> Any:
    """A JSON/YAML-safe copy (tuples to lists, keys to strings)."""
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def _imports(mods: Any) -> None:
    if not isinstance(mods, list) or not all(isinstance(m, str) for m in mods):
        fail("imports", f"must be a list of module names, got {_kind_of(mods)}")
    if mods and os.getcwd() not in sys.path:
        sys.path.append(os.getcwd())  # study plugins live in the user's project, as for `python -m`
    for i, m in enumerate(mods):
        try:
            importlib.import_module(m)
        except ImportError as exc:
            fail(f"imports[{i}]", f"cannot import module {m!r}: {exc}")


def _entries(data: Mapping[str, Any], field: str) -> list[dict[str, Any]]:
    items = data.get(field)
    if items is None:
        fail(field, "is required: a non-empty list of {name, params} entries")
    if not isinstance(items, list) or not items:
        fail(field, f"must be a non-empty list of {{name, params}} entries, got {_kind_of(items)}")
    allowed = ("name", "params") + (("label", "problems") if field == "algorithms" else ())
    out = []
    for i, item in enumerate(items):
        path = f"{field}[{i}]"
        if isinstance(item, str):
            item = {"name": item}
        if not isinstance(item, Mapping):
            fail(path, f"must be a name or a mapping with {', '.join(allowed)}, got {_kind_of(item)}")
        extra = sorted(set(map(str, item)) - set(allowed))
        if extra:
            fail(f"{path}.{extra[0]}", f"unknown field; allowed: {', '.join(allowed)}")
        if not isinstance(item.get("name"), str):
            fail(f"{path}.name", f"must be a name, got {item.get('name')!r}")
        params = item.get("params", {}) or {}
        if not isinstance(params, Mapping):
            fail(f"{path}.params", f"must be a mapping of parameter names to values or grids, got {_kind_of(params)}")
        label = item.get("label", item["name"])
        if not isinstance(label, str) or not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.+-]*", label):
            fail(f"{path}.label", f"must be a name of letters, digits, '_', '.', '+', '-', got {label!r}")
        entry = {"name": item["name"], "label": label, "params": dict(params)}
        if "problems" in item:
            only = item["problems"]
            if not isinstance(only, list) or not only or not all(isinstance(n, str) for n in only):
                fail(f"{path}.problems", f"must be a non-empty list of problem names, got {_kind_of(only)}")
            entry["problems"] = list(only)
        out.append(entry)
    if field == "algorithms":
        for i, e in enumerate(out):
            # One label may name entries on disjoint problems (e.g. a toy that needs other step sizes).
            if any(o["label"] == e["label"] and _share_problems(o, e) for o in out[:i]):
                fail(f"algorithms[{i}].label", f"label {e['label']!r} is used twice; give each entry a distinct "
                                               "label (or list disjoint problems for them)")
    return out


def _share_problems(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    """Whether two algorithm entries can run on a common problem."""
    return "problems" not in a or "problems" not in b or bool(set(a["problems"]) & set(b["problems"]))


def _pairs(a: Mapping[str, Any], p: Mapping[str, Any]) -> bool:
    """Whether algorithm entry `a` runs on problem entry `p` (every problem unless it names some)."""
    return "problems" not in a or p["name"] in a["problems"]


def _check_pairing(probs: list[dict], algs: list[dict]) -> None:
    names = {p["name"] for p in probs}
    for i, a in enumerate(algs):
        for k, n in enumerate(a.get("problems", ())):
            if n not in names:
                fail(f"algorithms[{i}].problems[{k}]", f"{n!r} is not among the study's problems "
                                                       f"({', '.join(sorted(names))})")


def _algorithm_class(a: dict[str, Any], i: int) -> type[Algorithm]:
    try:
        return algorithms.get(a["name"])
    except ParameterError:
        fail(f"algorithms[{i}].name", f"unknown algorithm {a['name']!r}; allowed: {', '.join(algorithms.available())}")
    raise AssertionError  # unreachable


def _problem_entry(p: dict[str, Any], i: int) -> None:
    try:
        problem_entry(p["name"])
    except ParameterError:
        fail(f"problems[{i}].name", f"unknown problem {p['name']!r}; allowed: {', '.join(problems.available())}")


def _seeds(seeds: Any) -> list[int]:
    if _is_int(seeds):
        if seeds <= 0:
            fail("seeds", f"must be a positive number of seeds or a list of seeds, got {seeds!r}")
        return list(range(seeds))
    if not isinstance(seeds, list) or not seeds:
        fail("seeds", f"must be a positive number of seeds or a non-empty list of seeds, got {_kind_of(seeds)}")
    for i, s in enumerate(seeds):
        if not (_is_int(s) and s >= 0):
            fail(f"seeds[{i}]", f"must be a non-negative integer, got {s!r}")
    if len(set(seeds)) != len(seeds):
        fail("seeds", "must not repeat a seed")
    return list(seeds)


def _split_record_error(exc: ParameterError) -> tuple[str | None, str]:
    """(field, message) of a parameter record's one-line error."""
    msg = str(exc)
    m = re.match(r"^.*?: '([^']+)' (must be .*)$", msg)
    if m:
        return m.group(1), m.group(2)
    m = re.match(r"^.*?: unknown parameter '([^']+)'; (allowed: .*)$", msg)
    if m:
        return m.group(1), f"unknown parameter; {m.group(2)}"
    return None, msg


def _record_error(path: str, exc: ParameterError, grid_values: Mapping[str, Any] | None = None,
                  grid_point: Mapping[str, Any] | None = None) -> None:
    """Re-raise a record's error with the YAML path of the field it names (and its grid entry)."""
    field, message = _split_record_error(exc)
    if field is None:
        fail(path, message)
    where = f"{path}.{field}"
    if grid_values and field in grid_values and grid_point and field in grid_point:
        where += f"[{grid_values[field].index(grid_point[field])}]"
    elif grid_point:
        message += f" (with {', '.join(f'{k}={v!r}' for k, v in grid_point.items())})"
    fail(where, message)


def _budget(budget: Any) -> dict[str, Any]:
    if budget is None:
        fail("budget", "is required: a mapping with iterations, oracle_calls and/or seconds")
    if not isinstance(budget, Mapping):
        fail("budget", f"must be a mapping with iterations, oracle_calls and/or seconds, got {_kind_of(budget)}")
    try:
        return Budget.from_dict(budget).as_dict()
    except ParameterError as exc:
        _record_error("budget", exc)
    raise AssertionError


def _resources(res: Any) -> dict[str, float]:
    if not isinstance(res, Mapping):
        fail("resources", f"must be a mapping like {{cpu: 1}}, got {_kind_of(res)}")
    extra = sorted(set(res) - {"cpu"})
    if extra:
        fail(f"resources.{extra[0]}", "unknown resource; allowed: cpu")
    cpu = res.get("cpu", 1)
    if isinstance(cpu, bool) or not isinstance(cpu, (int, float)) or not cpu > 0:
        fail("resources.cpu", f"must be a positive number, got {cpu!r}")
    return {"cpu": float(cpu)}


def _optional_positive_int(data: Mapping[str, Any], field: str, default: int | None) -> int | None:
    v = data.get(field, default)
    if v is not None and not (_is_int(v) and v > 0):
        fail(field, f"must be null or a positive integer, got {v!r}")
    return v


def _nonnegative_int(data: Mapping[str, Any], field: str, default: int) -> int:
    v = data.get(field, default)
    if not (_is_int(v) and v >= 0):
        fail(field, f"must be a non-negative integer, got {v!r}")
    return v


def _nonnegative_number(data: Mapping[str, Any], field: str, default: float) -> float:
    v = data.get(field, default)
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not (v >= 0 and math.isfinite(v)):
        fail(field, f"must be a non-negative number, got {v!r}")
    return float(v)


def _report(rep: Any, kind: str, online: bool) -> ReportOptions:
    if not isinstance(rep, Mapping):
        fail("report", f"must be a mapping with {', '.join(REPORT_FIELDS)}, got {_kind_of(rep)}")
    extra = sorted(set(map(str, rep)) - set(REPORT_FIELDS))
    if extra:
        fail(f"report.{extra[0]}", f"unknown field; allowed: {', '.join(REPORT_FIELDS)}")
    default_metric = "cumulative_regret" if online else ("F" if kind == "stepsize_sensitivity" else "grad_F_sq")
    metric = rep.get("metric", default_metric)
    for f in ("metric", "converged_metric"):
        if f in rep and not (isinstance(rep[f], str) and rep[f]):
            fail(f"report.{f}", f"must be a metric name such as F, grad_F_sq, y_err_sq, got {rep[f]!r}")
    goal = rep.get("goal", "min")
    if goal not in GOALS:
        fail("report.goal", f"must be one of min, max, got {goal!r}")
    below = rep.get("converged_below", 1e-3)
    if isinstance(below, bool) or not isinstance(below, (int, float)) or not below > 0:
        fail("report.converged_below", f"must be a positive number, got {below!r}")
    relative = rep.get("converged_relative", True)
    if not isinstance(relative, bool):
        fail("report.converged_relative", f"must be true or false, got {relative!r}")
    target = rep.get("target")
    if target is not None and (isinstance(target, bool) or not isinstance(target, (int, float))):
        fail("report.target", f"must be null or a number, got {target!r}")
    conv = rep.get("converged_metric", "cumulative_regret" if online else "grad_F_sq")
    return ReportOptions(metric, goal, conv, float(below), relative, None if target is None else float(target))


# ---------------------------------------------------------------- compatibility
def _check_online(probs: list[dict], algs: list[dict], classes: list[type[Algorithm]], kind: str) -> bool:
    flags = [problem_entry(p["name"]).online for p in probs]
    for i, (a, cls) in enumerate(zip(algs, classes)):
        for j, (p, on) in enumerate(zip(probs, flags)):
            if cls.online != on and _pairs(a, p):
                need = "an online" if cls.online else "an offline"
                have = "online" if on else "offline"
                fail(f"algorithms[{i}].name",
                     f"'{a['name']}' needs {need} problem but problems[{j}] '{p['name']}' is {have}; "
                     "a study pairs every algorithm with every problem (unless the algorithm lists its problems)")
    if kind == "drift":
        for j, (p, on) in enumerate(zip(probs, flags)):
            if not on:
                fail(f"problems[{j}].name", f"a drift study needs online problems; '{p['name']}' is offline")
    if len(set(flags)) > 1:  # reports treat a study as online or offline as a whole
        j = flags.index(not flags[0])
        fail(f"problems[{j}].name", f"'{probs[j]['name']}' is {'online' if flags[j] else 'offline'} but problems[0] "
                                    f"is not; a study's problems are all online or all offline")
    return bool(flags[0])


def _check_constraints(probs: list[dict], algs: list[dict], classes: list[type[Algorithm]],
                       seeds: list[int], instance_seed: int | None) -> None:
    needs = [(i, a) for i, (a, c) in enumerate(zip(algs, classes)) if c.constrained]
    if not needs:
        return
    for j, p in enumerate(probs):
        paired = [(i, a) for i, a in needs if _pairs(a, p)]
        if not paired:
            continue
        checks = _checks(problem_entry(p["name"]).params)
        params = {k: (v[0] if _is_grid(k, v, checks) else v) for k, v in p["params"].items()}
        try:
            inst = problems.make(p["name"], seed=instance_seed if instance_seed is not None else seeds[0], **params)
        except ParameterError as exc:
            _record_error(f"problems[{j}].params", exc)
        if getattr(inst, "constraints", None) is None and not hasattr(inst, "at"):
            i, a = paired[0]
            fail(f"algorithms[{i}].name",
                 f"'{a['name']}' needs lower-level constraints but problems[{j}] '{p['name']}' has none")


# ---------------------------------------------------------------- grids and points
def _is_grid(field: str, value: Any, checks: Mapping[str, str]) -> bool:
    """A list is a grid, except a flat list of numbers for a vector-valued field (then it is one value)."""
    if not isinstance(value, list):
        return False
    if checks.get(field) == "real_vector":
        return bool(value) and all(isinstance(v, list) for v in value)
    return True


def _checks(record: type[Params]) -> dict[str, str]:
    return {f.name: f.metadata.get("check", "any") for f in dataclasses.fields(record)}


def _expand(params: Mapping[str, Any], record: type[Params], path: str) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """Every grid point as (params, gridded values); unknown names and empty grids are errors."""
    names = [f.name for f in dataclasses.fields(record)]
    checks = _checks(record)
    fixed, grids = {}, {}
    for k, v in params.items():
        if k not in names:
            fail(f"{path}.{k}", f"unknown parameter; allowed: {', '.join(names)}")
        if _is_grid(k, v, checks):
            if not v:
                fail(f"{path}.{k}", "empty grid; give at least one value")
            grids[k] = v
        else:
            fixed[k] = v
    out = []
    for combo in itertools.product(*grids.values()):
        g = dict(zip(grids, combo))
        out.append(({**fixed, **g}, g))
    return out


def _build(record: type[Params], params: dict[str, Any], path: str, grid: Mapping[str, Any],
           raw: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Build the record (validating every field) and return its full field values."""
    try:
        return record.from_dict(params).as_dict()
    except ParameterError as exc:
        _record_error(path, exc, raw, grid)
    raise AssertionError


def _build_on_axis(record: type[Params], params: dict[str, Any], path: str, what: str) -> dict[str, Any]:
    """Build a record for an axis value; an error names the axis entry and the record it broke."""
    try:
        return record.from_dict(params).as_dict()
    except ParameterError as exc:
        fail(path, f"makes {what} invalid: {str(exc).split(': ', 1)[-1]}")
    raise AssertionError


def _axis(kind: str, axis: Any, probs: list[dict], algs: list[dict], classes: list[type[Algorithm]]) -> dict[str, Any]:
    if kind == "comparison":
        if axis not in (None, {}):
            fail("axis", "a comparison study has no axis; remove it or choose another kind")
        return {}
    if not isinstance(axis, Mapping):
        fail("axis", f"a {kind} study needs an axis mapping, got {_kind_of(axis)}")
    if kind == "stepsize_sensitivity":
        return _stepsize_axis(axis, algs, classes)
    return _param_axis(kind, axis, probs, algs, classes)


def _positive_list(axis: Mapping[str, Any], field: str, numbers_only: bool = True) -> list[Any]:
    values = axis.get(field)
    if not isinstance(values, list) or not values:
        fail(f"axis.{field}", f"must be a non-empty list of values, got {_kind_of(values)}")
    if numbers_only:
        for i, v in enumerate(values):
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not (v > 0 and math.isfinite(v)):
                fail(f"axis.{field}[{i}]", f"must be a positive number, got {v!r}")
    if len(set(map(repr, values))) != len(values):
        fail(f"axis.{field}", "must not repeat a value")
    return list(values)


def _stepsize_axis(axis: Mapping[str, Any], algs: list[dict], classes: list[type[Algorithm]]) -> dict[str, Any]:
    extra = sorted(set(map(str, axis)) - {"factors", "values"})
    if extra:
        fail(f"axis.{extra[0]}", "unknown field; a stepsize_sensitivity axis has factors or values")
    if ("factors" in axis) == ("values" in axis):
        fail("axis", "give exactly one of factors (scale the initial step sizes) or values (set them)")
    field = "factors" if "factors" in axis else "values"
    values = _positive_list(axis, field)
    for i, (a, cls) in enumerate(zip(algs, classes)):
        if not cls.step_sizes:
            fail(f"algorithms[{i}].name", f"'{a['name']}' declares no initial step sizes to sweep")
        for s in cls.step_sizes:
            if isinstance(a["params"].get(s), list):
                fail(f"algorithms[{i}].params.{s}", "is an initial step size swept by the axis; give one value")
    return {field: values}


def _param_axis(kind: str, axis: Mapping[str, Any], probs: list[dict], algs: list[dict],
                classes: list[type[Algorithm]]) -> dict[str, Any]:
    extra = sorted(set(map(str, axis)) - {"param", "values"})
    if extra:
        fail(f"axis.{extra[0]}", f"unknown field; a {kind} axis has param and values")
    param = axis.get("param")
    names = [param] if isinstance(param, str) else param
    if not isinstance(names, list) or not names or not all(isinstance(n, str) for n in names):
        fail("axis.param", f"must be a parameter name (or a list of names set together), got {param!r}")
    values = _positive_list(axis, "values", numbers_only=kind == "dimension_scaling")
    if kind == "dimension_scaling" and len(values) < 2:
        fail("axis.values", "needs at least 2 dimensions to fit a scaling exponent")
    prob_fields = [{f.name for f in dataclasses.fields(problem_entry(p["name"]).params)} for p in probs]
    alg_fields = [{f.name for f in dataclasses.fields(c.Config)} for c in classes]
    on_problem = all(all(n in f for n in names) for f in prob_fields)
    on_algorithm = kind == "noise" and not on_problem and all(all(n in f for n in names) for f in alg_fields)
    if not on_problem and not on_algorithm:
        where = "every problem or every algorithm" if kind == "noise" else "every problem"
        missing = next((f"problems[{j}] '{probs[j]['name']}'" for j, f in enumerate(prob_fields)
                        if not all(n in f for n in names)), "")
        fail("axis.param", f"{param!r} must be a parameter of {where}; {missing} has no such parameter")
    entries = probs if on_problem else algs
    for j, e in enumerate(entries):
        for n in names:
            if isinstance(e["params"].get(n), list):
                what = "problems" if on_problem else "algorithms"
                fail(f"{what}[{j}].params.{n}", "is swept by the axis; give one value or none")
    return {"param": names, "values": values, "on": "problem" if on_problem else "algorithm"}


def _points(kind: str, axis: dict[str, Any], probs: list[dict], algs: list[dict], classes: list[type[Algorithm]],
            budget: dict[str, Any], n_evals: int, instance_seed: int | None) -> list[Point]:
    prob_points = []
    for j, p in enumerate(probs):
        record = problem_entry(p["name"]).params
        for params, grid in _expand(p["params"], record, f"problems[{j}].params"):
            for k, (av, extra) in enumerate(_problem_axis(axis)):
                full = (_build_on_axis(record, {**params, **extra}, f"axis.values[{k}]", f"problems[{j}] '{p['name']}'")
                        if extra else _build(record, params, f"problems[{j}].params", grid, p["params"]))
                prob_points.append((p["name"], full, grid, av))
    alg_points = []
    for i, (a, cls) in enumerate(zip(algs, classes)):
        for params, grid in _expand(a["params"], cls.Config, f"algorithms[{i}].params"):
            base = _build(cls.Config, params, f"algorithms[{i}].params", grid, a["params"])
            for av, full, ref in _algorithm_axis(kind, axis, cls, base, i, grid):
                alg_points.append((a, full, grid, av, ref))
    points = []
    for a, a_full, a_grid, a_av, ref in alg_points:
        for p_name, p_full, p_grid, p_av in prob_points:
            if not _pairs(a, {"name": p_name}):
                continue
            coords = {"grid": {**{f"problem.{k}": v for k, v in p_grid.items()}, **a_grid}}
            av = a_av if a_av is not None else p_av
            if av is not None:
                coords["axis"] = av
            if kind == "stepsize_sensitivity":
                coords["reference"] = ref
                coords["in_grid"] = av is not None
            points.append(Point(a["name"], a["label"], a_full, p_name, p_full, instance_seed, budget, n_evals, coords))
    keys = [p.key for p in points]
    if len(set(keys)) != len(keys):
        dup = next(p for p in points if keys.count(p.key) > 1)
        fail("problems", f"two entries give the same configuration ({dup.label} on {dup.problem} with "
                         f"{dup.problem_params}); remove the duplicate")
    return points


def _problem_axis(axis: dict[str, Any]) -> list[tuple[Any, dict[str, Any]]]:
    if axis.get("on") != "problem":
        return [(None, {})]
    return [(v, {n: v for n in axis["param"]}) for v in axis["values"]]


def _algorithm_axis(kind: str, axis: dict[str, Any], cls: type[Algorithm], base: dict[str, Any], i: int,
                    grid: Mapping[str, Any]) -> list[tuple[Any, dict[str, Any], bool]]:
    """(axis value, full config, is-reference) for each point of the algorithm axis."""
    if kind == "stepsize_sensitivity":
        field = "factors" if "factors" in axis else "values"
        out = []
        if field == "factors":
            for s in cls.step_sizes:
                if isinstance(base[s], bool) or not isinstance(base[s], (int, float)):
                    fail(f"algorithms[{i}].params.{s}", f"is {base[s]!r}, not a number, so axis factors cannot "
                                                         "scale it; give a number here or use axis values")
        for k, v in enumerate(axis[field]):
            changes = {s: (base[s] * v if field == "factors" else v) for s in cls.step_sizes}
            full = _build_on_axis(cls.Config, {**base, **changes}, f"axis.{field}[{k}]", f"algorithms[{i}] '{cls.name}'")
            out.append((v, full, full == base))
        if not any(ref for _, _, ref in out):
            out.append((None, base, True))  # the unscaled configuration is the reference of the table
        return out
    if axis.get("on") == "algorithm":
        return [(v, _build_on_axis(cls.Config, {**base, **{n: v for n in axis["param"]}}, f"axis.values[{k}]",
                                   f"algorithms[{i}] '{cls.name}'"), False) for k, v in enumerate(axis["values"])]
    return [(None, base, False)]
