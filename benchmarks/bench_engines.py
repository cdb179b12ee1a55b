"""Explicit-state engines (algorithms.explicit): stacked SOBA compiled with JAX on whatever device JAX finds,
and side by side the NumPy stack and JAX against `algorithms.run_batched` of an older commit.

    .venv/bin/python benchmarks/bench_engines.py [--ks 1000 10000 100000] [--dims 10 100 1000]
        [--iterations 200] [--compare-dims 10 100] [--compare-k 1000] [--repeats 5] [--against COMMIT]
        [--oracle-calls B] [--tiny]

Two tables, SOBA on the deterministic quadratic (dim_x = dim_y = d), step-size grid over [0.02, 0.2]²:

* device: `engine="jax"` at every K and d for --device-iterations (a point whose (K, d) arrays pass --max-gb
  or whose FLOPs pass --max-tflop is skipped, with the reason), its
  compile seconds apart, configurations·iterations per second (run seconds, evaluations at --device-evals
  points included, records not made), and that rate's FLOP/s (the products of a step: 2(3d_y² + 2d_y d_x) per run
  per iteration) as a fraction of a float64 (n × n) matmul's FLOP/s measured on the same device here.
* side by side, K = --compare-k runs of --compare-algorithm (SOBA; or TTSA with its sampled HIA, whose JAX runs draw
  their own lengths, so that only the stacked engine is checked equal) × --iterations (on --compare-problem: the quadratic at each --compare-dims,
  or a problem with data, full batch: regularization_selection, hyper_cleaning, simulated, coreset_selection):
  "today", `algorithms.run_batched` of --against COMMIT (every record consumed; a commit before the NumPy stack
  took it, e.g. bc34bb6, is the batched run loop; run in a process of its own from a temporary worktree, as
  bench_million.py does, and timed there), the explicit stacked NumPy engine and the JAX engine (each with its
  records made), in turn --repeats times; process CPU seconds (every thread's: JAX's too), min and median, and the
  ratio of the first row's to each, median and min over the pairs (without --against: the NumPy stack's). The final
  records are checked equal (1e-10) first. With --oracle-calls B the runs' budget is B oracle calls instead of
  --iterations, and the NumPy stack's row is this checkout's `algorithms.run_batched` (the stack, its cut steps on
  the run loop; JAX takes no call budget).

As a trial on one CPU: the process pinned to one CPU (XLA sizes its thread pools from that) and BLAS to one
thread; --threads-any leaves both as they are. --tiny: a CI-size run (seconds).
"""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from algorithms.threads import pin_to_cpus  # noqa: E402

if "--threads-any" not in sys.argv:  # XLA sizes its thread pools from the affinity when it starts
    pin_to_cpus(1)

import algorithms  # noqa: E402
import problems  # noqa: E402
from algorithms import explicit  # noqa: E402
from algorithms.explicit.jax_engine import device, jax_modules  # noqa: E402
from algorithms.threads import blas_threads  # noqa: E402
from problems.shared.errors import ParameterError  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_million import pythons  # noqa: E402  (benchmarks/ is not a package)


def grid(k: int) -> list[dict[str, float]]:
    """K (ρ, γ) pairs log-spaced over [0.02, 0.2]²."""
    side = int(np.ceil(np.sqrt(k)))
    steps = np.geomspace(0.02, 0.2, side)
    return [{"rho": float(r), "gamma": float(g)} for r in steps for g in steps][:k]


def matmul_flops(n: int, repeats: int = 20) -> float:
    """The device's float64 FLOP/s on an (n × n) @ (n × n) product, best of `repeats`."""
    jax, jnp = jax_modules()
    with jax.enable_x64(True):
        a = jnp.asarray(np.random.default_rng(0).standard_normal((n, n)))
        product = jax.jit(lambda u: u @ u)
        product(a).block_until_ready()
        best = min(_timed(lambda: product(a).block_until_ready()) for _ in range(repeats))
    return 2.0 * n**3 / best


def _timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def step_flops(d: int) -> float:
    """FLOPs of one SOBA step's products for one run, dim_x = dim_y = d."""
    return 2.0 * (3 * d * d + 2 * d * d)


def device_table(args, peak: float) -> None:
    print(f"\nJAX on {device()}: float64 matmul {peak / 1e9:.2f} GFLOP/s; SOBA x {args.device_iterations} iterations, "
          f"evaluated at {len(explicit.points(args.device_iterations, args.device_evals))} points")
    print(f"{'engine':>6} {'K':>7} {'d':>5} {'compile s':>10} {'runs·it/s':>12} {'GFLOP/s':>8} {'of matmul':>10}")
    for d in args.dims:
        problem = problems.make("quadratic", seed=0, dim_x=d, dim_y=d)
        for k in args.ks:
            too_big = ("--max-gb", 5 * k * d * 8 / 1e9, args.max_gb)
            too_long = ("--max-tflop", k * args.device_iterations * step_flops(d) / 1e12, args.max_tflop)
            over = next((f"{flag} {limit:g} ({need:.3g})" for flag, need, limit in (too_big, too_long)
                         if need > limit), None)
            if over:
                print(f"{'jax':>6} {k:>7} {d:>5}  skipped: passes {over}")
                continue
            its = args.device_iterations
            first = explicit.run("soba", problem, grid(k), its, args.device_evals, engine="jax")
            again = explicit.run("soba", problem, grid(k), its, args.device_evals, engine="jax")
            rate = k * its / again.seconds
            flops = rate * step_flops(d)
            print(f"{'jax':>6} {k:>7} {d:>5} {first.compile_seconds:>10.2f} {rate:>12.3g} {flops / 1e9:>8.2f} "
                  f"{flops / peak:>9.1%}", flush=True)


#: The side-by-side algorithms: SOBA, or TTSA with its sampled HIA (N = 10; each run draws its lengths), on the
#: step-size grid (SOBA's ρ and γ, TTSA's α and γ).
COMPARED = {"soba": ("soba", lambda c: c),
            "ttsa": ("ttsa", lambda c: {"alpha": c["rho"], "gamma": c["gamma"], "hia_mode": "sampled"})}


#: The older commit's side: read one problem and run spec (JSON) per line, run `algorithms.run_batched` on it, print
#: its process CPU seconds and final values (run k's stream from seed k, as the explicit engines' default).
TODAY = """
import json, sys, time
import algorithms, problems
for line in sys.stdin:
    job = json.loads(line)
    problem = problems.make(job["problem"], **job["params"])
    start, finals = time.process_time(), {}
    for k, rec in algorithms.run_batched(job["algorithm"], problem, job["configs"], list(range(len(job["configs"]))),
                                         job["budget"], job["n_evals"]):
        finals[k] = rec
    seconds = time.process_time() - start
    keep = ("F", "grad_F_sq", "y_err_sq", "iteration")
    print(json.dumps({"seconds": seconds, "finals": {k: {n: r[n] for n in keep} for k, r in finals.items()}}),
          flush=True)
"""


class Today:
    """`algorithms.run_batched` of an older commit, in a process of its own (BLAS on one thread, one CPU)."""

    def __init__(self, python: str, algorithm: str, problem_spec: tuple[str, dict]) -> None:
        # BLAS on one thread as here (the CPU affinity is inherited)
        env = {**os.environ, "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
        self.proc = subprocess.Popen([python, "-c", TODAY], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                                     env=env)
        self.algorithm, self.problem_spec, self.seconds = algorithm, problem_spec, 0.0

    def __call__(self, problem, configs, budget: dict, n_evals: int) -> dict[int, dict]:
        name, params = self.problem_spec
        job = {"problem": name, "params": params, "algorithm": self.algorithm, "configs": configs,
               "budget": budget, "n_evals": n_evals}
        self.proc.stdin.write(json.dumps(job) + "\n")
        self.proc.stdin.flush()
        out = json.loads(self.proc.stdout.readline())
        self.seconds = out["seconds"]
        return {int(k): v for k, v in out["finals"].items()}

    def close(self) -> None:
        self.proc.stdin.close()
        self.proc.wait(timeout=60)


def explicit_engine(algorithm: str, engine: str):
    def run(problem, configs, budget: dict, n_evals: int) -> dict[int, dict]:
        if "iterations" in budget:
            return dict(explicit.run(algorithm, problem, configs, budget["iterations"], n_evals, engine=engine).records())
        return dict(algorithms.run_batched(algorithm, problem, configs, list(range(len(configs))), budget, n_evals))
    return run


def same(a: dict[int, dict], b: dict[int, dict]) -> bool:
    keys = ("F", "grad_F_sq", "y_err_sq", "iteration")
    return a.keys() == b.keys() and all(np.isclose(a[k][n], b[k][n], rtol=1e-10, atol=0) for k in a for n in keys)


def compared_problems(args) -> list[tuple[int, object, tuple[str, dict]]]:
    """(d, problem, (its name, params)) of each side-by-side row: the quadratic at each --compare-dims, or
    --compare-problem once."""
    if args.compare_problem == "quadratic":
        specs = [("quadratic", {"seed": 0, "dim_x": d, "dim_y": d}) for d in args.compare_dims]
    else:
        specs = [(args.compare_problem, {"seed": 0})]
    return [(p.dim_y, p, spec) for spec in specs for p in [problems.make(spec[0], **spec[1])]]


def compare_table(args) -> None:
    with contextlib.ExitStack() as stack:
        python = pythons(stack, args.against)[args.against] if args.against else None
        for d, problem, spec in compared_problems(args):
            compare_row(args, d, problem, python and Today(python, COMPARED[args.compare_algorithm][0], spec))


def compare_row(args, d: int, problem, today: Today | None) -> None:
    algorithm, configured = COMPARED[args.compare_algorithm]
    budget = {"oracle_calls": args.oracle_calls} if args.oracle_calls else {"iterations": args.iterations}
    engines = {**({"today": today} if today else {}), "stacked": explicit_engine(algorithm, "stacked"),
               **({} if args.oracle_calls else {"jax": explicit_engine(algorithm, "jax")})}
    first = next(iter(engines))
    draws = explicit.definition(algorithm).draws_for(explicit.definition(algorithm).configs([configured({
        "rho": 0.1, "gamma": 0.1})])[0])
    print(f"\nside by side on {args.compare_problem}: K = {args.compare_k} {algorithm} runs, budget {budget}, "
          f"{args.n_evals} evaluation points, records made; process CPU seconds over {args.repeats} rounds "
          f"(min / median); {first} / engine (median, min)" + (f"; today: run_batched at {args.against}" if today else ""))
    print(f"{'d':>5} {'engine':>8} {'min s':>8} {'median s':>9} {'ratio':>7} {'min':>7}")
    configs = [configured(c) for c in grid(args.compare_k)]
    finals = {name: run(problem, configs, budget, args.n_evals) for name, run in engines.items()}
    for name in ("stacked",) if draws or args.oracle_calls else ("stacked", "jax"):  # also the warm-up (JAX compiles)
        if name != first and not same(finals[first], finals[name]):  # (JAX's draws are its own: other samples)
            raise SystemExit(f"d={d}: {name} and {first}'s final records differ")
    seconds: dict[str, list[float]] = {name: [] for name in engines}
    for _ in range(args.repeats):
        for name, run in engines.items():
            start = time.process_time()
            run(problem, configs, budget, args.n_evals)
            seconds[name].append(run.seconds if isinstance(run, Today) else time.process_time() - start)
    if today:
        today.close()
    for name, s in seconds.items():
        ratios = [t / e for t, e in zip(seconds[first], s)]
        print(f"{d:>5} {name:>8} {min(s):>8.4f} {statistics.median(s):>9.4f} {statistics.median(ratios):>6.2f}x "
              f"{min(ratios):>6.2f}x", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ks", type=int, nargs="+", default=[1000, 10000, 100000])
    ap.add_argument("--dims", type=int, nargs="+", default=[10, 100, 1000])
    ap.add_argument("--iterations", type=int, default=200)
    ap.add_argument("--n-evals", type=int, default=30, help="evaluation points per run (the run loop's default)")
    ap.add_argument("--compare-dims", type=int, nargs="*", default=[10, 100])
    ap.add_argument("--compare-k", type=int, default=1000)
    ap.add_argument("--compare-algorithm", default="soba", choices=tuple(COMPARED),
                    help="the side-by-side algorithm: SOBA, or TTSA with its sampled HIA (each run's own lengths)")
    ap.add_argument("--compare-problem", default="quadratic",
                    choices=("quadratic", "regularization_selection", "hyper_cleaning", "simulated",
                             "coreset_selection"),
                    help="the side-by-side problem: the quadratic at --compare-dims, or real data (full batch)")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--against", metavar="COMMIT", help="the side-by-side table's first row: run_batched at COMMIT")
    ap.add_argument("--oracle-calls", type=int, help="the side-by-side runs' budget in oracle calls (not iterations)")
    ap.add_argument("--matmul-n", type=int, default=1000, help="size of the matmul that measures the device's peak")
    ap.add_argument("--device-iterations", type=int, default=50, help="iterations of a device-table point")
    ap.add_argument("--device-evals", type=int, default=2, help="evaluation points of a device-table point")
    ap.add_argument("--max-gb", type=float, default=1.0, help="skip device points whose stacked arrays pass this")
    ap.add_argument("--max-tflop", type=float, default=0.5, help="skip device points with more TFLOP than this "
                    "(a CPU does ~0.01 TFLOP/s; raise it on a GPU)")
    ap.add_argument("--tiny", action="store_true", help="a CI-size run: K = 50, d = 5, 20 iterations, 2 repeats")
    ap.add_argument("--threads-any", action="store_true", help="leave BLAS and XLA their default thread counts")
    args = ap.parse_args()
    if args.tiny:
        args.ks, args.dims, args.iterations, args.device_iterations, args.n_evals = [50], [5], 20, 20, 5
        args.compare_dims, args.compare_k, args.repeats, args.matmul_n = [5], 50, 2, 100
    try:
        jax_modules()
    except ParameterError as exc:
        print(exc, file=sys.stderr)
        raise SystemExit(2) from None
    with blas_threads(1) if not args.threads_any else contextlib.nullcontext():
        device_table(args, matmul_flops(args.matmul_n))
        if args.compare_dims:
            compare_table(args)


if __name__ == "__main__":
    main()
