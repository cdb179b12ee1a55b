"""A local Ray's start and stop as the driver does them (`start_ray`: no autoscaler monitor, no dashboard server)
against Ray's own start with the same options and every head service (`ray.init`), both stopped by `stop_ray`, each
in a fresh process, in turn; wall seconds of the start, of the first task's answer, and of the stop, min / median.

    .venv/bin/python benchmarks/bench_ray_start.py              # 5 rounds (~1 min on 2 cores)
    .venv/bin/python benchmarks/bench_ray_start.py --repeats 3
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

#: One start, first task and stop in a process of its own; prints {"start": s, "task": s, "stop": s}.
_ONE = """
import json, sys, time
import ray
from sweep.execution import ray_cluster
lean = sys.argv[1] == "driver"
began = time.monotonic()
if lean:
    ray_cluster.start_ray(None, 2)
else:
    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False, logging_level=30,
             namespace=ray_cluster.NAMESPACE, _system_config=ray_cluster._LOCAL_CONFIG)
started = time.monotonic()
ray.get(ray.remote(lambda: 1).remote())
answered = time.monotonic()
ray_cluster.stop_ray()
print(json.dumps({"start": started - began, "task": answered - started, "stop": time.monotonic() - answered}))
"""


def once(how: str) -> dict[str, float]:
    """The seconds of one start, first task and stop (`how`: driver or ray)."""
    proc = subprocess.run([sys.executable, "-c", _ONE, how], capture_output=True, text=True, cwd=REPO,
                          env={**os.environ, "PYTHONPATH": str(REPO)}, check=True)
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    times: dict[str, list[dict[str, float]]] = {"driver": [], "ray": []}
    for _ in range(args.repeats):
        for how in times:
            times[how].append(once(how))
    print(f"local Ray on 2 CPUs, {args.repeats} rounds in turn; wall seconds, min / median")
    print(f"{'start':8} {'start':>14} {'first task':>14} {'stop':>14} {'start + stop':>14}")
    for how, rows in times.items():
        cells = [[r[p] for r in rows] for p in ("start", "task", "stop")] + [[r["start"] + r["stop"] for r in rows]]
        print(f"{how:8} " + " ".join(f"{min(c):6.2f} / {statistics.median(c):5.2f}" for c in cells))
    ratio = statistics.median(r["start"] + r["stop"] for r in times["ray"]) / \
        statistics.median(r["start"] + r["stop"] for r in times["driver"])
    print(f"ray / driver, start + stop, medians: {ratio:.2f}x")


if __name__ == "__main__":
    main()
