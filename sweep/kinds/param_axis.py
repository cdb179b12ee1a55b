"""Kinds whose axis sets one parameter (or several together) of every problem or algorithm to each value.

`param: noise` (or `[dim_x, dim_y]`), `values: [...]`. Subclasses say whether the parameter may belong to
the algorithms instead of the problems, and what the values must be.
"""
from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, ClassVar

from pydantic import AfterValidator, Field

from sweep.kinds.base import Kind, Tables
from sweep.report import figures, tables
from sweep.results.runs import RunData
from sweep.study.checks import Block, after, before, invalid, is_number, no_repeats, nonempty_list
from sweep.study.expand import Expansion, field_names
from sweep.study.record import StudyRecord


def _param_names(value: Any) -> Any:
    names = [value] if isinstance(value, str) else value
    if not isinstance(names, list) or not names or not all(isinstance(n, str) for n in names):
        raise invalid(f"must be a parameter name (or a list of names set together), got {value!r}")
    return value


ParamNames = Annotated[Any, AfterValidator(_param_names)]
Values = before(nonempty_list("values"), after(list[Any], no_repeats()))


class ParamAxis(Block):
    """`param` (a name or names set together) and the `values` it takes."""

    param: ParamNames = Field(None, validate_default=True)
    values: Values = Field(None, validate_default=True)


class ParamAxisKind(Kind):
    """A kind sweeping a parameter of every problem (or, if `on_algorithms`, of every algorithm instead)."""

    Axis = ParamAxis
    on_algorithms: ClassVar[bool] = False

    def resolve_axis(self, ctx: Expansion, axis: ParamAxis) -> dict[str, Any]:
        """The parameter must exist on every problem (or every algorithm) and not be gridded there."""
        names = [axis.param] if isinstance(axis.param, str) else list(axis.param)
        prob_fields = [set(field_names(ctx.problem_record(j))) for j in range(len(ctx.problems))]
        alg_fields = [set(field_names(c.Config)) for c in ctx.classes]
        on_problem = all(all(n in f for n in names) for f in prob_fields)
        on_algorithm = self.on_algorithms and not on_problem and all(all(n in f for n in names) for f in alg_fields)
        if not on_problem and not on_algorithm:
            where = "every problem or every algorithm" if self.on_algorithms else "every problem"
            missing = next((f"problems[{j}] '{ctx.problems[j]['name']}'" for j, f in enumerate(prob_fields)
                            if not all(n in f for n in names)), "")
            ctx.errors.add("axis.param", f"{axis.param!r} must be a parameter of {where}; {missing} has no such parameter")
            return {}
        what = "problems" if on_problem else "algorithms"
        for j, e in enumerate(ctx.problems if on_problem else ctx.algorithms):
            for n in names:
                if isinstance(e["params"].get(n), list):
                    ctx.errors.add(f"{what}[{j}].params.{n}", "is swept by the axis; give one value or none")
        return {"param": names, "values": list(axis.values), "on": "problem" if on_problem else "algorithm"}

    def axis_name(self, axis: dict[str, Any]) -> str | None:
        """The parameter names joined by '+'."""
        return "+".join(axis["param"])

    def problem_axis(self, axis: dict[str, Any]) -> list[tuple[Any, dict[str, Any]]]:
        """Each value set on every named problem parameter."""
        if axis.get("on") != "problem":
            return [(None, {})]
        return [(v, {n: v for n in axis["param"]}) for v in axis["values"]]

    def algorithm_axis(self, ctx: Expansion, axis: dict[str, Any], i: int,
                       base: dict[str, Any]) -> list[tuple[Any, dict[str, Any] | None, dict[str, Any]]]:
        """Each value set on every named algorithm parameter (when the axis is on the algorithms)."""
        if axis.get("on") != "algorithm":
            return [(None, base, {})]
        cls = ctx.classes[i]
        return [(v, ctx.build_on_axis(cls.Config, {**base, **{n: v for n in axis["param"]}}, f"axis.values[{k}]",
                                      f"algorithms[{i}] '{cls.name}'"), {}) for k, v in enumerate(axis["values"])]

    def report(self, runs: list[RunData], meta: StudyRecord, directory: Path) -> tuple[Tables, list[Path]]:
        """`<kind>.csv` and `<kind>.png`: the final metric along the axis."""
        opts, axis_name = meta.report, meta.axis_name
        rows = tables.axis_table(runs, opts, axis_name)
        log_x = all(is_number(v) and v > 0 for v in meta.axis["values"])
        plot = figures.plot_axis(rows, axis_name, opts.metric, f"{self.name}: final {opts.metric}",
                                 directory / f"{self.name}.png", log_x=log_x)
        return {self.name: rows}, [plot]
