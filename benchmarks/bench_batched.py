"""K runs batched against one after another, through the run loop (records and all).

    .venv/bin/python benchmarks/bench_batched.py [--ks 10 100 1000] [--dims 10 100] [--iterations 200]
        [--repeats 3] [--families simulated logistic] [--family-ks 10 100]

Each row is one algorithm on one problem instance, a step-size grid of K configs (log-spaced over
[0.02, 0.2]²), seed 0, --iterations iterations and --n-evals evaluation points (default 30): once with
`algorithms.run_batched` (one stack), once as K `algorithms.run` loops in turn, the two in turn --repeats
times. A time is the process CPU seconds of consuming every record (evaluation included: a study pays for
it), BLAS on one thread (as a trial on one CPU); the ratio is sequential / batched, its median and min over
the repeats (each repeat's pair measured side by side). `step` is the ratio of the steps alone (the runs'
`cpu_time`, median). Rows:

* quadratic: SOBA full batch, dim_x = dim_y = d, for each d in --dims;
* simulated: SOBA on minibatches of 32 (d = 10, 1024 samples per level);
* logistic: SOBA on minibatches of 32 of regularization_selection (breast_cancer, 30 features).

The final records of the two are checked equal (rtol 1e-10) before a row is printed.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import algorithms  # noqa: E402
import problems  # noqa: E402
from algorithms.threads import blas_threads  # noqa: E402

#: The minibatch rows: (label, problem name, its parameters, SOBA's batch size).
FAMILIES = {
    "simulated": ("simulated", dict(dim_x=10, dim_y=10, n_samples_inner=1024, n_samples_outer=1024), 32),
    "logistic": ("regularization_selection", dict(dataset="breast_cancer"), 32),
}


def grid(k: int, batch_size: int | None = None) -> list[dict[str, Any]]:
    """K (ρ, γ) pairs log-spaced over [0.02, 0.2]²."""
    side = int(np.ceil(np.sqrt(k)))
    steps = np.geomspace(0.02, 0.2, side)
    return [{"rho": float(r), "gamma": float(g), "batch_size": batch_size} for r in steps for g in steps][:k]


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


def row(label: str, problem, configs, args) -> str:
    """One table row: the two in turn, --repeats times."""
    seq, bat, ratios, steps = [], [], [], []
    for _ in range(args.repeats):
        t_seq, recs_seq, step_seq = sequential(problem, configs, args.iterations, args.n_evals)
        t_bat, recs_bat, step_bat = batched(problem, configs, args.iterations, args.n_evals)
        if not same(recs_seq, recs_bat):
            raise SystemExit(f"{label} K={len(configs)}: batched and sequential final records differ")
        seq.append(t_seq)
        bat.append(t_bat)
        ratios.append(t_seq / t_bat)
        steps.append(step_seq / step_bat)
    return (f"{label:>22} {len(configs):>6} {statistics.median(seq):>11.2f} {statistics.median(bat):>9.3f} "
            f"{statistics.median(ratios):>7.1f}x {min(ratios):>7.1f}x {statistics.median(steps):>10.1f}x")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ks", type=int, nargs="+", default=[10, 100, 1000])
    ap.add_argument("--dims", type=int, nargs="+", default=[10, 100])
    ap.add_argument("--families", nargs="*", default=list(FAMILIES), choices=list(FAMILIES),
                    help="minibatch rows besides the quadratic ones")
    ap.add_argument("--family-ks", type=int, nargs="+", default=[10, 100],
                    help="K of the minibatch rows (their ground truth costs as much per run batched or not)")
    ap.add_argument("--iterations", type=int, default=200)
    ap.add_argument("--n-evals", type=int, default=30, help="evaluation points per run (the run loop's default)")
    ap.add_argument("--repeats", type=int, default=3, help="sequential/batched pairs per row (median, min)")
    args = ap.parse_args()
    print(f"SOBA x {args.iterations} iterations, {args.n_evals} evaluation points; process CPU seconds (medians), "
          f"sequential / batched ratio median and min over {args.repeats} pairs")
    print(f"{'problem':>22} {'K':>6} {'sequential':>11} {'batched':>9} {'ratio':>8} {'min':>8} {'step ratio':>11}")
    with blas_threads(1):
        for d in args.dims:
            problem = problems.make("quadratic", seed=0, dim_x=d, dim_y=d)
            for k in args.ks:
                print(row(f"quadratic d={d}", problem, grid(k), args), flush=True)
        for family in args.families:
            name, params, batch_size = FAMILIES[family]
            problem = problems.make(name, seed=0, **params)
            for k in args.family_ks:
                print(row(f"{family} b={batch_size}", problem, grid(k, batch_size), args), flush=True)


if __name__ == "__main__":
    main()
