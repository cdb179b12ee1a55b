"""The study field `backend`: what steps a study's batches of runs, and what a study on the JAX backend may hold.

`numpy` (the default): the explicit definitions' NumPy stack (`algorithms.explicit.NumpyStack`) for a batch with an
iteration or an oracle-call budget on an offline problem (the runs' cut steps on the run loop:
algorithms/explicit/call_budget.py); any other batch runs one run after another. `jax`: each batch is one compiled JAX program (`algorithms.explicit`'s JAX engine: `vmap` over the
batch's runs, `jit`, float64, on the device `JAX_PLATFORMS` chooses). What that engine runs today is checked
before any work: algorithms with an explicit definition on the quadratic (its finite sum too), the closed-form toys
(nonunique_toy, minimax_toy, coreset_toy), regularization_selection, hyper_cleaning, simulated, coreset_selection or
constrained_quadratic (the last six's ground truth evaluated on the host; the last without minibatches), SABA on the
finite-sum quadratic, regularization_selection, simulated and hyper_cleaning, iteration budgets, batched runs (any
divergence rule). A batch is computed a window of evaluation points at a time, checkpointed between windows (a killed
trial goes on from its last checkpoint: sweep/execution/trial_stacks.py), its records' seconds are its program's
shared out by steps (`time_mode: compiled`). Runs that draw nothing give the NumPy
engine's iterates to 1e-10 (but AID-CG's on nonunique_toy: its lower-level Hessian is singular, and CG there follows
rounding). Runs that draw (minibatches of a finite sum, SABA, TTSA's sampled HIA) draw from JAX's own streams: other
samples of the same algorithm than the NumPy engine's, equal in distribution; their run keys say so
(`Point.streams`), so that a study never mixes the two engines' samples under one key.
"""
from __future__ import annotations

import dataclasses
import importlib.util
import json
from typing import Any

from algorithms import explicit
from problems.shared.errors import ParameterError
from sweep.study.errors import Errors
from sweep.study.encoding import encoded_list
from sweep.study.model import Point, Study
from sweep.study.timing import timed_by

#: The problems the JAX engine runs (problems/pure.py: the deterministic quadratic's form and the closed-form toys';
#: problems/pure_data.py: the coreset toy's, the real-data problems', the simulated quadratic's, coreset selection's,
#: the constrained quadratic's, full batch).
JAX_PROBLEMS = ("quadratic", "nonunique_toy", "minimax_toy", "coreset_toy", "regularization_selection",
                "hyper_cleaning", "simulated", "coreset_selection", "constrained_quadratic")
#: Of those, the finite sums: a run with a `batch_size` draws its minibatches there.
FINITE_SUMS = ("regularization_selection", "hyper_cleaning", "simulated", "coreset_selection")
#: Of those, the ones whose pure form has SABA's per-sample oracles (besides the quadratic with n_samples).
SABA_PROBLEMS = ("regularization_selection", "simulated", "hyper_cleaning")
#: The streams a run that draws takes on the JAX backend (part of its identity: `Point.streams`).
JAX_STREAMS = "jax"


def check(study: Study, errors: Errors) -> None:
    """Every reason `study` cannot run on its backend, one line each (nothing for `numpy`)."""
    if study.backend != "jax":
        return
    if importlib.util.find_spec("jax") is None:
        errors.add("backend", "'jax' needs JAX, which is not installed: pip install 'bilevel-sweep[jax]', or use "
                              "backend 'numpy'")
    if study.batched == "off":
        errors.add("backend", "'jax' steps batches of runs, and this study sets batched: off")
    elif reason := timed_by(study):
        errors.add("backend", f"'jax' steps batches of runs, and this study times its runs one by one ({reason})")
    index = {a["label"]: i for i, a in enumerate(study.algorithms)}
    allowed = jax_algorithms()
    seen: set[str] = set()
    for point in study.points:
        where = f"algorithms[{index.get(point.label, 0)}]"
        key = json.dumps([point.algorithm, point.algorithm_params, point.problem, point.problem_params,
                          point.budget, point.divergence], sort_keys=True, default=repr)
        if key not in seen:
            seen.add(key)
            for path, message in _refusals(point, where, allowed):
                errors.add(path, message)


def _refusals(point: Point, where: str, allowed: list[str]) -> list[tuple[str, str]]:
    """(field, why) for each thing of one configuration the JAX engine does not run (`allowed`: its algorithms)."""
    out = []
    if point.algorithm not in allowed:
        out.append((f"{where}.name", f"backend 'jax' runs the algorithms with an explicit definition "
                                     f"({', '.join(allowed)}); '{point.algorithm}' is not one"))
    else:
        try:
            explicit.definition(point.algorithm).configs([point.algorithm_params])
        except ParameterError as exc:
            why = str(exc).removeprefix("configs[0]").lstrip(".: ")
            out.append((f"{where}.params", f"backend 'jax': {why}"))
    if point.problem not in JAX_PROBLEMS:
        out.append(("backend", f"'jax' runs the problems {', '.join(JAX_PROBLEMS)}; problem '{point.problem}' is not"))
    elif point.algorithm == "saba" and not (_finite_sum_quadratic(point) or point.problem in SABA_PROBLEMS):
        out.append((f"{where}.name", f"backend 'jax' runs SABA (its per-sample memory) on the 'quadratic' with "
                                     f"n_samples, {', '.join(SABA_PROBLEMS)}; problem '{point.problem}' is not, or "
                                     "use backend 'numpy'"))
    elif point.problem == "constrained_quadratic" and point.algorithm_params.get("batch_size") is not None \
            and point.problem_params.get("noise", 0.0) > 0:
        out.append((f"{where}.params", "backend 'jax' runs constrained_quadratic full batch (its minibatches are noise "
                                       "draws of the NumPy engine's); give no batch_size, noise 0, or use backend "
                                       "'numpy'"))
    if {k for k, v in point.budget.items() if v is not None} != {"iterations"}:
        out.append(("budget", f"backend 'jax' runs iteration budgets only, got {_plain(point.budget)}"))
    return out


def jax_algorithms() -> list[str]:
    """The algorithms a JAX study runs: those defined explicitly."""
    return explicit.defined()


def mark_streams(points: list[Point]) -> list[Point]:
    """The points whose runs draw on the JAX backend (`draws_own`) with `streams: jax`, each distinct configuration
    judged once (a study of 10⁵ points shares a few)."""
    judged: dict[str, bool] = {}

    def marked(point: Point) -> Point:
        key = encoded_list([point.algorithm, point.algorithm_params, point.problem, point.problem_params])
        if key not in judged:
            judged[key] = draws_own(point)
        return dataclasses.replace(point, streams=JAX_STREAMS) if judged[key] else point

    return [marked(p) for p in points]


def draws_own(point: Point) -> bool:
    """Whether the runs of `point` draw random numbers on the JAX backend (from JAX's own streams, so other samples
    than the NumPy engine's): minibatches of a finite sum, SABA's, TTSA's sampled HIA lengths."""
    if point.algorithm not in explicit.defined():
        return False
    defn = explicit.definition(point.algorithm)
    try:
        config = defn.configs([point.algorithm_params])[0]
    except ParameterError:
        return False
    finite_sum = point.problem in FINITE_SUMS or _finite_sum_quadratic(point)
    return defn.draws_for(config) and (finite_sum or getattr(config, "hia_mode", None) == "sampled")


def _finite_sum_quadratic(point: Point) -> bool:
    """Whether the point's problem is the quadratic as a finite sum (n_samples: the stochastic quadratic)."""
    return point.problem == "quadratic" and point.problem_params.get("n_samples") is not None


def _plain(budget: dict[str, Any]) -> str:
    return ", ".join(f"{k}: {v}" for k, v in budget.items() if v is not None) or "none"
