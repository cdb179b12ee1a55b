"""The rule that turns a measurement into a verdict, whichever way it goes.

`agrees` when the measured 95 % interval satisfies the paper's inequality (`Criterion`), `disagrees` when it
lies wholly on the wrong side, `partly` when it straddles the threshold (or some cases agree and some do not).
The label is never replaced; `place` says where it was earned (the paper's setting, or a deviating setup with
the open deviations the statement depends on), and `scorecard` prints one claim's verdicts.
"""
from __future__ import annotations

import dataclasses
import itertools
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from sweep.claims.setup import NO_MOVE, NO_PAPER, Setting
from sweep.report.tables import format_table

#: A verdict's direction: the measurement against the paper.
STATUSES = ("agrees", "disagrees", "partly", "not measured", "reference")
DIRECTIONS = ("agrees", "disagrees", "partly")
#: Where a verdict was earned ('-': a reference or an unmeasured statement).
SETTINGS = ("paper setting", "deviating setup", "reduced scale", "-")
#: Scales below the paper's sizes: their verdicts say so (`reduced`), whichever way they go.
REDUCED_SCALES = ("ci", "reduced")
#: The columns of report/verdicts.csv.
CSV_COLUMNS = ("claim", "statement", "paper", "measured", "low", "high", "verdict", "setting", "deviations",
               "discriminating", "note")


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


def censored(bounds: Sequence[tuple[float, float]], observed: Sequence[float]) -> Estimate:
    """The mean over cases each known only within (low, high) — a censored case has one side open, e.g. a run that
    stopped before the target took at least the time it ran — with its 95 % interval: from the lower end of the
    lows' interval to the upper end of the highs'. Censoring widens the interval the same way in both directions.
    `observed`: each case's measured number (the bound a censored case reached); the value is their mean, NaN when
    no case is bounded on either side."""
    known = [o for (lo, hi), o in zip(bounds, observed) if not (lo <= 0 and hi == math.inf) and not math.isnan(o)]
    if not known:
        return Estimate.point(math.nan)
    lo, hi = estimate([b[0] for b in bounds]), estimate([b[1] for b in bounds])
    if all(b[0] == b[1] for b in bounds):
        return lo
    return Estimate(float(np.mean(known)), lo.low, hi.high)


def ratio_bounds(a: float, a_reached: bool, b: float, b_reached: bool) -> tuple[float, float]:
    """Bounds on a / b for two times to a target, where an unreached time is only known to exceed the time its run
    ended at: (a/b, a/b) when both reached; (a/b, inf) when only a is censored; (0, a/b) when only b is; (0, inf)
    when neither reached it."""
    if math.isnan(a) or math.isnan(b) or b <= 0:
        return math.nan, math.nan
    r = a / b
    if a_reached and b_reached:
        return r, r
    if b_reached:
        return r, math.inf
    return (0.0, r) if a_reached else (0.0, math.inf)


def ratio_estimate(cases: Sequence[tuple[float, bool, float, bool]]) -> Estimate:
    """a / b over cases (instances, seeds) of (a, a reached, b, b reached); censored cases enter as one-sided bounds."""
    cases = [c for c in cases if not (math.isnan(c[0]) or math.isnan(c[2]))]
    return censored([ratio_bounds(*c) for c in cases], [c[0] / c[2] if c[2] > 0 else math.nan for c in cases])


def ratio_bootstrap(cases: Sequence[tuple[float, bool, float, bool]], seed: int = 0) -> Estimate:
    """a / b over cases (instances or seeds, the independent unit) of (a, a reached, b, b reached): the geometric mean
    ratio with its 95 % bootstrap interval over resamples of the cases (`bootstrap`). A case is known within
    `ratio_bounds` (a censored case one-sided: (r, inf) when a did not reach the target, (0, r) when b did not); a
    resample's geometric means of the lower and of the upper bounds feed the low and high ends. In log ratio the two
    censorings are mirror images, (log r, +inf) and (−inf, log r), so censoring opens the interval on its own side
    the same way in both directions. The value is over the cases bounded on some side."""
    cases = [c for c in cases if not (math.isnan(c[0]) or math.isnan(c[2])) and c[2] > 0]
    if not cases:
        return Estimate.point(math.nan)
    return bootstrap(cases, _geometric_bounds, seed)


def _geometric_bounds(cases: Sequence[tuple[float, bool, float, bool]]) -> Estimate:
    """The geometric means of the cases' ratios, lower bounds and upper bounds (a 0 or inf bound: that end)."""
    bounds = [ratio_bounds(*c) for c in cases]
    known = [c[0] / c[2] for c, (lo, hi) in zip(cases, bounds) if not (lo <= 0 and hi == math.inf)]
    return Estimate(_geomean(known), _geomean([b[0] for b in bounds]), _geomean([b[1] for b in bounds]))


def _geomean(values: Sequence[float]) -> float:
    """exp(mean(log v)): 0 when some v is 0 (and none inf), inf when some is inf (and none 0), NaN for both or none."""
    if not values:
        return math.nan
    zero, inf = any(v <= 0 for v in values), any(v == math.inf for v in values)
    if zero or inf:
        return math.nan if zero and inf else (0.0 if zero else math.inf)
    return math.exp(math.fsum(math.log(v) for v in values) / len(values))


def bounds_ratio(a: tuple[float, float], b: tuple[float, float]) -> Estimate:
    """a / b for two quantities known within bounds (lo, hi) — a censored time to a target is (the time its run
    ended, inf) —, by interval arithmetic: [a_lo / b_hi, a_hi / b_lo], the value the ratio of the lower ends (the
    measured numbers). Censoring on either side opens the interval the same way."""
    if any(math.isnan(v) for v in (*a, *b)) or b[0] <= 0:
        return Estimate.point(math.nan)
    lo, hi = a[0] / b[1] if b[1] > 0 else 0.0, a[1] / b[0]
    if lo == 0.0 and hi == math.inf:
        return Estimate.point(math.nan)
    return Estimate(a[0] / b[0], lo, hi)


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
    import scipy.stats as stats  # here: scipy.stats costs every `bisweep run` ~0.3 s before its first trial

    half = float(stats.t.ppf(0.975, v.size - 1) * v.std(ddof=1) / math.sqrt(v.size))
    return Estimate(m, m - half, m + half)


#: Resamples of a bootstrap; a sample with at most this many distinct resamples is enumerated exactly.
BOOTSTRAP_RESAMPLES = 2000


def bootstrap(cases: Sequence[Any], statistic: Callable[[Sequence[Any]], float | Estimate], seed: int = 0,
              resamples: int = BOOTSTRAP_RESAMPLES) -> Estimate:
    """`statistic` of the cases (the unit: instances or seeds) with its 95 % percentile bootstrap interval over
    resamples of the cases with replacement, seeded. A tiny sample (n^n ≤ `resamples`) is enumerated exactly. The
    interval's ends are order statistics (no interpolation: a censored statistic's infinite end stays infinite);
    a statistic that is itself an interval (a censored crossover) contributes its low end to the low quantile and its
    high end to the high one. One case (or no variation): the statistic's own bounds."""
    cases = list(cases)
    whole = _as_estimate(statistic(cases))
    n = len(cases)
    if n < 2:
        return whole
    if n ** n <= resamples:
        draws = np.array(list(itertools.product(range(n), repeat=n)))
    else:
        draws = np.random.default_rng(seed).integers(0, n, size=(resamples, n))
    got = [_as_estimate(statistic([cases[i] for i in row])) for row in draws]
    lows = np.array([e.low for e in got if not math.isnan(e.low)])
    highs = np.array([e.high for e in got if not math.isnan(e.high)])
    if not lows.size or not highs.size or math.isnan(whole.value):
        return whole
    low = float(np.quantile(lows, 0.025, method="lower"))
    high = float(np.quantile(highs, 0.975, method="higher"))
    return Estimate(whole.value, min(low, whole.low), max(high, whole.high))


def _as_estimate(v: float | Estimate) -> Estimate:
    return v if isinstance(v, Estimate) else Estimate.point(float(v))


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
                baselines: Sequence[Estimate] | None = None, broken: Mapping[str, str] | None = None) -> Verdict:
        """The verdict on `estimates` (the subjects' cases); `baselines`: the same test on the rivals; `broken`: the
        comparators the comparison involves that diverged, never moved or were not tuned (name -> why), which make
        it `not measured (comparator <name>: <why>)` whichever way the numbers point."""
        status = self.judge(estimates)
        note = "; ".join(f"comparator {name}: {why}" for name, why in (broken or {}).items())
        if note and status != "not measured":
            measured += f" (would read {status})"
            status = "not measured"
        worst = _worst(self, estimates)
        disc = "-"
        if baselines is not None:
            base = self.judge(baselines) if baselines else "not measured"
            disc = "no" if base == "agrees" else ("yes" if base == "disagrees" else "partly")
            measured += f"; the baselines on the same test: {base} (" + ", ".join(e.text() for e in baselines) + ")"
        paper = self.quote + f" — threshold {self.rule}" + (f" (looser than the paper: {self.looser})" if self.looser else "")
        return Verdict(statement, paper, measured, status, self.depends, estimate=worst, discriminating=disc,
                       criterion=self.name, note=note)


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
    problems: tuple[str, ...] | None = None  # the problems the statement is about (None: every one the study runs)

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
                "deviations": self.deviation, "discriminating": self.discriminating, "note": self.note}


def not_moved(statement: str, paper: str, measured: str, depends: tuple[str, ...] | None = None) -> Verdict:
    """A statement whose metric no method moved within the budget: not measured, whatever the threshold says."""
    return Verdict(statement, paper, measured, "not measured", depends, note=NO_MOVE)


def place(verdicts: Iterable[Verdict], settings: Sequence[Setting]) -> None:
    """Say where each measured verdict was earned: the open deviations of the fields it depends on (of the rows that
    concern its problems), or the paper's setting. The direction is left as it is, whichever it is."""
    no_paper = bool(settings) and all(s.paper == NO_PAPER for s in settings)
    for v in verdicts:
        if v.status not in DIRECTIONS or no_paper:  # a reference, or a reference model without a paper
            v.setting, v.deviation = "-", ""
            continue
        open_ = [s for s in settings if s.open and (v.depends is None or s.field in v.depends)
                 and s.concerns(v.problems)]
        v.deviation = "; ".join(f"{s.field}: {s.deviation}" for s in open_)
        v.setting = "deviating setup" if open_ else "paper setting"


def reduced(verdicts: Iterable[Verdict], scale: str) -> bool:
    """At a scale below the paper's sizes, every measured verdict's setting is `reduced scale` (its deviations kept
    after the scale): a check that the pipeline runs, not evidence. True when the scale is reduced."""
    if scale not in REDUCED_SCALES:
        return False
    for v in verdicts:
        if v.setting != "-":
            v.setting = "reduced scale"
            v.deviation = f"scale {scale}: below the paper's sizes" + (f"; {v.deviation}" if v.deviation else "")
    return True


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


def num(v: float) -> str:
    """A number in 4 significant digits."""
    return f"{v:.4g}" if isinstance(v, (int, float)) else str(v)

