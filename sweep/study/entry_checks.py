"""Checks across a study's entries: labels, problem lists, online against offline, what an algorithm needs of a
problem (lower-level constraints, a finite sum), and the metrics the report compares."""
from __future__ import annotations

import dataclasses
import functools
import json
import warnings
from typing import Any

import algorithms
import problems
from problems.registry import entry as problem_entry
from problems.shared.errors import ParameterError, did_you_mean
from sweep.study.errors import Errors
from sweep.study.expand import Expansion, field_names, is_grid, pairs
from sweep.study.model import Point


def check_labels_and_lists(probs: list[dict[str, Any]], algs: list[dict[str, Any]], ctx: Expansion) -> None:
    """Distinct labels (unless on disjoint problems); an algorithm's problem list names study problems."""
    names = {p["name"] for p in probs}
    for i, a in enumerate(algs):
        # One label may name entries on disjoint problems (e.g. a toy that needs other step sizes).
        if any(o["label"] == a["label"] and _share_problems(o, a) for o in algs[:i]):
            ctx.errors.add(f"algorithms[{i}].label", f"label {a['label']!r} is used twice; give each entry a distinct "
                                                     "label (or list disjoint problems for them)")
        for k, n in enumerate(a.get("problems", ())):
            if n not in names:
                ctx.errors.add(f"algorithms[{i}].problems[{k}]", f"{n!r} is not among the study's problems "
                                                                 f"({', '.join(sorted(names))})")


def _share_problems(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """Whether two algorithm entries can run on a common problem."""
    return "problems" not in a or "problems" not in b or bool(set(a["problems"]) & set(b["problems"]))


def check_online(ctx: Expansion) -> bool:
    """Online algorithms meet online problems only (and the reverse); the study is online or offline as a whole."""
    flags = [problem_entry(p["name"]).online for p in ctx.problems]
    for i, (a, cls) in enumerate(zip(ctx.algorithms, ctx.classes)):
        j = next((j for j, (p, on) in enumerate(zip(ctx.problems, flags)) if cls.online != on and pairs(a, p)), None)
        if j is not None:
            need = "an online" if cls.online else "an offline"
            have = "online" if flags[j] else "offline"
            ctx.errors.add(f"algorithms[{i}].name",
                           f"'{a['name']}' needs {need} problem but problems[{j}] '{ctx.problems[j]['name']}' is {have}; "
                           "a study pairs every algorithm with every problem (unless the algorithm lists its problems)")
    if len(set(flags)) > 1:  # reports treat a study as online or offline as a whole
        j = flags.index(not flags[0])
        ctx.errors.add(f"problems[{j}].name", f"'{ctx.problems[j]['name']}' is {'online' if flags[j] else 'offline'} "
                                              "but problems[0] is not; a study's problems are all online or all offline")
    return bool(flags[0])


def check_needs(ctx: Expansion, seeds: list[int]) -> None:
    """Algorithms that need lower-level constraints, or a finite sum (per-sample oracles), run only on problems
    that have them: each problem entry paired with one is built once (at its first grid point) to see."""
    needs = [(i, a, c) for i, (a, c) in enumerate(zip(ctx.algorithms, ctx.classes)) if c.constrained or c.finite_sum]
    for j, p in enumerate(ctx.problems if needs else []):
        paired = [(i, a, c) for i, a, c in needs if pairs(a, p)]
        if not paired:
            continue
        inst = _instance(ctx, j, seeds)
        if inst is None:
            continue
        for i, a, cls in paired:
            if cls.constrained and getattr(inst, "constraints", None) is None and not hasattr(inst, "at"):
                ctx.errors.add(f"algorithms[{i}].name",
                               f"'{a['name']}' needs lower-level constraints but problems[{j}] '{p['name']}' has none")
            if cls.finite_sum and getattr(inst, "n_samples", None) is None:
                ctx.errors.add(f"algorithms[{i}].name",
                               f"'{a['name']}' needs a finite-sum problem (per-sample oracles, n_samples) but "
                               f"problems[{j}] '{p['name']}' is not one{_finite_sum_hint(ctx, j)}")


def _instance(ctx: Expansion, j: int, seeds: list[int]) -> Any:
    """Problem entry j built at its first grid point (None after recording why it cannot be)."""
    p = ctx.problems[j]
    checks = {f.name: f.metadata.get("check", "any") for f in dataclasses.fields(ctx.problem_record(j))}
    params = {k: (v[0] if is_grid(v, checks.get(k)) else v) for k, v in p["params"].items()}
    seed = ctx.instance_seed if ctx.instance_seed is not None else seeds[0]
    try:
        return problems.make(p["name"], seed=seed, **params)
    except ParameterError as exc:
        ctx.record_error(f"problems[{j}].params", exc)
        return None


def _finite_sum_hint(ctx: Expansion, j: int) -> str:
    """How to make problem entry j a finite sum, when its record has the field for it."""
    return "; set its n_samples" if "n_samples" in field_names(ctx.problem_record(j)) else ""


#: Metrics every offline run records (online runs too, at the current time step).
ALWAYS_RECORDED = frozenset({"iteration", "time", "cpu_time", "eval_time", "F", "grad_F_sq", "y_err_sq"})


def check_metrics(given: dict[str, str], points: list[Point], errors: Errors) -> None:
    """The metrics a study's report block names (`given`: field -> name) are recorded by its runs.

    A name outside ALWAYS_RECORDED is looked for in the records of one iteration of each algorithm on each
    problem (stopping at the first that has it), so a study naming only the usual metrics costs nothing.
    """
    wanted = {f: m for f, m in given.items() if m not in ALWAYS_RECORDED}
    if not wanted:
        return
    seen: set[str] = set()
    for point in _one_per_pair(points):
        seen |= _recorded(point)
        if all(m in seen for m in wanted.values()):
            return
    for field, metric in wanted.items():
        if metric not in seen and seen:
            names = sorted(seen)
            errors.add(f"report.{field}", f"{metric!r} is not recorded by this study's runs;"
                                          f"{did_you_mean(metric, names)} they record: {', '.join(names)}")


def _one_per_pair(points: list[Point]) -> list[Point]:
    """The first point of each (algorithm, problem) pair."""
    return list({(p.algorithm, p.problem): p for p in reversed(points)}.values())[::-1]


def _recorded(point: Point) -> set[str]:
    """The numeric fields of the records of one iteration of `point` (empty when it cannot run)."""
    try:  # the registered objects are part of the key: a name registered again is probed again
        code = (algorithms.get(point.algorithm), problem_entry(point.problem).build)
    except Exception:  # noqa: BLE001  an unknown name is reported by the entries' own checks
        return set()
    return set(_probe(code, point.algorithm, _key(point.algorithm_params), point.problem,
                      _key(point.problem_params), point.instance_seed or 0))


def _key(params: dict[str, Any]) -> str:
    return json.dumps(params, sort_keys=True, default=repr)


@functools.lru_cache(maxsize=256)
def _probe(code: tuple[Any, Any], algorithm: str, algorithm_params: str, problem: str, problem_params: str, seed: int) -> frozenset[str]:
    """One iteration's recorded fields, kept per configuration: a probe can cost seconds (the coreset problem's
    metrics fit ten learners), and a study is validated again on resume, scale by scale and by every report."""
    try:
        made = problems.make(problem, seed=seed, **json.loads(problem_params))
        records = list(algorithms.run(algorithm, made, json.loads(algorithm_params), seed=0,
                                      budget={"iterations": 1}, n_evals=2))
    except Exception:  # noqa: BLE001  a run that fails is the trial's to report, not validation's
        return frozenset()
    return frozenset(k for rec in records for k, v in rec.items()
                     if isinstance(v, (int, float)) and not isinstance(v, bool))


def warn_theorem_conditions(points: list[Any], seeds: list[int]) -> list[str]:
    """Warn where an algorithm with theorem conditions (`conditions(config, problem)`, e.g. F2OBO, AF2OBO) runs outside
    them on the problem it meets — once per entry and problem configuration, naming the axis values where it does; a
    study may do so on purpose. Returns the warnings."""
    found: dict[tuple[str, str], list[tuple[Any, list[str]]]] = {}
    for p in points:
        cls = algorithms.get(p.algorithm)
        if not hasattr(cls, "conditions"):
            continue
        seed = p.instance_seed if p.instance_seed is not None else seeds[0]
        broken = cls.conditions(algorithms.make_config(p.algorithm, p.algorithm_params),
                                problems.make(p.problem, seed=seed, **p.problem_params))
        if broken:
            where = ", ".join(f"{k.split('.', 1)[-1]}={v}" for k, v in p.coords.get("grid", {}).items())
            found.setdefault((p.label, p.problem + (f"({where})" if where else "")), []).append((p.coords.get("axis"), broken))
    out = []
    for (label, prob), hits in found.items():
        axis = [a for a, _ in hits if a is not None]
        out.append(f"{label} on {prob}" + (f" at axis values {', '.join(map(str, axis))}" if axis else "")
                   + ": outside the paper's theorem conditions: " + "; ".join(hits[-1][1]))
        warnings.warn(out[-1], UserWarning, stacklevel=3)
    return out
