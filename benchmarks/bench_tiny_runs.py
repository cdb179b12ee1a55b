"""Tiny runs: N runs of SOBA on a d = 5 quadratic, 2 iterations each, through a whole `bisweep run` process.

Prints, per repeat and as min / median: the wall time, runs/s over the whole process and over the experiment
(the first trial's start to Tune's end, from the session's timeline), the driver's peak RSS, its CPU seconds
per run, the MLflow writer thread's share of the driver's CPU, and `mlflow.db` bytes per run (`--tables`: and
the tables that hold them, from SQLite's dbstat). `--code DIR` runs another checkout's code (e.g. an export of main) in
turn with this one, for before -> after figures side by side.

    .venv/bin/python benchmarks/bench_tiny_runs.py 10000                 # quick check (~1 min)
    .venv/bin/python benchmarks/bench_tiny_runs.py 100000 --repeats 1    # the 10^5 target
    .venv/bin/python benchmarks/bench_tiny_runs.py 10000 --code /tmp/main-export --repeats 3
"""
from __future__ import annotations

import argparse
import json
import os
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[1]
PYTHON = sys.executable

#: `bisweep run` as its console script runs it, the MLflow writer thread's CPU seconds measured (a wrapper of its
#: loop reads the thread's clock when the loop ends) and the driver's CPU and peak RSS written to a file.
CHILD = """
import atexit, json, os, resource, sys, time
import sweep.cli as cli  # first, as the `bisweep` script does (what it sets up before Ray, Tune or Arrow load)
try:
    import sweep.execution.mlflow_writer as mw
except ImportError:  # a checkout from before sweep/'s sub-packages
    import sweep.execution.mlflow_writer as mw
writer_cpu = []
work = mw.MlflowCallback._work
def timed(self):
    try:
        work(self)
    finally:
        writer_cpu.append(time.thread_time())
mw.MlflowCallback._work = timed
rc = cli.main(sys.argv[2:])
ru = resource.getrusage(resource.RUSAGE_SELF)
with open(sys.argv[1], "w") as fh:
    json.dump({"rc": rc, "rss_mb": ru.ru_maxrss / 1024, "cpu": ru.ru_utime + ru.ru_stime,
               "writer_cpu": sum(writer_cpu)}, fh)
atexit._run_exitfuncs()
sys.stdout.flush()
os._exit(rc)
"""


def log_grid(n: int, low: float, high: float) -> list[float]:
    """n values from low to high, evenly spaced in log."""
    return [float(f"{low * (high / low) ** (i / max(n - 1, 1)):.12g}") for i in range(n)]


def tiny_study(n: int) -> dict[str, Any]:
    """n configurations (SOBA's outer step on a log grid, times its inner step on one when n > 10⁴, so that the
    file stays under the 256 KB a study file may have) x 1 seed, 2 iterations on a d = 5 quadratic."""
    inner = 1 if n <= 10_000 else next(k for k in (10, 100, 1000) if n % k == 0 and n // k <= 10_000)
    params = {"gamma": log_grid(n // inner, 1e-3, 1.0)}
    if inner > 1:
        params["rho"] = log_grid(inner, 1e-2, 0.5)
    return {"name": f"tiny{n}", "kind": "comparison",
            "problems": [{"name": "quadratic", "params": {"dim_x": 5, "dim_y": 5}}],
            "algorithms": [{"name": "soba", "params": params}], "seeds": 1,
            "budget": {"iterations": 2}}


def tables(db: Path) -> dict[str, int]:
    """Bytes of each table of a SQLite file, its indexes counted with it (largest first)."""
    with sqlite3.connect(db) as conn:
        owner = dict(conn.execute("SELECT name, tbl_name FROM sqlite_master WHERE type IN ('table', 'index')"))
        out: dict[str, int] = {}
        for name, size in conn.execute("SELECT name, SUM(pgsize) FROM dbstat GROUP BY name"):
            table = owner.get(name, name)
            out[table] = out.get(table, 0) + size
    conn.close()
    return dict(sorted(out.items(), key=lambda kv: -kv[1]))


def run_tiny(python: str, n: int, work: Path, env: dict[str, str], extra: tuple[str, ...] = ()
             ) -> tuple[dict[str, Any], dict[str, Any], Path, float]:
    """One whole `bisweep run --no-report` of the tiny study of n runs in `work` by `python` (under `CHILD`, with
    `env` and `extra` arguments): the child's figures, the session's timeline (sessions.jsonl), the results
    directory and the wall seconds; an error with stderr's tail when it fails."""
    study, res, stats = work / "tiny.yaml", work / "res", work / "child.json"
    study.write_text(yaml.safe_dump(tiny_study(n)))
    args = ["run", str(study), "--results-dir", str(res), "--no-report", "--num-cpus", "2", "--max-runs", str(n),
            *extra]
    t0 = time.monotonic()
    proc = subprocess.run([python, "-c", CHILD, str(stats), *args], cwd=work, env=env, capture_output=True, text=True)
    wall = time.monotonic() - t0
    out = json.loads(stats.read_text()) if stats.exists() else {"rc": proc.returncode}
    if out["rc"] != 0:
        raise RuntimeError(f"bisweep run failed ({out['rc']}): {proc.stderr[-3000:]}")
    return out, json.loads((res / "sessions.jsonl").read_text().splitlines()[-1]), res, wall


def run_once(n: int, code: Path, work: Path, by_table: bool = False) -> dict[str, Any]:
    """One whole `bisweep run` of the tiny study with `code` first on the path; its figures."""
    out, marks, res, wall = run_tiny(PYTHON, n, work, {**os.environ, "PYTHONPATH": str(code)})
    span = marks["fit_done"] - marks["first_trial_started"]
    db = res / "mlflow.db"
    runs = sum(1 for line in (res / "ended.txt").read_text().splitlines() if line.startswith("finished"))
    return {"wall": wall, "runs": runs, "span": span, "rss_mb": out["rss_mb"], "cpu": out["cpu"],
            "fit_cpu": marks["fit_done_cpu"] - marks["first_trial_started_cpu"], "writer_cpu": out["writer_cpu"],
            "db_bytes": db.stat().st_size, "tables": tables(db) if by_table else {}, "trials": marks.get("trials")}


def mm(values: list[float], fmt: str = "{:.2f}") -> str:
    """min / median."""
    return f"{fmt.format(min(values))} / {fmt.format(statistics.median(values))}"


def row(label: str, n: int, got: list[dict[str, Any]]) -> dict[str, str]:
    """A table row of one code's repeats."""
    return {"code": label, "wall s": mm([g["wall"] for g in got]),
            "runs/s whole": mm([n / g["wall"] for g in got], "{:.0f}"),
            "runs/s experiment": mm([n / g["span"] for g in got], "{:.0f}"),
            "driver RSS MB": mm([g["rss_mb"] for g in got], "{:.0f}"),
            "driver CPU ms/run": mm([1000 * g["cpu"] / n for g in got], "{:.3f}"),
            "writer CPU ms/run": mm([1000 * g["writer_cpu"] / n for g in got], "{:.3f}"),
            "writer % of driver CPU": mm([100 * g["writer_cpu"] / g["cpu"] for g in got], "{:.1f}"),
            "mlflow.db KB/run": mm([g["db_bytes"] / 1024 / n for g in got]),
            "trials": mm([g["trials"] or 0 for g in got], "{:.0f}")}


def table(rows: list[dict[str, str]]) -> str:
    """Fixed-width text table."""
    cols = list(rows[0])
    widths = [max(len(c), *(len(r[c]) for r in rows)) for c in cols]
    lines = ["  ".join(c.rjust(w) for c, w in zip(cols, widths)), "  ".join("-" * w for w in widths)]
    return "\n".join(lines + ["  ".join(r[c].rjust(w) for c, w in zip(cols, widths)) for r in rows])


def main() -> None:
    """Run the tiny study `--repeats` times per code (interleaved) and print the table."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("n", type=int, nargs="?", default=10_000, help="number of tiny runs (10^5 for the target)")
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--tables", action="store_true", help="also the bytes per run of each MLflow table (slow)")
    ap.add_argument("--code", type=Path, action="append", default=[],
                    help="another checkout to run in turn with this one (repeatable)")
    args = ap.parse_args()
    codes = {"this": REPO, **{str(c): c.resolve() for c in args.code}}
    print(f"load average before: {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs (other work skews the numbers)")
    got: dict[str, list[dict[str, Any]]] = {k: [] for k in codes}
    for _ in range(args.repeats):
        for label, code in codes.items():
            with tempfile.TemporaryDirectory(prefix="bench_tiny") as d:
                r = run_once(args.n, code, Path(d), args.tables)
            assert r["runs"] == args.n, r
            got[label].append(r)
            print(f"  {label}: {r['wall']:.1f} s, {r['db_bytes'] / args.n:.0f} B/run, tables (KB/run): "
                  + ", ".join(f"{t} {b / 1024 / args.n:.2f}" for t, b in list(r["tables"].items())[:6]), flush=True)
    print(f"\n{args.n:,} tiny runs (SOBA, quadratic d = 5, 2 iterations), whole `bisweep run`, 2 CPUs "
          f"(min / median of {args.repeats})")
    print(table([row(label, args.n, got[label]) for label in codes]))
    print(f"load average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
