"""Time per outer iteration of F2CSA, SSIGD and DS-BLO against the dimension (F2CSA paper, Fig. 2).

    .venv/bin/python benchmarks/bench_constrained.py [--max-d 4000] [--steps 3] [--constraints linear]
                                                     [--threads 1]

On constrained_quadratic (d = dim x = dim y, p = 10 rows or the box, σ = 0.01) each algorithm runs with
its default configuration, all on the same instance in one process: two untimed warm-up steps, then
--steps steps timed one at a time, median kept. The steps of one method run back to back: a dense
step right after F2CSA's long memory-bound loop was measured ~0.7 s slower at d = 4000 than the same
step after another dense step, an artefact of interleaving rather than a cost of the method.
With noisy oracles F2CSA's inner loops run to their caps (300 + 300 iterations of O(d²) products);
`f2csa/exact` is F2CSA with exact oracles (batch_size null) and η = 0.01, D = 0.05, whose warm-started
inner loops stop on their tolerances instead. The table ends with log–log slopes, the crossover dimension(s) and
the speed-ups at the largest d, next to the paper's numbers (d = 4000: F2CSA 7.7 s, DS-BLO 22.6 s,
SSIGD 22.0 s; crossover near d = 1000). Larger d take minutes (d = 4000 builds three 4000² matrices).
"""
from __future__ import annotations

import argparse
import sys
import time

import numpy as np

import algorithms
import problems
from problems.counting import counted

DIMS = (100, 250, 500, 1000, 2000, 4000)
# f2csa/exact moves x by up to D = 0.05 per step (the Fig. 1 test's steps): with the paper's η = 1e-5
# x would hardly move and warm-started exact loops would stop after one iteration.
RUNS = (("f2csa", {}), ("ssigd", {}), ("dsblo", {}),
        ("f2csa/exact", {"batch_size": None, "eta": 0.01, "clip": 0.05, "goldstein": 0.5}))
WARMUP = 2
PAPER = {"f2csa": 7.7, "dsblo": 22.6, "ssigd": 22.0}


def build(name: str, problem, config: dict, seed: int):
    """An algorithm instance on a fresh counting view."""
    cls = algorithms.get(name.split("/")[0])
    return cls(counted(problem), algorithms.make_config(cls.name, config), np.random.default_rng(seed))


def time_dimension(d: int, steps: int, constraints: str, seed: int) -> dict[str, float]:
    """Median seconds per step of every run at dimension d, and oracle calls per step (`<label> calls`)."""
    p = problems.make("constrained_quadratic", seed=seed, d=d, constraints=constraints)
    out: dict[str, float] = {}
    for label, cfg in RUNS:
        alg = build(label, p, cfg, seed)
        # Untimed warm-up steps: F2CSA's first step also estimates curvatures, DS-BLO's takes two
        # gradients, and the first dense step after another method's loop pays for fresh memory.
        for _ in range(WARMUP):
            _step(alg)
        calls0 = alg.problem.counter.total_calls
        times = []
        for _ in range(steps):
            start = time.perf_counter()
            _step(alg)
            times.append(time.perf_counter() - start)
        out[label] = float(np.median(times))
        out[f"{label} calls"] = (alg.problem.counter.total_calls - calls0) / steps
    return out


def _step(alg) -> None:
    with np.errstate(over="raise", divide="raise", invalid="raise"):
        alg.step()
    alg.iteration += 1


def loglog_slope(ds: list[int], ts: list[float]) -> float:
    """Least-squares slope of log t against log d."""
    return float(np.polyfit(np.log(ds), np.log(ts), 1)[0]) if len(ds) > 1 else float("nan")


def crossover(ds: list[int], first: list[float], other: list[float]) -> str:
    """Where `first` becomes and stays faster than `other` (log–log interpolation between measured d)."""
    diff = np.log(first) - np.log(other)
    changes = int(np.sum(np.diff(np.sign(diff)) != 0))
    note = " (the timings cross more than once)" if changes > 1 else ""
    if diff[-1] <= 0:
        slower = np.flatnonzero(diff > 0)
        if slower.size == 0:
            return f"none: F2CSA faster at every d from {ds[0]}"
        i = int(slower[-1])
        w = diff[i] / (diff[i] - diff[i + 1])
        return f"d ≈ {np.exp((1 - w) * np.log(ds[i]) + w * np.log(ds[i + 1])):.0f}{note}"
    if len(ds) < 2:
        return "not measured"
    # Slower at the largest d: extrapolate the two fitted power laws t = a d^k.
    k1, c1 = np.polyfit(np.log(ds), np.log(first), 1)
    k2, c2 = np.polyfit(np.log(ds), np.log(other), 1)
    if k2 > k1:
        return f"none up to d = {ds[-1]}{note}; power-law fits cross near d ≈ {np.exp((c1 - c2) / (k2 - k1)):.0f}"
    return f"none up to d = {ds[-1]}{note}; the fitted power laws do not cross"


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--max-d", type=int, default=4000, help="largest dimension of 100, 250, 500, 1000, 2000, 4000")
    ap.add_argument("--steps", type=int, default=3, help="timed steps per algorithm and dimension (median)")
    ap.add_argument("--constraints", choices=("linear", "box"), default="linear")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=None, help="BLAS threads (default: the library's own)")
    args = ap.parse_args(argv)
    if args.threads is not None:
        from threadpoolctl import threadpool_limits  # installed with scikit-learn

        threadpool_limits(args.threads)
    dims = [d for d in DIMS if d <= args.max_d]
    labels = [label for label, _ in RUNS]
    results: dict[int, dict[str, float]] = {}
    print(f"constrained_quadratic ({args.constraints}, σ = 0.01), default configs, median of {args.steps} steps,"
          f" BLAS threads: {args.threads or 'default'}", flush=True)
    header = (f"{'d':>6} " + " ".join(f"{label + ' [s]':>17}" for label in labels)
              + f" {'ssigd/f2csa':>12} {'dsblo/f2csa':>12}")
    for d in dims:
        start = time.perf_counter()
        print(f"  timing d = {d} ...", file=sys.stderr, flush=True)
        results[d] = time_dimension(d, args.steps, args.constraints, args.seed)
        print(f"  d = {d} done in {time.perf_counter() - start:.0f} s", file=sys.stderr, flush=True)
    print(header)
    for d in dims:
        r = results[d]
        cells = " ".join(f"{r[label]:17.4f}" for label in labels)
        print(f"{d:6d} {cells} {r['ssigd'] / r['f2csa']:12.2f} {r['dsblo'] / r['f2csa']:12.2f}")
    _summary(dims, labels, results)


def _summary(dims: list[int], labels: list[str], results: dict[int, dict[str, float]]) -> None:
    col = {label: [results[d][label] for d in dims] for label in labels}
    print("\nlog–log slope of time per step against d (all d; between the two largest d):")
    for label in labels:
        print(f"  {label:12s} {loglog_slope(dims, col[label]):5.2f}  {loglog_slope(dims[-2:], col[label][-2:]):5.2f}")
    print("crossover (F2CSA becomes faster):")
    for other in ("ssigd", "dsblo"):
        print(f"  vs {other}: {crossover(dims, col['f2csa'], col[other])}")
        print(f"  vs {other} (f2csa/exact): {crossover(dims, col['f2csa/exact'], col[other])}")
    d = dims[-1]
    r = results[d]
    print(f"oracle calls per step at d = {d}: " + ", ".join(f"{label} {r[label + ' calls']:.0f}" for label in labels)
          + " (F2CSA: gradients; SSIGD/DS-BLO: 2 dense Hessian/Jacobian calls + gradients)")
    print(f"speed-up at d = {d}: ssigd/f2csa = {r['ssigd'] / r['f2csa']:.2f},"
          f" dsblo/f2csa = {r['dsblo'] / r['f2csa']:.2f}"
          f" (f2csa/exact: {r['ssigd'] / r['f2csa/exact']:.2f}, {r['dsblo'] / r['f2csa/exact']:.2f})")
    print(f"paper (Fig. 2, d = 4000): f2csa {PAPER['f2csa']} s, dsblo {PAPER['dsblo']} s, ssigd {PAPER['ssigd']} s"
          f" -> speed-ups {PAPER['ssigd'] / PAPER['f2csa']:.1f} and {PAPER['dsblo'] / PAPER['f2csa']:.1f};"
          " crossover near d = 1000")


if __name__ == "__main__":
    main()
