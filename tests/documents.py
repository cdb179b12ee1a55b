"""The project's documents — README.md and the documentation pages under docs/ — and their fenced code
blocks, which the tests run or validate as written (a block is found by the HTML comment above it)."""
from __future__ import annotations

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
