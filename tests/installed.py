"""A package installed for a test as pip installs one — its modules beside a dist-info whose entry_points.txt
lists its `bisweep.plugins` — and `bisweep` run in a fresh process that has it on its path."""
from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def install(site: Path, package: str, files: Mapping[str, str], entry_points: Mapping[str, str]) -> Path:
    """`package` (file name -> code) installed into the directory `site`, declaring `entry_points`
    (name -> module) in the group bisweep.plugins; returns `site`."""
    (site / package).mkdir(parents=True)
    for name, code in files.items():
        (site / package / name).write_text(code)
    info = site / f"{package}-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {package}\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(
        "[bisweep.plugins]\n" + "".join(f"{k} = {v}\n" for k, v in entry_points.items()))
    return site


def bisweep(args: list[str], site: Path, cwd: Path) -> tuple[int, str, list[str]]:
    """`bisweep ARGS` in a fresh process with `site` on its path: (exit code, stdout, stderr lines)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), str(site)])}
    proc = subprocess.run([sys.executable, "-m", "sweep.cli", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=120, env=env)
    return proc.returncode, proc.stdout, proc.stderr.strip().splitlines()


def generic_claim_tests(name: str, site: Path) -> tuple[int, int]:
    """(passed, skipped) of the generic claim tests (tests/sweep/claims/test_base.py) selected by `name`, run in
    a fresh process with `site` on its path: a claim installed there is picked up as a built-in one is."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), str(site)])}
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           str(REPO / "tests" / "sweep" / "claims" / "test_base.py"), "-k", name],
                          cwd=REPO, capture_output=True, text=True, timeout=300, env=env)
    tail = proc.stdout.strip().splitlines()[-1] if proc.stdout.strip() else proc.stderr
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    count = lambda word: int(tail.split(f" {word}")[0].split()[-1]) if f" {word}" in tail else 0  # noqa: E731
    return count("passed"), count("skipped")
