"""The runs of a study as reports and claims read them: one `RunData` per ended run, and their labels."""
from __future__ import annotations

import contextlib
import dataclasses
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

from sweep.results import run_columns
from sweep.results.store import ResultStore
from sweep.results.summaries import MISSING
from sweep.study.record import StudyRecord


@dataclasses.dataclass
class RunData:
    """One run as the report sees it."""

    key: str
    point: dict[str, Any]
    seed: int
    status: str
    final: dict[str, Any] | None
    records: Sequence[dict[str, Any]]  # a list, or the store's columns read when asked (RunRecords)
    where: dict[str, str]
    error: str | None


_UNREAD: Any = object()


class ColumnRun(RunData):
    """A run read from the store's columns: its final record (its last record) made a dict only when read, as a
    report's tables read most runs' final values from the columns at once (`sweep.report.run_arrays`)."""

    def __init__(self, key: str, point: dict[str, Any], seed: int, status: str, final: dict[str, Any] | None = _UNREAD,
                 records: Sequence[dict[str, Any]] = (), where: dict[str, str] | None = None,
                 error: str | None = None) -> None:
        self.key, self.point, self.seed, self.status = key, point, seed, status
        self.records, self.where, self.error = records, where or {}, error
        self._final = final

    @property  # type: ignore[override]
    def final(self) -> dict[str, Any] | None:
        if self._final is _UNREAD:
            self._final = self.records[-1] if len(self.records) else None
        return self._final

    @final.setter
    def final(self, value: dict[str, Any] | None) -> None:
        self._final = value

    def final_is_last(self) -> bool:
        """Whether the final record is still the last record, unread (its values can be read from the columns)."""
        return self._final is _UNREAD

def field(records: Sequence[dict[str, Any]], name: str) -> list[Any]:
    """A run's values of one record field, in order (None where a record has none): read from the store's columns
    without a dict per record when the records are (`RunRecords`)."""
    column = getattr(records, "column", None)
    return column(name) if column is not None else [r.get(name) for r in records]


# ---------------------------------------------------------------- labels
#: Labels made once per configuration while a report is built (`remembered_labels`): a 10⁵-configuration report
#: asked for each three times. Keyed by the point's id, the point kept with them so that its id is not reused.
_LABELS: dict[int, list[Any]] | None = None


@contextlib.contextmanager
def remembered_labels() -> Iterator[None]:
    """Within the block each configuration's labels are made once (its point taken as unchanging meanwhile)."""
    global _LABELS
    outer = _LABELS
    _LABELS = {} if outer is None else outer
    try:
        yield
    finally:
        _LABELS = outer


def problem_label(point: dict[str, Any]) -> str:
    """Problem name with its gridded parameters."""
    return _remembered(point, 0, _problem_label)


def config_label(point: dict[str, Any]) -> str:
    """Algorithm label with its gridded hyperparameters."""
    return _remembered(point, 1, _config_label)


def _remembered(point: dict[str, Any], which: int, make: Callable[[dict[str, Any]], str]) -> str:
    """Label `which` (0: problem, 1: configuration) of `point`, made once within `remembered_labels`."""
    if _LABELS is None:
        return make(point)
    got = _LABELS.get(id(point))
    if got is None or got[0] is not point:
        got = _LABELS[id(point)] = [point, None, None]
    if got[which + 1] is None:
        got[which + 1] = make(point)
    return got[which + 1]


def _problem_label(point: dict[str, Any]) -> str:
    grid = [(k[8:], v) for k, v in point["coords"]["grid"].items() if k.startswith("problem.")]
    return point["problem"] + (f"({', '.join(f'{k}={v}' for k, v in grid)})" if grid else "")


def _config_label(point: dict[str, Any]) -> str:
    grid = {k: v for k, v in point["coords"]["grid"].items() if not k.startswith("problem.")}
    return point["label"] + (f"({', '.join(f'{k}={v}' for k, v in grid.items())})" if grid else "")


def axis_text(point: dict[str, Any], axis_name: str | None) -> str:
    """The axis value as a person reads it: 'step ×2', 'step 4', 'reference', 'batch_size=16' ('' without one)."""
    coords = point["coords"]
    value = coords.get("axis")
    if value is None:
        return "reference" if coords.get("reference") else ""
    if axis_name == "step_size_factor":
        return f"step ×{value:g}" if isinstance(value, (int, float)) else f"step ×{value}"
    if axis_name == "initial_step_size":
        return f"step {value:g}" if isinstance(value, (int, float)) else f"step {value}"
    return f"{axis_name or 'axis'}={value}"


def run_name(point: dict[str, Any], seed: int, axis_name: str | None) -> str:
    """What a person compares, e.g. 'soba · step ×2 · quadratic · seed 2' (the run key stays the identity)."""
    parts = [config_label(point), axis_text(point, axis_name), problem_label(point), f"seed {seed}"]
    return " · ".join(p for p in parts if p)


def group(runs: Iterable[Any], key: Callable[[Any], Any]) -> dict[Any, list[Any]]:
    """Runs (or rows) grouped by `key`, in first-seen order."""
    out: dict[Any, list[Any]] = defaultdict(list)
    for r in runs:
        out[key(r)].append(r)
    return out


# ---------------------------------------------------------------- loading
def _brief(s: dict[str, Any] | None) -> tuple[str, dict[str, Any], str | None, Any] | None:
    """`Summaries.brief` of a summary given as a dict."""
    return None if s is None else (s["status"], s.get("where") or {}, s.get("error"), s.get("final", MISSING))



def load_runs(store: ResultStore, meta: StudyRecord) -> list[RunData]:
    """Every ended run of the study's configurations; its records read from the store's columns when asked."""
    cols = run_columns.load(store)
    runs = []
    summaries = cols.summaries
    brief = getattr(summaries, "brief", None)
    for point in meta.points:
        for seed in meta.seeds:
            key = f"{point['key']}.s{seed}"
            got = brief(key) if brief is not None else _brief(summaries.get(key))
            if got is None:
                continue
            status, where, error, final = got
            final = _UNREAD if final is MISSING else final  # the last record, read when asked
            runs.append(ColumnRun(key, point, seed, status, final, cols.records(key), where, error))
    return runs
