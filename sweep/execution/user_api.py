"""Ray Tune trainables for a user's own Tuner (`trainable_for`), and keeping Ray's console quiet.

    from ray import tune
    from sweep import trainable_for
    tuner = tune.Tuner(trainable_for("soba", "quadratic", budget={"iterations": 200}),
                       param_space={"alpha": tune.grid_search([0.01, 0.1]), "seed": 0})
"""
from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import algorithms
from algorithms.run import Budget
from problems.registry import entry as problem_entry
from problems.shared.errors import ParameterError
from problems.shared.registries import import_modules
from sweep.execution.trainable import run_trial
from sweep.study.model import Point, Trial

_RESERVED = ("seed", "seeds", "problem_params")


#: Loggers of the driver kept to warnings (or errors) in a quiet session, and why each says too much.
_QUIET_LOGGERS = {
    "ray": logging.WARNING,  # "Started a local Ray instance", "Initializing Ray automatically"
    "ray.tune": logging.WARNING,  # "Wrote the latest version of all result files ..."
    "ray.train": logging.WARNING,  # "Checkpoint successfully created at ..."
    "ray._private.authentication.authentication_token_setup": logging.ERROR,  # the token banner of every start
    "ray.tune.logger.tensorboardx": logging.ERROR,  # the run metadata dict is no TensorBoard scalar
}


def quiet_ray() -> bool:
    """Keep Ray's console to warnings: driver loggers, and a local Ray started without forwarding worker logs
    (whose checkpoint lines and shutdown tracebacks are noise); False when Ray was already running."""
    import ray

    for name, level in _QUIET_LOGGERS.items():
        logging.getLogger(name).setLevel(level)
    if ray.is_initialized():
        return False
    ray.init(log_to_driver=False, logging_level=logging.WARNING, include_dashboard=False)
    return True


def trainable_for(algorithm: str, problem: str = "quadratic", *, problem_params: Mapping[str, Any] | None = None,
                  budget: Mapping[str, Any] | None = None, n_evals: int = 20, instance_seed: int | None = None,
                  checkpoint_seconds: float = 10.0, imports: Sequence[str] = (),
                  quiet: bool = True) -> Callable[[dict[str, Any]], None]:
    """A Tune function trainable running `algorithm` on `problem`.

    The Tune config sets the algorithm's hyperparameters by name (top-level keys), `seed` (or a list
    `seeds`, run one after another) and `problem_params` (merged over `problem_params`). Every metric
    record (F, grad_F_sq, y_err_sq, calls/<oracle>, ...) is reported, so `TuneConfig(metric="grad_F_sq",
    mode="min")` works. With `quiet` (the default) Ray's console is kept to warnings: a local Ray is
    started here (unless one runs already) without forwarding worker logs; Tune's own progress table is
    the Tuner's `RunConfig(verbose=0)`.
    """
    import_modules(imports)
    cls = algorithms.get(algorithm)
    pe = problem_entry(problem)
    if cls.online != pe.online:
        raise ParameterError(f"algorithm '{algorithm}' and problem '{problem}' do not match (online vs offline)")
    base_problem = pe.params.from_dict(problem_params or {}).recorded()
    base_budget = Budget.from_dict(budget or {"iterations": 100}).as_dict()
    fields = [f.name for f in dataclasses.fields(cls.Config)]

    def trainable(config: dict[str, Any]) -> None:
        import_modules(imports)  # in a Ray worker the registry starts without them
        unknown = sorted(set(config) - set(fields) - set(_RESERVED))
        if unknown:
            raise ParameterError(f"trainable_for('{algorithm}'): unknown config key '{unknown[0]}'; "
                                 f"allowed: {', '.join(fields + list(_RESERVED))}")
        seeds = config.get("seeds", [config.get("seed", 0)])
        alg_params = algorithms.make_config(algorithm, {k: v for k, v in config.items() if k in fields}).recorded()
        prob_params = pe.params.from_dict({**base_problem, **(config.get("problem_params") or {})}).recorded()
        point = Point(algorithm, algorithm, alg_params, problem, prob_params, instance_seed, base_budget, n_evals, {})
        trial = Trial(point, tuple(int(s) for s in seeds))
        run_trial(trial.config(checkpoint_seconds, list(imports)))

    trainable.__name__ = f"{algorithm}_on_{problem}"
    trainable.__qualname__ = trainable.__name__
    if quiet:
        quiet_ray()
    return trainable
