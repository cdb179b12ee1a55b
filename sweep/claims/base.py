"""What a paper claim is: the paper's statement, the setup table, the measured tables and the verdicts.

A claim module registers an evaluator with `@claim(name, kind=..., title=..., statement=..., setup=...,
criteria=...)`; the evaluator reads a study's runs and returns a `Measured` (notes on the protocol, tables —
the first is the main "measured" table —, verdicts, plots). The thresholds that turn numbers into verdicts are
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
import re
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from scipy import stats

from sweep import analysis as an
from sweep.results import RunData
from sweep.tables import format_table

#: A verdict's direction: the measurement against the paper.
STATUSES = ("agrees", "disagrees", "partly", "not measured", "reference")
DIRECTIONS = ("agrees", "disagrees", "partly")
#: Where a verdict was earned ('-': a reference or an unmeasured statement).
SETTINGS = ("paper setting", "deviating setup", "-")
#: The columns of report/verdicts.csv.
CSV_COLUMNS = ("claim", "statement", "paper", "measured", "low", "high", "verdict", "setting", "deviations",
               "discriminating")
#: The fields of every claim's setup table, in the order printed.
FIELDS = ("problem and data", "dimensions", "constraints", "noise", "metric", "what is timed", "iteration counts",
          "batch sizes", "inner-loop policy", "step sizes", "seeds")
NOT_STATED = "not stated"
NO_PAPER = "no paper claim"
NO_MOVE = "no method moved"
#: A paper column that cites where the paper states its value (a section, appendix, figure, table, equation, ...).
CITATION = re.compile(r"§|App\. ?[A-Z]|Table \d|Fig\. ?\d|Figs\. ?\d|\(\d+\)|Remark \d|Lemma \d|Theorem \d|"
                      r"Algorithm \d|Prop(osition)?\.? \d|A\.\d")
Rows = list[dict[str, Any]]


@dataclasses.dataclass
class Setting:
    """One row of the setup table: the paper's value and the study's, and how they differ."""

    field: str
    paper: str
    study: str
    deviation: str | None = None  # None: the study runs the paper's setting, or a value the paper leaves open
    shown: str | None = None  # the study ran both ways and the deviation did not change the verdicts: how
    chosen: str | None = None  # the study's value of a setting the paper leaves open

    @property
    def status(self) -> str:
        """same, chosen: <value>, deviation, deviation (shown not to matter) or no paper claim."""
        if self.deviation is not None:
            return "deviation (shown not to matter)" if self.shown else "deviation"
        if self.paper == NO_PAPER:
            return NO_PAPER
        if self.chosen is not None or self.paper.startswith(NOT_STATED):
            return f"chosen: {self.chosen if self.chosen is not None else self.study}"
        return "same"

    @property
    def cited(self) -> bool:
        """The paper column names where the paper states the value."""
        return bool(CITATION.search(self.paper))

    @property
    def open(self) -> bool:
        """A deviation that could still explain the measurement."""
        return self.deviation is not None and not self.shown

    def row(self) -> dict[str, str]:
        """The setting as a table row."""
        note = self.deviation or ""
        if self.shown:
            note += f" (shown not to matter: {self.shown})"
        return {"field": self.field, "paper": self.paper, "study": self.study, "status": self.status, "deviation": note}


def setting(field: str, paper: str, study: str, deviation: str | None = None, shown: str | None = None) -> Setting:
    """A row of the setup table (`field` one of FIELDS); `paper` cites where the paper states it."""
    if field not in FIELDS:
        raise KeyError(f"setup field {field!r} is not one of {', '.join(FIELDS)}")
    return Setting(field, paper, study, deviation, shown)


def compare(field: str, paper_value: Any, study_value: Any, paper: str, study: str, deviation: str) -> Setting:
    """A row whose deviation is `deviation` when the study's value is not the paper's (compared as data)."""
    return setting(field, paper, study, None if study_value == paper_value else deviation)


def chosen(field: str, study: str, value: str | None = None, note: str = "") -> Setting:
    """A row for a value the paper leaves open: status `chosen: <value>` (`value` defaults to `study`)."""
    row = setting(field, NOT_STATED + (f" ({note})" if note else ""), study)
    row.chosen = value if value is not None else study
    return row


def unstated(field: str, study: str, note: str = "") -> Setting:
    """A row for a value the paper leaves open, `chosen: <study>`."""
    return chosen(field, study, note=note)


# ---------------------------------------------------------------- measurements and the rule that judges them
@dataclasses.dataclass(frozen=True)
class Estimate:
    """A measured value with its 95 % interval (low = high = value: one seed, or no seed variation)."""

    value: float
    low: float
    high: float

    @classmethod
    def point(cls, value: float) -> Estimate:
        return cls(value, value, value)

    def text(self) -> str:
        if self.low == self.high or not (math.isfinite(self.low) and math.isfinite(self.high)):
            return num(self.value)
        return f"{num(self.value)} [{num(self.low)}, {num(self.high)}]"


def estimate(values: Sequence[float]) -> Estimate:
    """Mean over seeds with its 95 % Student-t interval (one value: a point; ±inf anywhere: that infinity)."""
    v = np.asarray([x for x in values if not math.isnan(x)], dtype=float)
    if not v.size:
        return Estimate.point(math.nan)
    if not np.all(np.isfinite(v)):
        bad = float(v[~np.isfinite(v)][0])
        return Estimate(bad, float(v.min()), float(v.max()))
    m = float(v.mean())
    if v.size == 1 or np.all(v == v[0]):
        return Estimate.point(m)
    half = float(stats.t.ppf(0.975, v.size - 1) * v.std(ddof=1) / math.sqrt(v.size))
    return Estimate(m, m - half, m + half)


@dataclasses.dataclass(frozen=True)
class Criterion:
    """A threshold read from the paper's words: `quote` (with its section), the inequality the measurement must
    satisfy (`side`: 'max' — at most `threshold`; 'min' — at least; 'range' — within [threshold, upper]), and how
    the threshold is looser than the paper's number, if it is."""

    name: str
    quote: str
    threshold: float
    side: str = "max"
    upper: float = math.inf
    looser: str = ""
    depends: tuple[str, ...] | None = None  # the setup fields the statement rests on (None: all)
    comparative: bool = False  # the statement sets the method apart from the baselines

    def passes(self, e: Estimate) -> bool | None:
        """True: the whole interval satisfies the inequality; False: the whole interval violates it; None: it
        straddles the threshold (or is not a number)."""
        lo, hi = e.low, e.high
        if math.isnan(lo) or math.isnan(hi):
            return None
        if self.side == "max":
            return True if hi <= self.threshold else (False if lo > self.threshold else None)
        if self.side == "min":
            return True if lo >= self.threshold else (False if hi < self.threshold else None)
        if self.threshold <= lo and hi <= self.upper:
            return True
        return False if hi < self.threshold or lo > self.upper else None

    def judge(self, estimates: Sequence[Estimate]) -> str:
        """agrees / disagrees when every case is wholly on one side, partly otherwise; not measured without numbers."""
        if not estimates or all(math.isnan(e.value) for e in estimates):
            return "not measured"
        got = [self.passes(e) for e in estimates]
        if all(g is True for g in got):
            return "agrees"
        if all(g is False for g in got):
            return "disagrees"
        return "partly"

    @property
    def rule(self) -> str:
        """The inequality as printed."""
        if self.side == "max":
            return f"≤ {num(self.threshold)}"
        if self.side == "min":
            return f"≥ {num(self.threshold)}"
        return f"in [{num(self.threshold)}, {num(self.upper)}]"

    def verdict(self, statement: str, estimates: Sequence[Estimate], measured: str,
                baselines: Sequence[Estimate] | None = None) -> Verdict:
        """The verdict on `estimates` (the subjects' cases); `baselines`: the same test on the rivals."""
        status = self.judge(estimates)
        worst = _worst(self, estimates)
        disc = "-"
        if baselines is not None:
            base = self.judge(baselines) if baselines else "not measured"
            disc = "no" if base == "agrees" else ("yes" if base == "disagrees" else "partly")
            measured += f"; the baselines on the same test: {base} (" + ", ".join(e.text() for e in baselines) + ")"
        paper = self.quote + f" — threshold {self.rule}" + (f" (looser than the paper: {self.looser})" if self.looser else "")
        return Verdict(statement, paper, measured, status, self.depends, estimate=worst, discriminating=disc,
                       criterion=self.name)


def _worst(c: Criterion, estimates: Sequence[Estimate]) -> Estimate:
    """The case that decides the verdict: the one furthest on the wrong side of the threshold."""
    ok = [e for e in estimates if not math.isnan(e.value)]
    if not ok:
        return Estimate.point(math.nan)
    if c.side == "max":
        return max(ok, key=lambda e: e.value)
    if c.side == "min":
        return min(ok, key=lambda e: e.value)
    return max(ok, key=lambda e: max(c.threshold - e.value, e.value - c.upper))


@dataclasses.dataclass
class Verdict:
    """One of the paper's statements next to the measurement.

    `status` is the direction (STATUSES), decided from the measurement alone; `setting` and `deviations`
    say where it was earned (`place`); `depends` names the setup fields the statement rests on (None: all);
    `discriminating` is yes / no / partly for a comparative statement whose test was run on the baselines too,
    '-' otherwise; `estimate` is the deciding value with its 95 % interval.
    """

    claim: str
    paper: str
    measured: str
    status: str
    depends: tuple[str, ...] | None = None
    deviation: str = ""
    setting: str = "-"
    estimate: Estimate = dataclasses.field(default_factory=lambda: Estimate.point(math.nan))
    discriminating: str = "-"
    criterion: str = ""
    note: str = ""  # e.g. NO_MOVE for a `not measured`

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise ValueError(f"verdict status: must be one of {', '.join(STATUSES)}, got {self.status!r}")

    @property
    def label(self) -> str:
        """The direction as printed, with its qualifiers."""
        head = self.status + (f" ({self.note})" if self.note else "")
        return head + (" (not discriminating)" if self.discriminating == "no" else "")

    def row(self, claim: str = "") -> dict[str, Any]:
        """The verdict as a row of report/verdicts.csv (CSV_COLUMNS)."""
        e = self.estimate
        return {"claim": claim, "statement": self.claim, "paper": self.paper, "measured": self.measured,
                "low": e.low, "high": e.high, "verdict": self.status, "setting": self.setting,
                "deviations": self.deviation, "discriminating": self.discriminating}


def not_moved(statement: str, paper: str, measured: str, depends: tuple[str, ...] | None = None) -> Verdict:
    """A statement whose metric no method moved within the budget: not measured, whatever the threshold says."""
    return Verdict(statement, paper, measured, "not measured", depends, note=NO_MOVE)


def place(verdicts: Iterable[Verdict], settings: Sequence[Setting]) -> None:
    """Say where each measured verdict was earned: the open deviations of the fields it depends on, or the paper's
    setting. The direction is left as it is, whichever it is."""
    no_paper = bool(settings) and all(s.paper == NO_PAPER for s in settings)
    for v in verdicts:
        if v.status not in DIRECTIONS or no_paper:  # a reference, or a reference model without a paper
            v.setting, v.deviation = "-", ""
            continue
        open_ = [s for s in settings if s.open and (v.depends is None or s.field in v.depends)]
        v.deviation = "; ".join(f"{s.field}: {s.deviation}" for s in open_)
        v.setting = "deviating setup" if open_ else "paper setting"


gate = place  # the older name


def scorecard(name: str, verdicts: Sequence[Verdict]) -> str:
    """One table for a claim: statement, direction, setting, discriminating, measured value [95 %], the paper's;
    then the counts by direction × setting (not-discriminating agreements apart)."""
    rows = [{"statement": v.claim, "direction": v.label, "setting": v.setting, "discriminating": v.discriminating,
             "measured [95%]": v.estimate.text() if not math.isnan(v.estimate.value) else "-",
             "paper": v.paper.split(" — threshold")[0]} for v in verdicts]
    counts: dict[tuple[str, str], int] = {}
    for v in verdicts:
        key = (v.status + (" (not discriminating)" if v.discriminating == "no" else ""), v.setting)
        counts[key] = counts.get(key, 0) + 1
    tally = ", ".join(f"{k[0]} in {k[1]}: {n}" if k[1] != "-" else f"{k[0]}: {n}" for k, n in sorted(counts.items()))
    return format_table(rows, f"scorecard ({name}):") + f"counts: {tally}\n"


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
    criteria: tuple[Criterion, ...] = ()

    def settings(self, meta: dict[str, Any]) -> list[Setting]:
        """The setup table of a study (from its configuration alone)."""
        return self.setup(meta) if self.setup is not None else []

    def __call__(self, meta: dict[str, Any], runs: list[RunData], directory: Path) -> ClaimReport:
        """The claim's report section on these runs (plots written to `directory`), verdicts gated by the setup."""
        m = self.evaluate(meta, runs, directory)
        measured = {s.field: s for s in m.settings}
        settings = [measured.pop(s.field, s) for s in self.settings(meta)] + list(measured.values())
        place(m.verdicts, settings)
        tables = {**m.tables, "setup": [s.row() for s in settings]} if settings else m.tables
        return ClaimReport(self.name, self.title, self.statement, m.setup, tables, m.verdicts, m.plots, settings)


CLAIMS: dict[str, Claim] = {}


def claim(name: str, *, kind: str, title: str, statement: str, setup: SetupFn | None = None,
          criteria: Sequence[Criterion] = ()) -> Callable[[Evaluator], Claim]:
    """Register `fn(meta, runs, directory) -> Measured` as claim `name`, for studies of `kind`.

    `setup(meta) -> [Setting]` builds the claim's setup table from the study's configuration; `criteria` are the
    thresholds its verdicts are judged by (a test holds each to flip between agrees and disagrees).
    """
    def wrap(fn: Evaluator) -> Claim:
        if name in CLAIMS:
            raise KeyError(f"claim '{name}' registered twice")
        CLAIMS[name] = Claim(name, kind, title, statement, fn, setup, tuple(criteria))
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
