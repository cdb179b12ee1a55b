"""Peak memory of building `simulated` at n = 32,768, d = 100 and running 100 SOBA iterations on it.

    .venv/bin/python benchmarks/bench_memory.py [--repeats 3] [--baseline DIR]

Each case runs in a fresh process (peak RSS is a high-water mark, so cases cannot share one): the
imports alone; both levels at n = 32,768 (the issue's case); the inner level at 32,768 with the default
1,024 outer samples. Printed per case: peak RSS and the peak of traced (NumPy) allocations after the
imports, min / median over --repeats processes, and the per-sample arrays the instance keeps (six n × d
float64 arrays per level: 157 MB per level at n = 32,768, d = 100). --baseline DIR also runs every case
against the packages in DIR (an older checkout, e.g. `git worktree add DIR <commit>`), side by side.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

CHILD = r"""
import json, resource, sys, tracemalloc
import numpy as np
import problems, algorithms
kind = sys.argv[1]
out = {"imports": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}
if kind != "imports":
    tracemalloc.start()
    n_outer = 1024 if kind == "inner" else 32768
    dtype = "float32" if kind == "both32" else "float64"
    p = problems.make("simulated", seed=0, n_samples_inner=32768, n_samples_outer=n_outer, sample_dtype=dtype)
    for rec in algorithms.run("soba", p, {"batch_size": 64}, seed=0, budget={"iterations": 100}):
        pass
    out["traced"] = tracemalloc.get_traced_memory()[1] / 2**20
    out["data"] = sum(getattr(q, f).nbytes for q in (p.inner, p.outer) for f in "abcelm") / 2**20
    out["status"] = rec["status"]
out["peak"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(json.dumps(out))
"""

CASES = {"imports": "import problems, algorithms",
         "both": "simulated n_inner = n_outer = 32768, d 100, + 100 SOBA iterations",
         "both32": "the same with sample_dtype float32 (samples stored in single precision)",
         "inner": "simulated n_inner 32768, n_outer 1024, d 100, + 100 SOBA iterations"}


def measure(kind: str, path: Path) -> dict:
    """One fresh process: its figures in MiB."""
    env = dict(os.environ, PYTHONPATH=str(path), OPENBLAS_NUM_THREADS="1")
    done = subprocess.run([sys.executable, "-c", CHILD, kind], env=env, cwd="/", capture_output=True, text=True,
                          check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def fmt(values: list[float]) -> str:
    """min / median."""
    return f"{min(values):6.0f} / {statistics.median(values):6.0f}"


def main(argv: list[str] | None = None) -> None:
    """Measure every case (and the baseline's) and print the table."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--baseline", type=Path, help="a checkout whose packages to measure side by side")
    args = ap.parse_args(argv)
    trees = [("now", ROOT)] + ([("baseline", args.baseline.resolve())] if args.baseline else [])
    print(f"MiB (2^20 bytes), min / median over {args.repeats} processes; one BLAS thread")
    print(f"{'tree':<9} {'case':<8} {'peak RSS':>15} {'after imports':>15} {'traced peak':>15} {'sample data':>12}  what")
    for kind, what in CASES.items():
        for label, path in trees:
            try:
                runs = [measure(kind, path) for _ in range(args.repeats)]
            except subprocess.CalledProcessError:  # e.g. an older tree without sample_dtype
                print(f"{label:<9} {kind:<8} {'not available in this tree':>15}", flush=True)
                continue
            extra = ["-", "-", "-"] if kind == "imports" else [
                fmt([r["peak"] - r["imports"] for r in runs]), fmt([r["traced"] for r in runs]),
                f"{runs[0]['data']:12.0f}"]
            print(f"{label:<9} {kind:<8} {fmt([r['peak'] for r in runs]):>15} {extra[0]:>15} {extra[1]:>15} "
                  f"{extra[2]:>12}  {what}", flush=True)
    print("\ntraced peak: NumPy's allocations at their high-water mark (tracemalloc), imports excluded")


if __name__ == "__main__":
    main()
