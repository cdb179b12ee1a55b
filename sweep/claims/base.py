"""What a paper claim is: the paper's statement, the setup table, the measured tables and the verdicts.

A claim module registers an evaluator with `@claim(name, kind=..., title=..., statement=..., setup=...)`;
the evaluator reads a study's runs and returns a `Measured` (notes on the protocol, tables — the first is
the main "measured" table —, verdicts, plots). Thresholds that turn numbers into verdicts are fixed in the
claim's module, before any run, and printed with the verdicts.

The setup table sets the paper's experimental setting next to the study's, field by field (`FIELDS`:
problem and data, dimensions, ..., seeds). `setup(meta)` builds it from the study alone (no runs), so a
test can hold a built-in study to its paper's setting. A row whose study value differs from the paper's
is a deviation; a deviation that could explain a difference turns a `disagrees` or `partly` verdict that
depends on that field into `not comparable: <deviation>`, unless the study ran both ways and showed it
does not matter (`Setting.shown`). A field the paper does not state is not a deviation, but is printed.
"""
from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

from sweep import analysis as an
from sweep.results import RunData
from sweep.tables import format_table

STATUSES = ("agrees", "disagrees", "partly", "not measured", "not comparable", "reference", "consistent",
            "inconsistent")
#: The fields of every claim's setup table, in the order printed.
FIELDS = ("problem and data", "dimensions", "constraints", "noise", "metric", "what is timed", "iteration counts",
          "batch sizes", "inner-loop policy", "step sizes", "seeds")
#: A verdict with one of these statuses can be explained by a deviation of the setup.
DIFFERENCES = ("disagrees", "partly")
NOT_STATED = "not stated"
NO_PAPER = "no paper claim"
Rows = list[dict[str, Any]]


@dataclasses.dataclass
class Setting:
    """One row of the setup table: the paper's value and the study's, and how they differ."""

    field: str
    paper: str
    study: str
    deviation: str | None = None  # None: the study runs the paper's setting (or the paper does not state it)
    shown: str | None = None  # the study ran both ways and the deviation did not change the verdicts: how

    @property
    def status(self) -> str:
        """same, deviation, deviation (shown not to matter), not stated (by the paper) or no paper claim."""
        if self.deviation is None:
            if self.paper == NO_PAPER:
                return NO_PAPER
            return NOT_STATED if self.paper.startswith(NOT_STATED) else "same"
        return "deviation (shown not to matter)" if self.shown else "deviation"

    @property
    def open(self) -> bool:
        """A deviation that could still explain a difference."""
        return self.deviation is not None and not self.shown

    def row(self) -> dict[str, str]:
        """The setting as a table row."""
        note = self.deviation or ""
        if self.shown:
            note += f" (shown not to matter: {self.shown})"
        return {"field": self.field, "paper": self.paper, "study": self.study, "status": self.status, "deviation": note}


def setting(field: str, paper: str, study: str, deviation: str | None = None, shown: str | None = None) -> Setting:
    """A row of the setup table (`field` one of FIELDS)."""
    if field not in FIELDS:
        raise KeyError(f"setup field {field!r} is not one of {', '.join(FIELDS)}")
    return Setting(field, paper, study, deviation, shown)


def compare(field: str, paper_value: Any, study_value: Any, paper: str, study: str, deviation: str) -> Setting:
    """A row whose deviation is `deviation` when the study's value is not the paper's (compared as data)."""
    return setting(field, paper, study, None if study_value == paper_value else deviation)


def unstated(field: str, study: str, note: str = "") -> Setting:
    """A row for a field the paper does not state."""
    return setting(field, NOT_STATED + (f" ({note})" if note else ""), study)


@dataclasses.dataclass
class Verdict:
    """One of the paper's statements next to the measurement.

    `depends` names the setup fields the statement rests on (None: all of them); an open deviation of one
    of them turns a difference into `not comparable` (see `gate`).
    """

    claim: str
    paper: str
    measured: str
    status: str
    depends: tuple[str, ...] | None = None
    deviation: str = ""

    def row(self) -> dict[str, str]:
        """The verdict as a table row."""
        return {"status": self.status, "claim": self.claim, "paper": self.paper, "measured": self.measured,
                "deviation": self.deviation}

    @property
    def label(self) -> str:
        """The status as printed: `not comparable: <deviation>` names the deviation."""
        return f"{self.status}: {self.deviation}" if self.deviation else self.status


def verdict_of(checks: Sequence[bool]) -> str:
    """agrees when every case agrees, partly when some do, else disagrees."""
    return "agrees" if all(checks) else ("partly" if any(checks) else "disagrees")


def gate(verdicts: Iterable[Verdict], settings: Sequence[Setting]) -> None:
    """Turn each difference that an open deviation of a field it depends on could explain into `not comparable`."""
    for v in verdicts:
        if v.status not in DIFFERENCES:
            continue
        open_ = [s for s in settings if s.open and (v.depends is None or s.field in v.depends)]
        if open_:
            v.deviation = "; ".join(f"{s.field}: {s.deviation}" for s in open_)
            v.status = "not comparable"


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
            head = v.status.upper() + (f": {v.deviation}" if v.deviation else "")
            parts.append(f"  [{head}] "
                         f"{v.claim}\n      paper: {v.paper}\n      measured: {v.measured}")
        return "\n".join(parts) + "\n"


Evaluator = Callable[[dict[str, Any], list[RunData], Path], Measured]
SetupFn = Callable[[dict[str, Any]], list[Setting]]


@dataclasses.dataclass(frozen=True)
class Claim:
    """A registered claim: the study kind it reads, its title, statement, setup table and evaluator."""

    name: str
    kind: str
    title: str
    statement: str
    evaluate: Evaluator
    setup: SetupFn | None = None

    def settings(self, meta: dict[str, Any]) -> list[Setting]:
        """The setup table of a study (from its configuration alone)."""
        return self.setup(meta) if self.setup is not None else []

    def __call__(self, meta: dict[str, Any], runs: list[RunData], directory: Path) -> ClaimReport:
        """The claim's report section on these runs (plots written to `directory`), verdicts gated by the setup."""
        m = self.evaluate(meta, runs, directory)
        measured = {s.field: s for s in m.settings}
        settings = [measured.pop(s.field, s) for s in self.settings(meta)] + list(measured.values())
        gate(m.verdicts, settings)
        tables = {**m.tables, "setup": [s.row() for s in settings]} if settings else m.tables
        return ClaimReport(self.name, self.title, self.statement, m.setup, tables, m.verdicts, m.plots, settings)


CLAIMS: dict[str, Claim] = {}


def claim(name: str, *, kind: str, title: str, statement: str, setup: SetupFn | None = None) -> Callable[[Evaluator], Claim]:
    """Register `fn(meta, runs, directory) -> Measured` as claim `name`, for studies of `kind`.

    `setup(meta) -> [Setting]` builds the claim's setup table from the study's configuration.
    """
    def wrap(fn: Evaluator) -> Claim:
        if name in CLAIMS:
            raise KeyError(f"claim '{name}' registered twice")
        CLAIMS[name] = Claim(name, kind, title, statement, fn, setup)
        return CLAIMS[name]

    return wrap


def evaluate(meta: dict[str, Any], runs: list[RunData], directory: Path) -> ClaimReport | None:
    """The claim section of a study's report (None when the study names no claim)."""
    name = meta.get("claim") or (meta.get("source") or {}).get("claim")
    if not name:
        return None
    rep = CLAIMS[name](meta, runs, directory)
    rep.setup += f" Scale: {meta.get('scale', 'default')}."
    return rep


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


def num(v: float) -> str:
    """A number in 4 significant digits."""
    return f"{v:.4g}" if isinstance(v, (int, float)) else str(v)


def exponent(xs: Sequence[float], ys: Sequence[float]) -> float:
    """Least-squares log–log slope of ys against xs (NaN with fewer than two usable points)."""
    return an.fit_loglog(xs, ys)[0]


def clock(r: RunData) -> str:
    """The record key of a run's compute seconds: the stepping thread's CPU seconds when recorded under one BLAS
    thread (the whole step's work, not inflated by other processes on a busy machine), else wall-clock `time`."""
    return "cpu_time" if "cpu_time" in (r.final or {}) and r.point.get("blas_threads") == 1 else "time"
