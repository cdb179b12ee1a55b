"""The setup table of a paper claim: the paper's setting next to the study's, field by field (`FIELDS`).

A row is `same` only when the paper states the value — its section cited and the passage that states it quoted in the
paper column (`quoted`) — and the study uses it; a value the paper leaves open is `chosen: <value>` (`chosen`); anything else is a deviation, unless the
study ran both ways and showed it does not matter (`Setting.shown`).
"""
from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence
from typing import Any

#: The fields of every claim's setup table, in the order printed.
FIELDS = ("problem and data", "dimensions", "constraints", "noise", "metric", "what is timed", "iteration counts",
          "batch sizes", "inner-loop policy", "step sizes", "seeds")
NOT_STATED = "not stated"
NO_PAPER = "no paper claim"
NO_MOVE = "no method moved"
#: A paper column that cites where the paper states its value (a section, appendix, figure, table, equation, ...).
CITATION = re.compile(r"§|App\. ?[A-Z]|Table \d|Fig\. ?\d|Figs\. ?\d|\(\d+\)|Remark \d|Lemma \d|Theorem \d|"
                      r"Algorithm \d|Prop(osition)?\.? \d|A\.\d")
Rows = list[dict[str, Any]]


@dataclasses.dataclass
class Setting:
    """One row of the setup table: the paper's value and the study's, and how they differ."""

    field: str
    paper: str
    study: str
    deviation: str | None = None  # None: the study runs the paper's setting, or a value the paper leaves open
    shown: str | None = None  # the study ran both ways and the deviation did not change the verdicts: how
    chosen: str | None = None  # the study's value of a setting the paper leaves open
    problems: tuple[str, ...] | None = None  # the problems the row concerns (None: all the study runs)
    quote: str | None = None  # the paper's passage that states the value (a `same` row needs one)
    value: str | None = None  # the value the study uses, as the quote states it

    def concerns(self, problems: Sequence[str] | None) -> bool:
        """The row bears on a statement about `problems` (labels such as 'coreset_toy(points=paper)'; None: all)."""
        if self.problems is None or problems is None:
            return True
        return any(label.split("(")[0] in self.problems for label in problems)

    @property
    def status(self) -> str:
        """same, chosen: <value>, deviation, deviation (shown not to matter) or no paper claim."""
        if self.deviation is not None:
            return "deviation (shown not to matter)" if self.shown else "deviation"
        if self.paper == NO_PAPER:
            return NO_PAPER
        if self.chosen is not None or self.paper.startswith(NOT_STATED):
            return f"chosen: {self.chosen if self.chosen is not None else self.study}"
        return "same"

    @property
    def states(self) -> bool:
        """The paper column quotes a passage that contains the value the study uses."""
        return bool(self.quote and self.value and self.value in self.quote and self.quote in self.paper)

    @property
    def cited(self) -> bool:
        """The paper column names where the paper states the value."""
        return bool(CITATION.search(self.paper))

    @property
    def open(self) -> bool:
        """A deviation that could still explain the measurement."""
        return self.deviation is not None and not self.shown

    def row(self) -> dict[str, str]:
        """The setting as a table row."""
        note = self.deviation or ""
        if self.shown:
            note += f" (shown not to matter: {self.shown})"
        return {"field": self.field, "paper": self.paper, "study": self.study, "status": self.status, "deviation": note}


def setting(field: str, paper: str, study: str, deviation: str | None = None, shown: str | None = None) -> Setting:
    """A row of the setup table (`field` one of FIELDS); `paper` cites where the paper states it."""
    if field not in FIELDS:
        raise KeyError(f"setup field {field!r} is not one of {', '.join(FIELDS)}")
    return Setting(field, paper, study, deviation, shown)


def quoted(row: Setting, quote: str, value: str) -> Setting:
    """`row` with the paper's passage that states its value (`value`, a part of `quote`) added to its paper column."""
    if value not in quote:
        raise ValueError(f"setup row {row.field!r}: the quote does not state the value {value!r}")
    row.paper += f": '{quote}'"
    row.quote, row.value = quote, value
    return row


def compare(field: str, paper_value: Any, study_value: Any, paper: str, study: str, deviation: str) -> Setting:
    """A row whose deviation is `deviation` when the study's value is not the paper's (compared as data)."""
    return setting(field, paper, study, None if study_value == paper_value else deviation)


def chosen(field: str, study: str, value: str | None = None, note: str = "") -> Setting:
    """A row for a value the paper leaves open: status `chosen: <value>` (`value` defaults to `study`)."""
    row = setting(field, NOT_STATED + (f" ({note})" if note else ""), study)
    row.chosen = value if value is not None else study
    return row


def unstated(field: str, study: str, note: str = "") -> Setting:
    """A row for a value the paper leaves open, `chosen: <study>`."""
    return chosen(field, study, note=note)
