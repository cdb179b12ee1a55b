"""A trial of tiny runs in this process (no Ray, no MLflow): `execute_trial` of N runs of SOBA on a d = 5 quadratic,
2 iterations each (the grid of `bench_tiny_runs.py`), CPU µs a run, min / median of `--repeats`, in four variants
run in turn: with and without the MLflow points in the reports (`TrialConfig.mlflow_points`; a study larger than
its `mlflow_children` sends none), with and without `gc_pause.sparse()` around the trial (without: the collector as
Python sets it).

    .venv/bin/python benchmarks/bench_trial_tiny.py            # 7,000 runs, 6 repeats (~1 min)
    .venv/bin/python benchmarks/bench_trial_tiny.py 2000 --repeats 3
"""
from __future__ import annotations

import argparse
import contextlib
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_tiny_runs import table, tiny_study  # noqa: E402  (benchmarks/ is not a package)

from sweep.execution import trial  # noqa: E402
from sweep.study import spec  # noqa: E402
from sweep.study.model import RunSpec, TrialConfig  # noqa: E402


def config(runs: tuple[RunSpec, ...], points: bool) -> TrialConfig:
    """One batched trial of `runs`, reporting once at its end."""
    return TrialConfig("bench", runs, checkpoint_seconds=1e9, report_seconds=1e9, batched=True, mlflow_points=points)


def cpu_per_run(cfg: TrialConfig, sparse: bool) -> float:
    """CPU µs a run of one `execute_trial` of `cfg`."""
    saved = trial.gc_pause.sparse
    if not sparse:
        trial.gc_pause.sparse = contextlib.nullcontext
    try:
        start = time.process_time()
        trial.execute_trial(cfg, lambda result, checkpoint: None)
        return 1e6 * (time.process_time() - start) / len(cfg.runs)
    finally:
        trial.gc_pause.sparse = saved


def main() -> None:
    """Every variant `--repeats` times, in turn; the table."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("n", type=int, nargs="?", default=7000, help="runs in the trial (at most 10⁵)")
    ap.add_argument("--repeats", type=int, default=6)
    args = ap.parse_args()
    if not 1 <= args.n <= 100_000 or args.repeats < 1:
        sys.exit("bench_trial_tiny: n must be 1..100000 and --repeats positive")
    variants = {(points, sparse): [] for points in (True, False) for sparse in (False, True)}
    study = spec.validate(tiny_study(100_000))  # the first n runs of the 10⁵-run tiny study
    runs = tuple(RunSpec.of(p, s) for p in study.points[:args.n] for s in study.seeds)
    configs = {points: config(runs, points) for points in (True, False)}
    cpu_per_run(configs[True], True)  # warm-up: imports, first-call caches
    for _ in range(args.repeats):
        for (points, sparse), got in variants.items():
            got.append(cpu_per_run(configs[points], sparse))
    rows = [{"MLflow points": "yes" if points else "no", "gc_pause.sparse": "yes" if sparse else "no",
             "CPU µs a run": f"{min(got):.1f} / {statistics.median(got):.1f}"}
            for (points, sparse), got in variants.items()]
    print(f"execute_trial of {args.n:,} tiny runs in one process (min / median of {args.repeats})")
    print(table(rows))


if __name__ == "__main__":
    main()
