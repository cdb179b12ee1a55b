"""Regenerate the real output the Getting-started tutorial shows: run the quickstart as a new user would
(`bisweep run quickstart` in an empty directory, output not a terminal), then `bisweep report quickstart` and
the pandas lines, and write what each printed under docs/_generated/ (the tutorial includes these files;
tests/sweep/test_integration.py::test_quickstart_from_the_readme_main_command compares a new run's output with
them, numbers and paths normalised).

    python docs/tutorial_output.py        # about a minute on two cores
"""
from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

DOCS = Path(__file__).resolve().parent
OUT = DOCS / "_generated"
PANDAS = """\
import sweep
res = sweep.load_results("quickstart")
print(res.runs[["algorithm", "step_size_factor", "seed", "status", "grad_F_sq", "iteration"]].head(6).to_string())
print(res.runs.groupby(["algorithm", "step_size_factor"])["grad_F_sq"].median())
"""


def run(cmd: list[str], cwd: Path) -> str:
    proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=900)
    if proc.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed ({proc.returncode}):\n{proc.stderr[-2000:]}")
    return (proc.stdout + proc.stderr).replace(str(cwd), ".")


def main() -> None:
    OUT.mkdir(exist_ok=True)
    bisweep = str(Path(sys.executable).parent / "bisweep")
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        if len(sys.argv) > 1:  # an existing results/quickstart to describe instead of a new run
            shutil.copytree(sys.argv[1], work / "results" / "quickstart")
        else:
            (OUT / "quickstart-run.txt").write_text(run([bisweep, "run", "quickstart"], work))
        (OUT / "quickstart-report.txt").write_text(run([bisweep, "report", "quickstart"], work))
        (OUT / "quickstart-pandas.py").write_text(PANDAS)
        (OUT / "quickstart-pandas.txt").write_text(run([sys.executable, "-c", PANDAS], work))
        (OUT / "quickstart-files.txt").write_text(
            "\n".join(sorted(str(p.relative_to(work / "results" / "quickstart"))
                             for p in (work / "results" / "quickstart" / "report").iterdir()
                               if not p.name.startswith("."))) + "\n")
        shutil.copy(work / "results" / "quickstart" / "report" / "sensitivity.png", OUT / "quickstart-sensitivity.png")


if __name__ == "__main__":
    main()
