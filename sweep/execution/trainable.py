"""Ray Tune trainables wrapping the run loop.

A trial runs several runs (configurations and seeds) one after another. Its reports to Tune carry the
latest metric record as flat keys (so `TuneConfig(metric="grad_F_sq")` works) and, under `bisweep`, every
record since the last report, grouped by run (`chunks`): records closer together than `report_seconds`
travel in one report, across runs too, which keeps Tune's per-result cost off tiny runs. A report carries
a checkpoint (the runs done and the running run's state) when `checkpoint_seconds` have passed since the
last one, so a retried trial continues where it stopped; a run an earlier driver left midway continues
from the checkpoint named in the config's `resume`; a divergence ends that run with status `diverged`
and the trial goes on. On Ray, BLAS gets as many threads as the trial has CPUs (one for a 1-CPU trial).

    from ray import tune
    from sweep import trainable_for
    tuner = tune.Tuner(trainable_for("soba", "quadratic", budget={"iterations": 200}),
                       param_space={"alpha": tune.grid_search([0.01, 0.1]), "seed": 0})
"""
from __future__ import annotations

import contextlib
import itertools
import dataclasses
import logging
import math
import os
import socket
import tempfile
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any


import algorithms
import problems
from algorithms.checkpoint import load_state, save_state
from algorithms.run import Budget, Run
from algorithms.threads import blas_threads
from problems.registry import entry as problem_entry
from problems.validation import ParameterError
from sweep.study.model import Point, RunSpec, Trial, TrialConfig
from sweep.study.sources import import_plugins

#: Key of the run metadata in every reported result.
META = "bisweep"

Report = Callable[[dict[str, Any], "dict[str, Any] | None"], None]
#: skip(run_keys) -> the run keys among them already finished elsewhere (a resumed study, a retried trial).
Skip = Callable[[Sequence[str]], Collection[str]]
#: resume(run_key) -> the state of that run an earlier driver checkpointed midway, or None.
Resume = Callable[[str], "dict[str, Any] | None"]


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


def make_run(spec: RunSpec) -> Run:
    """The `Run` of one run spec (the problem is rebuilt from its name, params and seed)."""
    inst_seed = spec.instance_seed
    problem = problems.make(spec.problem, seed=spec.seed if inst_seed is None else inst_seed, **spec.problem_params)
    return Run(spec.algorithm, problem, spec.algorithm_params, seed=spec.seed, budget=spec.budget,
               n_evals=spec.n_evals, divergence=spec.divergence)


def chunks(result: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The per-run chunks of a reported result: run_key, seed, index, records (oldest first), done, span."""
    return result[META]["runs"]


class _Reporter:
    """Gathers records by run and sends them in one report when due (or with a checkpoint, or at the end)."""

    def __init__(self, config: TrialConfig, report: Report) -> None:
        self.config, self.report = config, report
        self.where = node_identity()
        self.pending: dict[str, dict[str, Any]] = {}
        self.last: dict[str, Any] | None = None
        self.last_report = time.monotonic()

    def add(self, index: int, spec: RunSpec, record: dict[str, Any], span: list[float] | None = None) -> None:
        chunk = self.pending.get(spec.run_key)
        if chunk is None:
            chunk = self.pending[spec.run_key] = {"run_key": spec.run_key, "seed": spec.seed, "index": index,
                                                  "records": [], "done": False}
        chunk["records"].append(record)
        if span is not None:
            chunk.update(done=True, span=span)
        self.last = record

    def due(self, now: float) -> bool:
        return now - self.last_report >= self.config.report_seconds

    def send(self, checkpoint: dict[str, Any] | None = None) -> None:
        if not self.pending:
            return
        meta = {"trial_key": self.config.key, "runs": list(self.pending.values()), **self.where}
        self.pending = {}
        self.last_report = time.monotonic()
        self.report({**self.last, META: meta}, checkpoint)


def execute_trial(config: TrialConfig | Mapping[str, Any], report: Report, state: dict[str, Any] | None = None,
                  skip: Skip | None = None, resume: Resume | None = None) -> None:
    """Run every run of a trial not done yet, calling `report(result, checkpoint_state_or_None)`.

    `state` is the trial's last checkpointed state (None for a fresh trial); `skip` names the runs already
    finished elsewhere, which must not run again; `resume` gives the midway state of a run an earlier
    driver left (see the module docstring for what a report carries).
    """
    if not isinstance(config, TrialConfig):
        config = TrialConfig.from_dict(config)
    import_plugins(config.imports)
    state = dict(state or {"done": [], "current": None})
    finished = set(skip(config.run_keys)) if skip is not None else set()
    out = _Reporter(config, report)
    clock = {"last_save": time.monotonic()}
    runs = list(enumerate(config.runs))
    try:
        # The limit is set once per stretch of runs sharing it (a study sets one value for all its runs):
        # threadpoolctl takes ~0.3 ms each time, as much as a tiny run's whole overhead.
        for threads, stretch in itertools.groupby(runs, key=lambda ir: ir[1].blas_threads):
            with _study_blas_limit(threads):
                for index, spec in stretch:
                    if spec.run_key in state["done"]:
                        continue
                    if spec.run_key in finished:
                        state = {**state, "done": [*state["done"], spec.run_key]}
                        continue
                    state = _run_one(config, index, spec, state, out, clock, resume)
    finally:
        out.send()  # what was measured, also before a failure, reaches the driver


def _study_blas_limit(threads: int | None) -> contextlib.AbstractContextManager[Any]:
    """The study's own BLAS-thread setting for a run (timing studies set 1, so that trials running side by
    side do not compete for cores through multithreaded linear algebra); without it, the trial's limit."""
    return contextlib.nullcontext() if threads is None else blas_threads(threads)


def _run_one(config: TrialConfig, index: int, spec: RunSpec, state: dict[str, Any], out: _Reporter,
             clock: dict[str, float], resume: Resume | None) -> dict[str, Any]:
    """Step one run to its end, reporting (batched) and checkpointing; the trial state after it."""
    run = make_run(spec)
    current = state.get("current")
    if current is not None and current["run_key"] == spec.run_key:
        run.load_state_dict(current["run"])
    elif resume is not None and (earlier := resume(spec.run_key)) is not None:
        run.load_state_dict(earlier)
    started = time.time()
    every = float(config.checkpoint_seconds)
    while not run.done:
        record = run.advance()
        if record is None:
            break
        now = time.monotonic()
        out.add(index, spec, record, [started, time.time()] if run.done else None)
        checkpoint = None
        if run.done:
            state = {"done": [*state["done"], spec.run_key], "current": None}
        if now - clock["last_save"] >= every:
            if not run.done:
                state = {"done": state["done"], "current": {"run_key": spec.run_key, "run": run.state_dict()}}
            checkpoint, clock["last_save"] = state, now
        if checkpoint is not None or out.due(now):
            out.send(checkpoint)
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


def _registry_skip(name: str | None) -> Skip | None:
    """Ask the study's registry of finished runs (a named actor the runner starts), if there is one."""
    if not name:
        return None
    import ray

    try:
        actor = ray.get_actor(name)
    except ValueError:
        return None
    return lambda run_keys: set(ray.get(actor.done_among.remote(list(run_keys))))


def _earlier_checkpoints(paths: Mapping[str, str]) -> Resume | None:
    """The midway states of runs an earlier driver left, read from the checkpoints it recorded."""
    if not paths:
        return None
    from ray.tune import Checkpoint

    def state_of(run_key: str) -> dict[str, Any] | None:
        if run_key not in paths:
            return None
        try:
            with Checkpoint(paths[run_key]).as_directory() as d:
                current = load_state(d).get("current")
        except (OSError, ValueError):
            return None  # gone (cleaned up or never synced): the run starts again from its beginning
        return current["run"] if current is not None and current["run_key"] == run_key else None

    return state_of


def trial_cpus() -> int | None:
    """The CPUs Ray assigned this trial (at least 1): its BLAS threads, so that trials never oversubscribe
    cores (Ray's OMP_NUM_THREADS default is not enough: a variable set by the user wins over it); None (no
    limit) outside a Ray worker."""
    import ray

    if not ray.is_initialized():
        return None
    cpus = ray.get_runtime_context().get_assigned_resources().get("CPU")
    return None if cpus is None else max(1, math.floor(cpus))


def run_trial(config: TrialConfig | Mapping[str, Any]) -> None:
    """Ray Tune function trainable of one study trial (a `TrialConfig`, or its `to_dict`)."""
    if not isinstance(config, TrialConfig):
        config = TrialConfig.from_dict(config)
    cpus = trial_cpus()
    with blas_threads(cpus) if cpus else contextlib.nullcontext():
        execute_trial(config, _tune_report, _tune_state(), _registry_skip(config.done_registry),
                      _earlier_checkpoints(config.resume))


def study_trainable(config: dict[str, Any]) -> None:
    """The Tune trainable of every study trial (its config holds the `TrialConfig` under "trial"); it lives
    here so that a worker unpickling it imports only the run loop, not the driver's modules."""
    run_trial(config["trial"])


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
    record (F, grad_F_sq, y_err_sq, calls/<oracle>, ...) is reported, so `TuneConfig(metric="grad_F_sq",
    mode="min")` works. With `quiet` (the default) Ray's console is kept to warnings: a local Ray is
    started here (unless one runs already) without forwarding worker logs; Tune's own progress table is
    the Tuner's `RunConfig(verbose=0)`.
    """
    import_plugins(imports)
    cls = algorithms.get(algorithm)
    pe = problem_entry(problem)
    if cls.online != pe.online:
        raise ParameterError(f"algorithm '{algorithm}' and problem '{problem}' do not match (online vs offline)")
    base_problem = pe.params.from_dict(problem_params or {}).recorded()
    base_budget = Budget.from_dict(budget or {"iterations": 100}).as_dict()
    fields = [f.name for f in dataclasses.fields(cls.Config)]

    def trainable(config: dict[str, Any]) -> None:
        import_plugins(imports)  # in a Ray worker the registry starts without them
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
