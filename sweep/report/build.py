"""Study reports from the on-disk results: tables (CSV, printed) and figures (PNG), and the paper claim.

Every study gets `runs.csv` (one row per run), `best.csv` (the best configuration per algorithm by
median over seeds) and convergence curves against iterations, oracle calls and compute time with
25–75% quantile bands over seeds; online studies also get regret curves. The study's kind adds its own
tables and figures (sweep/kinds/), and a study that names a claim gets its section (sweep/claims/); both are read
through the registries they register into (sweep.study.plugins), so this folder imports neither.
"""
from __future__ import annotations

import dataclasses
import sys
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TextIO

from problems.shared.errors import ParameterError
from sweep.report import report_cache, run_arrays, spread
from sweep.report.curves import palette, plot_convergence, plot_regret
from sweep.report.runs_table import WrittenRows, runs_table, write_table
from sweep.report.tables import best_table, fit_lines, format_table, slug
from sweep.results import gc_pause
from sweep.results.runs import RunData, load_runs, problem_label, remembered_labels
from sweep.results.safe_files import folder, write_text
from sweep.results.store import ResultStore
from sweep.study import plugins
from sweep.study.model import ReportOptions
from sweep.study.record import StudyRecord


@dataclasses.dataclass
class Report:
    """A built report: where it was written and its tables (name -> rows; the runs table's read back from runs.csv
    when asked, as text)."""

    directory: Path
    tables: dict[str, Sequence[dict[str, Any]]]
    plots: list[Path]
    partial: str | None = None  # "12 of 40 runs ended" while the study has runs not ended, else None

    @property
    def artifact_name(self) -> str:
        """Where the report goes in MLflow: its directory's name, with '-partial' while runs are missing."""
        return self.directory.name + ("-partial" if self.partial else "")


def build_report(results_dir: str | Path, out: TextIO | None = None, quiet: bool = False, metric: str | None = None,
                 goal: str | None = None, force: bool = False, study: StudyRecord | None = None) -> Report:
    """Build every table and plot of the study in `results_dir` into `<results_dir>/report/` and print the tables.

    `metric` and `goal` compare another final value than the study's `report:` block names; that report
    goes to `<results_dir>/report-<metric>-<goal>/` (the study's own report stays as it is) and has no
    paper-claim section, whose thresholds belong to the study's metric. A report whose inputs have not
    changed since it was built is not built again (sweep/report/report_cache.py) unless `force`: its summary is
    printed and its tables are read back from their CSV files. `study`: the results' study record as the caller
    already read it (`ResultStore.read_study`; read here otherwise: at 10⁵ configurations a second copy took
    ~2 s and ~200 MB).
    """
    try:
        with remembered_labels(), gc_pause.paused():
            return _build(results_dir, out, quiet, metric, goal, force, study)
    finally:
        run_arrays.forget()


def _build(results_dir: str | Path, out: TextIO | None, quiet: bool, metric: str | None, goal: str | None,
           force: bool, study: StudyRecord | None) -> Report:
    """`build_report` with each configuration's labels made once."""
    out = out or sys.stdout
    store = ResultStore(results_dir)
    meta = study if study is not None else store.read_study()
    _check_registered(meta)  # never imported from study.json: a received results directory must not run code
    meta, d = _with_metric(meta, metric, goal, store.report_dir)
    opts = meta.report
    fp = report_cache.fingerprint(store, meta, opts)
    partial = _partial(store, meta)
    if not force and report_cache.up_to_date(d, fp):
        return dataclasses.replace(_cached(d, out, quiet), partial=partial)
    runs = load_runs(store, meta)
    if d != store.report_dir:
        _check_metric(runs, opts.metric)
    folder(store.root, d)  # no link: a received results directory must not make the report write elsewhere
    report_cache.forget(d)
    for old in list(d.glob("*.png")) + list(d.glob("*.csv")):
        old.unlink()
    kind = plugins.KINDS[meta.kind]
    write_table(d / "runs.csv", runs_table(runs, meta))  # written now and let go: the figures come later
    tables: dict[str, Sequence[dict[str, Any]]] = {"runs": WrittenRows(d / "runs.csv"), "best": best_table(runs, opts)}
    many = spread.configurations(runs)
    if many > spread.SUMMARISE:  # more than a reader scans: the summary shows their spread
        tables["spread"] = spread.spread_table(runs, opts)
    run_arrays.forget_groups()  # the best and the spread tables shared them; the report's peak comes later
    own_tables, plots = kind.report(runs, meta, d)
    tables.update(own_tables)
    order = palette(runs)  # a configuration has one colour in every figure of the report
    plots.extend(_convergence_plots(kind.convergence_runs(runs), meta, opts, d, order))
    if meta.online:
        plots.append(plot_regret(runs, f"{meta.name}: regret", d / "regret.png", meta.axis_name, order))
    text = (f"PARTIAL REPORT: {partial}; the study is not complete\n" if partial else "") + _summary_text(
        meta, tables, many if many > spread.SUMMARISE else None)
    claim = _claim_section(meta, runs, d) if d == store.report_dir else None
    if claim is not None:  # the paper's claim next to the measurements
        tables.update({f"claim_{name}": rows for name, rows in claim.tables.items()})
        tables["verdicts"] = claim.rows()
        plots.extend(claim.plots)
        text += "\n" + claim.text()
    for name, rows in tables.items():
        write_table(d / f"{name}.csv", rows)
    text = fit_lines(text)  # prose too fits a terminal (the tables already do; the CSV files keep them whole)
    write_text(d / "summary.txt", text)
    report_cache.remember(d, fp)
    if not quiet:
        out.write(text)
        out.write(f"report written to {d}\n")
        out.flush()
    return Report(d, tables, plots, partial)


def _partial(store: ResultStore, meta: StudyRecord) -> str | None:
    """'N of M runs ended' when some of the study's runs have not ended (a report during a run), else None."""
    ended = store.ended()
    total = len(meta.points) * len(meta.seeds)
    n = sum(f"{p['key']}.s{s}" in ended for p in meta.points for s in meta.seeds)
    return f"{n} of {total} runs ended" if n < total else None


def _check_registered(meta: StudyRecord) -> None:
    """A kind or claim the study's plugin modules registered must be registered already (by the study's YAML when
    it ran here, or `--import`): one line naming the modules otherwise."""
    missing = [f"kind {meta.kind!r}"] if meta.kind not in plugins.KINDS.names() else []
    if meta.claim and meta.claim not in plugins.CLAIMS:
        missing.append(f"claim {meta.claim!r}")
    if missing:
        modules = meta.imports
        named = f" (the study named the modules {', '.join(map(repr, modules))[:300]})" if modules else ""
        raise ParameterError(f"import: this study's {' and '.join(missing)} is not registered{named}; a results "
                             "directory never imports code: give --import MODULE for each module you trust")


def _cached(d: Path, out: TextIO, quiet: bool) -> Report:
    """The report already in `d` (its tables as the CSV files hold them, each read when first asked: the runs table of
    10⁵ runs as rows took 2.5 s and ~500 MB to say the report was up to date)."""
    tables = {path.stem: WrittenRows(path) for path in sorted(d.glob("*.csv"))}
    if not quiet:
        out.write((d / "summary.txt").read_text())
        out.write(f"report up to date in {d}\n  (nothing changed since it was built; --force rebuilds it)\n")
        out.flush()
    return Report(d, tables, sorted(d.glob("*.png")))


def _with_metric(meta: StudyRecord, metric: str | None, goal: str | None,
                 report_dir: Path) -> tuple[StudyRecord, Path]:
    """The study's record with the report's metric and goal replaced, and where that report goes."""
    opts = meta.report
    metric, goal = metric or opts.metric, goal or opts.goal
    if goal not in ("min", "max"):
        raise ParameterError(f"goal: must be min or max, got {goal!r}")
    if (metric, goal) == (opts.metric, opts.goal):
        return meta, report_dir
    return meta.with_report(metric=metric, goal=goal), report_dir.with_name(f"report-{slug(metric)}-{goal}")


def _check_metric(runs: list[RunData], metric: str) -> None:
    """A --metric the runs' records do not have is an error naming those they have."""
    known = sorted({k for r in runs for rec in r.records[-1:] for k, v in rec.items()
                    if isinstance(v, (int, float)) and not isinstance(v, bool)})
    if known and metric not in known:
        raise ParameterError(f"metric: {metric!r} is not in this study's records; they have: {', '.join(known)}")


def _claim_section(meta: StudyRecord, runs: list[RunData], d: Path) -> plugins.ClaimSection | None:
    """The study's paper-claim section, also written to claims.txt (None when it names no claim)."""
    name = plugins.claim_of(meta)
    rep = plugins.CLAIMS[name].section(meta, runs, d) if name else None
    path = d / "claims.txt"
    if rep is None:
        path.unlink(missing_ok=True)
        return None
    write_text(path, fit_lines(rep.text()))  # as the summary prints it
    return rep


def _convergence_plots(runs: list[RunData], meta: StudyRecord, opts: ReportOptions, d: Path,
                       order: dict[str, str]) -> list[Path]:
    """One convergence figure per problem configuration."""
    by_problem: dict[str, list[RunData]] = defaultdict(list)
    for r in runs:
        if r.status == "failed":
            continue
        by_problem[problem_label(r.point)].append(r)
    if len(by_problem) == 1 and len(next(iter(by_problem.values()))) == len(runs):
        by_problem = {prob: runs for prob in by_problem}  # the list the tables read: its run index is made already
    metric, goal = (opts.metric, opts.goal) if not meta.online else ("grad_F_sq", "min")
    return [plot_convergence(rs, metric, goal, f"{meta.name}: {prob}", d / f"convergence_{slug(prob)}.png",
                             meta.axis_name, meta.online, order)
            for prob, rs in sorted(by_problem.items())]


def _summary_text(meta: StudyRecord, tables: dict[str, Sequence[dict[str, Any]]], many: int | None = None) -> str:
    """The printed summary: every table but the runs'; with `many` configurations (more than spread.SUMMARISE) the
    spread table first and, of a table longer than that, where it is instead of its rows."""
    parts = [f"study {meta.name} ({meta.kind}), metric {meta.report.metric} "
             f"({'lower' if meta.report.goal == 'min' else 'higher'} is better)\n"]
    if many is not None:
        parts.append(spread.note(many, meta.report.metric) + format_table(tables["spread"], "== spread =="))
    for name, rows in tables.items():
        if name in ("runs", "spread"):
            continue
        if many is not None and len(rows) > spread.SUMMARISE:
            parts.append(f"== {name} ==\n  {len(rows)} rows: see {name}.csv\n")
            continue
        parts.append(format_table(rows, f"== {name} =="))
    return "\n".join(parts)
