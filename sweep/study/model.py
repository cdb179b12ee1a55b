"""The study model: configurations (`Point`), trials, the typed trial config, a validated `Study`, scales.

Plain data only: this module knows nothing of YAML, validation, kinds, reports or claims, so the store,
the trainable and the trackers can use it without pulling in the rest of the platform.
"""
from __future__ import annotations

import dataclasses
import functools
import hashlib
import operator
import pickle
import re
import weakref
import zlib
from collections.abc import Collection, Mapping, Sequence
from typing import Any

from problems.shared.errors import ParameterError, did_you_mean
from sweep.study.encoding import encoded_list
from sweep.study.errors import Errors, shown

#: The scale a study runs at when none is named (its fields as written, without overrides).
DEFAULT_SCALE = "default"


# ---------------------------------------------------------------- configurations and trials
@dataclasses.dataclass(frozen=True, slots=True)
class Point:
    """One configuration: an algorithm config on a problem instance family, run for several seeds.

    Slotted: a study holds one per configuration for the whole session (10⁵ of them ~10 MB less than with an
    instance dict each)."""

    algorithm: str
    label: str
    algorithm_params: dict[str, Any]
    problem: str
    problem_params: dict[str, Any]
    instance_seed: int | None
    budget: dict[str, Any]
    n_evals: int
    coords: dict[str, Any]  # what varies across points: "grid" values, "axis" value, kind-specific flags
    divergence: dict[str, Any] | None = None  # the study's divergence rule when not the default
    blas_threads: int | None = None  # BLAS threads inside the trial (None: the libraries' default)
    streams: str | None = None  # whose random streams its runs draw from when not NumPy's ("jax": sweep.study.backend)
    _key: str | None = dataclasses.field(default=None, init=False, repr=False, compare=False)  # `key`, once made

    @property
    def key(self) -> str:
        """Deterministic identity of the configuration (seed excluded; computed once, a frozen point never changes)."""
        if self._key is None:
            object.__setattr__(self, "_key", self._identity())
        return self._key

    def _identity(self) -> str:
        ident = [self.algorithm, self.algorithm_params, self.problem, self.problem_params,
                 self.instance_seed, self.budget, self.n_evals]
        if self.divergence is not None:  # a run judged by another rule is another run
            ident.append(self.divergence)
        if self.blas_threads is not None:  # so is one timed with another number of threads
            ident.append({"blas_threads": self.blas_threads})
        if self.streams is not None:  # and one drawing other samples (another engine's streams)
            ident.append({"streams": self.streams})
        # json.dumps(ident, sort_keys=True, default=repr), its parts encoded once for the many points sharing them
        text = encoded_list(ident)
        digest = hashlib.sha1(text.encode()).hexdigest()[:10]
        return f"{self.label}.{self.problem}.{digest}"

    def run_key(self, seed: int) -> str:
        """Identity of one run (configuration, seed): the MLflow child-run key."""
        return f"{self.key}.s{seed}"

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Point:
        """The point `to_dict` wrote (its key is derived again, and checked)."""
        names = {f.name for f in dataclasses.fields(cls) if f.init}
        point = cls(**{k: v for k, v in data.items() if k in names})
        if "key" in data and point.key != data["key"]:
            raise ValueError(f"point: its data gives key {point.key}, not the recorded {data['key']}")
        return point

    def to_dict(self) -> dict[str, Any]:
        """The configuration as plain data (what study.json and run summaries hold)."""
        out = {"key": self.key, "algorithm": self.algorithm, "label": self.label,
               "algorithm_params": self.algorithm_params, "problem": self.problem,
               "problem_params": self.problem_params, "instance_seed": self.instance_seed,
               "budget": self.budget, "n_evals": self.n_evals, "coords": self.coords}
        for name in OPTIONAL_POINT_FIELDS:
            value = getattr(self, name)
            if value is not None:
                out[name] = value
        return out


#: The fields of a `Point` its plain data holds only when they are set.
OPTIONAL_POINT_FIELDS = ("divergence", "blas_threads", "streams")


@dataclasses.dataclass(frozen=True)
class RunSpec:
    """One run as a trial runs it: its key and seed, then the fields of its `Point` a run needs (same names);
    plain data built on the driver."""

    run_key: str
    seed: int
    algorithm: str
    algorithm_params: dict[str, Any]
    problem: str
    problem_params: dict[str, Any]
    instance_seed: int | None
    budget: dict[str, Any]
    n_evals: int
    divergence: dict[str, Any] | None = None
    blas_threads: int | None = None  # the study's BLAS threads per run (None: as many as the trial's CPUs)

    @classmethod
    def of(cls, point: Point, seed: int) -> RunSpec:
        """The run of `point` with `seed`."""
        # Filled as __init__ would (the same fields in the same order): a validated point's values need no
        # checks, and a frozen dataclass's __init__ sets each field through object.__setattr__ (3.0 -> 1.2 µs;
        # the driver makes one per run).
        spec = object.__new__(cls)
        values = spec.__dict__
        values["run_key"], values["seed"] = point.run_key(seed), seed
        for name in _POINT_FIELDS:
            values[name] = getattr(point, name)
        return spec


#: The fields a `RunSpec` takes from its `Point` (all but run_key and seed).
_POINT_FIELDS = tuple(f.name for f in dataclasses.fields(RunSpec))[2:]
#: A `RunSpec`'s fields as a tuple, in order (what `TrialConfig.__reduce__` packs of each run).
_RUN_FIELDS = operator.attrgetter(*(f.name for f in dataclasses.fields(RunSpec)))


@dataclasses.dataclass(frozen=True)
class TrialConfig:
    """What one trial runs (several runs, one after another or batched): built on the driver, read back as-is by
    the worker.

    It travels through Ray Tune as itself, pickled compressed (`__reduce__`), or as plain data (`to_dict`), which
    `from_dict` reads checking only its shape, because every value came from a validated study (or a validated
    `trainable_for` call). `resume` maps the run key of a run an earlier driver left midway to the checkpoint it
    continues from.
    """

    key: str
    runs: tuple[RunSpec, ...]
    checkpoint_seconds: float = 10.0
    report_seconds: float = 0.0
    imports: tuple[str, ...] = ()
    done_registry: str | None = None
    resume: dict[str, str] = dataclasses.field(default_factory=dict)
    batched: bool = False  # runs sharing an instance step as one batch (sweep.trial_batch)
    backend: str = "numpy"  # what steps a batch: numpy | jax (sweep.study.backend)
    #: Whether reports carry each run's MLflow metric points: not for a study whose children are chosen once its
    #: runs have ended (sweep.tracking.browse), which reads them from the store (at 10⁵ tiny runs the points
    #: were a third of a worker's CPU).
    mlflow_points: bool = True

    @property
    def run_keys(self) -> tuple[str, ...]:
        """The run keys, in the order the trial runs them."""
        return tuple(r.run_key for r in self.runs)

    # Tune deep-copies a trial's config and formats it into a tag; an immutable config is its own copy
    # and its text is its key, so both cost O(1) whatever the number of runs.
    def __deepcopy__(self, memo: dict[int, Any]) -> TrialConfig:
        return self

    def __str__(self) -> str:
        return self.key

    # Tune formats every result, its config included, into debug messages whether or not they are logged:
    # the dataclass repr of a trial's hundreds of runs took ~10% of the driver's CPU at 10^4 tiny runs.
    def __repr__(self) -> str:
        return f"TrialConfig({self.key!r}, {len(self.runs)} runs)"

    # Tune saves each trial's state as JSON with the config cloudpickled into hex text, and keeps that text: at
    # 10⁵ tiny runs the driver held ~100 MB of it at the end. Compressed, a run costs ~30 bytes there, not ~500.
    # Packed once per config: the trial's every report carries its config back (Tune's auto-filled `config`).
    def __reduce__(self) -> tuple[Any, tuple[bytes]]:
        packed = self.__dict__.get("_packed")
        if packed is None:  # the runs as tuples of their fields: pickled without a reduce call each (1.7 -> 1.0 µs)
            fields = (self.key, tuple(map(_RUN_FIELDS, self.runs)),
                      *(getattr(self, f.name) for f in dataclasses.fields(self)[2:]))
            packed = zlib.compress(pickle.dumps(fields, protocol=5), 1)
            _remember(self, packed)
        return _unpacked_trial_config, (packed,)

    def to_dict(self) -> dict[str, Any]:
        """Plain data (lists, dicts, numbers, strings) for Tune's config and experiment state."""
        return {"key": self.key, "runs": [dataclasses.asdict(r) for r in self.runs],
                "checkpoint_seconds": self.checkpoint_seconds, "report_seconds": self.report_seconds,
                "imports": list(self.imports), "done_registry": self.done_registry, "resume": dict(self.resume),
                "batched": self.batched, "backend": self.backend, "mlflow_points": self.mlflow_points}

    def drop_runs(self) -> None:
        """A trial that completed: its runs dropped from this config, in place. Tune keeps every trial's config,
        under several references, for the whole session; a completed trial's runs are in the store and no one
        reads them from here again (10⁵ tiny runs: ~38 MB of run specs and keys). The bytes that packed them read
        back as a new config, with its runs."""
        packed = self.__dict__.pop("_packed", None)
        if packed is not None and _PACKED.get(packed) is self:
            del _PACKED[packed]
        object.__setattr__(self, "runs", ())

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> TrialConfig:
        """The config `to_dict` produced (a missing or unknown field is a one-line error)."""
        values = dict(_shape_checked(cls, data, "trial config"))
        values["runs"] = tuple(RunSpec(**_shape_checked(RunSpec, r, "trial config: runs[]")) for r in values["runs"])
        values["imports"] = tuple(values.get("imports", ()))
        return cls(**values)


#: Packed bytes -> the live config they pack, in this process. Tune puts a trial's config into each of its results,
#: so the driver unpickled a trial's runs (up to 10⁴ `RunSpec`s) at every report and kept a copy in each trial's
#: last result; the same bytes now give back the config the driver made (the worker: the one it read first).
_PACKED: weakref.WeakValueDictionary[bytes, TrialConfig] = weakref.WeakValueDictionary()


def _remember(config: TrialConfig, packed: bytes) -> None:
    object.__setattr__(config, "_packed", packed)  # not a field: equality, fields() and asdict() ignore it
    _PACKED[packed] = config


def _unpacked_trial_config(packed: bytes) -> TrialConfig:
    """The `TrialConfig` that `TrialConfig.__reduce__` packed (the live one when this process has it: a config
    is immutable, so it is its own copy)."""
    config = _PACKED.get(packed)
    if config is None:
        key, runs, *rest = pickle.loads(zlib.decompress(packed))
        config = TrialConfig(key, tuple(RunSpec(*run) for run in runs), *rest)
        _remember(config, packed)
    return config


def _shape_checked(cls: type, data: Mapping[str, Any], what: str) -> Mapping[str, Any]:
    """`data` when its keys are the fields of dataclass `cls` (those with defaults may be missing)."""
    fields = {f.name: f for f in dataclasses.fields(cls)}
    unknown = sorted(set(data) - set(fields))
    missing = [n for n, f in fields.items() if n not in data and f.default is dataclasses.MISSING
               and f.default_factory is dataclasses.MISSING]
    if unknown or missing:
        field = f"unknown field '{unknown[0]}'" if unknown else f"missing field '{missing[0]}'"
        raise ParameterError(f"{what}: {field}; fields: {', '.join(fields)}")
    return data


@dataclasses.dataclass(frozen=True)
class Trial:
    """A configuration and the seeds one trial runs one after another (the fixed grouping of `Study.trials`)."""

    point: Point
    seeds: tuple[int, ...]

    @property
    def key(self) -> str:
        """Deterministic trial identity."""
        return f"{self.point.key}.s{'-'.join(map(str, self.seeds))}"

    def config(self, checkpoint_seconds: float, imports: Sequence[str], done_registry: str | None = None,
               report_seconds: float = 0.0) -> TrialConfig:
        """The typed config of this trial (what `sweep.execution.trainable.run_trial` runs)."""
        return TrialConfig(key=self.key, runs=tuple(RunSpec.of(self.point, s) for s in self.seeds),
                           checkpoint_seconds=checkpoint_seconds, report_seconds=report_seconds,
                           imports=tuple(imports), done_registry=done_registry)


# ---------------------------------------------------------------- the study
@dataclasses.dataclass(frozen=True)
class ReportOptions:
    """How final results are compared in reports."""

    metric: str
    goal: str = "min"
    converged_metric: str = "grad_F_sq"
    converged_below: float = 1e-3
    converged_relative: bool = True
    target: float | None = None
    best_by: str = "robust"


@dataclasses.dataclass(frozen=True)
class Study:
    """A validated study."""

    name: str
    description: str
    kind: str
    axis: dict[str, Any]
    problems: list[dict[str, Any]]
    algorithms: list[dict[str, Any]]
    seeds: list[int]
    instance_seed: int | None
    seeds_per_trial: int
    budget: dict[str, Any]
    n_evals: int
    resources: dict[str, float]
    max_concurrent: int | None
    max_failures: int
    checkpoint_seconds: float
    report_seconds: float
    imports: list[str]
    report: ReportOptions
    points: list[Point]
    online: bool
    source: dict[str, Any]
    claim: str | None = None
    scale: str = DEFAULT_SCALE
    axis_name: str | None = None  # the sweep axis as tables and plots name it (set by the kind)
    runs_per_trial: int | None = None  # runs one trial runs one after another (None: sized by their duration)
    identity: str | None = None  # spec_hash of a study that grows in rounds: its first round's (see Kind.next_points)
    counted: int | None = None  # configurations counted without building them (`points` then holds only some)
    batched: str = "auto"  # auto | off: whether runs sharing an instance step as one batch (sweep.batching)
    backend: str = "numpy"  # numpy | jax: what steps a batch (sweep.study.backend)
    mlflow_children: int | None = 10_000  # most runs that each get an MLflow child (None: all; sweep.tracking.browse)

    @property
    def configurations(self) -> int:
        """How many configurations the study has (counted, or its points)."""
        return len(self.points) if self.counted is None else self.counted

    @property
    def trials(self) -> list[Trial]:
        """Every trial: each configuration with its seeds split into chunks of seeds_per_trial."""
        out = []
        k = self.seeds_per_trial
        for p in self.points:
            for i in range(0, len(self.seeds), k):
                out.append(Trial(p, tuple(self.seeds[i:i + k])))
        return out

    @functools.cached_property
    def run_keys(self) -> list[str]:
        """Every (configuration, seed) run key, configuration by configuration (computed once)."""
        return [p.run_key(s) for p in self.points for s in self.seeds]

    @functools.cached_property
    def spec_hash(self) -> str:
        """Identity of the set of runs (changes when anything that defines a run changes).

        A study that grows in rounds keeps the identity of its first round: the rounds after it are a
        function of that round's results, so they belong to the same study (same MLflow parent, same Tune
        experiment directory).
        """
        if self.identity is not None:
            return self.identity
        return hashlib.sha1("\n".join(sorted(self.run_keys)).encode()).hexdigest()[:12]


# ---------------------------------------------------------------- scales
def scale_names(data: Mapping[str, Any]) -> list[str]:
    """The scales a study mapping offers: the default, then its named overrides."""
    scales = data.get("scales") or {}
    return [DEFAULT_SCALE] + [str(k) for k in scales] if isinstance(scales, Mapping) else [DEFAULT_SCALE]


def apply_scale(data: Mapping[str, Any], scale: str | None, overridable: Collection[str]) -> dict[str, Any]:
    """The study fields at `scale`: the overrides of `scales[scale]` merged in (mappings recursively).

    Every error of the `scales` block is raised at once; `overridable` names the fields a scale may set.
    """
    errors = Errors()
    scales = data.get("scales", {}) or {}
    if not isinstance(scales, Mapping):
        errors.add("scales", f"must be a mapping of scale names to field overrides, got {shown(scales)}")
        errors.raise_if_any()
    for name, over in scales.items():
        if not isinstance(name, str) or name == DEFAULT_SCALE or not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_-]*", name):
            errors.add("scales", f"scale names are letters, digits, '_', '-' (not {DEFAULT_SCALE!r}), got {name!r}")
        elif not isinstance(over, Mapping):
            errors.add(f"scales.{name}", f"must be a mapping of study fields to override, got {shown(over)}")
        else:
            for bad in sorted(set(map(str, over)) - set(overridable)):
                errors.add(f"scales.{name}.{bad}", "cannot be overridden by a scale; allowed: every study field "
                                                   "but name, scales")
    errors.raise_if_any()
    base = {k: v for k, v in data.items() if k != "scales"}
    if scale is None or scale == DEFAULT_SCALE:
        return base
    if scale not in scales:
        errors.add("scale", f"unknown scale {scale!r};{did_you_mean(scale, scale_names(data))} this study has: "
                            f"{', '.join(scale_names(data))}")
        errors.raise_if_any()
    return merge(base, scales[scale])


def merge(base: Mapping[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    """`base` with `over` merged in: mappings key by key, anything else (lists too) replaced."""
    out = dict(base)
    for k, v in over.items():
        out[k] = merge(out[k], v) if isinstance(v, Mapping) and isinstance(out.get(k), Mapping) else v
    return out

