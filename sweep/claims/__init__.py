"""Paper claims checked against a study's measurements: the `claim:` section of a report.

One module per paper in this package, each registering its claims with `@claim` (see `base`); importing
`sweep.claims` imports every module of the package, so a new claim is one new file (and the study file that
names it with `claim:`); the claim tests find each built-in claim through the study that names it.

Each claim's `setup` sets the paper's setting beside the study's; every verdict is judged by one rule from the
measurement and says separately whether it was earned in the paper's setting or a deviating one (base.py).
"""
from __future__ import annotations

from problems.shared.registries import discover
from sweep.claims.base import (CLAIMS, CSV_COLUMNS, FIELDS, SETTINGS, STATUSES, Claim, ClaimReport, Criterion, Estimate,
                               Measured, Setting, Verdict, chosen, claim, estimate, evaluate, place, setting)

discover(__name__, __path__)  # every module of the package, each registering itself

__all__ = ["CLAIMS", "CSV_COLUMNS", "FIELDS", "SETTINGS", "STATUSES", "Claim", "ClaimReport", "Criterion", "Estimate",
           "Measured", "Setting", "Verdict", "chosen", "claim", "estimate", "evaluate", "place", "setting"]
