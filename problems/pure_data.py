"""The pure forms whose ground truth stays the problem's own, evaluated on the host (the real-data logistic problems,
the simulated benchmark quadratic, coreset selection, the coreset toy, the constrained quadratic), for the compiled
engine: their arrays and oracles."""
from __future__ import annotations

from typing import Any

from problems.constrained import ConstrainedQuadratic
from problems.coreset import CoresetSelection
from problems.logistic_cleaning import HyperCleaning
from problems.pure_cleaning import pure_cleaning
from problems.pure_constrained import pure_constrained
from problems.pure_coreset import pure_coreset
from problems.pure_coreset_toy import pure_coreset_toy
from problems.pure_logistic import pure_regularization
from problems.pure_simulated import pure_simulated
from problems.shared.errors import ParameterError
from problems.simulated import Simulated
from problems.toys import CoresetToy

#: The problems with a pure form here, as a refusal names them.
NAMES = ("regularization_selection", "hyper_cleaning", "simulated", "coreset_selection", "coreset_toy",
         "constrained_quadratic")


def data_form(problem: Any) -> Any:
    """The pure form of `problem` (hyper-cleaning's, regularization selection's, the simulated quadratic's, coreset
    selection's, the coreset toy's or the constrained quadratic's); one line naming the problems there are otherwise."""
    if isinstance(problem, CoresetToy):
        return pure_coreset_toy(problem)
    if isinstance(problem, CoresetSelection):
        return pure_coreset(problem)
    if isinstance(problem, ConstrainedQuadratic):
        return pure_constrained(problem)
    if isinstance(problem, HyperCleaning):
        return pure_cleaning(problem)
    if isinstance(problem, Simulated):
        return pure_simulated(problem)
    try:
        return pure_regularization(problem)
    except ParameterError:
        raise ParameterError(f"problem: '{problem.name}' has no pure-array form for the compiled engine; allowed: "
                             f"'quadratic', 'nonunique_toy', 'minimax_toy', {', '.join(map(repr, NAMES))}") from None
