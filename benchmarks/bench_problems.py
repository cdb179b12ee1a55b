"""Time per oracle call (minibatch and full batch) and per ground-truth evaluation of every problem.

    .venv/bin/python benchmarks/bench_problems.py [--only quadratic,simulated] [--batch 64] [--quick]

Every registered problem is measured (problems added later included) at its size presets below, or at
its defaults when it has none; online problems are measured on their instance at t = 1. Rows print as
they are measured; the last lines fit the minibatch cost against the dimension for the finite sums,
which must grow like batch · d, not d².
"""
from __future__ import annotations

import argparse
import math
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import problems  # noqa: E402
from problems.base import OnlineProblem  # noqa: E402

SCALING_DIMS = (100, 400, 1600)

#: name -> [(label, params)]; the first entry is the one kept by --quick.
PRESETS: dict[str, list[tuple[str, dict]]] = {
    "quadratic": [("dense d=100", {"dim_x": 100, "dim_y": 100})]
    + [(f"finite-sum d={d}", {"dim_x": d, "dim_y": d, "n_samples": 1024, "rank": 2}) for d in SCALING_DIMS],
    # Timing needs no convex F: keep the first draw (the exact test redraws at d ≥ 400 with few samples).
    "simulated": [(f"d={d}", {"dim_x": d, "dim_y": d, "n_samples_inner": 2048, "convexity": "none"})
                  for d in SCALING_DIMS],
    "constrained_quadratic": [(f"d={d}", {"d": d}) for d in (50, 200, 800)],
    "drifting_quadratic": [(f"d={d}", {"dim_x": d, "dim_y": d}) for d in (20, 100, 400)],
    "regularization_selection": [
        ("breast_cancer", {}),
        ("synthetic n=20k p=50", {"dataset": "synthetic", "n_samples": 20_000, "n_features": 50}),
        ("synthetic n=50k p=100", {"dataset": "synthetic", "n_samples": 50_000, "n_features": 100}),
    ],
    "hyper_cleaning": [
        ("digits n=600", {"max_samples": 600}),
        ("digits", {}),
        ("synthetic n=10k p=50 K=10", {"dataset": "synthetic", "n_samples": 10_000, "n_features": 50,
                                       "n_classes": 10}),
    ],
    "streaming_regularization": [("default", {}), ("window=2000 p=100", {"window": 2000, "n_features": 100})],
    "streaming_hyper_cleaning": [("default", {}), ("window=2000 p=50 K=10",
                                                   {"window": 2000, "n_features": 50, "n_classes": 10})],
}

ORACLES = ("grad_g", "grad_f", "hvp", "cross")


def per_call(fn: Callable[[], object], min_time: float = 0.03, blocks: int = 5) -> float:
    """Seconds per call: the fastest of `blocks` timed blocks (robust to other load on the machine)."""
    fn()  # warm-up
    start = time.perf_counter()
    fn()
    once = max(time.perf_counter() - start, 1e-7)
    reps = max(1, int(min_time / blocks / once))
    best = math.inf
    for _ in range(blocks):
        start = time.perf_counter()
        for _ in range(reps):
            fn()
        best = min(best, (time.perf_counter() - start) / reps)
    return best


def oracle_calls(p, x, y, v, batch) -> dict[str, Callable[[], object]]:
    """The four timed oracles on one batch."""
    return {
        "grad_g": lambda: p.grad_g(x, y, batch),
        "grad_f": lambda: p.grad_f(x, y, batch),
        "hvp": lambda: p.hvp_yy_g(x, y, v, batch),
        "cross": lambda: p.cross_xy_g(x, y, v, batch),
    }


def ground_truth_times(p, x: np.ndarray, rng: np.random.Generator) -> tuple[float, float]:
    """(first, repeated) seconds of y*, F and ∇F at a new point, as the run loop evaluates them."""
    def evaluate(z):
        p.F(z)
        p.grad_F(z)

    start = time.perf_counter()
    evaluate(x)
    first = time.perf_counter() - start
    times = []
    for _ in range(2):
        z = x + 1e-2 * rng.standard_normal(x.shape)  # a nearby new point: memos miss, warm starts help
        start = time.perf_counter()
        evaluate(z)
        times.append(time.perf_counter() - start)
        if sum(times) > 2:
            break
    return first, float(np.median(times))


def measure(name: str, params: dict, batch_size: int) -> dict:
    """One table row: dimensions, sample count and timings of one instance."""
    start = time.perf_counter()
    P = problems.make(name, seed=0, **params)
    build = time.perf_counter() - start
    p = P.at(1) if isinstance(P, OnlineProblem) else P
    rng = np.random.default_rng(0)
    x0, y0 = p.initial_point()
    x = x0 + 0.1 * rng.standard_normal(x0.shape)
    y = y0 + 0.1 * rng.standard_normal(y0.shape)
    v = rng.standard_normal(p.dim_y)
    row = {"dx": p.dim_x, "dy": p.dim_y, "n": p.n_samples, "build": build}
    row["full"] = {k: per_call(fn) for k, fn in oracle_calls(p, x, y, v, None).items()}
    if getattr(p, "stochastic", False):
        batch = p.sample_batch(rng, batch_size)
        row["mini"] = {k: per_call(fn) for k, fn in oracle_calls(p, x, y, v, batch).items()}
    row["gt_first"], row["gt_next"] = ground_truth_times(p, x, rng)
    return row


def fmt_time(seconds: float | None) -> str:
    """Microseconds below 10 ms, else milliseconds or seconds."""
    if seconds is None:
        return "-"
    if seconds < 1e-2:
        return f"{seconds * 1e6:.0f}us"
    if seconds < 10:
        return f"{seconds * 1e3:.1f}ms"
    return f"{seconds:.1f}s"


COLUMNS = (("problem", 26), ("size", 26), ("dx", 6), ("dy", 6), ("n", 7)) + tuple(
    (f"{k} mb/full", 19) for k in ORACLES) + (("truth 1st/next", 18), ("build", 8))


def print_row(cells: list[str]) -> None:
    """One fixed-width line."""
    print("  ".join(str(c).ljust(w) for c, (_, w) in zip(cells, COLUMNS)), flush=True)


def row_cells(name: str, label: str, r: dict) -> list[str]:
    """The printed cells of a measured row."""
    mini = r.get("mini", {})
    cells = [name, label, r["dx"], r["dy"], r["n"] if r["n"] is not None else "-"]
    cells += [f"{fmt_time(mini.get(k))} / {fmt_time(r['full'][k])}" for k in ORACLES]
    cells += [f"{fmt_time(r['gt_first'])} / {fmt_time(r['gt_next'])}", fmt_time(r["build"])]
    return cells


def scaling_summary(results: dict[tuple[str, str], dict], batch_size: int) -> None:
    """Minibatch time ratios across SCALING_DIMS and the fitted exponent of d (1: linear, 2: quadratic)."""
    print(f"\nMinibatch scaling at batch {batch_size} (time ratio vs d={SCALING_DIMS[0]}; batch·d predicts "
          f"{', '.join(f'{d // SCALING_DIMS[0]}x' for d in SCALING_DIMS[1:])}, d² predicts "
          f"{', '.join(f'{(d // SCALING_DIMS[0]) ** 2}x' for d in SCALING_DIMS[1:])}):")
    for name, prefix in (("quadratic", "finite-sum d="), ("simulated", "d=")):
        rows = [results.get((name, f"{prefix}{d}")) for d in SCALING_DIMS]
        if any(r is None or "mini" not in r for r in rows):
            continue
        for k in ORACLES:
            t = np.array([r["mini"][k] for r in rows])
            slope = np.polyfit(np.log(SCALING_DIMS), np.log(t), 1)[0]
            ratios = ", ".join(f"{t[i] / t[0]:.1f}x" for i in range(1, len(t)))
            print(f"  {name:10s} {k:7s} ratios {ratios:16s} exponent of d: {slope:.2f}")


def main(argv: list[str] | None = None) -> None:
    """Measure and print the table."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", default="", help="comma-separated problem names (default: all registered)")
    ap.add_argument("--batch", type=int, default=64, help="minibatch size (default 64)")
    ap.add_argument("--quick", action="store_true", help="only the first size preset of each problem")
    args = ap.parse_args(argv)
    names = [n for n in problems.available() if not args.only or n in args.only.split(",")]
    print(f"Time per call: minibatch (batch {args.batch}) / full batch; ground truth = y*, F and ∇F at a new "
          "point (first call / later nearby calls); '-' = no minibatch form.\n")
    print_row([c for c, _ in COLUMNS])
    results: dict[tuple[str, str], dict] = {}
    start = time.perf_counter()
    for name in names:
        presets = PRESETS.get(name, [("default", {})])
        for label, params in presets[:1] if args.quick else presets:
            try:
                r = measure(name, params, args.batch)
            except Exception as err:  # a broken problem must not hide the others' numbers
                print_row([name, label, f"failed: {type(err).__name__}: {err}"])
                continue
            results[(name, label)] = r
            print_row(row_cells(name, label, r))
    scaling_summary(results, args.batch)
    print(f"\nTotal {time.perf_counter() - start:.0f}s")


if __name__ == "__main__":
    main()
