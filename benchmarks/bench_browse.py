"""The end of a study larger than its `mlflow_children`: `browse.sync_browsed` (the table of every ended run, the
choice of children, their writes to a fresh MLflow SQLite store), this checkout against an older commit in turn, one
process each: wall and CPU seconds of the step (the wall includes waiting for the disk: a transaction's commit
syncs the database file), the process's peak RSS and the runs in the table, as min / median.

The results directory is any finished study's (e.g. the 10⁵ tiny runs `bench_million.py` or a `bisweep run` leaves);
its study file is the one it was run from.

    .venv/bin/python benchmarks/bench_browse.py tiny.yaml results/tiny100000 --against main --repeats 3
"""
from __future__ import annotations

import argparse
import contextlib
import json
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_million import pythons  # noqa: E402  (benchmarks/ is not a package)
from bench_tiny_runs import mm, table  # noqa: E402

#: One measured step (argv: study file, results directory, a directory for the MLflow store); prints JSON.
STEP = """
import json, resource, sys, time
from sweep.results.store import ResultStore
from sweep.study import spec
from sweep.tracking import browse
from sweep.tracking.tracker import Tracker, local_artifact_location
study = spec.load(sys.argv[1])
uri = f"sqlite:///{sys.argv[3]}/mlflow.db"
tracker = Tracker(uri, study.name, local_artifact_location(uri))
tracker.start_study(study)
store = ResultStore(sys.argv[2])
start, clock = time.process_time(), time.perf_counter()
done = browse.sync_browsed(tracker, store, study, set())
cpu, wall = time.process_time() - start, time.perf_counter() - clock
print(json.dumps({"cpu": cpu, "wall": wall, "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, "runs": len(done)}))
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("study", help="the study file the results directory was run from")
    ap.add_argument("results", help="a finished study's results directory (only read)")
    ap.add_argument("--against", metavar="COMMIT", help="an older commit (or branch) to run in turn")
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    if args.repeats < 1 or not (Path(args.results) / "study.json").is_file():
        sys.exit("bench_browse: --repeats must be positive and RESULTS a study's results directory")
    with contextlib.ExitStack() as stack:
        codes = pythons(stack, args.against)
        got: dict[str, list[dict[str, float]]] = {k: [] for k in codes}
        for _ in range(args.repeats):
            for label, python in codes.items():
                with tempfile.TemporaryDirectory(prefix="bench_browse") as tmp:
                    out = subprocess.run([python, "-c", STEP, args.study, args.results, tmp], capture_output=True,
                                         text=True, check=True)
                got[label].append(json.loads(out.stdout.strip().splitlines()[-1]))
                print(f"  {label}: {got[label][-1]}", flush=True)
    rows = [{"code": label, "runs": f"{int(g[0]['runs']):,}", "sync_browsed wall s": mm([x["wall"] for x in g]),
             "CPU s": mm([x["cpu"] for x in g]),
             "peak RSS MB": mm([x["rss_mb"] for x in g], "{:.0f}")} for label, g in got.items()]
    print(f"\nthe end of a browsed study (min / median of {args.repeats}, in turn)")
    print(table(rows))


if __name__ == "__main__":
    main()
