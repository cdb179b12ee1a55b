"""Sweep platform overhead and parallel speed-up, printed as a table.

1. Many small runs: wall time of a study through the platform (local Ray + Tune + MLflow SQLite +
   on-disk records; Ray start-up included) against the same runs in a plain Python loop.
2. Compute-bound trials: the same study on a local Ray with 1 CPU and with 2 CPUs (the speed-up).

    .venv/bin/python benchmarks/bench_sweep.py            # about three minutes on 2 cores
    .venv/bin/python benchmarks/bench_sweep.py --quick
"""
from __future__ import annotations

import argparse
import os

os.environ.setdefault("OMP_NUM_THREADS", "1")  # one core per run, as Ray gives each trial
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import io  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from typing import Any  # noqa: E402

import algorithms  # noqa: E402
import problems  # noqa: E402
from sweep import spec  # noqa: E402
from sweep.runner import run_study  # noqa: E402


def study(name: str, algorithm: str, factors: list[float], seeds: int, dim: int, iterations: int,
          seeds_per_trial: int | None) -> spec.Study:
    """A step-size study of one algorithm on a quadratic."""
    return spec.validate({
        "name": name, "kind": "stepsize_sensitivity", "axis": {"factors": factors},
        "problems": [{"name": "quadratic", "params": {"dim_x": dim, "dim_y": dim}}],
        "algorithms": [{"name": algorithm}], "seeds": seeds, "seeds_per_trial": seeds_per_trial,
        "budget": {"iterations": iterations}, "n_evals": 20, "checkpoint_seconds": 60,
    })


def plain_loop(st: spec.Study) -> float:
    """The study's runs one after another with the run loop alone (no Ray, no MLflow, no files)."""
    start = time.perf_counter()
    for p in st.points:
        for s in st.seeds:
            inst = problems.make(p.problem, seed=s, **p.problem_params)
            for _ in algorithms.run(p.algorithm, inst, p.algorithm_params, seed=s, budget=p.budget, n_evals=p.n_evals):
                pass
    return time.perf_counter() - start


def platform(st: spec.Study, cpus: int) -> float:
    """The study through `run_study` on a fresh local Ray with `cpus` CPUs (start-up included)."""
    with tempfile.TemporaryDirectory(prefix="bench_sweep") as d:
        start = time.perf_counter()
        out = run_study(st, d, num_cpus=cpus, report=False, out=io.StringIO())
        elapsed = time.perf_counter() - start
    assert out.complete, out.counts
    return elapsed


def table(rows: list[dict[str, Any]]) -> str:
    """Fixed-width text table."""
    cols = list(rows[0])
    cells = [[f"{r[c]:.2f}" if isinstance(r[c], float) else str(r[c]) for c in cols] for r in rows]
    widths = [max(len(c), *(len(x[i]) for x in cells)) for i, c in enumerate(cols)]
    lines = ["  ".join(c.rjust(w) for c, w in zip(cols, widths)), "  ".join("-" * w for w in widths)]
    lines += ["  ".join(x.rjust(w) for x, w in zip(row, widths)) for row in cells]
    return "\n".join(lines)


def main() -> None:
    """Run the measurements and print their tables."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="smaller studies")
    ap.add_argument("--algorithm", default="soba", help="an offline algorithm (default soba)")
    args = ap.parse_args()
    alg = args.algorithm
    print(f"load average before: {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs (other work skews the numbers)")

    one = study("bench_one", alg, [1], 1, 10, 200, None)
    fixed = platform(one, 2)
    small = study("bench_small", alg, [0.25, 0.5, 1, 2, 4], 4 if args.quick else 20, 10, 200, None)
    n = len(small.run_keys)
    t_plain = plain_loop(small)
    t_plat = platform(small, 2)
    print(f"\n1. {n} small runs ({alg}, quadratic d=10, 200 iterations) in {len(small.trials)} trials, 2 CPUs")
    print(table([{"runs": n, "plain loop s": t_plain, "platform s": t_plat, "fixed start-up s": fixed,
                  "platform - start-up s": t_plat - fixed, "ratio": t_plat / t_plain,
                  "ratio w/o start-up": (t_plat - fixed) / t_plain,
                  "ms/run plain": 1000 * t_plain / n, "ms/run platform": 1000 * (t_plat - fixed) / n}]))

    dim, iters = (400, 600) if args.quick else (800, 1500)
    heavy = study("bench_heavy", alg, [0.5, 1, 2, 4], 2, dim, iters, 1)
    t_plain = plain_loop(heavy)
    t1 = platform(heavy, 1)
    t2 = platform(heavy, 2)
    print(f"\n2. {len(heavy.run_keys)} compute-bound trials ({alg}, quadratic d={dim}, {iters} iterations): 1 vs 2 CPUs")
    print(table([{"trials": len(heavy.trials), "plain loop s": t_plain, "platform 1 CPU s": t1,
                  "platform 2 CPUs s": t2, "speed-up 2 vs 1": t1 / t2,
                  "speed-up w/o start-up": (t1 - fixed) / (t2 - fixed), "plain / 2 CPUs": t_plain / t2}]))


if __name__ == "__main__":
    main()
