"""Loading and validating a study: from a built-in name, a YAML file or a mapping to a `Study`.

A study is validated in full before anything starts (no Ray, no MLflow), in stages; each stage reports
every error it finds, one line per error naming the field's YAML path (`algorithms[1].params.alpha0:
must be a positive number, got -1`), and the next stage runs only on a clean result:
1. scales and imports (plugins may register algorithms, problems, kinds and claims);
2. the schema (sweep.schema: every field, unknown fields, the kind and its axis);
3. across entries: labels, problem lists, the budget record, the claim against the kind;
4. online against offline problems;
5. the kind's axis against the study's algorithms and problems;
6. every grid point of every algorithm config and problem parameter record, then lower-level
   constraints and duplicate configurations.
"""
from __future__ import annotations

import dataclasses
import importlib
import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import algorithms
from algorithms.run import Budget, Divergence
from problems.validation import ParameterError
from sweep import claims, compat, kinds, limits, schema
from sweep.errors import Errors, SpecError, fail, shown
from sweep.expand import Expansion, check_duplicates, record_error
from sweep.model import DEFAULT_SCALE, ReportOptions, Study, apply_scale, scale_names
from sweep.sources import builtin_studies, read, resolve

__all__ = ["load", "validate", "builtin_studies", "resolve", "scale_names", "SpecError", "DEFAULT_SCALE"]


def load(study: str | Path | Mapping[str, Any], scale: str | None = None, max_runs: int = limits.MAX_RUNS) -> Study:
    """Load and validate a study from a built-in name, a YAML path or a mapping, at a named scale."""
    if isinstance(study, Mapping):
        return validate(study, scale=scale, max_runs=max_runs)
    path = resolve(str(study))
    return validate(read(path), default_name=path.stem, scale=scale, max_runs=max_runs)


def validate(data: Mapping[str, Any], default_name: str | None = None, scale: str | None = None,
             max_runs: int = limits.MAX_RUNS) -> Study:
    """Validate a study mapping completely (at `scale`, default: as written) and expand it into configurations.

    A study that would make more than `max_runs` runs is refused before it is expanded.
    """
    if not isinstance(data, Mapping):
        fail("study", f"must be a mapping of study fields, got {shown(data)}")
    data = apply_scale(data, scale, schema.OVERRIDABLE)
    _import_plugins(data.get("imports", []))
    spec, lines = schema.parse({**data, "name": data.get("name", default_name)})
    if spec is None:
        raise SpecError(lines)
    kind = kinds.get(spec.kind)
    errors = Errors()
    limits.check_size(spec, max_runs, errors)
    errors.raise_if_any()
    probs = [{"name": p.name, "label": p.name, "params": p.params} for p in spec.problems]
    algs = [a.as_dict() for a in spec.algorithms]
    ctx = Expansion(probs, algs, [algorithms.get(a["name"]) for a in algs], {}, spec.n_evals, spec.instance_seed, errors,
                    list(spec.seeds))

    compat.check_labels_and_lists(probs, algs, ctx)
    ctx.budget = _budget(spec.budget, errors)
    for j, p in enumerate(spec.problems):
        if p.budget is not None:  # the problem's own budget, merged over the study's
            probs[j]["budget"] = _budget({**spec.budget, **p.budget}, errors, f"problems[{j}].budget")
    divergence = _divergence(spec.divergence, errors)
    _check_claim(spec.claim, spec.kind, errors)
    errors.raise_if_any()
    online = compat.check_online(ctx)
    errors.raise_if_any()
    axis = kind.resolve_axis(ctx, spec.axis)
    errors.raise_if_any()
    points = kind.expand(ctx, axis)
    if divergence is not None:
        points = [dataclasses.replace(p, divergence=divergence) for p in points]
    if spec.blas_threads is not None:
        points = [dataclasses.replace(p, blas_threads=spec.blas_threads) for p in points]
    if not errors:  # a bad grid value would break the instance the check builds
        compat.check_constraints(ctx, spec.seeds)
        if online:
            compat.warn_theorem_conditions(points, list(spec.seeds))
    check_duplicates(points, errors)
    errors.raise_if_any()

    rep = spec.report
    return Study(
        name=spec.name, description=spec.description, kind=spec.kind, axis=axis, problems=probs, algorithms=algs,
        seeds=spec.seeds, instance_seed=spec.instance_seed,
        seeds_per_trial=min(spec.seeds_per_trial or len(spec.seeds), len(spec.seeds)), budget=ctx.budget,
        n_evals=spec.n_evals, resources={"cpu": spec.resources.cpu}, max_concurrent=spec.max_concurrent,
        max_failures=spec.max_failures, checkpoint_seconds=spec.checkpoint_seconds,
        report_seconds=spec.report_seconds, imports=list(spec.imports),
        report=ReportOptions(rep.metric or kind.default_metric(online), rep.goal,
                             rep.converged_metric or ("cumulative_regret" if online else "grad_F_sq"),
                             float(rep.converged_below), rep.converged_relative,
                             None if rep.target is None else float(rep.target)),
        points=points, online=online, source=_plain({**data, "name": spec.name}), claim=spec.claim,
        scale=scale or DEFAULT_SCALE, axis_name=kind.axis_name(axis),
        runs_per_trial=spec.runs_per_trial or spec.seeds_per_trial,
    )


def _import_plugins(mods: Any) -> None:
    """Import the study's plugin modules (they register algorithms, problems, kinds, claims)."""
    if not isinstance(mods, list) or not all(isinstance(m, str) for m in mods):
        fail("imports", f"must be a list of module names, got {shown(mods)}")
    if mods and os.getcwd() not in sys.path:
        sys.path.append(os.getcwd())  # study plugins live in the user's project, as for `python -m`
    errors = Errors()
    for i, m in enumerate(mods):
        try:
            importlib.import_module(m)
        except ImportError as exc:
            errors.add(f"imports[{i}]", f"cannot import module {m!r}: {exc}")
    errors.raise_if_any()


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
    if name not in claims.CLAIMS:
        errors.add("claim", f"must be one of {', '.join(claims.CLAIMS)} or null, got {name!r}")
    elif claims.CLAIMS[name].kind != kind:
        errors.add("claim", f"{name!r} checks a {claims.CLAIMS[name].kind} study, but this study's kind is {kind}")


def _plain(value: Any) -> Any:
    """A JSON/YAML-safe copy (tuples to lists, keys to strings)."""
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value
