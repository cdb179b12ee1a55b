"""What a study kind is, and the registry of kinds.

A kind owns everything that differs between studies of different kinds:
- `Axis`: the schema of its `axis` block (a pydantic model; None when it has none). A kind with other
  settings (e.g. a tuning protocol) declares them there too;
- `resolve_axis`: checks of the axis against the study's algorithms and problems; the axis as stored;
- `expand`: the study's configurations (default: every algorithm configuration on every problem
  configuration, the axis applied through `problem_axis` / `algorithm_axis`);
- `default_metric` and `axis_name`;
- `next_points`: for a kind whose study grows in rounds (an adaptive search), the configurations of the
  next round from the results of the earlier ones (default: none, the study is what `expand` made);
- `report`: its tables and figures, and `convergence_runs`: the runs its convergence plots show.

Register a kind with `@register` on a subclass; `sweep.kinds` imports every module of its package, and
a study's `imports:` can bring more.
"""
from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Annotated, Any, ClassVar, cast

from pydantic import AfterValidator, BaseModel, BeforeValidator, Field

from sweep.results.runs import RunData
from sweep.study.checks import invalid
from sweep.study.errors import shown
from sweep.study.expand import Expansion, pairs
from sweep.study.encoding import encoded_list
from sweep.study.model import Point, Study
from sweep.study.plugins import DEFAULT_KIND, KINDS  # noqa: F401  DEFAULT_KIND: sweep.kinds.DEFAULT_KIND
from sweep.study.record import StudyRecord

Tables = dict[str, list[dict[str, Any]]]


class Kind:
    """A study kind (see the module docstring); subclasses set `name`, `doc`, `Axis` and override hooks."""

    name: ClassVar[str]
    doc: ClassVar[str] = ""
    Axis: ClassVar[type[BaseModel] | None] = None
    #: Its report compares compute seconds: its runs are timed one after another (`batched: auto` is off).
    timed: ClassVar[bool] = False

    # ---- the schema ----
    def axis_field(self) -> tuple[Any, Any]:
        """The annotation and default of the study's `axis` field for this kind."""
        if self.Axis is None:
            return Annotated[Any, AfterValidator(self._no_axis)], Field(None, validate_default=True)
        return Annotated[self.Axis, BeforeValidator(self._need_axis)], Field(None, validate_default=True)

    def _no_axis(self, value: Any) -> None:
        if value not in (None, {}):
            raise invalid(f"a {self.name} study has no axis; remove it or choose another kind")
        return None

    def _need_axis(self, value: Any) -> Any:
        if not isinstance(value, Mapping):
            raise invalid(f"a {self.name} study needs an axis mapping, got {shown(value)}")
        return value

    # ---- validation and expansion ----
    def resolve_axis(self, ctx: Expansion, axis: BaseModel | None) -> dict[str, Any]:
        """Check the axis against the study's entries (errors go to `ctx.errors`); the axis as stored."""
        return {} if axis is None else axis.model_dump(exclude_none=True)

    def default_metric(self, online: bool) -> str:
        """The metric reports compare when the study names none."""
        return "cumulative_regret" if online else "grad_F_sq"

    def axis_name(self, axis: dict[str, Any]) -> str | None:
        """The sweep axis as tables and plots name it (None: no axis)."""
        return None

    def problem_axis(self, axis: dict[str, Any]) -> list[tuple[Any, dict[str, Any]]]:
        """(axis value, problem parameters it sets) for each point of the axis on the problems."""
        return [(None, {})]

    def algorithm_axis(self, ctx: Expansion, axis: dict[str, Any], i: int,
                       base: dict[str, Any]) -> list[tuple[Any, dict[str, Any], dict[str, Any]]]:
        """(axis value, full config, extra coords) for each point of the axis on algorithm entry i."""
        return [(None, base, {})]

    def expand(self, ctx: Expansion, axis: dict[str, Any]) -> list[Point]:
        """Every configuration of the study (errors go to `ctx.errors`)."""
        return cartesian(self, ctx, axis)

    def count(self, ctx: Expansion, axis: dict[str, Any]) -> tuple[int, list[Point]]:
        """How many configurations `expand` makes, and some of them (at least one of each algorithm on each
        problem): counted without building them all when the kind expands the default way."""
        if type(self).expand is not Kind.expand:
            points = self.expand(ctx, axis)
            return len(points), points
        return count_cartesian(self, ctx, axis)

    def growth(self, study: Study) -> str | None:
        """How the study grows in rounds after the first (`next_points`), in words; None when it does not."""
        return None

    def next_points(self, study: Study, summary: Callable[[str], dict[str, Any] | None]) -> list[Point] | None:
        """Every configuration of the study's next round, or None when the study is complete.

        Called by the runner once every run of `study` has ended; `summary(run_key)` is a run's summary as
        stored (status, final record). The list keeps every point of `study` (their slots may grow) and adds
        the new ones; it must be a function of the study and those summaries alone, so that a resumed study
        proposes again exactly what the killed one did.
        """
        return None

    # ---- the report ----
    def report(self, runs: list[RunData], meta: StudyRecord, directory: Path) -> tuple[Tables, list[Path]]:
        """The kind's own tables (name -> rows, written as <name>.csv) and figures; `meta` is the study as its results
        record it (`StudyRecord`: `meta.report`, `meta.axis`, `meta.axis_name`, `meta.points`)."""
        return {}, []

    def convergence_runs(self, runs: list[RunData]) -> list[RunData]:
        """The runs convergence plots show."""
        return runs


def factors(kind: Kind, ctx: Expansion, axis: dict[str, Any]) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    """The problem configurations (name, params, grid, axis value, budget) and the algorithm configurations
    (entry, params, grid, axis value, coords) a cartesian study pairs, each record checked once."""
    prob_points = []
    for j, p in enumerate(ctx.problems):
        record = ctx.problem_record(j)
        for params, grid in ctx.grid_points(p["params"], record, f"problems[{j}].params"):
            for k, (av, extra) in enumerate(kind.problem_axis(axis)):
                full = (ctx.build_on_axis(record, {**params, **extra}, f"axis.values[{k}]", f"problems[{j}] '{p['name']}'")
                        if extra else ctx.build(record, params, f"problems[{j}].params", grid, p["params"]))
                if full is not None:
                    prob_points.append((p["name"], full, grid, av, p.get("budget") or ctx.budget))
    alg_points = []
    for i, (a, cls) in enumerate(zip(ctx.algorithms, ctx.classes)):
        for params, grid in ctx.grid_points(a["params"], cls.Config, f"algorithms[{i}].params"):
            base = ctx.build(cls.Config, params, f"algorithms[{i}].params", grid, a["params"])
            if base is None:
                continue
            for av, full, extra in kind.algorithm_axis(ctx, axis, i, base):
                if full is not None:
                    alg_points.append((a, full, grid, av, extra))
    return prob_points, alg_points


def cartesian(kind: Kind, ctx: Expansion, axis: dict[str, Any]) -> list[Point]:
    """Every algorithm configuration on every problem configuration it pairs with, with the kind's axis."""
    prob_points, alg_points = factors(kind, ctx, axis)
    return [_point(ctx, a, p) for a in alg_points for p in prob_points if pairs(a[0], {"name": p[0]})]


def _point(ctx: Expansion, alg: tuple[Any, ...], prob: tuple[Any, ...]) -> Point:
    """The configuration of an algorithm configuration on a problem configuration (`factors`)."""
    a, a_full, a_grid, a_av, extra = alg
    p_name, p_full, p_grid, p_av, budget = prob
    coords: dict[str, Any] = {"grid": {**{f"problem.{k}": v for k, v in p_grid.items()}, **a_grid}}
    av = a_av if a_av is not None else p_av
    if av is not None:
        coords["axis"] = av
    coords.update(extra)
    return Point(a["name"], a["label"], a_full, p_name, p_full, ctx.instance_seed, budget, ctx.n_evals, coords)


def count_cartesian(kind: Kind, ctx: Expansion, axis: dict[str, Any]) -> tuple[int, list[Point]]:
    """What `cartesian` would make, counted from its factors: the number of configurations and the first of each
    algorithm on each problem. A configuration two entries give is an error, as `check_duplicates` has it."""
    prob_points, alg_points = factors(kind, ctx, axis)
    first = {}
    for p in prob_points:
        first.setdefault(p[0], p)
    per_name = Counter(p[0] for p in prob_points)
    count, some = 0, {}
    for a in alg_points:
        for name in per_name:
            if pairs(a[0], {"name": name}):
                count += per_name[name]
                if (a[0]["name"], name) not in some:
                    some[a[0]["name"], name] = _point(ctx, a, first[name])
    dup = _duplicate(prob_points, alg_points)
    if dup is not None:
        point = _point(ctx, *dup)
        ctx.errors.add("problems", f"two entries give the same configuration ({point.label} on {point.problem} with "
                                   f"{point.problem_params}); remove the duplicate")
    return count, list(some.values())


def _duplicate(probs: list[tuple[Any, ...]], algs: list[tuple[Any, ...]]) -> tuple[Any, Any] | None:
    """An (algorithm, problem) configuration pair that two entries both give, or None: the same problem
    configuration twice with any algorithm on it, or the same algorithm configuration twice on a common problem."""
    seen: dict[Any, Any] = {}
    for p in probs:
        ident = (p[0], encoded_list([p[1], p[4]]))
        a = next((a for a in algs if pairs(a[0], {"name": p[0]})), None) if ident in seen else None
        if a is not None:
            return a, p
        seen[ident] = p
    by_ident: dict[Any, list[Any]] = {}
    for a in algs:
        ident = (a[0]["name"], a[0]["label"], encoded_list([a[1]]))
        for other in by_ident.get(ident, []):
            p = next((p for p in probs if pairs(a[0], {"name": p[0]}) and pairs(other[0], {"name": p[0]})), None)
            if p is not None:
                return a, p
        by_ident.setdefault(ident, []).append(a)
    return None


# ---------------------------------------------------------------- the registry (sweep.study.plugins.KINDS)
def register(cls: type[Kind]) -> type[Kind]:
    """Class decorator adding a kind to the registry under `cls.name`."""
    KINDS.add(cls.name, cls())
    return cls


def get(name: str) -> Kind:
    """The registered kind `name`, or a one-line error naming the nearest and every known kind."""
    return cast(Kind, KINDS[name])


def names() -> list[str]:
    """Every registered kind, built-in ones first."""
    return KINDS.names()
