"""Ray Tune trainables wrapping the run loop.

A trial runs one configuration for one or more seeds, one after another, reporting every metric record
of `algorithms.Run` to Tune (flat metric keys, plus a `bisweep` entry with the seed, run key and node).
It checkpoints the finished seeds and the running `Run` state, so a retried or resumed trial continues
where it stopped; a divergence ends that seed with status `diverged` and the trial goes on.

    from ray import tune
    from sweep import trainable_for
    tuner = tune.Tuner(trainable_for("soba", "quadratic", budget={"iterations": 200}),
                       param_space={"alpha": tune.grid_search([0.01, 0.1]), "seed": 0})
"""
from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import socket
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any


import algorithms
import problems
from algorithms.checkpoint import load_state, save_state
from algorithms.run import Budget, Run
from algorithms.threads import blas_threads
from problems.registry import entry as problem_entry
from problems.validation import ParameterError
from sweep.model import Point, Trial, TrialConfig
from sweep.sources import import_plugins

#: Key of the run metadata in every reported result.
META = "bisweep"

Report = Callable[[dict[str, Any], "dict[str, Any] | None"], None]


def node_identity() -> dict[str, str]:
    """Where this process runs: the Ray node IP (when inside Ray) and the host name."""
    ip = ""
    try:
        import ray

        if ray.is_initialized():
            ip = ray.util.get_node_ip_address()
    except Exception:  # noqa: BLE001  outside Ray the IP is simply unknown
        ip = ""
    return {"node": ip, "host": socket.gethostname(), "pid": str(os.getpid())}


def make_run(config: TrialConfig, seed: int) -> Run:
    """The `Run` of one seed of a trial (the problem is rebuilt from its name, params, seed)."""
    inst_seed = config.instance_seed
    problem = problems.make(config.problem, seed=seed if inst_seed is None else inst_seed, **config.problem_params)
    return Run(config.algorithm, problem, config.algorithm_params, seed=seed, budget=config.budget,
               n_evals=config.n_evals, divergence=config.divergence)


def execute_trial(config: TrialConfig | Mapping[str, Any], report: Report, state: dict[str, Any] | None = None,
                  skip: Callable[[str], bool] | None = None) -> None:
    """Run every seed of a trial not done yet, calling `report(result, checkpoint_state_or_None)`.

    `state` is the last checkpointed state (None for a fresh trial); `skip(run_key)` says whether a run
    is already finished elsewhere (a resumed study) and must not run again. With `report_seconds` in the
    config, records closer together than that travel in one report (in `bisweep.earlier`), which keeps
    Tune's per-result cost off tiny runs.
    """
    if not isinstance(config, TrialConfig):
        config = TrialConfig.from_dict(config)
    import_plugins(config.imports)
    state = dict(state or {"done": [], "current": None})
    where = node_identity()
    with blas_limit(config.blas_threads):
        for index, (seed, run_key) in enumerate(zip(config.seeds, config.run_keys)):
            if run_key in state["done"]:
                continue
            if skip is not None and skip(run_key):
                state["done"] = [*state["done"], run_key]
                continue
            state = _run_seed(config, index, seed, run_key, state, report, where)


def blas_limit(threads: int | None) -> contextlib.AbstractContextManager[Any]:
    """At most `threads` BLAS threads inside the block (threadpoolctl); no limit for None.

    Timing studies set it to 1 so that trials running side by side do not compete for cores through
    multithreaded linear algebra, which would make one trial's seconds depend on its neighbours.
    """
    return contextlib.nullcontext() if threads is None else blas_threads(threads)


def _run_seed(config: TrialConfig, index: int, seed: int, run_key: str, state: dict[str, Any],
              report: Report, where: dict[str, str]) -> dict[str, Any]:
    """Step one seed's run to its end, reporting (batched) and checkpointing; the trial state after it."""
    run = make_run(config, seed)
    current = state.get("current")
    if current is not None and current["run_key"] == run_key:
        run.load_state_dict(current["run"])
    every = float(config.checkpoint_seconds)
    report_every = float(config.report_seconds)
    last_save = last_report = time.monotonic()
    earlier: list[dict[str, Any]] = []

    def send(record: dict[str, Any], before: list[dict[str, Any]], checkpoint: dict[str, Any] | None) -> None:
        meta = {"trial_key": config.key, "run_key": run_key, "seed": seed, "seed_index": index,
                "n_seeds": len(config.seeds), "run_done": run.done, "keys": list(record), "earlier": before,
                **where}
        report({**record, META: meta}, checkpoint)

    while not run.done:
        try:
            record = run.advance()
        except Exception:
            if earlier:  # what was measured before the failure still reaches the driver
                send(earlier[-1], earlier[:-1], None)
            raise
        if record is None:
            break
        now = time.monotonic()
        checkpoint = None
        if run.done:
            state = {"done": [*state["done"], run_key], "current": None}
            checkpoint = state
        elif now - last_save >= every:
            state = {"done": state["done"], "current": {"run_key": run_key, "run": run.state_dict()}}
            checkpoint, last_save = state, now
        if checkpoint is None and now - last_report < report_every:
            earlier.append(record)  # travels with the next report (a checkpoint always reports)
            continue
        send(record, earlier, checkpoint)
        earlier, last_report = [], now
    return state


# ---------------------------------------------------------------- the Tune side
def _tune_report(result: dict[str, Any], state: dict[str, Any] | None) -> None:
    from ray import tune
    from ray.tune import Checkpoint

    if state is None:
        tune.report(result)
        return
    with tempfile.TemporaryDirectory() as d:
        save_state(state, d)
        tune.report(result, checkpoint=Checkpoint.from_directory(d))


def _tune_state() -> dict[str, Any] | None:
    from ray import tune

    ckpt = tune.get_checkpoint()
    if ckpt is None:
        return None
    with ckpt.as_directory() as d:
        return load_state(d)


def _registry_skip(name: str | None) -> Callable[[str], bool] | None:
    """Ask the study's registry of finished runs (a named actor the runner starts), if there is one."""
    if not name:
        return None
    import ray

    try:
        actor = ray.get_actor(name)
    except ValueError:
        return None
    return lambda run_key: bool(ray.get(actor.is_done.remote(run_key)))


def run_trial(config: TrialConfig | Mapping[str, Any]) -> None:
    """Ray Tune function trainable of one study trial (a `TrialConfig`, or its `to_dict`)."""
    if not isinstance(config, TrialConfig):
        config = TrialConfig.from_dict(config)
    execute_trial(config, _tune_report, _tune_state(), _registry_skip(config.done_registry))


# ---------------------------------------------------------------- for a user's own Tuner
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
    record (F, grad_F_sq, y_err_sq, calls/*, ...) is reported, so `TuneConfig(metric="grad_F_sq",
    mode="min")` works. With `quiet` (the default) Ray's console is kept to warnings: a local Ray is
    started here (unless one runs already) without forwarding worker logs; Tune's own progress table is
    the Tuner's `RunConfig(verbose=0)`.
    """
    import_plugins(imports)
    cls = algorithms.get(algorithm)
    pe = problem_entry(problem)
    if cls.online != pe.online:
        raise ParameterError(f"algorithm '{algorithm}' and problem '{problem}' do not match (online vs offline)")
    base_problem = pe.params.from_dict(problem_params or {}).as_dict()
    base_budget = Budget.from_dict(budget or {"iterations": 100}).as_dict()
    fields = [f.name for f in dataclasses.fields(cls.Config)]

    def trainable(config: dict[str, Any]) -> None:
        import_plugins(imports)  # in a Ray worker the registry starts without them
        unknown = sorted(set(config) - set(fields) - set(_RESERVED))
        if unknown:
            raise ParameterError(f"trainable_for('{algorithm}'): unknown config key '{unknown[0]}'; "
                                 f"allowed: {', '.join(fields + list(_RESERVED))}")
        seeds = config.get("seeds", [config.get("seed", 0)])
        alg_params = algorithms.make_config(algorithm, {k: v for k, v in config.items() if k in fields}).as_dict()
        prob_params = pe.params.from_dict({**base_problem, **(config.get("problem_params") or {})}).as_dict()
        point = Point(algorithm, algorithm, alg_params, problem, prob_params, instance_seed, base_budget, n_evals, {})
        trial = Trial(point, tuple(int(s) for s in seeds))
        run_trial(trial.config(checkpoint_seconds, list(imports)))

    trainable.__name__ = f"{algorithm}_on_{problem}"
    trainable.__qualname__ = trainable.__name__
    if quiet:
        quiet_ray()
    return trainable
