"""Cost per oracle call of a problem built from JAX functions against the hand-written NumPy oracle.

    .venv/bin/python benchmarks/bench_functional.py [--dims 10,100,1000] [--repeats 7] [--batch 64]

The same quadratic instance twice: `problems.make("quadratic", ...)` (NumPy) and `fn_quadratic`
(problems.from_functions, JAX jit). Full batch on the dense form, and a minibatch on the finite-sum form
(n = 1024 samples, rank 1). Both sides get one thread by default (`--threads`), as a Ray trial gets one
core. Each oracle is timed in `--repeats` blocks of calls; the table gives the
fastest and the median block (µs per call) and the ratios JAX / NumPy. The first JAX call (compilation)
is reported separately and excluded. At small d the ratio is JAX's dispatch cost (converting arguments,
launching the compiled program, copying the result back); at large d both sides are matrix products.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import problems  # noqa: E402
from algorithms.threads import pin_to_cpus  # noqa: E402

ORACLES = ("f", "grad_g", "grad_y_g", "hvp", "cross")
N_SAMPLES = 1024


def calls(p, x, y, v, batch) -> dict[str, Callable[[], object]]:
    """The timed oracles on one batch."""
    return {
        "f": lambda: p.f(x, y, batch),
        "grad_g": lambda: p.grad_g(x, y, batch),
        "grad_y_g": lambda: p.grad_y_g(x, y, batch),
        "hvp": lambda: p.hvp_yy_g(x, y, v, batch),
        "cross": lambda: p.cross_xy_g(x, y, v, batch),
    }


def blocks(fn: Callable[[], object], repeats: int, min_time: float) -> list[float]:
    """Seconds per call in each of `repeats` blocks (a block lasts about min_time / repeats)."""
    start = time.perf_counter()
    fn()
    once = max(time.perf_counter() - start, 1e-7)
    reps = max(1, int(min_time / repeats / once))
    out = []
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(reps):
            fn()
        out.append((time.perf_counter() - start) / reps)
    return out


def first_call(fn: Callable[[], object]) -> float:
    """Seconds of the first call (compilation included)."""
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def measure(d: int, form: str, batch_size: int, repeats: int, min_time: float) -> list[dict]:
    """Rows of the table for one dimension and form ("full" dense or "minibatch" finite sum)."""
    params = {"dim_x": d, "dim_y": d}
    if form == "minibatch":
        params.update(n_samples=N_SAMPLES, rank=1)
    ref, fn = problems.make("quadratic", seed=0, **params), problems.make("fn_quadratic", seed=0, **params)
    rng = np.random.default_rng(0)
    x, y, v = rng.standard_normal(d), rng.standard_normal(d), rng.standard_normal(d)
    batch = ref.sample_batch(rng, batch_size) if form == "minibatch" else None
    mine, theirs = calls(fn, x, y, v, batch), calls(ref, x, y, v, batch)
    rows = []
    for name in ORACLES:
        compile_s = first_call(mine[name])
        _same(name, mine[name](), theirs[name]())  # timing two different computations would mean nothing
        a, b = blocks(theirs[name], repeats, min_time), blocks(mine[name], repeats, min_time)
        rows.append({"d": d, "form": form if batch is None else f"batch {batch_size}", "oracle": name,
                     "numpy_min": min(a), "numpy_med": statistics.median(a), "jax_min": min(b),
                     "jax_med": statistics.median(b), "compile": compile_s})
    return rows


def _same(name: str, a: object, b: object) -> None:
    def flat(out: object) -> np.ndarray:
        return np.concatenate([np.ravel(t) for t in out]) if isinstance(out, tuple) else np.ravel(out)

    a, b = flat(a), flat(b)
    err = np.linalg.norm(a - b) / max(np.linalg.norm(b), 1e-300)
    if not err <= 1e-10:
        raise AssertionError(f"{name}: JAX and NumPy oracles differ (relative error {err:.1e})")


def show(row: dict) -> str:
    us = 1e6
    return (f"{row['d']:>5}  {row['form']:<9} {row['oracle']:<9}{row['numpy_min'] * us:>10.1f}"
            f"{row['numpy_med'] * us:>10.1f}{row['jax_min'] * us:>10.1f}{row['jax_med'] * us:>10.1f}"
            f"{row['jax_min'] / row['numpy_min']:>9.1f}x{row['jax_med'] / row['numpy_med']:>8.1f}x"
            f"{row['compile']:>10.2f}")


HEADER = (f"{'d':>5}  {'form':<9} {'oracle':<9}{'numpy min':>10}{'med':>10}{'jax min':>10}{'med':>10}"
          f"{'ratio min':>10}{'med':>9}{'compile s':>10}")


def main(argv: list[str] | None = None) -> list[dict]:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dims", default="10,100,1000", help="comma-separated dimensions d = dim_x = dim_y")
    ap.add_argument("--repeats", type=int, default=7, help="timed blocks per oracle (min and median over them)")
    ap.add_argument("--min-time", type=float, default=0.2, help="seconds of calls per oracle and side")
    ap.add_argument("--batch", type=int, default=64, help="minibatch size of the finite-sum form")
    ap.add_argument("--threads", type=int, default=1, help="BLAS and XLA threads (0: the libraries' defaults)")
    args = ap.parse_args(argv)
    if args.threads:
        from threadpoolctl import threadpool_limits  # installed with scikit-learn

        threadpool_limits(args.threads)
        if args.threads == 1 and "jax" not in sys.modules:  # XLA sizes its thread pools from this when it starts
            pin_to_cpus(1)
    import problems.examples.quadratic  # noqa: F401  registers fn_quadratic (and starts JAX)

    print(f"µs per call: hand-written NumPy vs from_functions (JAX jit, float64); ratio = JAX / NumPy; "
          f"threads: {args.threads or 'default'}")
    print(HEADER, flush=True)
    rows = []
    for d in (int(s) for s in args.dims.split(",")):
        for form in ("full", "minibatch"):
            for row in measure(d, form, args.batch, args.repeats, args.min_time):
                print(show(row), flush=True)
                rows.append(row)
    return rows


if __name__ == "__main__":
    main()
