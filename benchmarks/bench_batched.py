"""K SOBA runs batched against one after another, through the run loop (records and all).

    .venv/bin/python benchmarks/bench_batched.py [--ks 10 100 1000] [--dims 10 100] [--iterations 200]

K full-batch SOBA runs on one `quadratic` instance (dim_x = dim_y = d), a step-size grid (ρ, γ
log-spaced over [0.02, 0.2]), seed 0, --iterations iterations and --n-evals evaluation points (default 30):
once with `algorithms.run_batched` (one stack), once as K `algorithms.run` loops in turn. Each is the
process CPU seconds of consuming every record (evaluation included: a study pays for it), BLAS on one
thread (as a trial on one CPU). `step` is the same ratio for the steps alone (the runs' `cpu_time`).
The final records of the two are checked equal (rtol 1e-10) before a row is printed.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import algorithms  # noqa: E402
import problems  # noqa: E402
from algorithms.threads import blas_threads  # noqa: E402


def grid(k: int) -> list[dict[str, float]]:
    """K (ρ, γ) pairs log-spaced over [0.02, 0.2]²."""
    side = int(np.ceil(np.sqrt(k)))
    steps = np.geomspace(0.02, 0.2, side)
    return [{"rho": float(r), "gamma": float(g)} for r in steps for g in steps][:k]


def batched(problem, configs, iterations: int, n_evals: int) -> tuple[float, list[dict], float]:
    """(CPU seconds, final records in run order, summed step CPU seconds)."""
    finals: dict[int, dict] = {}
    start = time.process_time()
    budget = {"iterations": iterations}
    for k, rec in algorithms.run_batched("soba", problem, configs, [0] * len(configs), budget, n_evals):
        finals[k] = rec
    spent = time.process_time() - start
    out = [finals[k] for k in range(len(configs))]
    return spent, out, sum(r["cpu_time"] for r in out)


def sequential(problem, configs, iterations: int, n_evals: int) -> tuple[float, list[dict], float]:
    out = []
    start = time.process_time()
    for c in configs:
        for rec in algorithms.run("soba", problem, c, 0, {"iterations": iterations}, n_evals):
            pass
        out.append(rec)
    spent = time.process_time() - start
    return spent, out, sum(r["cpu_time"] for r in out)


def same(a: list[dict], b: list[dict]) -> bool:
    keys = ("F", "grad_F_sq", "y_err_sq", "iteration", "calls/total")
    return all(np.isclose(x[k], y[k], rtol=1e-10, atol=0) for x, y in zip(a, b) for k in keys)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ks", type=int, nargs="+", default=[10, 100, 1000])
    ap.add_argument("--dims", type=int, nargs="+", default=[10, 100])
    ap.add_argument("--iterations", type=int, default=200)
    ap.add_argument("--n-evals", type=int, default=30, help="evaluation points per run (the run loop's default)")
    args = ap.parse_args()
    print(f"SOBA x {args.iterations} iterations, {args.n_evals} evaluation points, full batch, quadratic d x d; "
          "process CPU seconds")
    print(f"{'d':>5} {'K':>6} {'sequential':>11} {'batched':>9} {'ratio':>7} {'step ratio':>11}")
    with blas_threads(1):
        for d in args.dims:
            problem = problems.make("quadratic", seed=0, dim_x=d, dim_y=d)
            for k in args.ks:
                configs = grid(k)
                t_seq, seq, step_seq = sequential(problem, configs, args.iterations, args.n_evals)
                t_bat, bat, step_bat = batched(problem, configs, args.iterations, args.n_evals)
                if not same(seq, bat):
                    raise SystemExit(f"d={d} K={k}: batched and sequential final records differ")
                print(f"{d:>5} {k:>6} {t_seq:>11.2f} {t_bat:>9.3f} {t_seq / t_bat:>6.1f}x {step_seq / step_bat:>10.1f}x",
                      flush=True)


if __name__ == "__main__":
    main()
