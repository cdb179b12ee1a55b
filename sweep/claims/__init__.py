"""Paper claims checked against a study's measurements: the `claim:` section of a report.

One module per paper in this package, each registering its claims with `@claim` (see `base`); importing
`sweep.claims` imports every module of the package, so a new claim is one new file.

    bome_fig1      BOME paper §5, Figs. 1-3: distance to the optimum on the toys, OGD, BOME's η, T and α, time
    f2csa_fig2     F2CSA paper §6, Fig. 2 (cost per iteration and to a target vs d, crossover, speed-up) and
                   Fig. 1 (f2csa.py; its setup table and oracle accuracy in f2csa_setup.py)
    noise_scaling  no paper claim: final error against minibatch size and noise σ (σ²/b reference)
    f2obo_regret   F2OBO paper §4.3 (online.py): regret exponents in the horizon T, inner iteration counts
    f2obo_regret_bound  F2OBO Theorem 3.4 (f2obo_regret.py): regret against V_T, H_2,T; AF2OBO vs static methods
    tfbo_table2    extension of TFBO Table 2's question to its other two problems (tfbo.py; not the paper's task)
    tfbo_coreset   TFBO paper §5.3, Tables 1-2 and Fig. 3: coreset selection for continual learning on Split-digits
    tfbo_fig1      TFBO paper §5, Figs. 1-2 (tfbo_comparison.py): iterations and running time to a target

Each claim's `setup` sets the paper's setting beside the study's; every verdict is judged by one rule from the
measurement and says separately whether it was earned in the paper's setting or a deviating one (base.py).
"""
from __future__ import annotations

from problems.registries import discover
from sweep.claims.base import (CLAIMS, CSV_COLUMNS, FIELDS, SETTINGS, STATUSES, Claim, ClaimReport, Criterion, Estimate,
                               Measured, Setting, Verdict, chosen, claim, estimate, evaluate, place, setting)

discover(__name__, __path__)  # every module of the package, each registering itself

__all__ = ["CLAIMS", "CSV_COLUMNS", "FIELDS", "SETTINGS", "STATUSES", "Claim", "ClaimReport", "Criterion", "Estimate",
           "Measured", "Setting", "Verdict", "chosen", "claim", "estimate", "evaluate", "place", "setting"]
