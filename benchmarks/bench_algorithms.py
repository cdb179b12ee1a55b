"""Per-iteration time of every offline algorithm next to the time of its oracle calls, and D-TFBO at d = 1000.

    .venv/bin/python benchmarks/bench_algorithms.py [--iterations 200] [--seconds 2] [--batch 64] [--repeats 3]
    .venv/bin/python benchmarks/bench_algorithms.py --sections dtfbo accuracy   # the quadratic oracles only

Sections (all by default):

overhead: `simulated` (n 1024, d 100) and `regularization_selection` (breast_cancer). Each algorithm runs
    with its defaults and a minibatch of --batch where it has a minibatch form (D-TFBO in its fixed-loop
    mode, as the paper ran it) for --iterations or --seconds, whichever ends first. A run with the same
    seed then records every oracle call with its arguments. Each of --repeats rounds times three things
    over those iterations, taking turns every CHUNK (50) iterations so that a machine slowing down for
    a while slows all three alike: the run loop (algorithms.run.Run, evaluation time excluded), the bare
    steps, and the recorded oracle calls replayed alone (the oracle time). Overhead = iteration time /
    oracle time of the same round: what an iteration spends outside its oracles (minibatch draws,
    counting wrapper, vector updates; the run loop's checks in the first ratio).
dtfbo: D-TFBO (fixed loops, 10 + 10 steps, minibatch 64) on `quadratic` with dim_x = dim_y = 1000,
    n_samples = 1024, rank = 2: ms per iteration with the package's oracles and with the einsum oracles
    they replaced (EinsumQuadratic below, kept here as the reference), runs interleaved.
accuracy: those two oracle sets against a long-double evaluation of the same sums.
loop: the run loop's own cost per step (timing, budget and iterate checks), SOBA on `simulated` with its
    step replaced by one that does nothing, 100,000 steps per round, the loop on its real clocks.

BLAS runs on --blas-threads threads (default 1, as a Ray trial on one CPU gets it): with a thread per
core, the evaluations' dense solves leave OpenBLAS threads spinning for a while, which slowed the run loop
by up to 2x on this 2-core machine. Times are process CPU time (--clock wall for wall time), and every
figure is the min / median over --repeats rounds: the machine may be shared.
"""
from __future__ import annotations

import argparse
import contextlib
import dataclasses
import importlib
import statistics
import sys
import time
import types
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import algorithms  # noqa: E402
import problems  # noqa: E402
from algorithms.threads import blas_threads  # noqa: E402
from problems.counting import counted  # noqa: E402

run_module = importlib.import_module("algorithms.run")  # the package re-exports a function named `run`

ORACLE_METHODS = ("f", "g", "grad_f", "grad_g", "grad_y_f", "grad_y_g", "hvp_yy_g", "cross_xy_g",
                  "hessian_yy_g", "jacobian_xy_g", "grad_f_samples", "grad_y_g_samples", "hvp_yy_g_samples",
                  "cross_xy_g_samples")
NUMERIC_FAILURES = (FloatingPointError, OverflowError, ZeroDivisionError, np.linalg.LinAlgError)


class Clock:
    """The benchmark's clock: process CPU time by default (robust to other load on a shared machine),
    or wall time. The run loop's own timer is pointed at it, so its evaluation time is on the same clock."""

    def __init__(self) -> None:
        self.now = time.process_time

    @contextlib.contextmanager
    def use(self, name: str) -> Iterator[None]:
        """Time with `name` ("cpu" or "wall") inside the block, the run loop included."""
        saved = run_module.time
        self.now = time.process_time if name == "cpu" else time.perf_counter
        run_module.time = types.SimpleNamespace(perf_counter=self.now, thread_time=time.thread_time)
        try:
            yield
        finally:
            run_module.time = saved


CLOCK = Clock()


def min_median(values: list[float]) -> tuple[float, float]:
    """(min, median) of the rounds."""
    return min(values), statistics.median(values)


# ---------------------------------------------------------------- overhead
class CallLog:
    """Forwards everything to a problem and records each oracle call with copies of its arguments."""

    def __init__(self, problem: Any) -> None:
        self._problem = problem
        self.calls: list[tuple[str, tuple, dict]] = []
        for name in ORACLE_METHODS:
            setattr(self, name, self._logged(name, getattr(problem, name)))

    def __getattr__(self, name: str) -> Any:
        return getattr(self._problem, name)

    def _logged(self, name: str, method: Any) -> Any:
        def logged(*args: Any, **kwargs: Any) -> Any:
            # Copies: an algorithm may update its iterates in place after the call. Minibatches are
            # kept as they are (a read-only batch is never changed), so the replay shares rows as the run did.
            self.calls.append((name, tuple(_copied(a) for a in args), kwargs))
            return method(*args, **kwargs)
        return logged


def _copied(a: Any) -> Any:
    return np.array(a) if isinstance(a, np.ndarray) and a.flags.writeable else a


def bench_problems() -> list[tuple[str, Any]]:
    """(label, problem) pairs: simulated and regularization_selection."""
    return [("simulated (n 1024, d 100)", problems.make("simulated", seed=0)),
            ("regularization_selection (breast_cancer)",
             problems.make("regularization_selection", seed=0, dataset="breast_cancer"))]


#: Non-default settings: the ones the paper's minibatch experiments used (tolerance loops never end on
#: minibatch gradients; they would run to the 10⁴ cap every step).
SETTINGS = {"dtfbo": {"sub_loops": "fixed"}}


def config_for(name: str, batch: int) -> Any:
    """Defaults (plus SETTINGS), with the minibatch size set where the algorithm has a minibatch form."""
    cls = algorithms.get(name)
    params = dict(SETTINGS.get(name, {}))
    if "batch_size" in {f.name for f in dataclasses.fields(cls.Config)}:
        params["batch_size"] = batch
    return algorithms.make_config(name, params)


#: Iterations per turn: the run loop, the bare steps and the oracle replay take turns this often, so a
#: machine that slows down for a while slows all three alike (measured phase after phase, 2 s each,
#: their ratios moved by ±0.5 between rounds on a shared 2-core machine).
CHUNK = 50


def loop_time(name: str, problem: Any, cfg: Any, budget: dict[str, Any]) -> tuple[float, int, str]:
    """(seconds, iterations, status) of a run through the run loop, evaluation time excluded."""
    run = run_module.Run(name, problem, cfg, seed=0, budget=budget, n_evals=2)
    start = CLOCK.now()
    for _ in run.records():
        pass
    return CLOCK.now() - start - run.eval_time, run.algorithm.iteration, run.status


def recorded_calls(name: str, problem: Any, cfg: Any, iterations: int) -> list[list[tuple[str, tuple, dict]]]:
    """Every oracle call of `iterations` steps with their arguments, per iteration (the runs' seed)."""
    log = CallLog(problem)
    alg = algorithms.get(name)(counted(log), cfg, np.random.default_rng(0))
    per_iteration = []
    with np.errstate(all="ignore"):
        for _ in range(iterations):
            first = len(log.calls)
            alg.step()
            alg.iteration += 1
            per_iteration.append(log.calls[first:])
    return per_iteration


def loop_turn(run: Any) -> float:
    """Seconds the run loop steps to its next point. The point's evaluation and record are left out (a run
    of n iterations makes two; here one every CHUNK iterations would count its bookkeeping 50 times over)."""
    start = CLOCK.now()
    run.step()
    elapsed = CLOCK.now() - start
    run.skip_passed_points()
    return elapsed


def step_turn(alg: Any, stop: int) -> float:
    """Seconds of bare steps up to iteration `stop`, under the run loop's error state."""
    start = CLOCK.now()
    with np.errstate(over="raise", divide="raise", invalid="raise"):
        while alg.iteration < stop:
            try:
                alg.step()
            except NUMERIC_FAILURES:  # the run loop stopped there too: n ends at its divergence
                break
            alg.iteration += 1
    return CLOCK.now() - start


def replay_turn(methods: dict[str, Any], calls: list[list[tuple[str, tuple, dict]]]) -> float:
    """Seconds the recorded oracle calls of a few iterations take alone."""
    with np.errstate(all="ignore"):
        start = CLOCK.now()
        for iteration in calls:
            for method, args, kwargs in iteration:
                methods[method](*args, **kwargs)
        return CLOCK.now() - start


def paired_round(name: str, problem: Any, cfg: Any, calls: list[list[tuple[str, tuple, dict]]]) -> list[float]:
    """[loop, step, oracle] seconds over the recorded iterations, the three taking turns every CHUNK
    iterations (in rotating order, so none always runs on rows another has just brought into cache)."""
    n = len(calls)
    run = run_module.Run(name, problem, cfg, seed=0, budget={"iterations": n}, n_evals=2)
    run.points = [*range(CHUNK, n, CHUNK), n]
    alg = algorithms.get(name)(counted(problem), cfg, np.random.default_rng(0))
    methods = {m: getattr(problem, m) for m in ORACLE_METHODS}
    totals = [0.0, 0.0, 0.0]
    for k, start in enumerate(range(0, n, CHUNK)):
        stop = min(start + CHUNK, n)
        turns = [partial(loop_turn, run), partial(step_turn, alg, stop),
                 partial(replay_turn, methods, calls[start:stop])]
        for i in (k % 3, (k + 1) % 3, (k + 2) % 3):
            totals[i] += turns[i]()
    return totals


def overhead_row(name: str, problem: Any, args: argparse.Namespace) -> str:
    """One table row: iteration counts, times and overhead ratios (min / median over the rounds)."""
    cls = algorithms.get(name)
    if cls.online or (cls.constrained and problem.constraints is None):
        return f"{name:<9} skipped: {'online' if cls.online else 'needs lower-level constraints'}"
    if cls.finite_sum and problem.n_samples is None:
        return f"{name:<9} skipped: needs a finite-sum problem"
    cfg = config_for(name, args.batch)
    # The run loop fixes the iteration count (it may stop a run early as diverged); every round reruns it.
    _, n, status = loop_time(name, problem, cfg, {"iterations": args.iterations, "seconds": args.seconds})
    if n == 0:
        return f"{name:<9} {0:>6}  {status}"
    calls = recorded_calls(name, problem, cfg, n)
    rounds = [paired_round(name, problem, cfg, calls) for _ in range(args.repeats)]
    loop, step, oracle = ([r[i] / n for r in rounds] for i in range(3))
    ratio_loop = min_median([a / b for a, b in zip(loop, oracle)])
    ratio_step = min_median([a / b for a, b in zip(step, oracle)])
    cells = [f"{1e3 * v:.3f}" for v in (*min_median(loop), *min_median(oracle))]
    per_iteration = sum(map(len, calls)) / n
    return (f"{name:<9} {n:>6} {cells[0]:>7} /{cells[1]:>7} {cells[2]:>7} /{cells[3]:>7} "
            f"{ratio_loop[0]:>6.2f} /{ratio_loop[1]:>5.2f} {ratio_step[0]:>6.2f} /{ratio_step[1]:>5.2f} "
            f"{per_iteration:>6.1f}  {status}")


def section_overhead(args: argparse.Namespace) -> None:
    """The overhead table per problem, a row per algorithm as it finishes."""
    names = args.only or sorted(algorithms.available())
    threads = f"{args.blas_threads} BLAS thread(s)" if args.blas_threads else "the BLAS library's default threads"
    for label, problem in bench_problems():
        print(f"\n== {label}: batch {args.batch}, up to {args.iterations} iterations or {args.seconds:g} s, "
              f"{threads}, {args.repeats} rounds (min / median)")
        print(f"{'algorithm':<9} {'iters':>6} {'ms/iter (loop)':>16} {'oracle ms/iter':>16} "
              f"{'overhead loop':>14} {'overhead step':>14} {'calls':>6}  status")
        for name in names:
            print(overhead_row(name, problem, args), flush=True)
    print("\noverhead = iteration time / time of the same oracle calls replayed alone (1.0: all time in oracles);"
          "\nloop: through algorithms.run.Run (its checks included), step: algorithm.step() alone")


# ---------------------------------------------------------------- the quadratic's previous oracles
class EinsumQuadratic:
    """A `quadratic` finite sum with the minibatch oracles it had before (gather + einsum per call).

    The reference for the dtfbo and accuracy sections; everything else is the wrapped problem's.
    """

    def __init__(self, problem: Any, dtype: type = np.float64) -> None:
        self._problem = problem
        # The previous layout: U_i as U[i] of shape (d, r).
        self.U, self.V, self.S = (np.ascontiguousarray(A.transpose(0, 2, 1), dtype) for A in
                                  (problem.U, problem.V, problem.S))
        self.a_i, self.e = problem.a_i.astype(dtype), problem.e.astype(dtype)
        self.mu0, self.p0, self.m, self.c = (np.asarray(v, dtype) for v in (problem.mu0, problem.p0, problem.m,
                                                                            problem.c))

    def __getattr__(self, name: str) -> Any:
        return getattr(self._problem, name)

    def grad_y_f(self, x: Any, y: Any, batch: Any = None) -> Any:
        r = y - self.e
        Sb = self.S[batch]
        return self.p0 * r + np.einsum("bdr,br->d", Sb, np.einsum("bdr,d->br", Sb, r)) / len(batch)

    def grad_f(self, x: Any, y: Any, batch: Any = None) -> tuple[Any, Any]:
        return self.m * x + self.c, self.grad_y_f(x, y, batch)

    def grad_y_g(self, x: Any, y: Any, batch: Any = None) -> Any:
        Ub = self.U[batch]
        t = np.einsum("bdr,d->br", Ub, y) - np.einsum("bxr,x->br", self.V[batch], x)
        return self.mu0 * y + np.einsum("bdr,br->d", Ub, t) / len(batch) + self.a_i[batch].mean(axis=0)

    def hvp_yy_g(self, x: Any, y: Any, v: Any, batch: Any = None) -> Any:
        Ub = self.U[batch]
        return self.mu0 * v + np.einsum("bdr,br->d", Ub, np.einsum("bdr,d->br", Ub, v)) / len(batch)

    def cross_xy_g(self, x: Any, y: Any, v: Any, batch: Any = None) -> Any:
        Vb = self.V[batch]
        return -np.einsum("bxr,br->x", Vb, np.einsum("bdr,d->br", self.U[batch], v)) / len(batch)


DTFBO_PROBLEM = dict(dim_x=1000, dim_y=1000, n_samples=1024, rank=2)


def dtfbo_ms(problem: Any, iterations: int, seed: int) -> float:
    """Milliseconds per D-TFBO iteration (fixed loops, minibatch 64) on `problem`."""
    cfg = algorithms.make_config("dtfbo", {"sub_loops": "fixed", "batch_size": 64})
    alg = algorithms.get("dtfbo")(counted(problem), cfg, np.random.default_rng(seed))
    start = CLOCK.now()
    for _ in range(iterations):
        alg.step()
        alg.iteration += 1
    return 1e3 * (CLOCK.now() - start) / iterations


def section_dtfbo(args: argparse.Namespace) -> None:
    """D-TFBO ms/iteration with the package's oracles and the einsum reference, interleaved."""
    params = ", ".join(f"{k} {v}" for k, v in DTFBO_PROBLEM.items())
    print(f"\n== D-TFBO on quadratic ({params}; minibatch 64, fixed loops 10 + 10): ms per iteration, "
          f"{args.repeats} rounds of 20 iterations")
    start = CLOCK.now()
    p = problems.make("quadratic", seed=0, **DTFBO_PROBLEM)
    ref = EinsumQuadratic(p)
    print(f"(instance built in {CLOCK.now() - start:.1f} s)")
    now, before = [], []
    for k in range(args.repeats):
        before.append(dtfbo_ms(ref, 20, k))
        now.append(dtfbo_ms(p, 20, k))
    (b_min, b_med), (n_min, n_med) = min_median(before), min_median(now)
    print(f"{'einsum oracles (before)':<26} min {b_min:7.2f}  median {b_med:7.2f}")
    print(f"{'BLAS oracles (now)':<26} min {n_min:7.2f}  median {n_med:7.2f}")
    print(f"{'speed-up':<26} min {b_min / n_min:7.2f}x median {b_med / n_med:7.2f}x")


def section_accuracy(args: argparse.Namespace) -> None:
    """Both oracle sets against a long-double evaluation of the same sums."""
    print("\n== quadratic minibatch oracles: max |value − reference| / max |reference|, reference in long double "
          "(3 seeds)")
    print(f"{'instance':<26} {'oracle':<9} {'einsum':>9} {'BLAS':>9}  entries that differ")
    for d, n, rank, size in ((1000, 1024, 2, 64), (200, 256, 3, 32), (20, 40, 2, 8)):
        worst: dict[str, list] = {}
        for seed in range(3):
            for k, row in accuracy_case(d, n, rank, size, seed).items():
                acc = worst.setdefault(k, [0.0, 0.0, 0, 0])
                acc[0], acc[1] = max(acc[0], row[0]), max(acc[1], row[1])
                acc[2] += row[2]
                acc[3] += row[3]
        for k, (e_old, e_new, differ, total) in worst.items():
            print(f"{f'd {d} n {n} r {rank} batch {size}':<26} {k:<9} {e_old:9.2e} {e_new:9.2e}  {differ} of {total}")


def accuracy_case(d: int, n: int, rank: int, size: int, seed: int) -> dict[str, tuple[float, float, int, int]]:
    """Per oracle: (einsum error, BLAS error, entries that differ, entries) at one random point and batch."""
    p = problems.make("quadratic", seed=seed, dim_x=d, dim_y=d, n_samples=n, rank=rank)
    rng = np.random.default_rng(seed)
    x, y, v = (rng.standard_normal(d) for _ in range(3))
    batch = p.sample_batch(rng, size)
    exact = EinsumQuadratic(p, np.longdouble)
    xl, yl, vl = (u.astype(np.longdouble) for u in (x, y, v))
    out = {}
    for name, call in (("grad_y_g", lambda q, x, y, v: q.grad_y_g(x, y, batch)),
                       ("hvp", lambda q, x, y, v: q.hvp_yy_g(x, y, v, batch)),
                       ("cross", lambda q, x, y, v: q.cross_xy_g(x, y, v, batch)),
                       ("grad_y_f", lambda q, x, y, v: q.grad_y_f(x, y, batch))):
        ref = call(exact, xl, yl, vl)
        old, new = call(EinsumQuadratic(p), x, y, v), call(p, x, y, v)
        scale = float(np.max(np.abs(ref)))
        out[name] = (float(np.max(np.abs(old - ref))) / scale, float(np.max(np.abs(new - ref))) / scale,
                     int(np.sum(old != new)), old.size)
    return out


# ---------------------------------------------------------------- the run loop alone
LOOP_STEPS = 100_000


def loop_us(problem: Any) -> float:
    """Microseconds per step of the run loop around a step that does nothing."""
    run = run_module.Run("soba", problem, {"batch_size": 8}, seed=0, budget={"iterations": LOOP_STEPS}, n_evals=2)
    run.algorithm.step = lambda: None
    run.advance()  # the evaluation at iteration 0
    start = CLOCK.now()
    while not run.done:
        run.advance()  # one stretch to the end, then the final evaluation
    return 1e6 * (CLOCK.now() - start) / LOOP_STEPS


def section_loop(args: argparse.Namespace) -> None:
    """The run loop's own cost per step, on its real clocks as in a trial."""
    p = problems.make("simulated", seed=0, dim_x=100, dim_y=100, n_samples_inner=1024, n_samples_outer=1024)
    saved, run_module.time = run_module.time, time
    try:
        rounds = [loop_us(p) for _ in range(args.repeats)]
    finally:
        run_module.time = saved
    lo, med = min_median(rounds)
    print(f"\n== the run loop alone (SOBA's step a no-op, simulated d 100, {LOOP_STEPS:,} steps, {args.repeats} rounds)")
    print(f"{'µs per step':<26} min {lo:7.2f}  median {med:7.2f}")


SECTIONS = {"overhead": section_overhead, "dtfbo": section_dtfbo, "accuracy": section_accuracy,
            "loop": section_loop}


def main(argv: list[str] | None = None) -> None:
    """Run the chosen sections."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--iterations", type=int, default=200)
    ap.add_argument("--seconds", type=float, default=2.0)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--repeats", type=int, default=3, help="rounds per figure (min / median reported)")
    ap.add_argument("--only", nargs="*", help="algorithm names (default: every registered one)")
    ap.add_argument("--sections", nargs="*", choices=sorted(SECTIONS), default=list(SECTIONS))
    ap.add_argument("--blas-threads", type=int, default=1,
                    help="BLAS threads (default 1, as a Ray trial on one CPU gets; 0: the library's default)")
    ap.add_argument("--clock", choices=("cpu", "wall"), default="cpu",
                    help="process CPU time (default: other load on the machine does not count) or wall time")
    args = ap.parse_args(argv)
    print(f"clock: {'process CPU time' if args.clock == 'cpu' else 'wall time'}")
    with blas_threads(args.blas_threads) if args.blas_threads else contextlib.nullcontext(), CLOCK.use(args.clock):
        for name in args.sections:
            SECTIONS[name](args)


if __name__ == "__main__":
    sys.exit(main())
