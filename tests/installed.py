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
