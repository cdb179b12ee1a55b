"""Sweep platform: start-up, cost against the number of runs N, a hand-tuned Ray Tune + MLflow anchor, and
the speed-up from two CPUs. Every measurement is a whole process (`bisweep run ...` in a subprocess), so
imports, Ray's start and the MLflow store count; each is repeated and printed as min / median.

1. start-up: a 1-trial study (whole process, without and with its report), plain Ray + Tune running one trivial
   trial (the floor under any Ray Tune platform), and `bisweep list algorithms`;
2. N axis: a comparison study of N configurations x 1 seed, 20 iterations each, for N = 100, 1,000,
   10,000 (`--max-n`): wall, time to the first finished run, the driver's peak RSS, ms per run once
   started, and the log-log slope of the wall time (and of the wall time less the start-up) against N;
3. anchor: 100 trials x 50 reports with MLflow, the platform against plain `tune.Tuner` with
   `reuse_actors=True` and a batched MLflow callback on the driver (Tune's auto loggers off), interleaved;
   the platform's ms per trial, whole process and after the 1-trial start-up;
4. two CPUs: 8 runs on a local Ray with 1 and with 2 CPUs, start-up excluded (the span from the first
   run's start to the last run's end, from the runs' own timestamps when the platform records them, else
   the wall time less the 1-trial start-up), beside the same runs in a plain multiprocessing pool of 1 and
   2 processes (one BLAS thread each): the speed-up the machine itself gives them. Two workloads
   (WORKLOADS): compute-bound runs whose matrices stay in cache, and memory-bound ones;
5. the MLflow writer alone (no Ray): fed 3,000 ended runs at 100 runs/s (its longest lag and its drain at
   the end) and all at once (how many runs per second it writes);
6. reports: `bisweep report`'s build for N configurations, per configuration, and again with nothing changed.

    .venv/bin/python benchmarks/bench_sweep.py                 # everything, 3 repeats (~30 min on 2 cores)
    .venv/bin/python benchmarks/bench_sweep.py --only scale --max-n 1000 --repeats 1
    .venv/bin/python benchmarks/bench_sweep.py --only cpus --workloads compute-bound --repeats 5
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
PYTHON = sys.executable
BISWEEP = str(Path(sys.executable).parent / "bisweep")


# ---------------------------------------------------------------- studies
def scale_study(n: int) -> dict[str, Any]:
    """N configurations (SOBA's outer step on a log grid) x 1 seed, 20 iterations on a 2x2 quadratic."""
    gammas = [float(f"{1e-3 * 1000 ** (i / max(n - 1, 1)):.12g}") for i in range(n)]
    return {"name": f"scale{n}", "kind": "comparison",
            "problems": [{"name": "quadratic", "params": {"dim_x": 2, "dim_y": 2}}],
            "algorithms": [{"name": "soba", "params": {"gamma": gammas}}], "seeds": 1,
            "budget": {"iterations": 20}, "n_evals": 20}


#: 100 runs x 50 records: SOBA on a 10x10 quadratic, 200 iterations, 50 log-spaced evaluation points.
ANCHOR_RUN = {"dim": 10, "iterations": 200, "n_evals": 70}


def anchor_study(trials: int) -> dict[str, Any]:
    """The anchor's work as a study: `trials` step sizes x 1 seed, 50 records per run."""
    gammas = [float(f"{0.01 * 10 ** (i / max(trials - 1, 1)):.12g}") for i in range(trials)]
    d = ANCHOR_RUN["dim"]
    return {"name": "anchor", "kind": "comparison",
            "problems": [{"name": "quadratic", "params": {"dim_x": d, "dim_y": d}}],
            "algorithms": [{"name": "soba", "params": {"gamma": gammas}}], "seeds": 1,
            "budget": {"iterations": ANCHOR_RUN["iterations"]}, "n_evals": ANCHOR_RUN["n_evals"]}


#: Section 4's workloads: SOBA on a d x d quadratic (full batch, its three dense d x d matrices read every
#: iteration), iterations for ~2 s per run. At d = 200 a run's matrices (0.96 MB) stay in its core's cache: the
#: runs are compute-bound. At d = 800 they are 15.4 MB, and two runs' 31 MB fill the 32 MB L3 that the two cores
#: share on the AMD machine: those runs are bound by memory bandwidth, which two cores share.
WORKLOADS = {"compute-bound": (200, 20_000), "memory-bound": (800, 1500)}


def heavy_study(dim: int, iterations: int) -> dict[str, Any]:
    """8 runs of ~2 s: SOBA on a dim x dim quadratic, the default steps and 3 factors x 2 seeds, one run per trial."""
    return {"name": f"heavy{dim}", "kind": "stepsize_sensitivity", "axis": {"factors": [0.5, 2, 4]},
            "problems": [{"name": "quadratic", "params": {"dim_x": dim, "dim_y": dim}}],
            "algorithms": [{"name": "soba"}], "seeds": 2, "seeds_per_trial": 1,
            "budget": {"iterations": iterations}, "n_evals": 20}


# ---------------------------------------------------------------- one measured process
#: `bisweep run` as its console script runs it, plus the driver's peak RSS written to a file.
CHILD = """
import atexit, json, os, resource, sys
import sweep.cli as cli
rc = cli.main(sys.argv[2:])
with open(sys.argv[1], "w") as fh:
    json.dump({"rc": rc, "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}, fh)
if hasattr(cli, "entry"):  # what the console script does after main (sweep.cli.entry)
    atexit._run_exitfuncs()
    sys.stdout.flush()
    os._exit(rc)
"""


def run_bisweep(study: dict[str, Any], work: Path, *extra: str, cpus: int = 2, report: bool = False) -> dict[str, Any]:
    """`bisweep run` of a study in a fresh process: wall, first finished run, driver RSS, run timestamps."""
    path = work / f"{study['name']}.yaml"
    path.write_text(yaml.safe_dump(study))
    res, stats = work / f"res-{study['name']}", work / "child.json"
    args = ["run", str(path), "--results-dir", str(res), *([] if report else ["--no-report"]), "--num-cpus", str(cpus),
            "--max-runs", "1000000", *extra]
    t0 = time.time()
    proc = subprocess.run([PYTHON, "-c", CHILD, str(stats), *args], cwd=work, capture_output=True, text=True)
    wall = time.time() - t0
    out = json.loads(stats.read_text()) if stats.exists() else {"rc": proc.returncode, "rss_mb": float("nan")}
    if out["rc"] != 0:
        raise RuntimeError(f"bisweep run failed ({out['rc']}): {proc.stderr[-2000:]}")
    ends = sorted(p.stat().st_mtime for p in (res / "runs").iterdir())
    spans = [json.loads(p.read_text()).get("span") for p in (res / "runs").iterdir()] if len(ends) <= 100 else []
    return {"wall": wall, "first": ends[0] - t0, "rss_mb": out["rss_mb"], "runs": len(ends),
            "span": (max(s[1] for s in spans) - min(s[0] for s in spans)) if spans and all(spans) else None}


ANCHOR = """
import json, os, sys, time
os.environ.setdefault("TUNE_DISABLE_AUTO_CALLBACK_LOGGERS", "1")
from mlflow import MlflowClient
from mlflow.entities import Metric, RunTag
import ray
from ray import tune
import algorithms, problems

work, trials, dim, iterations, n_evals = sys.argv[1], *map(int, sys.argv[2:6])
client = MlflowClient(f"sqlite:///{work}/anchor.db")
exp = client.create_experiment("anchor")
parent = client.create_run(exp, run_name="anchor").info.run_id


def trainable(config):
    p = problems.make("quadratic", seed=0, dim_x=dim, dim_y=dim)
    for rec in algorithms.run("soba", p, {"gamma": config["gamma"]}, seed=0, budget={"iterations": iterations},
                              n_evals=n_evals):
        tune.report(rec)


class BatchedMlflow(tune.Callback):
    # Child run per trial under one parent; metrics buffered and sent with log_batch every 1000 values.
    def __init__(self):
        self.runs, self.buffer = {}, {}

    def on_trial_start(self, iteration, trials, trial, **info):
        self.runs[trial.trial_id] = client.create_run(exp, tags={"mlflow.parentRunId": parent}).info.run_id
        self.buffer[trial.trial_id] = []
        client.log_batch(self.runs[trial.trial_id], params=[], tags=[RunTag("gamma", str(trial.config["gamma"]))])

    def on_trial_result(self, iteration, trials, trial, result, **info):
        buf, ts = self.buffer[trial.trial_id], int(time.time() * 1000)
        buf += [Metric(k, float(v), ts, result["iteration"]) for k, v in result.items()
                if k in keys and isinstance(v, (int, float)) and not isinstance(v, bool)]
        if len(buf) >= 1000:
            self.flush(trial.trial_id)

    def flush(self, tid):
        buf = self.buffer[tid]
        for i in range(0, len(buf), 1000):
            client.log_batch(self.runs[tid], metrics=buf[i:i + 1000])
        buf.clear()

    def on_trial_complete(self, iteration, trials, trial, **info):
        self.flush(trial.trial_id)
        client.set_terminated(self.runs[trial.trial_id], "FINISHED")


keys = set(next(iter(algorithms.run("soba", problems.make("quadratic", seed=0, dim_x=dim, dim_y=dim), {},
                                    seed=0, budget={"iterations": 1}, n_evals=1))))
ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
gammas = [float(f"{0.01 * 10 ** (i / max(trials - 1, 1)):.12g}") for i in range(trials)]
grid = tune.Tuner(tune.with_resources(trainable, {"cpu": 1}), param_space={"gamma": tune.grid_search(gammas)},
                  tune_config=tune.TuneConfig(reuse_actors=True),
                  run_config=tune.RunConfig(storage_path=work, name="anchor", verbose=0,
                                            callbacks=[BatchedMlflow()])).fit()
assert not grid.errors and len(grid) == trials
client.set_terminated(parent, "FINISHED")
ray.shutdown()
"""


#: The floor under any Ray Tune platform: Ray started, one trivial trial through `tune.Tuner`, Ray stopped.
RAY_TUNE_FLOOR = """
import os, sys
os.environ.setdefault("TUNE_DISABLE_AUTO_CALLBACK_LOGGERS", "1")
import ray
from ray import tune
ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
tune.Tuner(lambda config: tune.report({"x": 1}),
           run_config=tune.RunConfig(storage_path=sys.argv[1], name="floor", verbose=0)).fit()
ray.shutdown()
"""


def run_anchor(work: Path, trials: int) -> float:
    """The anchor in a fresh process: its whole wall time."""
    t0 = time.time()
    r = ANCHOR_RUN
    proc = subprocess.run([PYTHON, "-c", ANCHOR, str(work), str(trials), str(r["dim"]), str(r["iterations"]),
                           str(r["n_evals"])], cwd=REPO, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"anchor failed: {proc.stderr[-2000:]}")
    return time.time() - t0


def wall_of(cmd: list[str]) -> float:
    t0 = time.time()
    subprocess.run(cmd, cwd=REPO, check=True, capture_output=True)
    return time.time() - t0


# ---------------------------------------------------------------- printing
def mm(values: list[float], fmt: str = "{:.2f}") -> str:
    """min / median."""
    vals = [v for v in values if v is not None and not math.isnan(v)]
    if not vals:
        return "-"
    return f"{fmt.format(min(vals))} / {fmt.format(statistics.median(vals))}"


def table(rows: list[dict[str, Any]]) -> str:
    """Fixed-width text table."""
    cols = list(rows[0])
    cells = [[str(r[c]) for c in cols] for r in rows]
    widths = [max(len(c), *(len(x[i]) for x in cells)) for i, c in enumerate(cols)]
    lines = ["  ".join(c.rjust(w) for c, w in zip(cols, widths)), "  ".join("-" * w for w in widths)]
    lines += ["  ".join(x.rjust(w) for x, w in zip(row, widths)) for row in cells]
    return "\n".join(lines)


def slope(ns: list[int], ts: list[float]) -> float:
    """Least-squares slope of log t against log n."""
    xs, ys = [math.log(n) for n in ns], [math.log(max(t, 1e-9)) for t in ts]
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)


# ---------------------------------------------------------------- sections
def fresh() -> tempfile.TemporaryDirectory:
    return tempfile.TemporaryDirectory(prefix="bench_sweep")


def startup(repeats: int) -> float:
    """A 1-trial study (without and with its report), plain Ray + Tune with one trivial trial, and `bisweep list
    algorithms`, each a whole process, interleaved; returns the median start-up without the report."""
    one, reported, floor, lists = [], [], [], []
    for _ in range(repeats):
        with fresh() as d:
            one.append(run_bisweep(scale_study(1), Path(d))["wall"])
        with fresh() as d:
            reported.append(run_bisweep(scale_study(1), Path(d), report=True)["wall"])
        with fresh() as d:
            floor.append(wall_of([PYTHON, "-c", RAY_TUNE_FLOOR, d]))
        lists.append(wall_of([BISWEEP, "list", "algorithms"]))
    print("\n1. start-up (whole process, s; min / median)")
    print(table([{"1-trial study": mm(one), "with its report": mm(reported), "Ray + Tune alone, 1 trivial trial":
                  mm(floor), "bisweep list algorithms": mm(lists)}]))
    return statistics.median(one)


def scale(max_n: int, repeats: int, fixed: float) -> None:
    """The N axis."""
    ns = [n for n in (100, 1000, 10_000, 100_000) if n <= max_n]
    rows, med = [], {}
    for n in ns:
        got = []
        for _ in range(repeats):
            with fresh() as d:
                got.append(run_bisweep(scale_study(n), Path(d)))
        assert all(g["runs"] == n for g in got), got
        med[n] = statistics.median(g["wall"] for g in got)
        rows.append({"N": f"{n:,}", "wall s": mm([g["wall"] for g in got]),
                     "first run done s": mm([g["first"] for g in got]),
                     "driver RSS MB": mm([g["rss_mb"] for g in got], "{:.0f}"),
                     "ms/run after start-up": mm([1000 * (g["wall"] - fixed) / n for g in got])})
    print(f"\n2. N configurations x 1 seed, 20 iterations each, 2 CPUs (min / median of {repeats}; "
          f"start-up {fixed:.2f} s)")
    print(table(rows))
    if len(ns) >= 2:
        walls = [med[n] for n in ns]
        print(f"log-log slope of the median wall against N: {slope(ns, walls):.3f}; of the wall less the start-up: "
              f"{slope(ns, [w - fixed for w in walls]):.3f}")


def anchor(repeats: int, fixed: float, trials: int = 100) -> None:
    """The platform against the anchor, interleaved pairs; per trial also after the 1-trial start-up `fixed`."""
    plat, anc = [], []
    for _ in range(repeats):
        with fresh() as d:
            anc.append(run_anchor(Path(d), trials))
        with fresh() as d:
            plat.append(run_bisweep(anchor_study(trials), Path(d))["wall"])
    ratios = [a / p for a, p in zip(anc, plat)]
    print(f"\n3. {trials} trials x 50 reports with MLflow, whole process, 2 CPUs (s; min / median of {repeats} "
          "interleaved pairs)")
    print(table([{"anchor (Tuner + reuse_actors + batched MLflow)": mm(anc), "platform": mm(plat),
                  "anchor / platform": mm(ratios), "platform ms/trial": mm([1000 * p / trials for p in plat], "{:.0f}"),
                  "… after the start-up": mm([1000 * (p - fixed) / trials for p in plat], "{:.0f}")}]))


def heavy_runs(dim: int, iterations: int) -> list[Any]:
    """The heavy study's runs as the platform's trials run them."""
    from sweep.study import spec
    from sweep.study.model import RunSpec

    st = spec.validate(heavy_study(dim, iterations), max_runs=10**6)
    return [RunSpec.of(p, seed) for p in st.points for seed in st.seeds]


def _import_run_loop(_: int) -> None:
    import sweep.execution.trainable  # noqa: F401  (a pool worker's start-up, before the timed runs)


def _plain_run(run: Any) -> tuple[float, float]:
    """One run in a plain worker process with one BLAS thread: its (start, end), as the platform's spans."""
    from threadpoolctl import threadpool_limits

    from sweep.execution.trainable import make_run

    with threadpool_limits(1):
        start = time.time()
        for _ in make_run(run).records():
            pass
        return start, time.time()


def plain_processes(runs: list[Any], cpus: int) -> float:
    """The same runs in `cpus` plain worker processes (multiprocessing, no Ray, no platform): the first
    start to the last end, the workers' start-up excluded. Its speed-up is what the machine itself gives."""
    import multiprocessing

    with multiprocessing.get_context("spawn").Pool(cpus) as pool:
        pool.map(_import_run_loop, range(cpus))
        spans = pool.map(_plain_run, runs, chunksize=1)
    return max(e for _, e in spans) - min(s for s, _ in spans)


def cpu_rounds(dim: int, iterations: int, repeats: int, fixed: float) -> dict[tuple[str, int], list[float]]:
    """A workload's spans, (platform | plain, CPUs) -> one per round: 1 and 2 CPUs, each beside plain processes."""
    runs = heavy_runs(dim, iterations)
    got: dict[tuple[str, int], list[float]] = {(w, c): [] for w in ("platform", "plain") for c in (1, 2)}
    for _ in range(repeats):
        for c in (1, 2):
            with fresh() as d:
                r = run_bisweep(heavy_study(dim, iterations), Path(d), cpus=c)
                got["platform", c].append(r["span"] if r["span"] is not None else r["wall"] - fixed)
            got["plain", c].append(plain_processes(runs, c))
    return got


def cpus(repeats: int, fixed: float, workloads: list[str]) -> None:
    """Each workload's runs on 1 and 2 CPUs, beside the same runs in plain processes, interleaved."""
    for label in workloads:
        dim, iterations = WORKLOADS[label]
        got = cpu_rounds(dim, iterations, repeats, fixed)
        speed = {w: [a / b for a, b in zip(got[w, 1], got[w, 2])] for w in ("platform", "plain")}
        print(f"\n4. {label}: 8 runs (SOBA, quadratic d={dim}, {iterations} iterations), one per trial, "
              f"start-up excluded (s; min / median of {repeats}, interleaved); plain: the same runs in a "
              "multiprocessing pool")
        print(table([{"": w, "1 CPU": mm(got[w, 1]), "2 CPUs": mm(got[w, 2]), "speed-up": mm(speed[w])}
                     for w in ("platform", "plain")]))
        print("platform speed-up / plain speed-up, per round: "
              + ", ".join(f"{a / b:.2f}" for a, b in zip(speed["platform"], speed["plain"])))


# ---------------------------------------------------------------- in-process: the MLflow writer and reports
def real_records(n: int) -> tuple[Any, list[dict[str, Any]]]:
    """The scale study of n configurations and the records of one of its runs (every run logs as many)."""
    import algorithms
    import problems
    from sweep.study import spec

    st = spec.validate(scale_study(n), max_runs=10**6)
    p = st.points[0]
    inst = problems.make(p.problem, seed=0, **p.problem_params)
    return st, list(algorithms.run(p.algorithm, inst, p.algorithm_params, seed=0, budget=p.budget, n_evals=p.n_evals))


def feed_writer(n: int, rate: float) -> dict[str, float]:
    """The driver's MLflow writer (default SQLite store) fed n ended runs at `rate` runs/s (0: at once)."""
    from sweep.execution.mlflow_writer import MlflowCallback
    from sweep.execution.trainable import META
    from sweep.results.store import ResultStore
    from sweep.tracking.tracker import SyncLog, Tracker, default_tracking_uri, local_artifact_location

    st, recs = real_records(n)
    with fresh() as d:
        store = ResultStore(d)
        store.write_study(st)
        uri = default_tracking_uri(d)
        tracker = Tracker(uri, st.name, local_artifact_location(uri))
        synced = SyncLog(store, tracker.start_study(st))
        cb = MlflowCallback(lambda: (tracker, synced), {p.run_key(0): (p, 0) for p in st.points}, store)
        start = time.monotonic()
        for i, p in enumerate(st.points):
            while rate and time.monotonic() - start < i / rate:
                time.sleep(0.002)
            chunk = {"run_key": p.run_key(0), "seed": 0, "index": 0, "records": recs, "done": True}
            cb.on_trial_result(0, [], None, {**recs[-1], META: {"trial_key": "t", "runs": [chunk]}})
        cb.close()
        total = time.monotonic() - start
    return {"lag": cb.max_lag, "drain": cb.drain_seconds, "rate": n / total, "metrics": len(recs) * sum(
        isinstance(v, (int, float)) and not isinstance(v, bool) for v in recs[-1].values())}


def mlflow(repeats: int, n: int = 3000) -> None:
    """How the MLflow writer keeps up: at 100 runs/s (lag, drain), and as fast as it can."""
    paced = [feed_writer(n, 100.0) for _ in range(repeats)]
    flat = [feed_writer(n, 0.0) for _ in range(repeats)]
    print(f"\n5. MLflow writer, {n:,} ended runs of {paced[0]['metrics']} metric points each into the SQLite store "
          f"(min / median of {repeats})")
    print(table([{"fed at 100 runs/s: max lag s": mm([r["lag"] for r in paced]),
                  "drain at the end s": mm([r["drain"] for r in paced]),
                  "fed at once: runs/s written": mm([r["rate"] for r in flat], "{:.0f}")}]))


def synthetic_results(n: int, root: Path) -> None:
    """Results of the scale study of n configurations, every run with a real run's records (values spread)."""
    from sweep.results.store import ResultStore

    st, recs = real_records(n)
    store = ResultStore(root)
    store.write_study(st)
    for i, p in enumerate(st.points):
        f = 0.5 + i / n
        rs = [{**r, "F": r["F"] * f, "grad_F_sq": r["grad_F_sq"] * f} for r in recs]
        store.append_many(p.run_key(0), rs)
        store.finish(p.run_key(0), {"run_key": p.run_key(0), "trial_key": "t", "seed": 0, "status": "finished",
                                    "final": rs[-1], "where": {}, "point": p.to_dict()})


def reports(repeats: int, ns: tuple[int, ...] = (100, 400, 1600)) -> None:
    """`bisweep report`'s build, per configuration, and the same call when nothing changed."""
    import io

    from sweep.report.build import build_report

    rows, builds = [], {}
    for n in ns:
        with fresh() as d:
            synthetic_results(n, Path(d))
            first, again = [], []
            for _ in range(repeats):
                t0 = time.perf_counter()
                build_report(d, out=io.StringIO(), force=True)
                first.append(time.perf_counter() - t0)
                t0 = time.perf_counter()
                build_report(d, out=io.StringIO())
                again.append(time.perf_counter() - t0)
        builds[n] = statistics.median(first)
        rows.append({"configurations": f"{n:,}", "build s": mm(first), "ms per configuration":
                     mm([1000 * t / n for t in first]), "unchanged, s": mm(again, "{:.3f}")})
    print(f"\n6. reports of N configurations x 1 seed (min / median of {repeats})")
    print(table(rows))
    a, b = ns[0], ns[-1]
    print(f"marginal cost {1000 * (builds[b] - builds[a]) / (b - a):.2f} ms per configuration ({a:,} -> {b:,})")


def main() -> None:
    """Run the chosen sections and print their tables."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--max-n", type=int, default=10_000, help="largest N of the N axis (100,000 on a cluster)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--only", choices=("startup", "scale", "anchor", "cpus", "mlflow", "reports"), action="append",
                    help="run only these sections (repeatable)")
    ap.add_argument("--workloads", nargs="+", choices=list(WORKLOADS), default=list(WORKLOADS),
                    help="section 4's workloads (default: both)")
    args = ap.parse_args()
    only = set(args.only or ("startup", "scale", "anchor", "cpus", "mlflow", "reports"))
    print(f"load average before: {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs (other work skews the numbers)")
    fixed = startup(args.repeats) if only & {"startup", "scale", "anchor", "cpus"} else 0.0
    if "scale" in only:
        scale(args.max_n, args.repeats, fixed)
    if "anchor" in only:
        anchor(args.repeats, fixed)
    if "cpus" in only:
        cpus(args.repeats, fixed, args.workloads)
    if "mlflow" in only:
        mlflow(args.repeats)
    if "reports" in only:
        reports(args.repeats)
    print(f"\nload average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
