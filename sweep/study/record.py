"""A recorded study: what `<results>/study.json` holds, typed, as kinds, claims, reports and the CLI read it.

The driver has the validated `Study`; a report may run elsewhere, later, from the results directory alone, so it
reads this record instead (`StudyRecord.from_dict` of study.json, or `StudyRecord.from_study` in-process). The
header fields are typed; `points` stays the list of plain dicts study.json holds (one per configuration: key,
algorithm, label, algorithm_params, problem, problem_params, instance_seed, budget, n_evals, coords), shared, not
copied: a study may have 10⁵–10⁶ of them and the report's time and memory at 10⁵ are measured.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from problems.shared.errors import ParameterError
from sweep.study.model import DEFAULT_SCALE, ReportOptions, Study

#: One configuration as study.json records it (`Point.to_dict`).
PointDict = dict[str, Any]

_REPORT_FIELDS = {f.name: f for f in dataclasses.fields(ReportOptions)}


@dataclasses.dataclass(frozen=True, kw_only=True, eq=False)
class StudyRecord:
    """A study as its results directory records it (read-only; `with_report` makes a modified copy)."""

    name: str
    description: str = ""
    kind: str
    axis: dict[str, Any] = dataclasses.field(default_factory=dict)
    axis_name: str | None = None  # the sweep axis as tables and plots name it
    seeds: list[int]
    online: bool = False
    spec_hash: str | None = None
    report: ReportOptions
    claim: str | None = None
    scale: str = DEFAULT_SCALE
    source: dict[str, Any] = dataclasses.field(default_factory=dict)  # where the study came from (its imports, ...)
    environment: dict[str, Any] | None = None  # the machine it ran on (sweep.results.environment); None in-process
    points: list[PointDict]

    @classmethod
    def from_study(cls, study: Study, environment: dict[str, Any] | None = None) -> StudyRecord:
        """The record of a validated study, as `ResultStore.write_study` writes it."""
        return cls(name=study.name, description=study.description, kind=study.kind, axis=study.axis,
                   axis_name=study.axis_name, seeds=study.seeds, online=study.online, spec_hash=study.spec_hash,
                   report=study.report, claim=study.claim, scale=study.scale, source=study.source,
                   environment=environment, points=[p.to_dict() for p in study.points])

    @classmethod
    def from_dict(cls, data: Any, where: str = "study.json") -> StudyRecord:
        """The record of a study.json mapping; a field of the wrong type is a one-line error naming it.

        A field an older study.json lacks takes its default (a report option, `ReportOptions`'). The points are
        taken as they are, not copied or checked one by one (the store checks their keys, which name its files).
        """
        if not isinstance(data, Mapping) or not isinstance(data.get("points"), list) \
                or not isinstance(data.get("seeds"), list):
            raise ParameterError(f"{where}: holds no study (points and seeds)")
        for i, seed in enumerate(data["seeds"]):
            if not isinstance(seed, int) or isinstance(seed, bool):
                raise ParameterError(f"{where}: seeds[{i}] must be an integer, got {str(seed)[:80]!r}")
        _typed(data, "name", str, where, required=True)
        _typed(data, "kind", str, where, required=True)
        _typed(data, "description", str, where)
        for name in ("axis_name", "spec_hash", "claim", "scale"):
            _typed(data, name, (str, type(None)), where)
        _typed(data, "online", bool, where)
        for name in ("axis", "source"):
            _typed(data, name, Mapping, where)
        _typed(data, "environment", (Mapping, type(None)), where)
        return cls(name=data["name"], description=data.get("description", ""), kind=data["kind"],
                   axis=data.get("axis", {}), axis_name=data.get("axis_name"), seeds=data["seeds"],
                   online=data.get("online", False), spec_hash=data.get("spec_hash"),
                   report=_report(data.get("report"), f"{where}: report"), claim=data.get("claim"),
                   scale=data.get("scale") or DEFAULT_SCALE, source=data.get("source", {}),
                   environment=data.get("environment"), points=data["points"])

    def to_dict(self) -> dict[str, Any]:
        """The study.json mapping of this record, in its order (its points the same list, not copies)."""
        out = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        out["report"] = dataclasses.asdict(self.report)
        if self.environment is None:  # recorded only where the study ran
            del out["environment"]
        return out

    def with_report(self, **changes: Any) -> StudyRecord:
        """This record with report options changed (e.g. metric, goal); the points are shared."""
        return dataclasses.replace(self, report=dataclasses.replace(self.report, **changes))

    @property
    def imports(self) -> list[str]:
        """The plugin modules the study named (never imported from a received results directory)."""
        return [m for m in self.source.get("imports") or [] if isinstance(m, str)]


def _typed(data: Mapping[str, Any], name: str, types: type | tuple[type, ...], where: str,
           required: bool = False) -> None:
    """A one-line error unless `data[name]` is of `types` (or, unless `required`, missing)."""
    if name not in data:
        if required:
            raise ParameterError(f"{where}: missing field {name!r}")
        return
    if not isinstance(data[name], types):
        raise ParameterError(f"{where}: {name} has the wrong type, got {str(data[name])[:80]!r}")


def _report(data: Any, where: str) -> ReportOptions:
    """The report options study.json records (an option it lacks, from an older version, at its default)."""
    if not isinstance(data, Mapping) or not isinstance(data.get("metric"), str):
        raise ParameterError(f"{where}: must be a mapping with a metric name, got {str(data)[:80]!r}")
    unknown = sorted(set(data) - set(_REPORT_FIELDS))
    if unknown:
        raise ParameterError(f"{where}: unknown field {unknown[0]!r}; fields: {', '.join(_REPORT_FIELDS)}")
    return ReportOptions(**data)
