"""Where a study ran: the project's version and git commit, Python, the numerical libraries, the CPU, and the
BLAS with its thread count. study.json and the MLflow parent run record it, so that results from two
machines can be told apart before they are compared."""
from __future__ import annotations

import os
import platform
import subprocess
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy  # noqa: F401  loads the BLAS that threadpoolctl inspects
from threadpoolctl import threadpool_info

#: Distributions whose versions are recorded (a missing one is recorded as null).
PACKAGES = ("numpy", "scipy", "ray", "mlflow", "pandas")
ROOT = Path(__file__).resolve().parents[2]  # the source tree this package is imported from


def describe() -> dict[str, Any]:
    """The record of this machine and software (JSON-ready; fields that cannot be read are null)."""
    return {"project": _version("bilevel-sweep"), "git_commit": _git_commit(),
            "python": platform.python_version(),
            **{name: _version(name) for name in PACKAGES},
            "platform": platform.platform(), "cpu": _cpu_model(), "cores": os.cpu_count(), **_blas()}


def flat(record: dict[str, Any], prefix: str = "env.") -> dict[str, str]:
    """The record as MLflow tags: prefixed keys, string values."""
    return {f"{prefix}{k}": str(v) for k, v in record.items()}


def _version(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def _git_commit() -> str | None:
    """The commit of the source tree the project is imported from, with "+dirty" when it has changes."""
    try:
        run = lambda *a: subprocess.run(["git", "-C", str(ROOT), *a], capture_output=True, text=True,  # noqa: E731
                                        timeout=5, check=True).stdout.strip()
        commit = run("rev-parse", "HEAD")
        return commit + ("+dirty" if run("status", "--porcelain", "--untracked-files=no") else "")
    except (OSError, subprocess.SubprocessError):
        return None  # not a git checkout (an installed package) or no git


def _cpu_model() -> str | None:
    """The CPU's model name (/proc/cpuinfo on Linux, else what the platform module knows)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or None


def _blas() -> dict[str, Any]:
    """The BLAS NumPy calls and its threads (threadpoolctl), e.g. openblas 0.3.27 with 2 threads."""
    pools = [p for p in threadpool_info() if p.get("user_api") == "blas"]
    if not pools:
        return {"blas": None, "blas_threads": None}
    p = pools[0]
    return {"blas": f"{p.get('internal_api')} {p.get('version')}".strip(), "blas_threads": p.get("num_threads")}
