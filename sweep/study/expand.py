"""Expanding a study into configurations: grids, parameter records, and the default cartesian product.

Algorithm configs and problem parameters are the registries' `Params` records (problems.validation):
every grid point is built, so a bad value gets the record's own check, reported at its YAML path
(`algorithms[0].params.inner_steps[1]` for the second value of a grid).
"""
from __future__ import annotations

import dataclasses
import itertools
import re
from collections.abc import Iterator, Mapping
from typing import Any

from algorithms.base import Algorithm
from problems.registry import entry as problem_entry
from problems.shared.errors import ParameterError, did_you_mean
from problems.validation import Params
from sweep.study.errors import Errors
from sweep.study.model import Point


def pairs(algorithm: Mapping[str, Any], problem: Mapping[str, Any]) -> bool:
    """Whether an algorithm entry runs on a problem entry (every problem unless it names some)."""
    return "problems" not in algorithm or problem["name"] in algorithm["problems"]


def field_names(record: type[Params]) -> list[str]:
    """The parameter names of a record."""
    return [f.name for f in dataclasses.fields(record)]


def split_record_error(exc: ParameterError) -> tuple[str | None, str]:
    """(field, message) of a parameter record's one-line error."""
    msg = str(exc)
    m = re.match(r"^.*?: '([^']+)' (must be .*)$", msg)
    if m:
        return m.group(1), m.group(2)
    m = re.match(r"^.*?: unknown parameter '([^']+)'; (.*)$", msg)
    if m:
        return m.group(1), f"unknown parameter; {m.group(2)}"
    return None, msg


def record_error(errors: Errors, path: str, exc: ParameterError, grid_values: Mapping[str, Any] | None = None,
                 grid_point: Mapping[str, Any] | None = None) -> None:
    """A parameter record's error at the YAML path of the field it names (and its grid entry)."""
    field, message = split_record_error(exc)
    if field is None:
        errors.add(path, message)
        return
    where = f"{path}.{field}"
    if grid_values and field in grid_values and grid_point and field in grid_point:
        where += f"[{grid_values[field].index(grid_point[field])}]"
    elif grid_point:
        message += f" (with {', '.join(f'{k}={v!r}' for k, v in grid_point.items())})"
    errors.add(where, message)


@dataclasses.dataclass
class Expansion:
    """A study's validated entries, what a kind reads to check its axis and expand the study into points."""

    problems: list[dict[str, Any]]
    algorithms: list[dict[str, Any]]
    classes: list[type[Algorithm]]
    budget: dict[str, Any]
    n_evals: int
    instance_seed: int | None
    errors: Errors
    seeds: list[int] = dataclasses.field(default_factory=list)  # the study's run seeds
    memory: float | None = None  # bytes one instance's arrays may take (None: not checked)
    #: (path, field, id of a grid value) that made a record fail: every other grid point holding that value is
    #: refused without building it (a YAML alias grid of 10⁵ points with a bad value took minutes before).
    bad_values: set[tuple[str, str, int]] = dataclasses.field(default_factory=set)

    def problem_record(self, j: int) -> type[Params]:
        """The parameter record of problem entry j."""
        return problem_entry(self.problems[j]["name"]).params

    # ---- records ----
    def record_error(self, path: str, exc: ParameterError, grid_values: Mapping[str, Any] | None = None,
                     grid_point: Mapping[str, Any] | None = None) -> None:
        """A record's error at the YAML path of the field it names (and its grid entry)."""
        record_error(self.errors, path, exc, grid_values, grid_point)

    def build(self, record: type[Params], params: Mapping[str, Any], path: str,
              grid: Mapping[str, Any] | None = None, raw: Mapping[str, Any] | None = None) -> dict[str, Any] | None:
        """The record's field values (`Params.recorded`), or None after recording every bad field it has.

        A bad field is reported, then left at its default to look for the next one (cross-field rules
        are checked once every single field is fine).
        """
        if grid and any((path, k, id(v)) in self.bad_values for k, v in grid.items()):
            return None  # a value already reported bad: the study fails, its error is listed once
        params, seen, clean = dict(params), set(), True
        while True:
            try:
                rec = record.from_dict(params)
                if not self.fits(rec, path):
                    return None
                return rec.recorded() if clean else None
            except ParameterError as exc:
                self.record_error(path, exc, raw, grid)
                clean = False
                field, _ = split_record_error(exc)
                if grid and field in grid:
                    self.bad_values.add((path, field, id(grid[field])))
                if field is None or field in seen or field not in params:
                    return None
                seen.add(field)
                del params[field]

    def build_on_axis(self, record: type[Params], params: Mapping[str, Any], path: str, what: str) -> dict[str, Any] | None:
        """A record for an axis value; an error names the axis entry and the record it broke."""
        try:
            rec = record.from_dict(params)
        except ParameterError as exc:
            self.errors.add(path, f"makes {what} invalid: {str(exc).split(': ', 1)[-1]}")
            return None
        return rec.recorded() if self.fits(rec, path) else None

    def fits(self, rec: Params, path: str) -> bool:
        """Whether an instance of `rec` fits in memory (counted from its sizes); an error at `path` otherwise."""
        need = rec.array_bytes()
        if need is None or self.memory is None or need <= self.memory:
            return True
        sizes = ", ".join(f"{f.name} = {getattr(rec, f.name):,}" for f in dataclasses.fields(rec)
                          if f.metadata.get("check") in ("positive_int", "optional_positive_int")
                          and getattr(rec, f.name) is not None)
        self.errors.add(path, f"an instance needs about {size_text(need)} of arrays ({sizes}), more than the "
                              f"{size_text(self.memory)} of memory of this machine; give smaller sizes")
        return False

    def grid_points(self, params: Mapping[str, Any], record: type[Params],
                    path: str) -> Iterator[tuple[dict[str, Any], dict[str, Any]]]:
        """Every grid point as (params, gridded values), one at a time; unknown names and empty grids are errors."""
        names = field_names(record)
        checks = {f.name: f.metadata.get("check", "any") for f in dataclasses.fields(record)}
        fixed, grids = {}, {}
        for k, v in params.items():
            if k not in names:
                self.errors.add(f"{path}.{k}", f"unknown parameter;{did_you_mean(k, names)} allowed: {', '.join(names)}")
            elif is_grid(v, checks.get(k)):
                if not v:
                    self.errors.add(f"{path}.{k}", "empty grid; give at least one value")
                grids[k] = v
            else:
                fixed[k] = v
        if any(k not in names for k in params) or any(not v for v in grids.values()):
            return
        for combo in itertools.product(*grids.values()):
            yield {**fixed, **dict(zip(grids, combo))}, dict(zip(grids, combo))


def size_text(n: float) -> str:
    """Bytes in binary units: 14.6 TiB."""
    units = ("B", "KiB", "MiB", "GiB", "TiB", "PiB")
    k = 0
    while n >= 1024 and k < len(units) - 1:
        n, k = n / 1024, k + 1
    return f"{n:,.1f} {units[k]}"


def is_grid(value: Any, check: str | None) -> bool:
    """A list is a grid, except one value of an array-valued field: a flat list of numbers for a vector,
    a list of rows for a matrix (a grid of those is a list of them)."""
    if not isinstance(value, list):
        return False
    if check in ("real_vector", "optional_vector"):
        return bool(value) and all(isinstance(v, list) for v in value)
    if check == "optional_matrix":
        return bool(value) and all(isinstance(v, list) and v and all(isinstance(r, list) for r in v) for v in value)
    return True


def check_duplicates(points: list[Point], errors: Errors) -> None:
    """Two entries that give the same configuration are an error (their runs would collide)."""
    keys = [p.key for p in points]
    if len(set(keys)) != len(keys):
        dup = next(p for p in points if keys.count(p.key) > 1)
        errors.add("problems", f"two entries give the same configuration ({dup.label} on {dup.problem} with "
                               f"{dup.problem_params}); remove the duplicate")
