"""`drift`: a drift parameter of every (online) problem."""
from __future__ import annotations

from typing import Any

from problems.registry import entry as problem_entry
from sweep.kinds.base import register
from sweep.kinds.param_axis import ParamAxis, ParamAxisKind
from sweep.study.expand import Expansion


@register
class Drift(ParamAxisKind):
    """`axis: {param: drift, values: [0, 0.01, 0.1]}` on online problems; the report adds the final regret."""

    name = "drift"
    doc = "param, values: a drift parameter of every (online) problem"

    def resolve_axis(self, ctx: Expansion, axis: ParamAxis) -> dict[str, Any]:
        """Online problems only, then the parameter checks of every parameter axis."""
        offline = [(j, p["name"]) for j, p in enumerate(ctx.problems) if not problem_entry(p["name"]).online]
        for j, name in offline:
            ctx.errors.add(f"problems[{j}].name", f"a drift study needs online problems; '{name}' is offline")
        return {} if offline else super().resolve_axis(ctx, axis)
