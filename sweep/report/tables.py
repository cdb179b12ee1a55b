"""Report tables: fixed-width text for the summary, CSV files, and the tables every study gets.

`runs` (one row per run) and `best` (per problem, algorithm label and axis value: the configuration with
the best median over seeds) are built for every study; `axis_table` (the final metric along the axis)
serves the kinds that sweep an axis. A kind's own tables live in its module (sweep/kinds/).
"""
from __future__ import annotations

import csv
import math
import re
import textwrap
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from sweep.report import analysis as an
from sweep.report import run_arrays as ra
from sweep.results.runs import RunData, config_label, field, problem_label
from sweep.results.safe_files import open_file
from sweep.study.model import ReportOptions
from sweep.study.record import StudyRecord


def fmt(v: Any) -> str:
    if isinstance(v, float):
        if math.isnan(v):
            return "nan"
        if math.isinf(v):
            return "inf" if v > 0 else "-inf"
        return f"{v:.4g}"
    return "" if v is None else str(v)


#: The columns a printed table fits in (a terminal's width); the CSV files keep every table whole.
WIDTH = 100
#: Text cells wider than this wrap onto more lines of their row.
MAX_CELL = 44


def format_table(rows: list[dict[str, Any]], title: str, width: int = WIDTH) -> str:
    """A fixed-width text table no wider than `width`: long text cells wrap within their row, and a table with
    more columns than fit is printed in blocks of columns, each repeating the leading identity columns."""
    if not rows:
        return f"{title}\n  (no rows)\n"
    cols = list(rows[0])
    cells = [[fmt(r.get(c)) for c in cols] for r in rows]
    same = _shared_prose(cols, cells)  # a sentence every row repeats is said once, above the table
    notes = "".join(f"\n  {cols[i]}: {cells[0][i]}" for i in same)
    if same:
        cols = [c for i, c in enumerate(cols) if i not in same]
        cells = [[x for i, x in enumerate(row) if i not in same] for row in cells]
    widths = [min(max(len(c), *(len(row[i]) for row in cells)), max(MAX_CELL, len(c))) for i, c in enumerate(cols)]
    _narrow_text_columns(widths, cells, width)
    keys = _key_columns(widths, width)
    blocks = _column_blocks(widths, keys, width)
    parts = []
    for n, block in enumerate(blocks):
        shown = keys + block
        room = width - sum(widths[i] + 2 for i in keys) - 2 * (len(block) - 1)
        fitted = {i: widths[i] for i in shown}
        if len(block) == 1 and fitted[block[0]] > room:  # one column wider than what is left: its cells wrap
            fitted[block[0]] = max(room, len(cols[block[0]]))
        head = f"{title}{notes}" if n == 0 else f"{title} (continued)"
        parts.append(_render(head, [cols[i] for i in shown], [[row[i] for i in shown] for row in cells],
                             [fitted[i] for i in shown]))
    return "".join(parts)


def _shared_prose(cols: list[str], cells: list[list[str]]) -> list[int]:
    """Columns of prose (wider than 24, with spaces) that hold the same text in every one of several rows."""
    if len(cells) < 2:
        return []
    return [i for i in range(len(cols)) if len(cells[0][i]) > 24 and " " in cells[0][i]
            and all(row[i] == cells[0][i] for row in cells)]


def _narrow_text_columns(widths: list[int], cells: list[list[str]], width: int, floor: int = 24) -> None:
    """Narrow the widest columns of prose (cells with spaces) towards `floor`, until the table fits or they all
    reach it: wrapping prose reads better than splitting a table into blocks."""
    prose = [i for i, w in enumerate(widths) if w > floor and any(" " in row[i] for row in cells)]
    while prose and sum(widths) + 2 * (len(widths) - 1) > width:
        i = max(prose, key=lambda k: widths[k])
        if widths[i] <= floor:
            break
        widths[i] -= 1


def _key_columns(widths: list[int], width: int) -> list[int]:
    """The leading columns repeated in every block (at most two, at most a third of the width)."""
    keys: list[int] = []
    for i, w in enumerate(widths[:2]):
        if sum(widths[k] + 2 for k in keys) + w + 2 > width // 3 or i == len(widths) - 1:
            break
        keys.append(i)
    return keys


def _column_blocks(widths: list[int], keys: list[int], width: int) -> list[list[int]]:
    """The other columns, in order, packed into blocks that fit beside the key columns."""
    room = width - sum(widths[k] + 2 for k in keys)
    blocks: list[list[int]] = [[]]
    used = 0
    for i in range(len(keys), len(widths)):
        need = widths[i] + (2 if blocks[-1] else 0)
        if blocks[-1] and used + need > room:
            blocks.append([])
            need, used = widths[i], 0
        blocks[-1].append(i)
        used += need
    return blocks


def _render(title: str, header: list[str], rows: list[list[str]], widths: list[int]) -> str:
    """One block: the header, a rule, and each row on as many lines as its tallest wrapped cell."""
    line = "  ".join(c.ljust(w) for c, w in zip(header, widths)).rstrip()
    body = []
    for row in rows:
        wrapped = [textwrap.wrap(x, w, break_on_hyphens=False) or [""] if len(x) > w else [x]
                   for x, w in zip(row, widths)]
        for k in range(max(map(len, wrapped))):
            body.append("  ".join((c[k] if k < len(c) else "").ljust(w) for c, w in zip(wrapped, widths)).rstrip())
    return f"{title}\n{line}\n{'-' * len(line)}\n" + "".join(b + "\n" for b in body)


def fit_lines(text: str, width: int = WIDTH) -> str:
    """`text` with every line wider than `width` wrapped, its continuation indented past the line's own indent
    (prose; tables from `format_table` already fit)."""
    out = []
    for line in text.split("\n"):
        if len(line) <= width:
            out.append(line)
            continue
        indent = " " * (len(line) - len(line.lstrip()))
        out.extend(textwrap.wrap(line, width, subsequent_indent=indent + "    ", break_on_hyphens=False,
                                 break_long_words=True, drop_whitespace=True))
    return "\n".join(out)


def write_csv(path: Path, rows: Sequence[dict[str, Any]]) -> None:
    cols: list[str] = []
    for r in rows:
        cols.extend(k for k in r if k not in cols)
    with open_file(path, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=cols)
        w.writeheader()
        for r in rows:
            w.writerow({k: cell(v) for k, v in r.items()})


def cell(v: Any) -> Any:
    """A CSV cell: a non-finite float as `fmt` writes it ('nan', 'inf'), anything else as the csv module does."""
    return fmt(v) if isinstance(v, float) and not math.isfinite(v) else v


def slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.=-]+", "_", text).strip("_")[:120]



# ---------------------------------------------------------------- tables
#: Final values shown first in a run's row (then every other number of its final record).
KEY_METRICS = ("F", "grad_F_sq", "y_err_sq", "F_gap", "cumulative_regret", "test_accuracy")
#: Where the run ended (before the oracle counts and the rest of the final record).
PROGRESS = ("iteration", "time", "eval_time", "calls/total", "samples/total")


def identity(point: dict[str, Any], seed: int, meta: StudyRecord) -> dict[str, Any]:
    """The columns that say which run a row belongs to: problem, algorithm, configuration, axis value, seed."""
    row = {"study": meta.name, "problem": problem_label(point), "algorithm": point["label"],
           "configuration": config_label(point)}
    axis_name = meta.axis_name
    if axis_name:
        row[axis_name] = point["coords"].get("axis")
    if "reference" in point["coords"]:
        row["reference"] = bool(point["coords"]["reference"])
    row["seed"] = seed
    return row


def final_columns(final: dict[str, Any] | None, metric: str) -> dict[str, Any]:
    """Every number of a run's final record, the report's metric and the key metrics first."""
    f = final or {}
    numbers = {k: v for k, v in f.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}
    first = [metric, *KEY_METRICS, *PROGRESS]
    out = {k: numbers[k] for k in dict.fromkeys(first) if k in numbers}
    out.update((k, v) for k, v in numbers.items() if k not in out)
    return out


def records_table(runs: list[RunData], meta: StudyRecord) -> list[dict[str, Any]]:
    """Every record of every run (long format: one row per run and evaluation point)."""
    rows = []
    for r in runs:
        ident = {"run_key": r.key, **identity(r.point, r.seed, meta)}
        rows.extend({**ident, **rec} for rec in r.records)
    return rows


def by_point(runs: list[RunData]) -> dict[str, list[RunData]]:
    out: dict[str, list[RunData]] = defaultdict(list)
    for r in runs:
        out[r.point["key"]].append(r)
    return out


def by_problem_and_config(runs: list[RunData]) -> dict[tuple[str, str], list[RunData]]:
    """Runs grouped by (problem label, configuration label)."""
    groups: dict[tuple[str, str], list[RunData]] = defaultdict(list)
    for r in runs:
        groups[(problem_label(r.point), config_label(r.point))].append(r)
    return groups


def stats(runs: list[RunData], opts: ReportOptions) -> dict[str, Any]:
    vals = [an.final_value({"status": r.status, "final": r.final}, opts.metric, opts.goal) for r in runs]
    q = an.quantiles(vals, (0.25, 0.75))
    conv = [an.converged(r.records, r.status, opts.converged_metric, opts.converged_below,
                         opts.converged_relative) for r in runs]
    return {"median": an.median(vals), "q25": float(q[0]), "q75": float(q[1]), "seeds": len(runs),
            "diverged": sum(r.status == "diverged" for r in runs), "failed": sum(r.status == "failed" for r in runs),
            "converged": sum(conv),
            # finished within budget without converging: neither a success nor a blow-up
            "stalled": sum(r.status == "finished" and not c for r, c in zip(runs, conv))}


#: What `best_table` picks by (report option best_by), as its `criterion` column says.
CRITERIA = {"robust": "best median over seeds among configurations stable on every seed (finished, final "
                      "{metric} no worse than at the start); the others only when none is",
            "median": "best median over seeds, whatever its worst seed did"}


def stable(run: RunData, metric: str, goal: str) -> bool:
    """Whether a seed ended well: finished (not diverged or failed) with its final metric no worse than at its
    start (a run that blew up and came back finite, or rose, is not)."""
    if run.status != "finished" or not run.records:
        return False
    start = field(run.records, metric)[0]
    final = an.final_value({"status": run.status, "final": run.final}, metric, goal)
    if start is None or math.isnan(final):
        return False
    return final <= float(start) if goal == "min" else final >= float(start)


def best_table(runs: list[RunData], opts: ReportOptions) -> list[dict[str, Any]]:
    """Per (problem, algorithm label, axis value): the best configuration by `opts.best_by` (`CRITERIA`), with
    its median, quartiles and worst seed. Every configuration's median and stability are computed for all
    configurations at once (`run_arrays`); only the best ones' runs are read one by one."""
    by, metric, goal = opts.best_by, opts.metric, opts.goal
    cg = ra.ConfigGroups.of(runs, metric, goal)
    groups, medians, ok = cg.groups, cg.medians, cg.ok
    varied = cg.varied
    rows = []
    for (prob, label, _), configs in groups.items():
        cfgs = np.asarray(configs)
        pool = cfgs[ok[cfgs]] if by == "robust" and ok[cfgs].any() else cfgs
        key = medians[pool] if goal == "min" else -medians[pool]
        best = int(pool[0] if np.all(np.isnan(key)) else pool[np.nanargmin(key)])  # ties: the first, as `an.better`
        rs = cg.runs_of(best)
        st = stats(rs, opts)
        p = rs[0].point
        axis = p["coords"].get("axis")
        if axis is None and p["coords"].get("reference"):
            axis = "reference"  # the unscaled configuration a sensitivity study compares against
        seeds = [an.final_value({"status": r.status, "final": r.final}, metric, goal) for r in rs]
        rows.append({"problem": prob, "algorithm": label, "axis": axis,
                     "best_config": named_config(p, varied.get((prob, label), [])), f"median_{metric}": st["median"],
                     "worst_seed": _worst(seeds, goal),
                     "q25": st["q25"], "q75": st["q75"], "seeds": st["seeds"], "diverged": st["diverged"],
                     "failed": st["failed"], "converged": st["converged"], "stalled": st["stalled"],
                     "stable_on_all_seeds": bool(ok[best]), "configurations": len(configs),
                     "criterion": CRITERIA[by].format(metric=metric)})
    return rows


def named_config(point: dict[str, Any], varied: list[str]) -> str:
    """The configuration as the runs table names it (its grid values); without a grid, by the parameters that
    differ between its algorithm's configurations (e.g. 'soba(gamma=0.2, rho=0.2)' in a step-size study), not by
    the algorithm's name alone."""
    label = config_label(point)
    if point["coords"].get("grid") or not varied:
        return label
    params = point["algorithm_params"]
    return f"{label}({', '.join(f'{k}={fmt(params[k])}' for k in varied)})"


def _worst(values: list[float], goal: str) -> float:
    """The worst seed's final value (a failed seed, NaN, counts as the worst)."""
    if any(math.isnan(v) for v in values) or not values:
        return math.nan
    return max(values) if goal == "min" else min(values)



def axis_table(runs: list[RunData], opts: ReportOptions, axis_name: str) -> list[dict[str, Any]]:
    """Median final metric (and converged fraction) along a noise or drift axis."""
    groups = by_problem_and_config(runs)
    rows = []
    for (prob, cfg), rs in groups.items():
        for a, by_rs in sorted(((v[0].point["coords"].get("axis"), v) for v in by_point(rs).values()),
                               key=lambda t: axis_order(t[0])):
            st = stats(by_rs, opts)
            rows.append({"problem": prob, "algorithm": cfg, axis_name: a, f"median_{opts.metric}": st["median"],
                         "q25": st["q25"], "q75": st["q75"], "converged": st["converged"], "seeds": st["seeds"],
                         "diverged": st["diverged"], "failed": st["failed"]})
    return rows


def axis_order(value: Any) -> tuple[int, Any]:
    """Numbers in increasing order, then anything else (e.g. null batch size) by its text."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return (0, float(value))
    return (1, repr(value))

