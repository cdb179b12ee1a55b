"""The registries study kinds and paper claims register into, owned here so that study/ and report/ read them
without importing the folders that fill them (sweep/kinds/, sweep/claims/ build on the study's model and the
report's tables, so they come after both).

The built-in kinds and claims are the modules of `sweep.kinds` and `sweep.claims`, imported on a registry's
first read as an installed plugin is (problems.shared.registries); what study/ and report/ call on an entry is
the protocol below (`sweep.kinds.base.Kind` and `sweep.claims.base.Claim` document each hook).
"""
from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

from problems.shared.registries import Registry
from sweep.study.expand import Expansion
from sweep.study.model import Point
from sweep.study.record import StudyRecord

#: The kind of a study that names none.
DEFAULT_KIND = "comparison"

Rows = list[dict[str, Any]]


class StudyKind(Protocol):
    """What validation, expansion and the report call on a registered kind."""

    name: str
    timed: bool

    def axis_field(self) -> tuple[Any, Any]: ...

    def resolve_axis(self, ctx: Expansion, axis: Any) -> dict[str, Any]: ...

    def default_metric(self, online: bool) -> str: ...

    def axis_name(self, axis: dict[str, Any]) -> str | None: ...

    def expand(self, ctx: Expansion, axis: dict[str, Any]) -> list[Point]: ...

    def count(self, ctx: Expansion, axis: dict[str, Any]) -> tuple[int, list[Point]]: ...

    # runs: the study's runs as reports read them (sweep.results.runs.RunData, a later folder)
    def report(self, runs: Sequence[Any], meta: StudyRecord, directory: Path) -> tuple[dict[str, Rows], list[Path]]: ...

    def convergence_runs(self, runs: Sequence[Any]) -> Sequence[Any]: ...


class ClaimSection(Protocol):
    """A claim's section of a report: its tables, its verdicts as CSV rows, its figures and its text."""

    tables: dict[str, Rows]
    plots: list[Path]

    def rows(self) -> Rows: ...

    def text(self) -> str: ...


class StudyClaim(Protocol):
    """What validation and the report call on a registered paper claim."""

    name: str
    kind: str  # the kind of study it reads
    timed: bool  # its verdicts read compute seconds

    def section(self, meta: StudyRecord, runs: Sequence[Any], directory: Path) -> ClaimSection: ...


KINDS: Registry[StudyKind] = Registry("kind", builtin="sweep.kinds")
CLAIMS: Registry[StudyClaim] = Registry("claim", builtin="sweep.claims")


def claim_of(meta: StudyRecord) -> str | None:
    """The claim a study's report checks: its own, or the one of the built-in study it was made from."""
    return meta.claim or meta.source.get("claim") or None
