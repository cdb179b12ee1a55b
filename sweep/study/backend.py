"""The study field `backend`: what steps a study's batches of runs, and what a study on the JAX backend may hold.

`numpy` (the default): the stacked NumPy engine (`algorithms.run_batched`), for every batchable algorithm and
problem. `jax`: each batch is one compiled JAX program (`algorithms.explicit`'s JAX engine: `vmap` over the
batch's runs, `jit`, float64, on the device `JAX_PLATFORMS` chooses). What that engine runs today is checked
before any work: algorithms with an explicit definition on the deterministic quadratic, the closed-form toys
(nonunique_toy, minimax_toy, coreset_toy), regularization_selection, hyper_cleaning or simulated (full batch; the last
four's ground truth evaluated on the host), iteration budgets, batched runs (any divergence rule). A batch runs whole
(no checkpoint midway: a killed trial runs its batch again), its records' seconds are its program's shared out by
steps (`time_mode: compiled`), and on these deterministic problems its iterates are those of the NumPy engine to
1e-10 (but AID-CG's on nonunique_toy: its lower-level Hessian is singular, and CG there follows rounding).
"""
from __future__ import annotations

import importlib.util
import json
from typing import Any

from algorithms import explicit
from problems.shared.errors import ParameterError
from sweep.study.errors import Errors
from sweep.study.model import Point, Study
from sweep.study.timing import timed_by

#: The problems the JAX engine runs (problems/pure.py: the deterministic quadratic's form and the closed-form toys';
#: problems/pure_data.py: the coreset toy's, the real-data problems' and the simulated quadratic's, full batch).
JAX_PROBLEMS = ("quadratic", "nonunique_toy", "minimax_toy", "coreset_toy", "regularization_selection",
                "hyper_cleaning", "simulated")
#: Of those, the finite sums whose minibatches the JAX engine would draw from its own streams (refused: a study's
#: runs would then depend on its backend).
FINITE_SUMS = ("regularization_selection", "hyper_cleaning", "simulated")


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
        out.append((f"{where}.name", f"backend 'jax' runs the algorithms with an explicit definition that draw "
                                     f"nothing ({', '.join(allowed)}); '{point.algorithm}' is not one"))
    else:
        try:
            config = explicit.definition(point.algorithm).configs([point.algorithm_params])[0]
        except ParameterError as exc:
            why = str(exc).removeprefix("configs[0]").lstrip(".: ")
            out.append((f"{where}.params", f"backend 'jax': {why}"))
        else:
            if getattr(config, "hia_mode", None) == "sampled":  # a draw of each run's own, on any problem
                out.append((f"{where}.params", "backend 'jax' runs hia_mode 'expected' only (a sampled HIA length "
                                               "would come from JAX's own streams); set hia_mode: expected or use "
                                               "backend 'numpy'"))
    if point.problem not in JAX_PROBLEMS or _finite_sum_quadratic(point):
        out.append(("backend", f"'jax' runs the deterministic {', '.join(JAX_PROBLEMS)} (no n_samples); "
                               f"{_named(point)} is not"))
    elif point.problem in FINITE_SUMS and point.algorithm_params.get("batch_size") is not None:
        out.append((f"{where}.params", f"backend 'jax' runs {_named(point)} full batch only (its minibatches would "
                                       "come from JAX's own streams); remove batch_size or use backend 'numpy'"))
    if {k for k, v in point.budget.items() if v is not None} != {"iterations"}:
        out.append(("budget", f"backend 'jax' runs iteration budgets only, got {_plain(point.budget)}"))
    return out


def jax_algorithms() -> list[str]:
    """The algorithms a JAX study runs: those defined explicitly that draw nothing on its deterministic problems
    (one that always draws, SABA, would draw other samples than on the NumPy engine, from JAX's own streams;
    SOBA draws only minibatches of a finite sum)."""
    return sorted(n for n in explicit.defined() if explicit.definition(n).draws is not True)


def _finite_sum_quadratic(point: Point) -> bool:
    """Whether the point's problem is the quadratic as a finite sum (n_samples: the stochastic quadratic)."""
    return point.problem == "quadratic" and point.problem_params.get("n_samples") is not None


def _named(point: Point) -> str:
    """'the problem' as a refusal names it."""
    samples = point.problem_params.get("n_samples") if _finite_sum_quadratic(point) else None
    return f"problem '{point.problem}'" + (f" with n_samples {samples}" if samples is not None else "")


def _plain(budget: dict[str, Any]) -> str:
    return ", ".join(f"{k}: {v}" for k, v in budget.items() if v is not None) or "none"
