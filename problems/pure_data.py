"""The pure forms of the problems with data (the real-data logistic problems, the simulated benchmark quadratic), for
the compiled engine: their arrays and oracles; their ground truth stays the problem's own, evaluated on the host."""
from __future__ import annotations

from typing import Any

from problems.logistic_cleaning import HyperCleaning
from problems.pure_cleaning import pure_cleaning
from problems.pure_logistic import pure_regularization
from problems.pure_simulated import pure_simulated
from problems.shared.errors import ParameterError
from problems.simulated import Simulated

#: The problems with a pure form here, as a refusal names them.
NAMES = ("regularization_selection", "hyper_cleaning", "simulated")


def data_form(problem: Any) -> Any:
    """The pure form of `problem` (hyper-cleaning's, regularization selection's or the simulated quadratic's); one
    line naming the problems there are otherwise."""
    if isinstance(problem, HyperCleaning):
        return pure_cleaning(problem)
    if isinstance(problem, Simulated):
        return pure_simulated(problem)
    try:
        return pure_regularization(problem)
    except ParameterError:
        raise ParameterError(f"problem: '{problem.name}' has no pure-array form for the compiled engine; allowed: "
                             f"'quadratic', 'nonunique_toy', 'minimax_toy', {', '.join(map(repr, NAMES))}") from None
