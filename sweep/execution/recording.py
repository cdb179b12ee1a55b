"""Driver-side recording of a study's Tune results: every record to disk, each run's summary when it ends,
a retried trial's finished runs to the registry it asks, run durations to the queue that sizes trials, and where a
running run was last checkpointed. Every event costs O(what it carries), never O(runs in the study).
"""
from __future__ import annotations

import contextlib
from typing import Any

from ray.tune import Callback

from sweep.execution.dispatch import RunQueue
from sweep.execution.progress import trial_error
from sweep.execution.trainable import META, chunks
from sweep.execution.trial_runs import SHARD, final_record, record_idents, with_records
from sweep.results.store import DONE_STATUSES, ResultStore
from sweep.study.model import Point, TrialConfig


def config_of(trial: Any) -> Any:
    """The `TrialConfig` of a study trial of Tune."""
    return trial.config["trial"]


def checkpoint_uri(checkpoint: Any) -> str:
    """A Tune checkpoint as a path or URI another process can open (`ray.tune.Checkpoint(uri)`)."""
    fs = getattr(checkpoint, "filesystem", None)
    kind = getattr(fs, "type_name", "local") if fs is not None else "local"
    return checkpoint.path if kind == "local" else f"{kind}://{checkpoint.path}"


class StoreCallback(Callback):
    """Writes every record to the on-disk store and each run's summary when it ends."""

    def __init__(self, store: ResultStore, index: dict[str, tuple[Point, int]], registry: DoneRegistry | None = None,
                 queue: RunQueue | None = None) -> None:
        self.store = store
        self.index = index
        self.registry = registry
        self.queue = queue
        self._current: dict[str, list[str]] = {}  # trial id -> the runs its next checkpoint holds
        self.failed: dict[str, list[str]] = {}  # trial id -> the runs its failure failed

    def __getstate__(self) -> dict[str, Any]:
        return {}  # Tune pickles its run config; this callback lives only in the driver

    def on_trial_result(self, iteration: int, trials: list, trial: Any, result: dict[str, Any], **info: Any) -> None:
        meta = result.get(META)
        if meta is None:
            return
        where = {"node": meta.get("node", ""), "host": meta.get("host", "")}
        if any(self.store.status(c["run_key"]) in DONE_STATUSES for c in meta["runs"]):
            # A trial that could not ask the registry (its node lost) ran again runs that had ended: their
            # records go nowhere, here nor in MLflow (this callback runs first; Tune lets it change the result).
            meta["runs"] = type(meta["runs"])(c for c in with_records(result)
                                               if self.store.status(c["run_key"]) not in DONE_STATUSES)
            meta[SHARD] = None
        table = meta.pop(SHARD, None)  # the report as the trial encoded it (kept only while it is written)
        done = [c for c in chunks(result) if c["done"]]
        ended = [(c["run_key"], self._summary(c["run_key"], c, meta["trial_key"], where)) for c in done]
        if self.queue is not None:  # a batched run's share of the batch's wall time sizes the next trials
            self.queue.observe_many([(self.index[c["run_key"]][0], c.get("seconds", c["span"][1] - c["span"][0]))
                                     for c in done if c.get("span")])
        # The report as one shard (records and summaries), committed by one index line, then ended.txt in one write.
        self.store.write_shard([(c["run_key"], c.get("records"), c.get("lines"), record_idents(c))
                                for c in chunks(result)], ended, table if isinstance(table, bytes) else None)
        if trial is not None:  # a checkpoint comes with the report naming the runs it holds (a batch: several)
            self._current[trial.trial_id] = meta.get("checkpointed") or [c["run_key"] for c in chunks(result)[-1:]]

    def on_trial_recover(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        """A trial that failed starts again: before it does, the registry it asks holds its runs that ended (Tune
        calls this before the trial's restart is scheduled)."""
        if self.registry is not None:
            self.registry.add([r.run_key for r in config_of(trial).runs
                               if self.store.status(r.run_key) in DONE_STATUSES])

    def _summary(self, key: str, chunk: dict[str, Any], trial_key: str, where: dict[str, str]) -> dict[str, Any]:
        """The summary of a run that ended with this chunk."""
        point, seed = self.index[key]
        final = final_record(chunk)
        return {"run_key": key, "trial_key": trial_key, "seed": seed, "status": final["status"], "final": final,
                "where": where, "span": chunk.get("span"), "point": point}  # made plain data only if stored whole

    def on_checkpoint(self, iteration: int, trials: list, trial: Any, checkpoint: Any, **info: Any) -> None:
        for key in self._current.get(trial.trial_id, ()):  # the checkpoint came with these runs' latest report
            self.store.note_checkpoint(key, checkpoint_uri(checkpoint))

    def on_trial_complete(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        self._current.pop(trial.trial_id, None)
        if self.queue is not None:
            self.queue.trial_ended()

    def on_trial_error(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        """The trial failed for good (its retries spent): the run that raised failed, the runs after it never
        started and go back to the queue; a trial's runs run in order, so the first unfinished one raised."""
        self._current.pop(trial.trial_id, None)
        cfg = config_of(trial)
        left = [r for r in cfg.runs if self.store.status(r.run_key) not in DONE_STATUSES]
        failing = left[:1] if self.queue is not None else left  # without a queue the others fail with it
        error = trial_error(trial)
        for run in failing:
            point, _ = self.index[run.run_key]
            self.store.finish(run.run_key, {"run_key": run.run_key, "trial_key": cfg.key, "seed": run.seed,
                                            "status": "failed", "final": None, "error": error, "where": {},
                                            "point": point.to_dict()})
        self.failed[trial.trial_id] = [r.run_key for r in failing]
        if self.queue is not None:
            self.queue.requeue([self.index[r.run_key] for r in left[1:]])
            self.queue.trial_ended()


class Slim(Callback):
    """The last callback: Tune keeps every trial's last result for the whole session, so once the records it
    carries are on disk and queued for MLflow, it keeps only how many runs it reported and ended (a trial's report
    may carry the records of thousands of runs; Tune lets callbacks change a result in place).

    A report with a checkpoint comes twice: Tune asks the trial for the checkpoint with another call, whose answer
    is the same report deserialized again, and keeps it (up to `num_to_keep` per trial, for the whole session)
    with every record of every run it carried: it is slimmed once Tune has registered the checkpoint. A trial that
    completed keeps its config without its runs (`TrialConfig.drop_runs`).
    """

    def __getstate__(self) -> dict[str, Any]:
        return {}

    def on_trial_result(self, iteration: int, trials: list, trial: Any, result: dict[str, Any], **info: Any) -> None:
        slim(result)

    def on_trial_complete(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        config = trial.config.get("trial")
        if isinstance(config, TrialConfig):
            config.drop_runs()  # its runs are in the store; Tune keeps the config for the whole session
            trial.invalidate_json_state()  # the state Tune saves of the trial: its config without them

    def on_trial_save(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        saved = getattr(trial, "latest_checkpoint_result", None)  # the report that came with the checkpoint
        if isinstance(getattr(saved, "metrics", None), dict):
            slim(saved.metrics)


def slim(result: dict[str, Any]) -> None:
    """A result's runs as how many it reported and ended (in place: Tune keeps other references to this dict).
    Their keys are in the trial's config; as a list of 10⁴ run keys in each trial's last result, Tune encoded them
    into its experiment state at every save (~0.7 s of the driver's CPU at 10⁵ runs)."""
    meta = result.get(META)
    if meta is None:
        return
    meta.pop(SHARD, None)
    runs = meta.get("runs")
    if isinstance(runs, list):
        meta["runs"] = {"reported": len(runs), "ended": sum(bool(c["done"]) for c in runs)}


def on_driver_node() -> dict[str, Any]:
    """Actor options pinning an actor to the driver's node (not softly): a platform actor on a worker would die
    with that worker (a reclaimed spot node), failing every trial that asks it afterwards."""
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    here = ray.get_runtime_context().get_node_id()
    return {"scheduling_strategy": NodeAffinitySchedulingStrategy(node_id=here, soft=False)}


class DoneRegistry:
    """The session's registry of finished runs that a retried trial asks (so that it skips them): a named actor
    (no CPU, on the driver's node) started at the first retry, not before. A trial's first start has nothing to
    skip (runs done before this session are never handed to a trial), and an actor is a process of its own
    (~1.2 CPU-s to start on 2 cores) that nearly every study would start for nothing."""

    #: How long the driver waits for the registry to take a retried trial's finished runs (seconds).
    SECONDS = 60.0

    def __init__(self, name: str) -> None:
        self.name = name
        self.actor: Any = None

    def add(self, keys: list[str]) -> None:
        """Hold `keys` before this returns (a trial that asks next sees them). A registry that cannot start or
        answer is none: the trial runs those runs again and the store keeps one copy of each."""
        import ray
        from ray.exceptions import RayError

        if not keys:
            return
        try:
            if self.actor is None:
                self.actor = _registry_actor(self.name)
            ray.get(self.actor.add_all.remote(keys), timeout=self.SECONDS)
        except RayError:  # RayActorError, GetTimeoutError
            pass

    def end(self) -> None:
        """Stop the actor, if it started (a lost node may have taken it already)."""
        import ray

        if self.actor is not None:
            with contextlib.suppress(Exception):
                ray.kill(self.actor)


def _registry_actor(name: str) -> Any:
    """The named actor a starting trial finds by `name` (sweep.execution.trainable asks it)."""
    import ray

    @ray.remote(num_cpus=0)
    class Registry:
        def __init__(self) -> None:
            self.keys: set[str] = set()

        def add_all(self, keys: list[str]) -> None:
            self.keys.update(keys)

        def done_among(self, keys: list[str]) -> list[str]:
            return [k for k in keys if k in self.keys]

    return Registry.options(name=name, **on_driver_node()).remote()
