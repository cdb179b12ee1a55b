"""Study reports from the on-disk results: tables (CSV, printed) and plots (PNG, matplotlib Agg).

Every study gets `runs.csv` (one row per run), `best.csv` (the best configuration per algorithm by
median over seeds) and convergence curves against iterations, oracle calls and compute time with
25–75% quantile bands over seeds. By kind:
- stepsize_sensitivity: `sensitivity.csv` (median final metric per step size, the TFBO paper's
  relative average change against the unscaled configuration, the fraction of grid runs that
  converge) and sensitivity curves;
- dimension_scaling: `scaling.csv` with fitted log–log exponents, and the scaling plot;
- noise and drift: the final metric along the axis; online studies also get regret curves.
"""
from __future__ import annotations

import csv
import dataclasses
import math
import re
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any, TextIO

import numpy as np

from sweep import analysis as an
from sweep.store import ResultStore

X_AXES = (("iteration", "iterations"), ("calls/total", "oracle calls"), ("time", "compute seconds"))


@dataclasses.dataclass
class RunData:
    """One run as the report sees it."""

    key: str
    point: dict[str, Any]
    seed: int
    status: str
    final: dict[str, Any] | None
    records: list[dict[str, Any]]
    where: dict[str, str]
    error: str | None


@dataclasses.dataclass
class Report:
    """A built report: where it was written and its tables (name -> rows)."""

    directory: Path
    tables: dict[str, list[dict[str, Any]]]
    plots: list[Path]


# ---------------------------------------------------------------- labels
def problem_label(point: dict[str, Any]) -> str:
    """Problem name with its gridded parameters."""
    grid = {k.split(".", 1)[1]: v for k, v in point["coords"]["grid"].items() if k.startswith("problem.")}
    return point["problem"] + (f"({', '.join(f'{k}={v}' for k, v in grid.items())})" if grid else "")


def config_label(point: dict[str, Any]) -> str:
    """Algorithm label with its gridded hyperparameters."""
    grid = {k: v for k, v in point["coords"]["grid"].items() if not k.startswith("problem.")}
    return point["label"] + (f"({', '.join(f'{k}={v}' for k, v in grid.items())})" if grid else "")


def _fmt(v: Any) -> str:
    if isinstance(v, float):
        if math.isnan(v):
            return "nan"
        if math.isinf(v):
            return "inf" if v > 0 else "-inf"
        return f"{v:.4g}"
    return "" if v is None else str(v)


def format_table(rows: list[dict[str, Any]], title: str) -> str:
    """A fixed-width text table."""
    if not rows:
        return f"{title}\n  (no rows)\n"
    cols = list(rows[0])
    cells = [[_fmt(r.get(c)) for c in cols] for r in rows]
    widths = [max(len(c), *(len(row[i]) for row in cells)) for i, c in enumerate(cols)]
    line = "  ".join(c.ljust(w) for c, w in zip(cols, widths))
    body = "\n".join("  ".join(x.ljust(w) for x, w in zip(row, widths)) for row in cells)
    return f"{title}\n{line}\n{'-' * len(line)}\n{body}\n"


def _write_csv(path: Path, rows: list[dict[str, Any]]) -> None:
    cols: list[str] = []
    for r in rows:
        cols.extend(k for k in r if k not in cols)
    with open(path, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=cols)
        w.writeheader()
        for r in rows:
            w.writerow({k: (_fmt(v) if isinstance(v, float) and not math.isfinite(v) else v) for k, v in r.items()})


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.=-]+", "_", text).strip("_")[:120]


# ---------------------------------------------------------------- loading
def load_runs(store: ResultStore, meta: dict[str, Any]) -> list[RunData]:
    """Every ended run of the study's configurations."""
    runs = []
    for point in meta["points"]:
        for seed in meta["seeds"]:
            key = f"{point['key']}.s{seed}"
            s = store.summary(key)
            if s is None:
                continue
            runs.append(RunData(key, point, seed, s["status"], s.get("final"), store.records(key),
                                s.get("where") or {}, s.get("error")))
    return runs


# ---------------------------------------------------------------- tables
def runs_table(runs: list[RunData], metric: str) -> list[dict[str, Any]]:
    """One row per run with its final values."""
    rows = []
    for r in runs:
        f = r.final or {}
        row = {"problem": problem_label(r.point), "algorithm": config_label(r.point),
               "axis": r.point["coords"].get("axis"), "seed": r.seed, "status": r.status,
               "iteration": f.get("iteration"), "calls": f.get("calls/total"), "samples": f.get("samples/total"),
               "time": f.get("time"), metric: f.get(metric)}
        for m in ("F", "grad_F_sq", "y_err_sq", "F_gap", "cumulative_regret"):
            if m in f and m not in row:
                row[m] = f[m]
        row.update({"node": r.where.get("node", ""), "run_key": r.key, "error": r.error or ""})
        rows.append(row)
    return rows


def _by_point(runs: list[RunData]) -> dict[str, list[RunData]]:
    out: dict[str, list[RunData]] = defaultdict(list)
    for r in runs:
        out[r.point["key"]].append(r)
    return out


def _by_problem_and_config(runs: list[RunData]) -> dict[tuple[str, str], list[RunData]]:
    """Runs grouped by (problem label, configuration label)."""
    groups: dict[tuple[str, str], list[RunData]] = defaultdict(list)
    for r in runs:
        groups[(problem_label(r.point), config_label(r.point))].append(r)
    return groups


def _stats(runs: list[RunData], opts: dict[str, Any]) -> dict[str, Any]:
    vals = [an.final_value({"status": r.status, "final": r.final}, opts["metric"], opts["goal"]) for r in runs]
    q = an.quantiles(vals, (0.25, 0.75))
    conv = [an.converged(r.records, r.status, opts["converged_metric"], opts["converged_below"],
                         opts["converged_relative"]) for r in runs]
    return {"median": an.median(vals), "q25": float(q[0]), "q75": float(q[1]), "seeds": len(runs),
            "diverged": sum(r.status == "diverged" for r in runs), "failed": sum(r.status == "failed" for r in runs),
            "converged": sum(conv)}


def best_table(runs: list[RunData], opts: dict[str, Any]) -> list[dict[str, Any]]:
    """Per (problem, algorithm label, axis value): the configuration with the best median over seeds."""
    groups: dict[tuple, dict[str, list[RunData]]] = defaultdict(lambda: defaultdict(list))
    for r in runs:
        p = r.point
        groups[(problem_label(p), p["label"], repr(p["coords"].get("axis")))][p["key"]].append(r)
    rows = []
    for (prob, label, _), configs in groups.items():
        best_key, best = None, None
        for key, rs in configs.items():
            st = _stats(rs, opts)
            if best is None or an.better(st["median"], best["median"], opts["goal"]):
                best_key, best = key, st
        p = configs[best_key][0].point
        axis = p["coords"].get("axis")
        if axis is None and p["coords"].get("reference"):
            axis = "reference"  # the unscaled configuration a sensitivity study compares against
        rows.append({"problem": prob, "algorithm": label, "axis": axis,
                     "best_config": config_label(p), f"median_{opts['metric']}": best["median"],
                     "q25": best["q25"], "q75": best["q75"], "seeds": best["seeds"], "diverged": best["diverged"],
                     "failed": best["failed"], "converged": best["converged"], "configurations": len(configs)})
    return rows


def sensitivity_table(runs: list[RunData], opts: dict[str, Any], axis_name: str) -> list[dict[str, Any]]:
    """Median final metric per step size, relative average change vs the reference, fraction converged."""
    groups = _by_problem_and_config(runs)
    rows = []
    for (prob, cfg), rs in groups.items():
        by = _by_point(rs)
        grid = sorted(((v[0].point["coords"]["axis"], _stats(v, opts)) for v in by.values()
                       if v[0].point["coords"].get("in_grid")), key=lambda t: _axis_order(t[0]))
        refs = [_stats(v, opts) for v in by.values() if v[0].point["coords"].get("reference")]
        ref = refs[0]["median"] if refs else math.nan
        row = {"problem": prob, "algorithm": cfg}
        row.update({f"{axis_name}={a}": st["median"] for a, st in grid})
        grid_runs = [r for v in by.values() if v[0].point["coords"].get("in_grid") for r in v]
        conv = sum(_stats([r], opts)["converged"] for r in grid_runs)
        row.update({"reference": ref, "relative_average_change": an.relative_average_change([st["median"] for _, st in grid], ref),
                    "converged_fraction": conv / len(grid_runs) if grid_runs else math.nan,
                    "diverged_runs": sum(r.status == "diverged" for r in grid_runs), "grid_runs": len(grid_runs)})
        rows.append(row)
    return rows


def axis_table(runs: list[RunData], opts: dict[str, Any], axis_name: str) -> list[dict[str, Any]]:
    """Median final metric (and converged fraction) along a noise or drift axis."""
    groups = _by_problem_and_config(runs)
    rows = []
    for (prob, cfg), rs in groups.items():
        for a, by_rs in sorted(((v[0].point["coords"].get("axis"), v) for v in _by_point(rs).values()),
                               key=lambda t: _axis_order(t[0])):
            st = _stats(by_rs, opts)
            rows.append({"problem": prob, "algorithm": cfg, axis_name: a, f"median_{opts['metric']}": st["median"],
                         "q25": st["q25"], "q75": st["q75"], "converged": st["converged"], "seeds": st["seeds"],
                         "diverged": st["diverged"], "failed": st["failed"]})
    return rows


def _axis_order(value: Any) -> tuple[int, Any]:
    """Numbers in increasing order, then anything else (e.g. null batch size) by its text."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return (0, float(value))
    return (1, repr(value))


def scaling_table(runs: list[RunData], opts: dict[str, Any], axis_name: str) -> list[dict[str, Any]]:
    """Per algorithm and quantity: medians over seeds at each dimension and the fitted log–log exponent."""
    groups = _by_problem_and_config(runs)
    rows = []
    for (prob, cfg), rs in groups.items():
        by_dim: dict[float, list[RunData]] = defaultdict(list)
        for r in rs:
            by_dim[float(r.point["coords"]["axis"])].append(r)
        dims = sorted(by_dim)
        for quantity, fn in _scaling_quantities(opts).items():
            ys = [an.median([fn(r) for r in by_dim[d]]) for d in dims]
            p, c, r2 = an.fit_loglog(dims, ys)
            row = {"problem": prob, "algorithm": cfg, "quantity": quantity, "exponent": p, "r2": r2}
            row.update({f"{axis_name}={d:g}": y for d, y in zip(dims, ys)})
            rows.append(row)
    return rows


def _scaling_quantities(opts: dict[str, Any]) -> dict[str, Any]:
    def per_iter(r: RunData) -> float:
        f = r.final or {}
        it = f.get("iteration") or 0
        return f["time"] / it if r.status == "finished" and it else math.nan

    out = {"seconds_per_iteration": per_iter}
    if opts.get("target") is not None:
        for x, name in (("calls/total", "calls_to_target"), ("time", "seconds_to_target"), ("iteration", "iterations_to_target")):
            out[name] = (lambda r, x=x: an.first_reach(r.records, opts["metric"], opts["target"], x, opts["goal"])
                         if r.status == "finished" else math.nan)
    return out


# ---------------------------------------------------------------- plots
def pyplot() -> Any:
    """matplotlib.pyplot on the file-only Agg backend (imported late: trials never need it)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def save_figure(fig: Any, path: Path, dpi: int = 90) -> Path:
    """Lay out, write and close a figure; returns its path."""
    fig.tight_layout()
    fig.savefig(path, dpi=dpi)
    pyplot().close(fig)
    return path


def _curves(runs: list[RunData], x: str, y: str) -> list[tuple[list[float], list[float]]]:
    out = []
    for r in runs:
        pts = [(rec[x], rec[y]) for rec in r.records if x in rec and y in rec]
        if pts:
            out.append(([a for a, _ in pts], [b for _, b in pts]))
    return out


def _band(ax: Any, runs: list[RunData], x: str, y: str, label: str, color: Any) -> np.ndarray | None:
    """Plot the median and 25–75% band over seeds; the band's values (None when nothing to plot)."""
    curves = _curves(runs, x, y)
    ys = np.concatenate([np.asarray(c[1], dtype=float) for c in curves]) if curves else np.array([])
    log_y = bool(ys.size) and bool(np.all(ys[np.isfinite(ys)] > 0))
    grid = an.common_grid(curves, log_x=True)  # points at 0 (the start) drop out of log axes
    if not grid.size:
        return None
    q = an.quantile_band(curves, grid, log_y=log_y)
    ax.plot(grid, q[1], color=color, label=label)
    ax.fill_between(grid, q[0], q[2], color=color, alpha=0.2, linewidth=0)
    ax.set_xscale("log")
    if log_y:
        ax.set_yscale("log")
    return q


def _focus(ax: Any, bands: list[np.ndarray]) -> None:
    """Limit the y axis to the curves of runs that did not all diverge (a blow-up hides the rest)."""
    vals = np.concatenate([b[np.isfinite(b)] for b in bands]) if bands else np.array([])
    if not vals.size:
        return
    lo, hi = vals.min(), vals.max()
    if ax.get_yscale() == "log" and lo > 0:
        ax.set_ylim(lo / 2, hi * 2)
    elif hi > lo:
        pad = 0.05 * (hi - lo)
        ax.set_ylim(lo - pad, hi + pad)


def plot_convergence(runs: list[RunData], metric: str, title: str, path: Path) -> Path:
    """Median and 25–75% band over seeds against iterations, oracle calls and compute time."""
    plt = pyplot()
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.2))
    groups = defaultdict(list)
    for r in runs:
        groups[config_label(r.point) + _axis_suffix(r.point)].append(r)
    colors = [plt.cm.tab10(i % 10) for i in range(len(groups))]
    kept: dict[int, list[np.ndarray]] = defaultdict(list)
    for (label, rs), color in zip(sorted(groups.items()), colors):
        stable = any(r.status == "finished" for r in rs)
        for i, (ax, (x, xl)) in enumerate(zip(axes, X_AXES)):
            q = _band(ax, rs, x, metric, label + ("" if stable else " (diverged)"), color)
            if q is not None and stable:
                kept[i].append(q)
            ax.set_xlabel(xl)
    if any(r.status != "finished" for r in runs):
        for i, ax in enumerate(axes):
            _focus(ax, kept[i])
    axes[0].set_ylabel(metric)
    axes[0].legend(fontsize=7)
    fig.suptitle(title)
    return save_figure(fig, path)


def _axis_suffix(point: dict[str, Any]) -> str:
    a = point["coords"].get("axis")
    return "" if a is None else f" [{a}]"


def plot_axis(rows: list[dict[str, Any]], axis_name: str, metric: str, title: str, path: Path,
              log_x: bool = True) -> Path:
    """Median final metric (with its 25–75% range) along the study axis, one line per algorithm."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(7, 4.5))
    groups = defaultdict(list)
    for r in rows:
        groups[(r["problem"], r["algorithm"])].append(r)
    key = f"median_{metric}"
    for (prob, alg), rs in sorted(groups.items()):
        pts = sorted((float(r[axis_name]), r[key], r["q25"], r["q75"]) for r in rs
                     if isinstance(r[axis_name], (int, float)))
        if not pts:
            continue
        xs, ys, lo, hi = (np.array(v, dtype=float) for v in zip(*pts))
        line = ax.plot(xs, ys, marker="o", label=f"{alg} on {prob}")[0]
        ax.fill_between(xs, lo, hi, color=line.get_color(), alpha=0.2, linewidth=0)
    if log_x:
        ax.set_xscale("log")
    vals = np.array([r[key] for r in rows], dtype=float)
    if vals.size and np.all(vals[np.isfinite(vals)] > 0):
        ax.set_yscale("log")
    ax.set_xlabel(axis_name)
    ax.set_ylabel(f"final {metric} (median over seeds)")
    ax.set_title(title)
    ax.legend(fontsize=7)
    return save_figure(fig, path)


def plot_scaling(rows: list[dict[str, Any]], axis_name: str, path: Path) -> Path:
    """Log–log scaling of each quantity with the fitted line and exponent."""
    plt = pyplot()
    quantities = sorted({r["quantity"] for r in rows})
    fig, axes = plt.subplots(1, len(quantities), figsize=(6 * len(quantities), 4.5), squeeze=False)
    for ax, qn in zip(axes[0], quantities):
        for r in (r for r in rows if r["quantity"] == qn):
            dims = [(float(k.split("=", 1)[1]), v) for k, v in r.items() if k.startswith(f"{axis_name}=")]
            xs, ys = np.array([d for d, _ in dims]), np.array([v for _, v in dims], dtype=float)
            line = ax.plot(xs, ys, "o", label=f"{r['algorithm']} on {r['problem']}: p = {_fmt(r['exponent'])}")[0]
            if math.isfinite(r["exponent"]):
                _, c, _ = an.fit_loglog(xs, ys)
                ax.plot(xs, np.exp(c) * xs ** r["exponent"], "-", color=line.get_color())
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel(axis_name)
        ax.set_ylabel(qn)
        ax.legend(fontsize=7)
    return save_figure(fig, path)


def plot_regret(runs: list[RunData], title: str, path: Path) -> Path:
    """Cumulative local regret against t, median and band over seeds."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(7, 4.5))
    groups = defaultdict(list)
    for r in runs:
        groups[config_label(r.point) + _axis_suffix(r.point) + " on " + problem_label(r.point)].append(r)
    for i, (label, rs) in enumerate(sorted(groups.items())):
        _band(ax, rs, "iteration", "cumulative_regret", label, plt.cm.tab10(i % 10))
    ax.set_xlabel("t")
    ax.set_ylabel("cumulative local regret")
    ax.set_title(title)
    ax.legend(fontsize=7)
    return save_figure(fig, path)


# ---------------------------------------------------------------- the report
def build_report(results_dir: str | Path, out: TextIO | None = None, quiet: bool = False) -> Report:
    """Build every table and plot of the study in `results_dir` into `<results_dir>/report/` and print the tables."""
    out = out or sys.stdout
    store = ResultStore(results_dir)
    meta = store.read_study()
    opts = meta["report"]
    runs = load_runs(store, meta)
    d = store.report_dir
    d.mkdir(parents=True, exist_ok=True)
    for old in list(d.glob("*.png")) + list(d.glob("*.csv")):
        old.unlink()
    tables: dict[str, list[dict[str, Any]]] = {"runs": runs_table(runs, opts["metric"]), "best": best_table(runs, opts)}
    plots: list[Path] = []
    kind, axis_name = meta["kind"], meta["axis_name"]
    if kind == "stepsize_sensitivity":
        tables["sensitivity"] = sensitivity_table(runs, opts, axis_name)
        rows = axis_table([r for r in runs if r.point["coords"].get("in_grid")], opts, axis_name)
        plots.append(plot_axis(rows, axis_name, opts["metric"], "step-size sensitivity", d / "sensitivity.png"))
    elif kind == "dimension_scaling":
        tables["scaling"] = scaling_table(runs, opts, axis_name)
        plots.append(plot_scaling(tables["scaling"], axis_name, d / "scaling.png"))
    elif kind in ("noise", "drift"):
        tables[kind] = axis_table(runs, opts, axis_name)
        log_x = all(isinstance(v, (int, float)) and v > 0 for v in meta["axis"]["values"])
        plots.append(plot_axis(tables[kind], axis_name, opts["metric"], f"{kind}: final {opts['metric']}",
                               d / f"{kind}.png", log_x=log_x))
    plots.extend(_convergence_plots(runs, meta, opts, d))
    if meta.get("online"):
        plots.append(plot_regret(runs, f"{meta['name']}: regret", d / "regret.png"))
    text = _summary_text(meta, tables)
    claim = _claim_section(meta, runs, d)
    if claim is not None:  # the paper's claim next to the measurements (sweep.claims)
        tables.update({f"claim_{name}": rows for name, rows in claim.tables.items()})
        tables["verdicts"] = [v.row() for v in claim.verdicts]
        plots.extend(claim.plots)
        text += "\n" + claim.text()
    for name, rows in tables.items():
        _write_csv(d / f"{name}.csv", rows)
    (d / "summary.txt").write_text(text)
    if not quiet:
        out.write(text)
        out.write(f"report written to {d}\n")
        out.flush()
    return Report(d, tables, plots)


def _claim_section(meta: dict[str, Any], runs: list[RunData], d: Path) -> Any:
    """The study's paper-claim section, also written to claims.txt (None when it names no claim)."""
    from sweep import claims  # claims build on this module

    rep = claims.evaluate(meta, runs, d)
    path = d / "claims.txt"
    if rep is None:
        path.unlink(missing_ok=True)
        return None
    path.write_text(rep.text())
    return rep


def _convergence_plots(runs: list[RunData], meta: dict[str, Any], opts: dict[str, Any], d: Path) -> list[Path]:
    """One convergence figure per problem configuration (every configuration of the study's kind)."""
    by_problem: dict[str, list[RunData]] = defaultdict(list)
    for r in runs:
        if r.status == "failed":
            continue
        by_problem[problem_label(r.point)].append(r)
    paths = []
    metric = opts["metric"] if not meta.get("online") else "grad_F_sq"
    for prob, rs in sorted(by_problem.items()):
        if meta["kind"] == "stepsize_sensitivity":
            rs = [r for r in rs if r.point["coords"].get("reference") or r.point["coords"].get("in_grid")]
        paths.append(plot_convergence(rs, metric, f"{meta['name']}: {prob}", d / f"convergence_{_slug(prob)}.png"))
    return paths


def _summary_text(meta: dict[str, Any], tables: dict[str, list[dict[str, Any]]]) -> str:
    parts = [f"study {meta['name']} ({meta['kind']}), metric {meta['report']['metric']} "
             f"({'lower' if meta['report']['goal'] == 'min' else 'higher'} is better)\n"]
    for name, rows in tables.items():
        if name == "runs":
            continue
        parts.append(format_table(rows, f"== {name} =="))
    return "\n".join(parts)
