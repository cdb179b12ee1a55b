"""Two compute-bound runs on two cores: speed-up with one BLAS thread per run against the library default.

    .venv/bin/python benchmarks/bench_blas_threads.py [--repeats 3] [--iterations 200] [--workload soba-regsel]

A run is --iterations steps of D-TFBO (fixed loops 10 + 10, minibatch 64) on `quadratic` with
dim_x = dim_y = 1000, n_samples = 1024, rank = 2: its (128 × 1000) matrix-vector products are large
enough for OpenBLAS to use every thread, and its megabyte gathers make it memory-bound (--workload
soba-regsel: SOBA on regularization_selection, small and CPU-bound). Two worker processes build the instance once (start-up is not
timed); then, per round and per BLAS setting, worker 0 runs alone (T1) and both run at once (T2, the
later of the two to finish): speed-up = 2 T1 / T2, the throughput of two runs in parallel over one.
Each run's CPU time (all its threads) is reported too: 2 C1 / C2 is the speed-up two free cores would
give, which a machine shared with other work cannot show in wall time.
"1 thread" limits BLAS with algorithms.threads.blas_threads(1) in each worker; "default" leaves OpenBLAS
at a thread per core, which is what two plain Python processes get (a Ray trial on one CPU gets
OMP_NUM_THREADS=1, so one thread, unless the variable was already set).
"""
from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

#: name -> (algorithm, its config, problem, its parameters).
WORKLOADS = {
    "dtfbo-quadratic": ("dtfbo", {"sub_loops": "fixed", "batch_size": 64},
                        "quadratic", dict(dim_x=1000, dim_y=1000, n_samples=1024, rank=2)),
    "soba-regsel": ("soba", {"batch_size": 64}, "regularization_selection", {"dataset": "breast_cancer"}),
}


def worker(conn, workload: str) -> None:
    """Build the instance, then time a run for each (iterations, threads) request until told to stop."""
    import contextlib

    import numpy as np

    import algorithms
    import problems
    from algorithms.threads import blas_threads

    name, config, problem, params = WORKLOADS[workload]
    p = problems.make(problem, seed=0, **params)
    cfg = algorithms.make_config(name, config)
    conn.send("ready")
    while (job := conn.recv()) is not None:
        iterations, threads = job
        alg = algorithms.get(name)(problems.counted(p), cfg, np.random.default_rng(0))
        with blas_threads(threads) if threads else contextlib.nullcontext():
            start, cpu = time.perf_counter(), time.process_time()
            for _ in range(iterations):
                alg.step()
            conn.send((time.perf_counter() - start, time.process_time() - cpu))


def timed(conns, workers: int, iterations: int, threads: int) -> tuple[float, float]:
    """(wall seconds until the last of `workers` simultaneous runs ends, the largest run's CPU seconds)."""
    for c in conns[:workers]:
        c.send((iterations, threads))
    times = [c.recv() for c in conns[:workers]]
    return max(t[0] for t in times), max(t[1] for t in times)


def main(argv: list[str] | None = None) -> None:
    """Start two workers, measure every setting per round, print min / median."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--iterations", type=int, default=200)
    ap.add_argument("--workload", choices=sorted(WORKLOADS), default="dtfbo-quadratic",
                    help="dtfbo-quadratic (default: memory-bound, megabyte gathers) or soba-regsel (small, CPU-bound)")
    args = ap.parse_args(argv)
    ctx = mp.get_context("spawn")
    pipes = [ctx.Pipe() for _ in range(2)]
    procs = [ctx.Process(target=worker, args=(child, args.workload)) for _, child in pipes]
    conns = [parent for parent, _ in pipes]
    for proc in procs:
        proc.start()
    start = time.perf_counter()
    for c in conns:
        c.recv()
    name, _, problem, params = WORKLOADS[args.workload]
    print(f"{os.cpu_count()} CPUs; workers ready in {time.perf_counter() - start:.0f} s; "
          f"{name} on {problem} {params}, {args.iterations} iterations per run")
    results: dict[str, dict[str, list[float]]] = {"1 thread": {}, "default": {}}
    for _ in range(args.repeats):
        for label, threads in (("1 thread", 1), ("default", 0)):
            (t1, c1), (t2, c2) = timed(conns, 1, args.iterations, threads), timed(conns, 2, args.iterations, threads)
            for key, value in (("T1", t1), ("T2", t2), ("speed-up", 2 * t1 / t2), ("C1", c1), ("C2", c2),
                               ("CPU speed-up", 2 * c1 / c2)):
                results[label].setdefault(key, []).append(value)
    for c in conns:
        c.send(None)
    for proc in procs:
        proc.join()
    columns = (("T1", "T1 wall s"), ("T2", "T2 wall s"), ("speed-up", "2·T1/T2"), ("C1", "C1 CPU s"),
               ("C2", "C2 CPU s"), ("CPU speed-up", "2·C1/C2"))
    print(f"{'BLAS threads per run':<20}" + "".join(f"{title:>16}" for _, title in columns))
    for label, r in results.items():
        print(f"{label:<20}" + "".join(f"{min(r[k]):>7.2f} /{statistics.median(r[k]):>7.2f}" for k, _ in columns))
    print("(min / median over rounds, ratios per round; C: CPU seconds of a run, all its threads. On a machine\n"
          " shared with other work the wall-clock speed-up falls below 2 whatever the setting; 2·C1/C2 is what\n"
          " it would be with two free cores: how much the two runs slow each other, spinning BLAS threads included)")


if __name__ == "__main__":
    main()
