"""Limits checked before a study expands: its size as data, and how many runs it would make, counted without
building them.

A grid of 32⁴ points once took 78 s to validate and 7 GB before any trial started. The count here
multiplies grid lengths (what the expansion would enumerate) and refuses a study past the limit in
milliseconds; `bisweep run --max-runs N` raises the limit. Strings and nesting are bounded before the
schema sees them (a 10 MB description once reached Ray), and an instance whose arrays cannot fit in the
memory of this machine is refused when its parameters are checked (`node_memory`, `Params.array_bytes`).
"""
from __future__ import annotations

import dataclasses
import math
import os
from collections.abc import Mapping
from typing import Any

import algorithms
from problems.registry import entry as problem_entry
from problems.validation import Params
from sweep.study.errors import Errors, yaml_path
from sweep.study.expand import is_grid

#: Default largest study (runs = configurations × seeds) a driver accepts.
MAX_RUNS = 100_000
#: The most --max-runs may raise it to (the driver holds a key and a slot for every run).
MAX_RUNS_LIMIT = 10_000_000
#: The longest string a study holds (a description, a path, a name; names and labels have their own limit).
MAX_STRING = 1_000
#: The deepest nesting of lists and mappings (a study needs about 6; a matrix grid 5).
MAX_DEPTH = 32
#: The most values a study holds, a YAML alias counted each time it is used: a 256 kB file without aliases holds
#: at most ~130,000 (`[0,0,...]`), while nine aliases of nine aliases ... of a short list are billions.
MAX_VALUES = 250_000


def check_input(data: Any, errors: Errors) -> None:
    """Every string at most MAX_STRING characters (keys too), nesting at most MAX_DEPTH and at most MAX_VALUES
    values, walked without recursion in the file's order; one error per string or branch too large."""
    stack: list[tuple[tuple[Any, ...], Any]] = [((), data)]
    for _ in range(MAX_VALUES):
        if not stack:
            return
        loc, value = stack.pop()
        if isinstance(value, str):
            if len(value) > MAX_STRING:
                errors.add(yaml_path(loc) or "study", f"must be at most {MAX_STRING:,} characters, got {len(value):,}")
        elif isinstance(value, (Mapping, list, tuple)) and len(loc) >= MAX_DEPTH:
            errors.add(yaml_path(loc), f"nests lists and mappings more than {MAX_DEPTH} deep")
        elif isinstance(value, Mapping):
            long = [k for k in value if isinstance(k, str) and len(k) > MAX_STRING]
            for k in long:
                errors.add(yaml_path(loc) or "study", f"has a key of {len(k):,} characters; at most {MAX_STRING:,}")
            stack.extend(reversed([((*loc, str(k)), v) for k, v in value.items() if k not in long]))
        elif isinstance(value, (list, tuple)):
            stack.extend(((*loc, i), value[i]) for i in range(len(value) - 1, -1, -1))
    if stack:
        errors.add("study", f"holds more than {MAX_VALUES:,} values (a YAML alias counts each time it is used)")


def node_memory() -> float | None:
    """Bytes of memory of this machine (what one instance's arrays must fit in), None where unknown."""
    try:
        return float(os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"))
    except (ValueError, OSError, AttributeError):
        return None


def grid_size(params: Mapping[str, Any], record: type[Params]) -> int:
    """How many grid points a params mapping expands to (unknown names count as one value)."""
    checks = {f.name: f.metadata.get("check", "any") for f in dataclasses.fields(record)}
    return math.prod(max(len(v), 1) for k, v in params.items() if is_grid(v, checks.get(k)))


def axis_size(axis: Any) -> int:
    """An upper bound on the points of a kind's axis: its longest list, plus the reference point."""
    if not isinstance(axis, Mapping):
        return 1
    lengths = [len(v) for v in axis.values() if isinstance(v, list)]
    return max(lengths) + 1 if lengths else 1


def estimate_runs(spec: Any) -> int:
    """Runs a parsed study (sweep.study.schema) would expand to, at most: Σ algorithm grids × problem grids × axis × seeds."""
    problem_sizes = {p.name: 0 for p in spec.problems}
    for p in spec.problems:
        problem_sizes[p.name] += grid_size(p.params, problem_entry(p.name).params)
    configs = 0
    for a in spec.algorithms:
        on = a.problems or list(problem_sizes)
        configs += grid_size(a.params, algorithms.get(a.name).Config) * sum(problem_sizes.get(n, 0) for n in on)
    return configs * axis_size(spec.axis) * len(spec.seeds)


def check_size(spec: Any, max_runs: int, errors: Errors) -> None:
    """An error when the study would make more than `max_runs` runs."""
    runs = estimate_runs(spec)
    if runs > max_runs:
        errors.add("study", f"expands to about {runs:,} runs ({len(spec.seeds)} seeds each), more than the limit "
                            f"{max_runs:,}; shrink the grids or raise the limit with --max-runs")
