"""Generate the results pages' measured part from studies' results directories: for each, the command that
reproduces it, when and where it ran (study.json's environment record), the verdicts in sentences and the
scorecard (report/verdicts.csv), the claim's full report with its setup table (report/claims.txt), and the
report's figures.

    python docs/results_pages.py --all [--only STEM ...] [--num-cpus N]   # run every page's study, then its page
    python docs/results_pages.py results/tfbo_sensitivity results/f2csa_scaling-full ...   # pages of finished runs

`--all` regenerates every page from today's code: for each generated part a page of docs/results/ includes
(`generated/<study>[-<scale>].md`), it runs `bisweep run <study> [--scale <scale>]` into
results/pages-<commit>/<stem> (a fresh directory per commit: a killed regeneration resumes at the same commit
and never reuses runs of older code), writes the page and prints how long it took. Either way it writes
docs/results/generated/<study>[-<scale>].md with its figures and scorecard beside it. A page names the project
version and the commit of the code that made it, and its sentences about verdicts are generated from
verdicts.csv: the hand-written pages hold commentary only, with no verdict words (`check` and `prose` fail the
command when a generated page and its verdicts.csv disagree or a hand-written page states a verdict). It then
counts the verdicts of every generated scorecard into docs/results/generated/counts.md, the table of the results
index.
"""
from __future__ import annotations

import argparse
import csv
import datetime
import json
import re
import shutil
import subprocess
import sys
import time
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


REPO = Path(__file__).resolve().parents[1]
PAGES = OUT.parent  # docs/results: the hand-written pages, each including its generated parts
INCLUDE = re.compile(r"^```\{include\} generated/([\w.-]+)\.md$", re.M)
#: Words that state a verdict: the generated sentences and scorecards carry them, the hand-written commentary not.
VERDICT_WORDS = re.compile(r"\b(agrees?|agreements?|disagrees?|disagreements?|partly|not discriminating|"
                           r"not measured|not comparable)\b", re.I)
MADE_WITH = re.compile(r"\*\*Page made with\*\*: bilevel-sweep \S+, commit [0-9a-f]{40}\+?\.")


def made_with() -> str:
    """The project version and the commit of the code that generates the page (a '+' marks uncommitted changes)."""
    repo = REPO
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
    bad = [] if MADE_WITH.search(page_text) else [f"{stem}: the page does not name the version and commit it was made with"]
    said = re.search(r"\*\*Verdicts\*\*\n\n((?:- .*\n)*)", page_text)
    if said is None:
        return bad + [f"{stem}: the page has no generated verdict sentences"]
    if len(said.group(1).splitlines()) != len(rows):
        bad.append(f"{stem}: {len(said.group(1).splitlines())} verdict sentences for {len(rows)} verdicts")
    for r in rows:
        row_text = "| " + " | ".join(cell(r.get(c, "")) for c in SCORECARD[:2])
        if row_text not in page_text:
            bad.append(f"{stem}: scorecard row for {r['statement']!r} is not '{r['verdict']}'")
        if f"{cell(r['statement'])}: **{cell(label(r))}**" not in said.group(1):
            bad.append(f"{stem}: the sentence for {r['statement']!r} does not say '{label(r)}'")
    return bad


def prose(path: Path) -> list[str]:
    """Where a hand-written results page states a verdict in its own words (outside code blocks): its verdicts
    are the generated sentences it includes, so its commentary cannot disagree with them."""
    text = re.sub(r"^```.*?^```", "", path.read_text(), flags=re.M | re.S)
    text = re.sub(r"<!--.*?-->", "", text, flags=re.S)
    bad = []
    for i, line in enumerate(text.splitlines(), 1):
        if (m := VERDICT_WORDS.search(line.replace("`partly discriminating`", ""))):
            bad.append(f"{path.name}: hand-written verdict word {m.group(0)!r}: {line.strip()[:100]}")
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


def page(root: Path, stamp: str | None = None) -> tuple[str, str]:
    """(file stem, Markdown) of one results directory's generated part; `stamp`: the code that made it (default:
    the checkout's now, `made_with`)."""
    meta = json.loads((root / "study.json").read_text())
    name = meta["name"]
    scale = None if meta.get("scale") in (None, "default") else meta["scale"]
    stem = f"{name}-{scale}" if scale else name
    report = root / "report"
    command = f"bisweep run {name}" + (f" --scale {scale}" if scale else "")
    lines = [f"**Reproduce**: `{command}` (then `bisweep report {name}" + (f" --scale {scale}" if scale else "")
             + "`). Ran on " + when(root) + ".", "", f"**Page made with**: {stamp or made_with()}.", ""]
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
                     str(sum(v["discriminating"] in ("no", "partly") for v in verdicts)),
                     str(sum(v["discriminating"] == "partly" for v in verdicts))])
    # "not discriminating" counts the partly discriminating ones too (some baselines pass the same test): neither
    # supports the comparison; the last column says how many of them are partly.
    header = ["study", "scale", *COUNTS, "in the paper's setting", "at a reduced scale", "not discriminating",
              "of which partly"]
    return "\n".join(table(header, rows))


def included() -> list[str]:
    """The stems of every generated part a hand-written results page includes, in the pages' order."""
    return list(dict.fromkeys(m.group(1) for md in sorted(PAGES.glob("*.md")) for m in INCLUDE.finditer(md.read_text())
                              if m.group(1) != "counts"))


def regenerate(only: list[str], root: Path, num_cpus: int | None) -> list[str]:
    """Run the study of every included page (or `only` those) with today's code and write its page; prints the
    seconds each took. Returns the results directories, in order."""
    pages = included()
    unknown = sorted(set(only) - set(pages))
    if unknown:
        sys.exit(f"--only: {', '.join(unknown)} is not a generated page; pages: {', '.join(pages)}")
    commit = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short=12", "HEAD"], capture_output=True,
                            text=True).stdout.strip() or "unknown"
    done, stamp = [], made_with()  # the code the studies run with, even if the checkout moves meanwhile
    for stem in [p for p in pages if not only or p in only]:
        name, _, scale = stem.partition("-")
        results = root / f"pages-{commit}" / stem
        command = [sys.executable, "-m", "sweep.cli", "run", name, "--results-dir", str(results),
                   *(["--scale", scale] if scale else []), *(["--num-cpus", str(num_cpus)] if num_cpus else [])]
        print(f"{stem}: {' '.join(command[2:])}", flush=True)
        start = time.monotonic()
        if subprocess.run(command, cwd=REPO).returncode != 0:
            sys.exit(f"{stem}: the study failed (its results are in {results}; run the command again to resume)")
        write(results, stamp)
        print(f"{stem}: {time.monotonic() - start:.0f} s", flush=True)
        done.append(str(results))
    return done


def write(root: Path, stamp: str | None = None) -> None:
    """Write the generated part of one results directory."""
    stem, text = page(root, stamp)
    (OUT / f"{stem}.md").write_text(text)
    print(f"wrote {OUT / stem}.md", flush=True)


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("results", nargs="*", help="results directories of finished studies")
    parser.add_argument("--all", action="store_true", help="run the study of every page with today's code first")
    parser.add_argument("--only", nargs="+", default=[], metavar="STEM", help="with --all: just these pages")
    parser.add_argument("--results-root", type=Path, default=Path("results"), help="with --all (default: results)")
    parser.add_argument("--num-cpus", type=int, help="with --all: passed to bisweep run")
    args = parser.parse_args(argv)
    OUT.mkdir(parents=True, exist_ok=True)
    start = time.monotonic()
    if args.all:
        regenerate(args.only, args.results_root.resolve(), args.num_cpus)
    for path in args.results:
        write(Path(path))
    (OUT / "counts.md").write_text(counts())
    print(f"wrote {OUT / 'counts.md'}" + (f"; {time.monotonic() - start:.0f} s in all" if args.all else ""))
    bad = [b for md in sorted(OUT.glob("*.md")) if md.stem != "counts" for b in check(md.stem)]
    bad += [b for md in sorted(PAGES.glob("*.md")) if set(INCLUDE.findall(md.read_text())) - {"counts"} for b in prose(md)]
    if bad:
        sys.exit("pages disagree with their verdicts.csv:\n" + "\n".join(bad))


if __name__ == "__main__":
    main(sys.argv[1:])
