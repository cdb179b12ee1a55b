"""Generate the results pages' measured part from studies' results directories: for each, the command that
reproduces it, when and where it ran (study.json's environment record), the scorecard (report/verdicts.csv),
the claim's full report with its setup table (report/claims.txt), and the report's figures.

    python docs/results_pages.py results/tfbo_sensitivity results/f2csa_scaling-full ...

writes docs/results/generated/<study>[-<scale>].md and its figures and scorecard beside it; each page of
docs/results/ includes the generated part of its study under its own discussion. A page names the project version
and the commit of the code that made it, and its sentences about verdicts are generated from verdicts.csv (`check`
fails the command when a generated page and its verdicts.csv disagree). It then counts the verdicts of every
generated scorecard into docs/results/generated/counts.md, the table of the results index.
"""
from __future__ import annotations

import csv
import datetime
import json
import shutil
import subprocess
import sys
from importlib import metadata
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


def made_with() -> str:
    """The project version and the commit of the code that generates the page (a '+' marks uncommitted changes)."""
    repo = Path(__file__).resolve().parents[1]
    try:
        version = metadata.version("bilevel-sweep")
    except metadata.PackageNotFoundError:
        version = "unknown"
    git = lambda *a: subprocess.run(["git", "-C", str(repo), *a], capture_output=True, text=True).stdout.strip()  # noqa: E731
    commit = git("rev-parse", "HEAD") or "unknown"
    dirty = "+" if git("status", "--porcelain", "--untracked-files=no") else ""
    return f"bilevel-sweep {version}, commit {commit}{dirty}"


def label(row: dict[str, str]) -> str:
    """A verdict as printed: its direction with its note (e.g. the comparator that makes it not measured)."""
    note = row.get("note") or ""
    return row["verdict"] + (f" ({note})" if note else "") + (
        " (not discriminating)" if row.get("discriminating") == "no" else "")


def sentences(rows: list[dict[str, str]]) -> list[str]:
    """One generated sentence per verdict: the statement, its label and where it was earned — the only prose about
    verdicts on a page, so it cannot disagree with verdicts.csv."""
    out = []
    for r in rows:
        where = "" if r.get("setting") in (None, "", "-") else f", {r['setting']}" + (
            f" ({r['deviations']})" if r.get("deviations") else "")
        out.append(f"- {cell(r['statement'])}: **{cell(label(r))}**{cell(where) if where else ''}.")
    return out + [""]


def check(stem: str) -> list[str]:
    """Where a generated page's verdicts disagree with the verdicts.csv beside it (empty: they agree)."""
    page_text = (OUT / f"{stem}.md").read_text()
    path = OUT / stem / "verdicts.csv"
    if not path.is_file():
        return []
    with path.open() as fh:
        rows = list(csv.DictReader(fh))
    bad = []
    for r in rows:
        row_text = "| " + " | ".join(cell(r.get(c, "")) for c in SCORECARD[:2])
        if row_text not in page_text:
            bad.append(f"{stem}: scorecard row for {r['statement']!r} is not '{r['verdict']}'")
        if "**Verdicts**" in page_text and f"{cell(r['statement'])}: **{cell(label(r))}**" not in page_text:
            bad.append(f"{stem}: the sentence for {r['statement']!r} does not say '{label(r)}'")
    return bad


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
             + "`). Ran on " + when(root) + ".", "", f"**Page made with**: {made_with()}.", ""]
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
        lines += ["**Verdicts**", "", *sentences(rows)]
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
                     str(sum(v["setting"] == "reduced scale" for v in verdicts)),
                     str(sum(v["discriminating"] == "no" for v in verdicts)),
                     str(sum(v["discriminating"] == "partly" for v in verdicts))])
    header = ["study", "scale", *COUNTS, "in the paper's setting", "at a reduced scale", "not discriminating",
              "partly discriminating"]
    return "\n".join(table(header, rows))


def main(paths: list[str]) -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    for path in paths:
        stem, text = page(Path(path))
        (OUT / f"{stem}.md").write_text(text)
        print(f"wrote {OUT / stem}.md")
    (OUT / "counts.md").write_text(counts())
    print(f"wrote {OUT / 'counts.md'}")
    bad = [b for md in sorted(OUT.glob("*.md")) if md.stem != "counts" for b in check(md.stem)]
    if bad:
        sys.exit("pages disagree with their verdicts.csv:\n" + "\n".join(bad))


if __name__ == "__main__":
    main(sys.argv[1:])
