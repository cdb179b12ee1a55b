"""`bisweep report` of a large comparison study (SOBA on a d = 5 quadratic, 2 iterations a run, one seed), this
checkout against an older commit side by side: CPU seconds and peak RSS of the report's process.

The results directory is written by each code's own driver path (`StoreCallback`, as under Tune, without Ray):
each run's records are a real SOBA run's records at its step sizes for the first `--real` runs, and copies of
those with seeded multiplicative noise on every metric for the others (a 10⁵-run study runs ~20 min otherwise),
sent in reports of 1,000 runs as a trial's would be. Then `bisweep report DIR --no-mlflow --force` runs under
`/usr/bin/time -v`.

    .venv/bin/python benchmarks/bench_report.py 100000 --against main            # ~5 min
    .venv/bin/python benchmarks/bench_report.py 10000 --repeats 3
"""
from __future__ import annotations

import argparse
import contextlib
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_million import pythons  # noqa: E402  (benchmarks/ is not a package)
from bench_tiny_runs import mm, table, tiny_study  # noqa: E402

#: Writes the results directory of the tiny study (argv: study YAML, results directory, runs run for real).
MAKE = """
import sys, time
import numpy as np
import yaml
from algorithms.run import run
import problems
from sweep.execution.recording import StoreCallback
from sweep.execution.trainable import META
from sweep.results.store import ResultStore
from sweep.study import spec
try:
    from sweep.results.shards import shard_lines
except ImportError:
    shard_lines = None
data = yaml.safe_load(open(sys.argv[1]))
st = spec.validate(data, max_runs=10**7)
store = ResultStore(sys.argv[2])
store.write_study(st)
cb = StoreCallback(store, {p.run_key(s): (p, s) for p in st.points for s in st.seeds})
real, rng = int(sys.argv[3]), np.random.default_rng(0)
problem = problems.make("quadratic", seed=0, dim_x=5, dim_y=5)
templates = []
chunks = []
for i, p in enumerate(st.points):
    key = p.run_key(0)
    if i < real:
        records = list(run("soba", problem, p.algorithm_params, seed=0, budget=p.budget, n_evals=p.n_evals))
        templates.append(records)
    else:
        noise = float(np.exp(rng.normal(0.0, 0.3)))
        records = [{k: (v * noise if isinstance(v, float) and k not in ("time", "cpu_time", "eval_time") else v)
                    for k, v in r.items()} for r in templates[i % real]]
    chunk = {"run_key": key, "seed": 0, "index": 0, "records": records, "done": True, "span": [0.0, 0.001]}
    if shard_lines is not None:
        chunk["lines"] = shard_lines(key, records)
    chunks.append(chunk)
    if len(chunks) == 1000 or i == len(st.points) - 1:
        cb.on_trial_result(0, [], None, {**records[-1], META: {"trial_key": key, "runs": chunks, "node": "", "host": "h"}})
        chunks = []
"""


def bytes_per_run(root: Path, n: int) -> float:
    """Apparent bytes of the results directory (its report excluded) per run."""
    total = 0
    for dirpath, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if not d.startswith("report")]
        total += sum(os.lstat(os.path.join(dirpath, f)).st_size for f in files)
    return total / n


def report_once(python: str, n: int, work: Path, real: int) -> dict[str, Any]:
    """Write the results of n tiny runs with `python`'s code, then time its `bisweep report` on them."""
    study, res = work / "tiny.yaml", work / "res"
    study.write_text(yaml.safe_dump(tiny_study(n)))
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    t0 = time.monotonic()
    subprocess.run([python, "-c", MAKE, str(study), str(res), str(real)], cwd=work, env=env, check=True)
    made = time.monotonic() - t0
    proc = subprocess.run(["/usr/bin/time", "-v", python, "-m", "sweep.cli", "report", str(study), "--results-dir",
                           str(res), "--no-mlflow", "--force"], cwd=work, env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"bisweep report failed ({proc.returncode}): {proc.stderr[-3000:]}")
    def field(name: str) -> float:
        return float(re.search(rf"{re.escape(name)}: ([\d.]+)", proc.stderr)[1])
    return {"cpu": field("User time (seconds)") + field("System time (seconds)"),
            "rss_mb": field("Maximum resident set size (kbytes)") / 1024, "made": made,
            "store": bytes_per_run(res, n), "summary_lines": proc.stdout.count("\n")}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("n", type=int, nargs="?", default=100_000, help="runs of the study (configurations, one seed)")
    ap.add_argument("--against", metavar="COMMIT", help="an older commit (or branch) to run side by side")
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--real", type=int, default=200, help="runs actually run (the others copy them with noise)")
    args = ap.parse_args()
    if args.n < 1 or args.repeats < 1 or args.real < 1:
        sys.exit("bench_report: n, --repeats and --real must be positive integers")
    with contextlib.ExitStack() as stack:
        codes = pythons(stack, args.against)
        print(f"load average before: {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs")
        got: dict[str, list[dict[str, Any]]] = {k: [] for k in codes}
        for _ in range(args.repeats):
            for label, python in codes.items():
                with tempfile.TemporaryDirectory(prefix="bench_report") as d:
                    g = report_once(python, args.n, Path(d), min(args.real, args.n))
                got[label].append(g)
                print(f"  {label}: report {g['cpu']:.1f} s CPU, {g['rss_mb']:.0f} MB peak, store "
                      f"{g['store']:.0f} B/run, load {os.getloadavg()[0]:.1f}", flush=True)
    rows = [{"code": label, "report CPU s": mm([g["cpu"] for g in gs], "{:.1f}"),
             "report peak MB": mm([g["rss_mb"] for g in gs], "{:.0f}"),
             "printed lines": mm([g["summary_lines"] for g in gs], "{:.0f}"),
             "store B/run": mm([g["store"] for g in gs], "{:.0f}")} for label, gs in got.items()]
    print(f"\n`bisweep report` of {args.n:,} tiny runs (comparison, one seed), min / median of {args.repeats}")
    print(table(rows))
    print(f"load average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
