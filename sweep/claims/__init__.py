"""Paper claims checked against a study's measurements: the `claim:` section of a report.

One module per paper in this package, each registering its claims with `@claim` (see `base`) and naming the
study each reads (`claim(..., study=...)`: a built-in study file's name, or the study itself in the same file);
importing `sweep.claims` imports every module of the package, so a new claim is one new file plus its test: the
generic claim tests (tests/sweep/claims/test_base.py) pick up every discovered claim through the study it names.

Each claim's `setup` sets the paper's setting beside the study's; every verdict is judged by one rule from the
measurement and says separately whether it was earned in the paper's setting or a deviating one (base.py).
"""
from __future__ import annotations

from problems.shared.registries import discover
from sweep.claims.base import (CLAIMS, CSV_COLUMNS, FIELDS, SETTINGS, STATUSES, Claim, ClaimReport, Criterion, Estimate,
                               Measured, Setting, StudySource, Verdict, chosen, claim, compare, estimate, evaluate, place,
                               quoted, setting)

discover(__name__, __path__)  # every module of the package, each registering itself

__all__ = ["CLAIMS", "CSV_COLUMNS", "FIELDS", "SETTINGS", "STATUSES", "Claim", "ClaimReport", "Criterion", "Estimate",
           "Measured", "Setting", "StudySource", "Verdict", "chosen", "claim", "compare", "estimate", "evaluate", "place",
           "quoted", "setting"]
