"""A study that grows in rounds (an adaptive search, `Kind.next_points`): run a round, propose the next, repeat.

Each round is one ordinary session of the runner (`session(study, report)`), so its trials are resumable and
run exactly once, and every round keeps the first round's identity (one MLflow parent, one Tune experiment
directory). The rounds an earlier session proposed come back from study.json, so nothing is proposed twice;
a round whose runs have all ended in this session (failed ones too) is not run again here, and the next one is
proposed from it. The report is built once, after the last round.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, TextIO

from sweep import kinds
from sweep.execution.progress import print_line
from sweep.results.store import ResultStore
from sweep.study.model import Point, Study


def run_rounds(study: Study, store: ResultStore, session: Callable[[Study, bool], Any], report: bool,
               out: TextIO) -> Any:
    """Run every round of `study` through `session`, then report; an interrupted round ends it (its Outcome)."""
    kind = kinds.get(study.kind)
    study = proposed_before(study, store)
    ran: set[str] = set()
    while True:
        store = ResultStore(store.root)  # what the sessions wrote (a store caches the runs it saw end)
        if set(study.run_keys) - store.done(study.run_keys) - ran:
            outcome = session(study, False)
            if outcome.counts["missing"]:
                return outcome  # interrupted: the next `bisweep run` continues this round
            ran = set(study.run_keys)
        points = kind.next_points(study, store.summary)
        if points is None:
            return session(study, report)  # nothing left to run: the final sync, the report, the parent's end
        print_line(out, f"bisweep: next tuning round: {len(points) - len(study.points)} new configurations "
                        f"proposed from {len(study.run_keys)} runs")
        study = dataclasses.replace(study, points=points, identity=study.spec_hash)


def proposed_before(study: Study, store: ResultStore) -> Study:
    """The study with every round an earlier session of it recorded in study.json (same identity)."""
    if not (store.root / "study.json").exists():
        return study
    meta = store.read_study()
    if meta.spec_hash != study.spec_hash or len(meta.points) <= len(study.points):
        return study
    points = [Point.from_dict(d) for d in meta.points]
    if not {p.key for p in study.points} <= {p.key for p in points}:
        return study
    return dataclasses.replace(study, points=points, identity=study.spec_hash)
