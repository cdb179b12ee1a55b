"""What a paper claim is: the paper's statement, the setup table, the measured tables and the verdicts.

A claim module registers an evaluator with `@claim(name, kind=..., title=..., statement=..., setup=...,
criteria=..., study=...)` (`study`: the built-in study it reads, or that study's fields in the same file); the
evaluator reads a study's runs and returns a `Measured` (notes on the protocol, tables — the first is the main
"measured" table —, verdicts, plots). The thresholds that turn numbers into verdicts are
`Criterion`s fixed in the claim's module before any run: each quotes the paper's sentence or number with its
section, and says when it is looser than the paper's number.

One rule decides every verdict, whichever way it goes (`Criterion.judge`): `agrees` when the measured 95 %
interval satisfies the paper's inequality, `disagrees` when it lies wholly on the wrong side, `partly` when it
straddles the threshold (or some of the cases agree and some do not). The label is never replaced. A separate
`setting` says where it was earned: `paper setting`, or `deviating setup` with the open deviations of the setup
fields the statement depends on — for agreements and disagreements alike (`place`). A comparative statement
runs the same test on the baselines; when they pass it too it is `not discriminating` and does not support
the comparison. A statement whose metric no method moved within the budget is `not measured (no method moved)`.

The setup table sets the paper's setting next to the study's, field by field (`FIELDS`). A row is `same` only
when the paper states the value — its section cited in the paper column — and the study uses it; a value the
paper leaves open is `chosen: <value>` (`chosen`); anything else is a deviation, unless the study ran both ways
and showed it does not matter (`Setting.shown`).
"""
from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any


from sweep.report import analysis as an
from sweep.claims.setup import (CITATION, FIELDS, NO_MOVE, NO_PAPER, NOT_STATED, Rows, Setting, chosen, compare,  # noqa: F401
                                 quoted, setting, unstated)
from sweep.claims.verdicts import (CSV_COLUMNS, DIRECTIONS, SETTINGS, STATUSES, Criterion, Estimate, bootstrap,  # noqa: F401
                                    Verdict, bounds_ratio, censored, estimate, not_moved, num, place, ratio_bootstrap,
                                    ratio_bounds, ratio_estimate, reduced, scorecard)
from sweep.report.tables import format_table
from sweep.results.runs import RunData
from sweep.study.plugins import CLAIMS, claim_of
from sweep.study.record import StudyRecord

@dataclasses.dataclass
class Measured:
    """What a claim's evaluator measured: notes on the protocol, tables (name -> rows), verdicts and plots.

    `settings` replace the rows of the same field of the claim's setup table (for what only the runs
    show, e.g. a measured accuracy of an inner loop).
    """

    setup: str
    tables: dict[str, Rows]
    verdicts: list[Verdict]
    plots: list[Path] = dataclasses.field(default_factory=list)
    settings: list[Setting] = dataclasses.field(default_factory=list)


@dataclasses.dataclass
class ClaimReport:
    """A claim's section of the report: what the paper says, the setup table, the measurements, the verdicts."""

    name: str
    title: str
    paper: str
    setup: str
    tables: dict[str, Rows]  # name -> rows; the first is the main "measured" table
    verdicts: list[Verdict]
    plots: list[Path] = dataclasses.field(default_factory=list)
    settings: list[Setting] = dataclasses.field(default_factory=list)

    def text(self) -> str:
        """The section as printed in the report's summary."""
        parts = [f"== paper claim: {self.title} ==", f"paper: {self.paper}", ""]
        if self.settings:
            parts.append(format_table([s.row() for s in self.settings], "setup (the paper's setting and this study's):"))
        parts += [f"notes: {self.setup}", ""]
        parts += [format_table(rows, f"{name}:") for name, rows in self.tables.items() if name != "setup"]
        parts.append("verdicts:")
        for v in self.verdicts:
            where = f" | {v.setting}" + (f": {v.deviation}" if v.deviation else "") if v.setting != "-" else ""
            parts.append(f"  [{v.label.upper()}{where}] "
                         f"{v.claim}\n      paper: {v.paper}\n      measured: {v.measured}")
        parts += ["", scorecard(self.name, self.verdicts)]
        return "\n".join(parts) + "\n"

    def rows(self) -> list[dict[str, Any]]:
        """report/verdicts.csv: one row per verdict, CSV_COLUMNS."""
        return [v.row(self.name) for v in self.verdicts]


Evaluator = Callable[[StudyRecord, list[RunData], Path], Measured]
#: A claim's study: the name of a built-in study file (sweep/studies/<name>.yaml) that names the claim, or the
#: study's fields themselves (a mapping or YAML text), validated by the same model as a study file when loaded.
StudySource = str | Mapping[str, Any] | None
SetupFn = Callable[[StudyRecord], list[Setting]]


@dataclasses.dataclass(frozen=True)
class Claim:
    """A registered claim: the study kind it reads, its title, statement, setup table and evaluator."""

    name: str
    kind: str
    title: str
    statement: str
    evaluate: Evaluator
    setup: SetupFn | None = None
    criteria: tuple[Criterion, ...] = ()
    timed: bool = False  # its verdicts read compute seconds: its study's runs are timed one after another
    # The study it reads: a built-in study's name, or the study itself (see `claim`); not compared (a mapping).
    study: StudySource = dataclasses.field(default=None, compare=False)

    def settings(self, meta: StudyRecord) -> list[Setting]:
        """The setup table of a study (from its configuration alone)."""
        return self.setup(meta) if self.setup is not None else []

    def __call__(self, meta: StudyRecord, runs: list[RunData], directory: Path) -> ClaimReport:
        """The claim's report section on these runs (plots written to `directory`), verdicts gated by the setup."""
        m = self.evaluate(meta, runs, directory)
        measured = {s.field: s for s in m.settings}
        settings = [measured.pop(s.field, s) for s in self.settings(meta)] + list(measured.values())
        place(m.verdicts, settings)
        tables = {**m.tables, "setup": [s.row() for s in settings]} if settings else m.tables
        return ClaimReport(self.name, self.title, self.statement, m.setup, tables, m.verdicts, m.plots, settings)

    def section(self, meta: StudyRecord, runs: list[RunData], directory: Path) -> ClaimReport:
        """The claim's section of a study's report: its report on the runs, with the study's scale."""
        rep = self(meta, runs, directory)
        scale = meta.scale
        rep.setup += f" Scale: {scale}."
        if reduced(rep.verdicts, scale):
            rep.setup += (f" The {scale} scale is below the paper's sizes: its verdicts (setting 'reduced scale') check "
                          "that the study runs end to end and are not evidence for or against the paper.")
        return rep


# The registry: sweep.study.plugins.CLAIMS (study/ validates with it, report/ reads it).


def claim(name: str, *, kind: str, title: str, statement: str, setup: SetupFn | None = None,
          criteria: Sequence[Criterion] = (), timed: bool = False, study: StudySource = None
          ) -> Callable[[Evaluator], Claim]:
    """Register `fn(meta, runs, directory) -> Measured` as claim `name`, for studies of `kind` (`meta`: the study as
    its results record it, a `sweep.study.record.StudyRecord`: `meta.report.metric`, `len(meta.seeds)`, `meta.axis`,
    `meta.points` the configurations as dicts).

    `setup(meta) -> [Setting]` builds the claim's setup table from the study's configuration; `criteria` are the
    thresholds its verdicts are judged by (a test holds each to flip between agrees and disagrees); `timed`, that
    its verdicts read compute seconds (its study then runs unbatched by default, see sweep.batching). `study` is
    the study the claim reads: the name of a built-in study file, or the study's fields in the claim's own file
    (a mapping or YAML text; its `claim:` is this claim, its `name` defaults to the claim's), so a claim with its
    study is one file: `bisweep list studies` shows it and `bisweep run <its name>` runs it.
    """
    if study is not None and not isinstance(study, (str, Mapping)):
        raise TypeError(f"claim {name!r}: study must be a study name, YAML text or a mapping, got {type(study).__name__}")

    def wrap(fn: Evaluator) -> Claim:
        return CLAIMS.add(name, Claim(name, kind, title, statement, fn, setup, tuple(criteria), timed, study))

    return wrap


def evaluate(meta: StudyRecord, runs: list[RunData], directory: Path) -> ClaimReport | None:
    """The claim section of a study's report (None when the study names no claim)."""
    name = claim_of(meta)
    return CLAIMS[name].section(meta, runs, directory) if name else None


# ---------------------------------------------------------------- small helpers
def final(r: RunData, metric: str, goal: str = "min") -> float:
    """A run's final value (diverged: the worst value, failed or missing: NaN)."""
    return an.final_value({"status": r.status, "final": r.final}, metric, goal)


def initial(r: RunData, metric: str) -> float:
    """The metric at the run's first record (its starting point)."""
    v = r.records[0].get(metric) if r.records else None
    return float(v) if isinstance(v, (int, float)) else math.nan


def pct(v: float) -> str:
    """A percentage with two decimals (inf and nan spelled out)."""
    return f"{v:.2f}%" if math.isfinite(v) else ("inf" if v == math.inf else "nan")



def exponent(xs: Sequence[float], ys: Sequence[float]) -> float:
    """Least-squares log–log slope of ys against xs (NaN with fewer than two usable points)."""
    return an.fit_loglog(xs, ys)[0]


def clock(r: RunData) -> str:
    """The record key of a run's compute seconds: the stepping thread's CPU seconds when recorded under one BLAS
    thread (the whole step's work, not inflated by other processes on a busy machine), else wall-clock `time`."""
    return "cpu_time" if "cpu_time" in (r.final or {}) and r.point.get("blas_threads") == 1 else "time"


def local_slope(xs: Sequence[float], ys: Sequence[float]) -> float:
    """The log–log slope between the two largest x with a usable y (where a fixed overhead no longer flattens it)."""
    pts = [(x, y) for x, y in zip(xs, ys) if math.isfinite(y) and y > 0 and x > 0][-2:]
    return exponent(*zip(*pts)) if len(pts) == 2 else math.nan


def growth(xs: Sequence[float], per_seed: Sequence[Sequence[float]]) -> tuple[Estimate, Estimate]:
    """(global log–log fit, local slope at the two largest x), each over seeds with its 95 % interval;
    `per_seed` holds one y sequence (aligned with xs) per seed."""
    return (estimate([exponent(xs, ys) for ys in per_seed]), estimate([local_slope(xs, ys) for ys in per_seed]))


def moved(starts: Sequence[float], finals: Sequence[float], fraction: float) -> bool:
    """Some method's final value differs from its start by at least `fraction` of the start."""
    return any(math.isfinite(s) and math.isfinite(f) and abs(f - s) >= fraction * max(abs(s), 1e-300)
               for s, f in zip(starts, finals))


#: A comparator whose final metric is this many times worse than its start has diverged.
DIVERGED = 2.0


def health(runs: Sequence[RunData], metric: str, goal: str = "min", fraction: float = 1e-3) -> str | None:
    """Why a comparator's runs cannot carry a comparison — diverged (a diverged run, or its final `metric` at least
    DIVERGED × worse than its start) or never moved (no run changed `metric` by `fraction` of its start) —, None
    when they can. Judged on the median over its runs."""
    if not runs:
        return None
    if any(r.status == "diverged" for r in runs):
        return "diverged (a run stopped as diverged)"
    starts = [initial(r, metric) for r in runs]
    finals = [final(r, metric, goal) for r in runs]
    s, f = an.median(starts), an.median(finals)
    if not (math.isfinite(s) and math.isfinite(f)):
        return None if math.isnan(f) or math.isnan(s) else f"diverged (final {metric} {num(f)})"
    worse = f / s if goal == "min" else s / f if f > 0 else math.inf
    if s > 0 and worse >= DIVERGED:
        return f"diverged (final {metric} {num(worse)}× {'its start' if goal == 'min' else 'below its start'})"
    if not moved(starts, finals, fraction):
        return f"never moved ({metric} within {fraction:g} of its start)"
    return None
