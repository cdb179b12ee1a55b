"""Study reports from the on-disk results: tables (CSV, printed) and figures (PNG), and the paper claim.

Every study gets `runs.csv` (one row per run), `best.csv` (the best configuration per algorithm by
median over seeds) and convergence curves against iterations, oracle calls and compute time with
25–75% quantile bands over seeds; online studies also get regret curves. The study's kind adds its own
tables and figures (sweep/kinds/), and a study that names a claim gets its section (sweep/claims/).
"""
from __future__ import annotations

import csv
import dataclasses
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any, TextIO

from sweep import claims, kinds, report_cache
from sweep.claims import ClaimReport
from sweep.figures import plot_convergence, plot_regret
from sweep.results import RunData, load_runs, problem_label
from sweep.sources import import_plugins
from sweep.store import ResultStore
from sweep.tables import best_table, format_table, runs_table, slug, write_csv


@dataclasses.dataclass
class Report:
    """A built report: where it was written and its tables (name -> rows)."""

    directory: Path
    tables: dict[str, list[dict[str, Any]]]
    plots: list[Path]


def build_report(results_dir: str | Path, out: TextIO | None = None, quiet: bool = False,
                 force: bool = False) -> Report:
    """Build every table and plot of the study in `results_dir` into `<results_dir>/report/` and print the tables.

    A report whose inputs have not changed since it was built is not built again (sweep/report_cache.py)
    unless `force`: its summary is printed and its tables are read back from their CSV files.
    """
    out = out or sys.stdout
    store = ResultStore(results_dir)
    meta = store.read_study()
    import_plugins((meta.get("source") or {}).get("imports", []))  # a plugin kind or claim
    opts = meta["report"]
    d = store.report_dir
    fp = report_cache.fingerprint(store, meta, opts)
    if not force and report_cache.up_to_date(d, fp):
        return _cached(d, out, quiet)
    runs = load_runs(store, meta)
    d.mkdir(parents=True, exist_ok=True)
    report_cache.forget(d)
    for old in list(d.glob("*.png")) + list(d.glob("*.csv")):
        old.unlink()
    kind = kinds.get(meta["kind"])
    tables: dict[str, list[dict[str, Any]]] = {"runs": runs_table(runs, opts["metric"]), "best": best_table(runs, opts)}
    own_tables, plots = kind.report(runs, meta, d)
    tables.update(own_tables)
    plots.extend(_convergence_plots(kind.convergence_runs(runs), meta, opts, d))
    if meta.get("online"):
        plots.append(plot_regret(runs, f"{meta['name']}: regret", d / "regret.png"))
    text = _summary_text(meta, tables)
    claim = _claim_section(meta, runs, d)
    if claim is not None:  # the paper's claim next to the measurements
        tables.update({f"claim_{name}": rows for name, rows in claim.tables.items()})
        tables["verdicts"] = [v.row() for v in claim.verdicts]
        plots.extend(claim.plots)
        text += "\n" + claim.text()
    for name, rows in tables.items():
        write_csv(d / f"{name}.csv", rows)
    (d / "summary.txt").write_text(text)
    report_cache.remember(d, fp)
    if not quiet:
        out.write(text)
        out.write(f"report written to {d}\n")
        out.flush()
    return Report(d, tables, plots)


def _cached(d: Path, out: TextIO, quiet: bool) -> Report:
    """The report already in `d` (its tables as the CSV files hold them)."""
    tables = {}
    for path in sorted(d.glob("*.csv")):
        with open(path, newline="") as fh:
            tables[path.stem] = list(csv.DictReader(fh))
    if not quiet:
        out.write((d / "summary.txt").read_text())
        out.write(f"report up to date in {d} (nothing changed since it was built; --force rebuilds it)\n")
        out.flush()
    return Report(d, tables, sorted(d.glob("*.png")))


def _claim_section(meta: dict[str, Any], runs: list[RunData], d: Path) -> ClaimReport | None:
    """The study's paper-claim section, also written to claims.txt (None when it names no claim)."""
    rep = claims.evaluate(meta, runs, d)
    path = d / "claims.txt"
    if rep is None:
        path.unlink(missing_ok=True)
        return None
    path.write_text(rep.text())
    return rep


def _convergence_plots(runs: list[RunData], meta: dict[str, Any], opts: dict[str, Any], d: Path) -> list[Path]:
    """One convergence figure per problem configuration."""
    by_problem: dict[str, list[RunData]] = defaultdict(list)
    for r in runs:
        if r.status == "failed":
            continue
        by_problem[problem_label(r.point)].append(r)
    metric = opts["metric"] if not meta.get("online") else "grad_F_sq"
    return [plot_convergence(rs, metric, f"{meta['name']}: {prob}", d / f"convergence_{slug(prob)}.png")
            for prob, rs in sorted(by_problem.items())]


def _summary_text(meta: dict[str, Any], tables: dict[str, list[dict[str, Any]]]) -> str:
    parts = [f"study {meta['name']} ({meta['kind']}), metric {meta['report']['metric']} "
             f"({'lower' if meta['report']['goal'] == 'min' else 'higher'} is better)\n"]
    for name, rows in tables.items():
        if name == "runs":
            continue
        parts.append(format_table(rows, f"== {name} =="))
    return "\n".join(parts)
