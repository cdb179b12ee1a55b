"""The project's documents — README.md and the documentation pages under docs/ — and their fenced code
blocks, which the tests run or validate as written (a block is found by the HTML comment above it)."""
from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
#: Generated or built files under docs/ that are no pages of their own.
NOT_PAGES = ("_build", "_generated", "generated", "gallery")


def pages() -> list[Path]:
    """README.md, then every Markdown page of the documentation."""
    docs = sorted(p for p in (REPO / "docs").rglob("*.md")
                  if not any(part in NOT_PAGES for part in p.relative_to(REPO / "docs").parts))
    return [REPO / "README.md", *docs]


def text() -> str:
    """Every document, one after another."""
    return "\n".join(p.read_text() for p in pages())


def marked_block(marker: str) -> str:
    """The fenced code block right after the line `<!-- marker -->`, in whichever document holds it."""
    for page in pages():
        lines = page.read_text().splitlines()
        if f"<!-- {marker} -->" in lines:
            i = lines.index(f"<!-- {marker} -->") + 1
            assert lines[i].startswith("```"), f"{page}: {lines[i]}"
            end = lines.index("```", i + 1)
            return "\n".join(lines[i + 1:end]) + "\n"
    raise AssertionError(f"no document has <!-- {marker} -->")


#: What differs between two runs of the same command and is no drift of the docs: live progress lines,
#: numbers (times, run ids, last digits of stochastic values), absolute paths, and column padding.
_PROGRESS = re.compile(r"^runs \d+/\d+ done, ")
_RUN_ID = re.compile(r"\b[0-9a-f]{12,32}\b")
_NUMBER = re.compile(r"[-+]?\d+(?:[.,:]\d+)*(?:e[-+]?\d+)?")


def shape(output: str, cwd: str | None = None) -> list[str]:
    """`output` as the docs may show it, normalised: progress lines dropped, the working directory as '.', run
    ids as ID, numbers as #, runs of spaces and table rules as one."""
    lines = []
    for line in output.splitlines():
        if _PROGRESS.match(line):
            continue
        if cwd:
            line = line.replace(cwd, ".")
        line = _NUMBER.sub("#", _RUN_ID.sub("ID", line))
        line = re.sub(r"-{3,}", "---", re.sub(r"\s+", " ", line)).strip()
        lines.append(line)
    return lines
