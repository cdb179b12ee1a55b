"""10⁴, 10⁵, 10⁶ tiny runs (SOBA, quadratic d = 5, 2 iterations, one study), whole `bisweep run --no-report`
processes, this checkout against an older commit side by side.

Per size and code, as min / median of `--repeats` (the codes in turn, so that a drift of the machine's speed hits
both): runs/s from the first trial's start to Tune's end (`trials`) and to the session's end (`to end`: MLflow's
last writes included), runs/s over the whole process, the driver's CPU per run (all its threads), its peak RSS,
and bytes per run of the results directory without `mlflow.db` (`store`: summaries, records, logs, MLflow's
artifacts; apparent size and disk blocks) and of `mlflow.db`. `--against COMMIT` checks COMMIT out into a
temporary git worktree with its own venv whose one .pth file puts that checkout first and then this venv's
site-packages (the libraries are the same, only the code differs), as this worktree's venv does.

    .venv/bin/python benchmarks/bench_million.py 10000 --against main            # ~2 min
    .venv/bin/python benchmarks/bench_million.py 100000 --against main --repeats 3
    .venv/bin/python benchmarks/bench_million.py 1000000                         # once: minutes
    .venv/bin/python benchmarks/bench_million.py 100000 --against main --address 127.0.0.1:6379   # Ray started once
"""
from __future__ import annotations

import argparse
import contextlib
import os
import site
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_tiny_runs import mm, run_tiny, table  # noqa: E402  (benchmarks/ is not a package)

REPO = Path(__file__).resolve().parents[1]


@contextlib.contextmanager
def checkout(commit: str) -> Iterator[Path]:
    """A python whose `sweep` is `commit`'s: a temporary worktree and venv (removed afterwards)."""
    with tempfile.TemporaryDirectory(prefix="bench_million_against") as tmp:
        tree, venv = Path(tmp) / "tree", Path(tmp) / "venv"
        subprocess.run(["git", "-C", str(REPO), "worktree", "add", "--detach", "--quiet", str(tree), commit],
                       check=True)
        try:
            subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
            target = next((venv / "lib").glob("python*/site-packages"))
            mine = [p for p in site.getsitepackages() if Path(p).is_dir()]
            reused = [line for p in mine for f in sorted(Path(p).glob("*.pth")) if not f.name.startswith("__editable__")
                      for line in f.read_text().splitlines() if line and not line.startswith(("import", "#"))]
            (target / "zz_bench_against.pth").write_text("\n".join([str(tree), *mine, *reused]) + "\n")
            yield venv / "bin" / "python"
        finally:
            subprocess.run(["git", "-C", str(REPO), "worktree", "remove", "--force", str(tree)], check=False)


def pythons(stack: contextlib.ExitStack, against: str | None) -> dict[str, str]:
    """The python of this checkout ("this") and, when `against` is given, of that commit (removed with `stack`)."""
    codes = {"this": sys.executable}
    if against:
        codes[against] = str(stack.enter_context(checkout(against)))
    return codes


def sizes(root: Path) -> tuple[int, int, int]:
    """(apparent bytes, disk bytes) of the results directory without mlflow.db, and mlflow.db's bytes."""
    apparent = disk = db = 0
    for dirpath, _, files in os.walk(root):
        for name in files:
            st = os.lstat(os.path.join(dirpath, name))
            if name == "mlflow.db" and Path(dirpath) == root:
                db = st.st_size
            else:
                apparent, disk = apparent + st.st_size, disk + st.st_blocks * 512
    return apparent, disk, db


def run_once(python: str, n: int, work: Path, address: str | None = None) -> dict[str, Any]:
    """One whole `bisweep run` of n tiny runs with `python` (on the Ray at `address`, else a local one of its own);
    its figures."""
    extra = ("--ray-start-timeout", "900", *(("--address", address) if address else ()))  # a busy machine starts Ray slowly
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    out, marks, res, wall = run_tiny(python, n, work, env, extra)
    apparent, disk, db = sizes(res)
    return {"wall": wall, "trials": marks["fit_done"] - marks["first_trial_started"],
            "to_end": marks["end"] - marks["first_trial_started"], "rss_mb": out["rss_mb"], "cpu": out["cpu"],
            "store": apparent, "store_disk": disk, "db": db}


def row(label: str, n: int, got: list[dict[str, Any]]) -> dict[str, str]:
    """A table row of one code's repeats at n runs."""
    return {"runs": f"{n:,}", "code": label,
            "runs/s trials": mm([n / g["trials"] for g in got], "{:.0f}"),
            "runs/s to end": mm([n / g["to_end"] for g in got], "{:.0f}"),
            "runs/s whole": mm([n / g["wall"] for g in got], "{:.0f}"),
            "driver CPU ms/run": mm([1000 * g["cpu"] / n for g in got], "{:.3f}"),
            "driver peak MB": mm([g["rss_mb"] for g in got], "{:.0f}"),
            "store B/run": mm([g["store"] / n for g in got], "{:.0f}"),
            "store disk B/run": mm([g["store_disk"] / n for g in got], "{:.0f}"),
            "mlflow.db B/run": mm([g["db"] / n for g in got], "{:.0f}")}


def main() -> None:
    """Each size `--repeats` times per code, in turn; the table."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("sizes", type=int, nargs="*", default=[10_000, 100_000, 1_000_000], help="numbers of tiny runs")
    ap.add_argument("--against", metavar="COMMIT", help="an older commit (or branch) to run side by side")
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--address", help="a running Ray (`ray start --head`) every run uses, instead of starting its own: "
                    "its workers run the code the head was started with, so only the drivers' code differs")
    args = ap.parse_args()
    if any(n < 1 for n in args.sizes) or args.repeats < 1:
        sys.exit("bench_million: sizes and --repeats must be positive integers")
    with contextlib.ExitStack() as stack:
        codes = pythons(stack, args.against)
        print(f"load average before: {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs (other work skews the numbers)")
        rows = []
        for n in args.sizes:
            got: dict[str, list[dict[str, Any]]] = {k: [] for k in codes}
            for _ in range(args.repeats):
                for label, python in codes.items():
                    with tempfile.TemporaryDirectory(prefix="bench_million") as d:
                        got[label].append(run_once(python, n, Path(d), args.address))
                    g = got[label][-1]
                    print(f"  {n:,} {label}: {g['wall']:.1f} s whole, {n / g['to_end']:.0f} runs/s to end, "
                          f"load {os.getloadavg()[0]:.1f}", flush=True)
            rows += [row(label, n, got[label]) for label in codes]
    print(f"\ntiny runs (SOBA, quadratic d = 5, 2 iterations), whole `bisweep run --no-report`, 2 CPUs "
          f"(min / median of {args.repeats})")
    print(table(rows))
    print(f"load average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
