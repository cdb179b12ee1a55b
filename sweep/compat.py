"""Checks across a study's entries: labels, problem lists, online against offline, lower-level constraints."""
from __future__ import annotations

import dataclasses
from typing import Any

import problems
from problems.registry import entry as problem_entry
from problems.validation import ParameterError
from sweep.expand import Expansion, is_grid, pairs


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


def check_constraints(ctx: Expansion, seeds: list[int]) -> None:
    """Algorithms that need lower-level constraints run only on problems that have them."""
    needs = [(i, a) for i, (a, c) in enumerate(zip(ctx.algorithms, ctx.classes)) if c.constrained]
    if not needs:
        return
    for j, p in enumerate(ctx.problems):
        paired = [(i, a) for i, a in needs if pairs(a, p)]
        if not paired:
            continue
        record = ctx.problem_record(j)
        checks = {f.name: f.metadata.get("check", "any") for f in dataclasses.fields(record)}
        params = {k: (v[0] if is_grid(v, checks.get(k)) else v) for k, v in p["params"].items()}
        seed = ctx.instance_seed if ctx.instance_seed is not None else seeds[0]
        try:
            inst = problems.make(p["name"], seed=seed, **params)
        except ParameterError as exc:
            ctx.record_error(f"problems[{j}].params", exc)
            continue
        if getattr(inst, "constraints", None) is None and not hasattr(inst, "at"):
            i, a = paired[0]
            ctx.errors.add(f"algorithms[{i}].name",
                           f"'{a['name']}' needs lower-level constraints but problems[{j}] '{p['name']}' has none")


def warn_theorem_conditions(points: list[Any], seeds: list[int]) -> list[str]:
    """Warn where an algorithm with theorem conditions (`conditions(config, problem)`, e.g. F2OBO, AF2OBO) runs outside
    them on the problem it meets — once per entry and problem configuration, naming the axis values where it does; a
    study may do so on purpose. Returns the warnings."""
    import warnings

    import algorithms

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
