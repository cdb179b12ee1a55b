"""A trial's runs and their bookkeeping: the problem instance they share, their reports (records gathered by
run), the trial's checkpoint state (runs done, midway states) and one run stepped to its end (no Ray here).

A report carries the latest metric record as flat keys (so `TuneConfig(metric="grad_F_sq")` works) and, under
`bisweep`, every record since the last report, grouped by run (`chunks`): records closer together than
`report_seconds` travel in one report, across runs too, which keeps Tune's per-result cost off tiny runs. A
report carries a checkpoint (the runs done and the state of the runs going on) when `checkpoint_seconds` have
passed since the last one.
"""
from __future__ import annotations

import json
import os
import socket
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any

import problems
from algorithms.run import Run
from sweep.results import columns
from sweep.study.model import RunSpec, TrialConfig
from sweep.tracking.metric_points import points_text

#: Key of the run metadata in every reported result.
META = "bisweep"
#: Key, in the run metadata, of the report's records encoded as a shard of the store.
SHARD = "shard"

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


class Instances:
    """The problem instance of the runs last asked for, built once for the consecutive runs sharing it."""

    def __init__(self) -> None:
        self._key: str | None = None
        self._problem: Any = None

    def of(self, spec: RunSpec) -> Any:
        """The problem of `spec` (name, params and instance seed), reused while consecutive runs share it."""
        seed = spec.seed if spec.instance_seed is None else spec.instance_seed
        key = json.dumps([spec.problem, spec.problem_params, seed], sort_keys=True, default=repr)
        if key != self._key:
            self._problem, self._key = problems.make(spec.problem, seed=seed, **spec.problem_params), key
        return self._problem


def make_run(spec: RunSpec, instances: Instances | None = None) -> Run:
    """The `Run` of one run spec (its problem from `instances`, else built from its name, params and seed)."""
    problem = (instances or Instances()).of(spec)
    return Run(spec.algorithm, problem, spec.algorithm_params, seed=spec.seed, budget=spec.budget,
               n_evals=spec.n_evals, divergence=spec.divergence)


class Chunks(list):
    """The per-run chunks of a report, with a short repr: Tune formats every result it receives into debug text
    (`logger.debug(f"...{results}")`, whatever the log level), which for a report of hundreds of tiny runs'
    records took a fifth of the driver's Tune thread."""

    def __repr__(self) -> str:
        return f"<records of {len(self)} runs>"


def chunks(result: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The per-run chunks of a reported result: run_key, seed, index, done, span, and the run's records (oldest
    first) or, when the report's shard holds them, its final record and the (iteration, status) of each
    (`final_record`, `record_idents`; `with_records` gives them back)."""
    return result[META]["runs"]


def final_record(chunk: Mapping[str, Any]) -> dict[str, Any]:
    """The latest record of a reported chunk."""
    return chunk["final"] if "final" in chunk else chunk["records"][-1]


def record_idents(chunk: Mapping[str, Any]) -> list[tuple[int, str]]:
    """(iteration, status) of each record of a reported chunk, in order."""
    if "idents" in chunk:
        return chunk["idents"]  # plain already (`_light`)
    return [(int(r["iteration"]), str(r["status"])) for r in chunk["records"]]


def with_records(result: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The result's chunks, each with its records (those the shard holds decoded from it, once)."""
    runs = chunks(result)
    light = [c for c in runs if "records" not in c]
    if light:
        held = columns.records_by_run(result[META][SHARD])
        for chunk in light:
            chunk["records"] = held.get(chunk["run_key"], [])
    return runs


def _light(chunk: dict[str, Any]) -> dict[str, Any]:
    """A chunk whose records travel in the report's shard: its final record and idents instead (a driver decoding
    10⁵ tiny runs' records twice, as dicts and in the shard, spent ~1 s of CPU on the dicts)."""
    records = chunk.pop("records")
    chunk["final"] = records[-1]
    chunk["idents"] = [(int(r["iteration"]), str(r["status"])) for r in records]
    return chunk


def as_trial_config(config: TrialConfig | Mapping[str, Any]) -> TrialConfig:
    """The typed config (a mapping is read with `TrialConfig.from_dict`)."""
    return config if isinstance(config, TrialConfig) else TrialConfig.from_dict(config)


class Reporter:
    """Gathers records by run and sends them in one report when due (or with a checkpoint, or at the end)."""

    def __init__(self, config: TrialConfig, report: Report) -> None:
        self.config, self.report = config, report
        self.where = node_identity()
        self.pending: dict[str, dict[str, Any]] = {}
        self.last: dict[str, Any] | None = None
        self.last_report = time.monotonic()

    def add(self, index: int, spec: RunSpec, record: dict[str, Any], span: list[float] | None = None,
            seconds: float | None = None) -> None:
        """One record of a run; `span` when it is the run's last, with `seconds`, its share of a batch's wall time."""
        chunk = self.pending.get(spec.run_key)
        if chunk is None:
            chunk = self.pending[spec.run_key] = {"run_key": spec.run_key, "seed": spec.seed, "index": index,
                                                  "records": [], "done": False}
        chunk["records"].append(record)
        if span is not None:
            chunk.update(done=True, span=span)
            if seconds is not None:
                chunk["seconds"] = seconds
        self.last = record

    def due(self, now: float) -> bool:
        """Whether the records gathered are due to be sent."""
        return now - self.last_report >= self.config.report_seconds

    def send(self, checkpoint: dict[str, Any] | None = None) -> None:
        """Report what was gathered (with `checkpoint`, naming the runs whose state it holds)."""
        if not self.pending:
            return
        if self.config.mlflow_points:
            for chunk in self.pending.values():  # the MLflow points, encoded here rather than on the driver
                chunk["points"] = points_text(chunk["records"])
        table = shard(self.pending.values(), self.config.key, self.where)
        runs = Chunks(self.pending.values() if table is None else map(_light, self.pending.values()))
        meta = {"trial_key": self.config.key, "runs": runs, **self.where, SHARD: table}
        if checkpoint is not None:
            meta["checkpointed"] = checkpointed(checkpoint)
        self.pending = {}
        self.last_report = time.monotonic()
        self.report({**self.last, META: meta}, checkpoint)


def shard(chunks: Collection[Mapping[str, Any]], trial_key: str, where: Mapping[str, str]) -> bytes | None:
    """The report as the store's shard (`columns.encode`), encoded here rather than on the driver, for the summaries
    the driver makes of the runs it ends (`StoreCallback`); None when it does not fit the columns."""
    place = {"node": where.get("node", ""), "host": where.get("host", "")}
    ended = [(c["run_key"], {"run_key": c["run_key"], "trial_key": trial_key, "seed": c["seed"],
                             "status": c["records"][-1]["status"], "final": c["records"][-1], "where": place,
                             "span": c.get("span")}) for c in chunks if c["done"]]
    return columns.encode([(c["run_key"], c["records"]) for c in chunks if c["records"]], ended)


def checkpointed(state: Mapping[str, Any]) -> list[str]:
    """The runs whose midway state a trial checkpoint holds."""
    current = state.get("current")
    return [*([current["run_key"]] if current else []), *(state.get("batch") or {})]


def saved_state(state: Mapping[str, Any], run_key: str) -> dict[str, Any] | None:
    """A run's midway state in a trial checkpoint (None: not there)."""
    current = state.get("current")
    if current is not None and current["run_key"] == run_key:
        return current["run"]
    return (state.get("batch") or {}).get(run_key)


class Body:
    """A trial's progress: its state (runs done, midway states), its reporter, the checkpoint clock."""

    def __init__(self, config: TrialConfig, report: Report, state: dict[str, Any] | None, skip: Skip | None,
                 resume: Resume | None) -> None:
        self.config = config
        self.state = dict(state or {"done": [], "current": None})
        self.finished = set(skip(config.run_keys)) if skip is not None else set()
        self.out = Reporter(config, report)
        self.last_save = time.monotonic()
        self.resume = resume
        self.instances = Instances()

    def pending(self, runs: list[tuple[int, RunSpec]]) -> list[tuple[int, RunSpec]]:
        """The runs of `runs` not done yet (those finished elsewhere count as done from now on)."""
        out = []
        for index, spec in runs:
            if spec.run_key in self.state["done"]:
                continue
            if spec.run_key in self.finished:
                self.state = {**self.state, "done": [*self.state["done"], spec.run_key]}
                continue
            out.append((index, spec))
        return out

    def start_state(self, run_key: str) -> dict[str, Any] | None:
        """Where a run starts: its state in this trial's checkpoint, or the one an earlier driver left, or None."""
        state = saved_state(self.state, run_key)
        if state is None and self.resume is not None:
            state = self.resume(run_key)
        return state

    def checkpoint_due(self, now: float) -> bool:
        """Whether `checkpoint_seconds` have passed since the last checkpoint."""
        return now - self.last_save >= float(self.config.checkpoint_seconds)

    def saved(self, now: float) -> dict[str, Any]:
        """The state, as the checkpoint sent now."""
        self.last_save = now
        return self.state

    def ended(self, run_keys: Sequence[str]) -> None:
        """These runs are done: listed as such, their midway states dropped."""
        batch = {k: v for k, v in (self.state.get("batch") or {}).items() if k not in run_keys}
        current = self.state["current"]
        self.state = {"done": [*self.state["done"], *run_keys],
                      "current": None if current is not None and current["run_key"] in run_keys else current,
                      **({"batch": batch} if batch else {})}

    def run_one(self, index: int, spec: RunSpec, run: Run | None = None, replayed: int = 0) -> None:
        """Step one run to its end, reporting (gathered) and checkpointing; `replayed` records of it were
        reported already (a batch that failed runs its runs again alone) and are not sent twice."""
        if run is None:
            run = make_run(spec, self.instances)
            if (earlier := self.start_state(spec.run_key)) is not None:
                run.load_state_dict(earlier)
        started = time.time()
        while not run.done:
            record = run.advance()
            if record is None:
                break
            now = time.monotonic()
            if replayed:
                replayed -= 1
            else:
                self.out.add(index, spec, record, [started, time.time()] if run.done else None)
            checkpoint = None
            if run.done:
                self.ended([spec.run_key])
            if self.checkpoint_due(now):
                if not run.done:
                    self.state = {**self.state, "current": {"run_key": spec.run_key, "run": run.state_dict()}}
                checkpoint = self.saved(now)
            if checkpoint is not None or self.out.due(now):
                self.out.send(checkpoint)
