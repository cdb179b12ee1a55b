"""Generate the results pages' measured part from studies' results directories: for each, the command that
reproduces it, when and where it ran (study.json's environment record), the scorecard (report/verdicts.csv),
the claim's full report with its setup table (report/claims.txt), and the report's figures.

    python docs/results_pages.py results/tfbo_sensitivity results/f2csa_scaling-full ...

writes docs/results/generated/<study>[-<scale>].md and its figures and scorecard beside it; each page of
docs/results/ includes the generated part of its study under its own discussion. It then counts the verdicts
of every generated scorecard into docs/results/generated/counts.md, the table of the results index.
"""
from __future__ import annotations

import csv
import datetime
import json
import shutil
import sys
from pathlib import Path

OUT = Path(__file__).resolve().parent / "results" / "generated"
SCORECARD = ("statement", "verdict", "setting", "discriminating", "measured", "low", "high", "paper")
ENVIRONMENT = ("project", "git_commit", "python", "numpy", "scipy", "ray", "mlflow", "cpu", "cores", "blas",
               "blas_threads")


def cell(text: str) -> str:
    """A Markdown table cell: one line, pipes escaped."""
    return " ".join(str(text).split()).replace("|", "\\|") or " "


def table(header: list[str], rows: list[list[str]]) -> list[str]:
    return ["| " + " | ".join(header) + " |", "|" + "---|" * len(header),
            *("| " + " | ".join(cell(c) for c in row) + " |" for row in rows), ""]


def when(root: Path) -> str:
    """The date of the study's last session (sessions.jsonl), else of its report."""
    sessions = root / "sessions.jsonl"
    if sessions.is_file():
        lines = [json.loads(ln) for ln in sessions.read_text().splitlines() if ln.strip()]
        stamps = [s.get("started") or s.get("time") for s in lines if isinstance(s, dict)]
        stamps = [s for s in stamps if isinstance(s, (int, float))]
        if stamps:
            return datetime.datetime.fromtimestamp(max(stamps), datetime.timezone.utc).strftime("%Y-%m-%d")
    stamp = (root / "report").stat().st_mtime
    return datetime.datetime.fromtimestamp(stamp, datetime.timezone.utc).strftime("%Y-%m-%d")


def page(root: Path) -> tuple[str, str]:
    """(file stem, Markdown) of one results directory's generated part."""
    meta = json.loads((root / "study.json").read_text())
    name = meta["name"]
    scale = None if meta.get("scale") in (None, "default") else meta["scale"]
    stem = f"{name}-{scale}" if scale else name
    report = root / "report"
    command = f"bisweep run {name}" + (f" --scale {scale}" if scale else "")
    lines = [f"**Reproduce**: `{command}` (then `bisweep report {name}" + (f" --scale {scale}" if scale else "")
             + "`). Ran on " + when(root) + ".", ""]
    env = meta.get("environment") or {}
    if env:
        lines += ["**Where it ran**: " + "; ".join(f"{k} {env[k]}" for k in ENVIRONMENT if env.get(k) is not None)
                  + ".", ""]
    figures = OUT / stem
    shutil.rmtree(figures, ignore_errors=True)
    figures.mkdir(parents=True)
    verdicts = report / "verdicts.csv"
    if verdicts.is_file():
        shutil.copy(verdicts, figures / "verdicts.csv")  # the counts table reads it
        with verdicts.open() as fh:
            rows = list(csv.DictReader(fh))
        lines += ["**Scorecard**", ""] + table(list(SCORECARD), [[r.get(c, "") for c in SCORECARD] for r in rows])
    claims = report / "claims.txt"
    if claims.is_file():
        lines += ["**The claim's report** (`report/claims.txt`: the paper's statement, the setup table, the "
                  "measurements and the verdicts)", "", "```text", claims.read_text().rstrip(), "```", ""]
    for png in sorted(report.glob("*.png")):
        shutil.copy(png, figures / png.name)
        lines += [f"![{png.stem}]({stem}/{png.name})", ""]
    return stem, "\n".join(lines)


COUNTS = ("agrees", "disagrees", "partly", "not measured", "reference")


def counts() -> str:
    """The verdicts of every generated scorecard counted by direction, setting and discrimination."""
    rows = []
    for path in sorted(OUT.glob("*/verdicts.csv")):
        with path.open() as fh:
            verdicts = list(csv.DictReader(fh))
        study, _, scale = path.parent.name.partition("-")
        rows.append([f"`{study}`", scale or "default",
                     *(str(sum(v["verdict"].startswith(c) for v in verdicts)) for c in COUNTS),
                     str(sum(v["setting"] == "paper setting" for v in verdicts)),
                     str(sum(v["discriminating"] == "no" for v in verdicts))])
    header = ["study", "scale", *COUNTS, "in the paper's setting", "not discriminating"]
    return "\n".join(table(header, rows))


def main(paths: list[str]) -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    for path in paths:
        stem, text = page(Path(path))
        (OUT / f"{stem}.md").write_text(text)
        print(f"wrote {OUT / stem}.md")
    (OUT / "counts.md").write_text(counts())
    print(f"wrote {OUT / 'counts.md'}")


if __name__ == "__main__":
    main(sys.argv[1:])
