"""A batched study against the same study unbatched or on the JAX backend, whole process (`bisweep run ... --no-report`).

A step-size study of 1,000 SOBA configurations (the initial step sizes scaled by 999 factors from 0.1 to 2, and
the reference) x 5,000 iterations on a d = 10 quadratic, 1 seed, once with `batched: auto` and once with
`batched: off`, run in turn (auto, off, auto, off, ...) so that a drift of the machine's speed hits both: wall
seconds of the whole process, the driver's CPU seconds (its session timeline), the runs' stepping CPU seconds
(the sum of their `cpu_time`: a batched run's is its share of the batch's) and the seconds until the first trial
started, as min / median; the whole process over (first trial's start + the runs' stepping), the median of the
pairs' ratios, and a check that both gave every run the same final values (rtol 1e-10; the summaries read from
the store, whatever its format). On a busy machine the
CPU seconds move less than the wall time. `--trial-body K` measures instead the trial body alone in this
process (no Ray, no MLflow): K of the runs as one batched trial against the same K one after another, CPU seconds.

    .venv/bin/python benchmarks/bench_batched_study.py                  # 3 repeats (~5 min on 2 cores)
    .venv/bin/python benchmarks/bench_batched_study.py --configs 200 --repeats 1
    .venv/bin/python benchmarks/bench_batched_study.py --trial-body 250       # in process, ~1 min
    .venv/bin/python benchmarks/bench_batched_study.py --vs jax              # the NumPy engine against the JAX backend
"""
from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[1]
BISWEEP = str(Path(sys.executable).parent / "bisweep")
#: Record values that are not computed the same way batched (they are seconds).
VOLATILE = ("time", "cpu_time", "eval_time", "time_mode")


def study(configs: int, iterations: int, dim: int, batched: str) -> dict[str, Any]:
    """The step-size study: `configs` SOBA configurations (the reference among them) on one quadratic; `batched`
    auto, off, or jax (batched on the JAX backend)."""
    n = configs - 1
    factors = [round(0.1 * 20 ** (i / (n - 1)), 12) for i in range(n)]
    factors = [f if f != 1.0 else 1.0 + 1e-9 for f in factors]  # the reference is the unscaled one
    return {"name": f"batched_{batched}", "kind": "stepsize_sensitivity", "axis": {"factors": factors},
            "problems": [{"name": "quadratic", "params": {"dim_x": dim, "dim_y": dim}}], "algorithms": ["soba"],
            "seeds": 1, "budget": {"iterations": iterations}, "n_evals": 20,
            **({"batched": "auto", "backend": "jax"} if batched == "jax" else {"batched": batched})}


def run_once(path: Path, results: Path) -> tuple[float, float, float, float]:
    """(wall seconds, the driver's CPU seconds, the runs' stepping CPU seconds, seconds until the first trial
    started) of one whole `bisweep run`."""
    start = time.monotonic()
    proc = subprocess.run([BISWEEP, "run", str(path), "--results-dir", str(results), "--no-report"],
                          capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(REPO)})
    wall = time.monotonic() - start
    if proc.returncode != 0:
        sys.exit(f"bisweep failed ({proc.returncode}):\n{proc.stderr[-2000:]}")
    session = json.loads((results / "sessions.jsonl").read_text().splitlines()[-1])
    steps = sum(s["final"]["cpu_time"] for s in summaries(results).values())
    return wall, float(session["end_cpu"]), steps, float(session["first_trial_started"])


def summaries(results: Path) -> dict[str, dict[str, Any]]:
    """Run key -> its summary (its final record among it), as the store holds it (shards or files)."""
    from sweep.results import run_columns
    from sweep.results.store import ResultStore

    cols = run_columns.load(ResultStore(results))
    out = {k: cols.summary(k) for k in cols.summaries}
    if not out:
        sys.exit(f"no run summaries in {results}")
    return out


def finals(results: Path) -> dict[str, dict[str, Any]]:
    """Run key -> its final record (from the study's run summaries)."""
    return {k: {n: v for n, v in s["final"].items() if n not in VOLATILE} for k, s in summaries(results).items()}


def same(a: dict[str, dict[str, Any]], b: dict[str, dict[str, Any]]) -> float:
    """The largest relative difference of the two studies' final values (inf: different runs or keys)."""
    if a.keys() != b.keys():
        return math.inf
    worst = 0.0
    for key in a:
        if a[key].keys() != b[key].keys():
            return math.inf
        for k, v in a[key].items():
            w = b[key][k]
            if isinstance(v, float) and isinstance(w, float) and math.isfinite(v) and math.isfinite(w):
                worst = max(worst, abs(v - w) / max(abs(w), 1e-300))
            elif v != w and not (isinstance(v, float) and isinstance(w, float) and math.isnan(v) and math.isnan(w)):
                return math.inf
    return worst


def trial_body(k: int, iterations: int, dim: int, repeats: int) -> None:
    """CPU seconds of one trial of k runs, batched and one after another, in this process (min / median)."""
    from sweep.execution.trial import execute_trial
    from sweep.study import spec
    from sweep.study.model import RunSpec, TrialConfig

    st = spec.validate(study(max(k, 3), iterations, dim, "auto"))
    runs = tuple(RunSpec.of(p, s) for p in st.points[:k] for s in st.seeds)
    cpu: dict[bool, list[float]] = {True: [], False: []}
    for _ in range(repeats):
        for batched in cpu:
            start = time.process_time()
            execute_trial(TrialConfig("bench", runs, 1e9, 1.0, (), batched=batched), lambda result, ckpt: None)
            cpu[batched].append(time.process_time() - start)
    print(f"\ntrial body, in process: {k} SOBA runs x {iterations:,} iterations, quadratic d = {dim}, CPU seconds")
    for batched, ts in cpu.items():
        print(f"{'batched' if batched else 'one after another':18} {min(ts):8.2f} / {statistics.median(ts):.2f} s "
              f"({1000 * statistics.median(ts) / k:.1f} ms per run)")
    print(f"ratio, median of the pairs: {statistics.median(o / a for a, o in zip(cpu[True], cpu[False])):.1f}x")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--configs", type=int, default=1000)
    ap.add_argument("--iterations", type=int, default=5000)
    ap.add_argument("--dim", type=int, default=10)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--trial-body", type=int, default=None, metavar="K", help="the trial body alone, K runs")
    ap.add_argument("--vs", choices=("off", "jax"), default="off",
                    help="what `batched: auto` (the NumPy engine) is compared with: off, or the JAX backend")
    args = ap.parse_args()
    if args.trial_body:
        trial_body(args.trial_body, args.iterations, args.dim, args.repeats)
        return
    times: dict[str, list[tuple[float, float, float, float]]] = {"auto": [], args.vs: []}
    with tempfile.TemporaryDirectory(prefix="bench-batched-") as tmp:
        root = Path(tmp)
        for mode in times:
            (root / f"{mode}.yaml").write_text(yaml.safe_dump(study(args.configs, args.iterations, args.dim, mode)))
        for i in range(args.repeats):
            for mode in times:
                results = root / f"{mode}-{i}"
                times[mode].append(run_once(root / f"{mode}.yaml", results))
        diff = same(finals(root / "auto-0"), finals(root / f"{args.vs}-0"))
    print(f"\n{args.configs:,} SOBA configurations x {args.iterations:,} iterations, quadratic d = {args.dim}, 1 seed, "
          f"--no-report; whole process, {args.repeats} runs each, in turn")
    print(f"{'batched':8} {'wall s':>14} {'driver CPU s':>14} {'runs CPU s':>14} {'first trial s':>14} "
          f"{'wall / (first + runs)':>22}   (min / median)")
    for mode, ts in times.items():
        cols = [[t[i] for t in ts] for i in range(4)] + [[t[0] / (t[3] + t[2]) for t in ts]]
        print(f"{mode:8} " + " ".join(f"{f'{min(c):.1f} / {statistics.median(c):.1f}':>{w}}"
                                      for c, w in zip(cols, (14, 14, 14, 14, 22))))
    ratios = [statistics.median(o[i] / a[i] for a, o in zip(times["auto"], times[args.vs])) for i in range(3)]
    print(f"{args.vs} / auto, median of the pairs: wall {ratios[0]:.2f}x, driver CPU {ratios[1]:.2f}x, "
          f"runs CPU {ratios[2]:.2f}x")
    print(f"final values, auto against {args.vs}: largest relative difference {diff:.1e} "
          f"({'equal to rtol 1e-10' if diff <= 1e-10 else 'NOT EQUAL'})")


if __name__ == "__main__":
    main()
