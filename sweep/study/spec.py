"""Loading and validating a study: from a built-in name, a YAML file or a mapping to a `Study`.

A study is validated in full before anything starts (no Ray, no MLflow), and every size is counted before
anything is built. Each error is one line naming the field's YAML path (`algorithms[1].params.alpha0:
must be a positive number, got -1`), and every error independent of the others is reported at once:
0. the input's bounds (sweep.study.limits: string lengths, nesting; files: sweep.study.sources);
1. scales and imports (plugins may register algorithms, problems, kinds and claims);
2. the schema (sweep.study.schema: every field, unknown fields, the kind and its axis; seeds counted against
   the run limit);
3. the number of runs (counted from the grids);
4. across entries: labels, problem lists, the budget record, the claim against the kind, online
   against offline problems, then the kind's axis;
5. every grid point of every algorithm config and problem parameter record (each instance's arrays
   counted against this machine's memory), then what algorithms need of problems (lower-level
   constraints, a finite sum), duplicate configurations, and the report's metrics.
A stage that fails still has every entry's parameter records checked before it stops (`_check_records`),
so a bad `kind` or `seeds` hides no parameter error.
"""
from __future__ import annotations

import dataclasses
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import algorithms
from algorithms.run import Budget, Divergence
from problems.registry import entry as problem_entry
from problems.shared.errors import ParameterError, did_you_mean
from problems.shared.registries import import_modules
from sweep.study import backend, entry_checks, limits, plugins, schema
from sweep.study.errors import Errors, SpecError, fail, shown
from sweep.study.expand import Expansion, check_duplicates, record_error
from sweep.study.model import DEFAULT_SCALE, ReportOptions, Study, apply_scale, scale_names
from sweep.study.sources import builtin_studies, is_path, parse, read, resolve

__all__ = ["load", "validate", "builtin_studies", "studies", "claim_study", "resolve", "scale_names", "SpecError",
           "DEFAULT_SCALE"]


def load(study: str | Path | Mapping[str, Any], scale: str | None = None, max_runs: int = limits.MAX_RUNS,
         count_only: bool = False) -> Study:
    """Load and validate a study from a built-in name (a file of sweep/studies or a claim's own study), a YAML
    path or a mapping, at a named scale."""
    if isinstance(study, Mapping):
        return validate(study, scale=scale, max_runs=max_runs, count_only=count_only)
    defined = {} if is_path(str(study)) else defined_studies()
    if str(study) in defined:
        return validate(defined[str(study)], scale=scale, max_runs=max_runs, count_only=count_only)
    path = resolve(str(study), list(defined))
    return validate(read(path), default_name=path.stem, scale=scale, max_runs=max_runs, count_only=count_only)


def defined_studies() -> dict[str, dict[str, Any]]:
    """The studies claims define in their own file, by study name (each names its claim)."""
    out: dict[str, dict[str, Any]] = {}
    for name, c in plugins.CLAIMS.items():
        if c.study is None or (isinstance(c.study, str) and _is_name(c.study)):
            continue
        data = dict(parse(c.study, f"the study of claim {name!r} ({c.evaluate.__module__})")
                    if isinstance(c.study, str) else c.study)
        if data.setdefault("claim", name) != name:
            fail("claim", f"{name!r} defines a study that names claim {data['claim']!r}; leave `claim:` out or name "
                          f"{name!r}")
        study = str(data.setdefault("name", name))
        if study in out or study in builtin_studies():
            fail("study", f"{study!r} is defined twice: by claim {name!r} and by "
                          f"{'claim ' + repr(out[study]['claim']) if study in out else 'sweep/studies/' + study + '.yaml'}")
        out[study] = data
    return out


def studies() -> dict[str, Path | dict[str, Any]]:
    """Every built-in study by name: a file of sweep/studies, or the fields a claim's module defines."""
    return dict(sorted({**builtin_studies(), **defined_studies()}.items()))


def claim_study(name: str) -> str:
    """The name of the built-in study claim `name` reads (None-free: a claim without a study is an error)."""
    c = plugins.CLAIMS[name]
    if c.study is None:
        fail("claim", f"{name!r} names no study (give `claim(..., study=...)`)")
    if isinstance(c.study, str) and _is_name(c.study):
        return c.study
    return next(s for s, data in defined_studies().items() if data["claim"] == name)


def defined_in(claim: str) -> str:
    """The file of the module that defines claim `claim` and its study."""
    return str(getattr(sys.modules.get(plugins.CLAIMS[claim].evaluate.__module__), "__file__", None) or "?")


def _is_name(study: str) -> bool:
    """A claim's `study` string is a built-in study's name (one word), not YAML text."""
    return "\n" not in study and ":" not in study


def validate(data: Mapping[str, Any], default_name: str | None = None, scale: str | None = None,
             max_runs: int = limits.MAX_RUNS, count_only: bool = False) -> Study:
    """Validate a study mapping completely (at `scale`, default: as written) and expand it into configurations.

    A study that would make more than `max_runs` runs is refused before it is expanded. Every error
    independent of the others is reported at once: a stage that fails still has every entry's parameters
    checked before it stops. `count_only` (for --validate-only) checks the same and counts the
    configurations instead of building them (`Study.counted`; `points` then holds one per algorithm and
    problem): 10⁶ configurations took minutes and gigabytes to build.
    """
    if not isinstance(data, Mapping):
        fail("study", f"must be a mapping of study fields, got {shown(data)}")
    errors = Errors()
    limits.check_input(data, errors)  # huge strings or deep nesting: nothing else is read
    errors.raise_if_any()
    data = apply_scale(data, scale, schema.OVERRIDABLE)
    _import_plugins(data.get("imports", []))
    spec, lines = schema.parse({**data, "name": data.get("name", default_name)}, max_runs)
    if spec is None:
        errors.extend(lines)
        _check_records(data, errors, max_runs)
        raise SpecError(errors.lines)
    kind = plugins.KINDS[spec.kind]
    limits.check_size(spec, max_runs, errors)
    errors.raise_if_any()
    probs = [{"name": p.name, "label": p.name, "params": p.params} for p in spec.problems]
    algs = [a.as_dict() for a in spec.algorithms]
    ctx = Expansion(probs, algs, [algorithms.get(a["name"]) for a in algs], {}, spec.n_evals, spec.instance_seed, errors,
                    list(spec.seeds), limits.node_memory())

    entry_checks.check_labels_and_lists(probs, algs, ctx)
    ctx.budget = _budget(spec.budget, errors)
    for j, p in enumerate(spec.problems):
        if p.budget is not None:  # the problem's own budget, merged over the study's
            probs[j]["budget"] = _budget({**spec.budget, **p.budget}, errors, f"problems[{j}].budget")
    divergence = _divergence(spec.divergence, errors)
    _check_claim(spec.claim, spec.kind, errors)
    online = entry_checks.check_online(ctx)
    axis = kind.resolve_axis(ctx, spec.axis) if not errors else {}
    if errors:  # the entries' own parameters are still checked, as the expansion would
        _check_records(data, errors, max_runs)
        errors.raise_if_any()
    counted, points = kind.count(ctx, axis) if count_only else (None, kind.expand(ctx, axis))
    if divergence is not None:
        points = [dataclasses.replace(p, divergence=divergence) for p in points]
    if spec.blas_threads is not None:
        points = [dataclasses.replace(p, blas_threads=spec.blas_threads) for p in points]
    if spec.backend == "jax":  # a run drawing from JAX's streams is another run than NumPy's of its seed
        points = backend.mark_streams(points)
    if not errors:  # a bad grid value would break the instance the check builds
        entry_checks.check_needs(ctx, spec.seeds)
        if online:
            entry_checks.warn_theorem_conditions(points, list(spec.seeds))
        if counted is None:  # counting checked them
            check_duplicates(points, errors)
    errors.raise_if_any()
    entry_checks.check_metrics({f: getattr(spec.report, f) for f in ("metric", "converged_metric")
                                if getattr(spec.report, f) is not None}, points, errors)
    errors.raise_if_any()

    study = Study(
        name=spec.name, description=spec.description, kind=spec.kind, axis=axis, problems=probs, algorithms=algs,
        seeds=spec.seeds, instance_seed=spec.instance_seed,
        seeds_per_trial=min(spec.seeds_per_trial or len(spec.seeds), len(spec.seeds)), budget=ctx.budget,
        n_evals=spec.n_evals, resources={"cpu": spec.resources.cpu, "gpu": spec.resources.gpu}, max_concurrent=spec.max_concurrent,
        max_failures=spec.max_failures, checkpoint_seconds=spec.checkpoint_seconds,
        report_seconds=spec.report_seconds, imports=list(spec.imports),
        report=_report(spec.report, kind.default_metric(online), online),
        points=points, online=online, source=_plain({**data, "name": spec.name}), claim=spec.claim,
        scale=scale or DEFAULT_SCALE, axis_name=kind.axis_name(axis),
        runs_per_trial=spec.runs_per_trial or spec.seeds_per_trial, counted=counted, batched=spec.batched,
        mlflow_children=None if spec.mlflow_children == "all" else spec.mlflow_children, backend=spec.backend,
    )
    backend.check(study, errors)
    errors.raise_if_any()
    return study


def _report(rep: Any, default_metric: str, online: bool) -> ReportOptions:
    """The report options with the kind's defaults filled in."""
    return ReportOptions(rep.metric or default_metric, rep.goal,
                         rep.converged_metric or ("cumulative_regret" if online else "grad_F_sq"),
                         float(rep.converged_below), rep.converged_relative,
                         None if rep.target is None else float(rep.target), rep.best_by)


def _check_records(data: Mapping[str, Any], errors: Errors, max_runs: int) -> None:
    """The records of a study the schema or a stage refused, read from its raw fields where they can be: the
    budgets, the divergence rule, the claim and every entry's parameters (errors independent of the others)."""
    budget = data.get("budget")
    if isinstance(budget, Mapping):
        _budget(dict(budget), errors)
    if isinstance(data.get("divergence"), Mapping):
        _divergence(dict(data["divergence"]), errors)
    if isinstance(data.get("claim"), str) and isinstance(data.get("kind", plugins.DEFAULT_KIND), str):
        _check_claim(data["claim"], data.get("kind", plugins.DEFAULT_KIND), errors)
    ctx = Expansion([], [], [], {}, 2, None, errors, [], limits.node_memory())
    for field, record_of in (("problems", _problem_record), ("algorithms", _algorithm_record)):
        entries = data.get(field)
        for j, entry in enumerate(entries if isinstance(entries, list) else []):
            name, params = (entry, {}) if isinstance(entry, str) else \
                (entry.get("name"), entry.get("params") or {}) if isinstance(entry, Mapping) else (None, None)
            record = record_of(name)
            if record is None or not isinstance(params, Mapping) or limits.grid_size(params, record) > max_runs:
                continue
            path = f"{field}[{j}].params"
            for point, grid in ctx.grid_points(params, record, path):
                ctx.build(record, point, path, grid, params)
            own = entry.get("budget") if isinstance(entry, Mapping) else None
            if field == "problems" and isinstance(own, Mapping) and isinstance(budget, Mapping):
                _budget({**budget, **own}, errors, f"problems[{j}].budget")


def _problem_record(name: Any) -> Any:
    try:
        return problem_entry(name).params
    except ParameterError:
        return None


def _algorithm_record(name: Any) -> Any:
    try:
        return algorithms.get(name).Config
    except (ParameterError, KeyError, TypeError):
        return None


def _import_plugins(mods: Any) -> None:
    """Import the study's plugin modules (they register algorithms, problems, kinds, claims)."""
    if not isinstance(mods, list) or not all(isinstance(m, str) for m in mods):
        fail("imports", f"must be a list of module names, got {shown(mods)}")
    try:
        import_modules(mods)
    except ParameterError as exc:  # one line per module that failed
        raise SpecError(str(exc).splitlines()) from exc


def _budget(budget: dict[str, Any], errors: Errors, path: str = "budget") -> dict[str, Any]:
    """The budget record's full values (its own checks name the field)."""
    try:
        return Budget.from_dict(budget).as_dict()
    except ParameterError as exc:
        record_error(errors, path, exc)
        return {}


def _divergence(block: dict[str, Any] | None, errors: Errors) -> dict[str, Any] | None:
    """The study's divergence rule as plain data; None when it is the default rule."""
    if block is None:
        return None
    try:
        rule = Divergence.from_dict(block)
    except ParameterError as exc:
        record_error(errors, "divergence", exc)
        return None
    plain = {"factor": rule.factor, "metrics": list(rule.metrics)}
    default = Divergence()
    return None if plain == {"factor": default.factor, "metrics": list(default.metrics)} else plain


def _check_claim(name: str | None, kind: str, errors: Errors) -> None:
    """The paper claim the report checks must exist and read studies of this kind."""
    if name is None:
        return
    if name not in plugins.CLAIMS:
        errors.add("claim", f"must be one of {', '.join(plugins.CLAIMS)} or null, got {name!r};"
                            f"{did_you_mean(name, list(plugins.CLAIMS))}".rstrip(";"))
    elif plugins.CLAIMS[name].kind != kind:
        errors.add("claim", f"{name!r} checks a {plugins.CLAIMS[name].kind} study, but this study's kind is {kind}")


def _plain(value: Any) -> Any:
    """A JSON/YAML-safe copy (tuples to lists, keys to strings)."""
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value
