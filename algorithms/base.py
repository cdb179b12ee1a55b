"""The algorithm contract and its registry.

An algorithm is built from (counted problem, validated config, rng); `step()` performs one outer
iteration (one time step for online algorithms); `x` and `y` are the current iterates at all times.
"""
from __future__ import annotations

import copy
import dataclasses
from abc import ABC, abstractmethod
from collections import deque
from typing import Any, ClassVar

import numpy as np

from algorithms.index_stream import IndexStream, decodable, numpy_draws_as_decoded
from algorithms.minibatch_stream import MinibatchStream
from algorithms.search_space import Range
from problems.base import Array
from problems.shared.errors import ParameterError
from problems.shared.registries import Registry
from problems.validation import Params, param


@dataclasses.dataclass(frozen=True)
class AlgorithmConfig(Params):
    """Base of every algorithm's hyperparameter record (defaults from the paper)."""


@dataclasses.dataclass(frozen=True)
class StochasticConfig(AlgorithmConfig):
    """Config of an algorithm with a minibatch form: null batch_size means full-batch oracles."""

    batch_size: int | None = param(None, "optional_positive_int", "minibatch size (null: full batch)")


class Algorithm(ABC):
    """One bilevel algorithm. Subclasses set the class attributes and implement `step`."""

    name: ClassVar[str]
    Config: ClassVar[type[AlgorithmConfig]] = AlgorithmConfig
    #: Config fields that are initial step sizes (what a step-size sensitivity study scales).
    step_sizes: ClassVar[tuple[str, ...]] = ()
    #: Tuning ranges besides (or replacing) the default ones of the step sizes; None drops a step size.
    #: Declarations merge along the class hierarchy (see `search_space`).
    tunables: ClassVar[dict[str, Range | None]] = {}
    first_order: ClassVar[bool] = False
    stochastic: ClassVar[bool] = False
    loops: ClassVar[str] = "single"  # "single" or "double"
    online: ClassVar[bool] = False
    #: True when the algorithm needs lower-level linear constraints (problem.constraints).
    constrained: ClassVar[bool] = False
    #: True when the algorithm needs a finite-sum problem (per-sample oracles, problem.n_samples).
    finite_sum: ClassVar[bool] = False
    #: True when the algorithm selects coresets: it needs a problem with per-task blocks of sample weights
    #: (problem.blocks, problem.coreset_size: problems.coreset).
    coreset: ClassVar[bool] = False
    #: Instance attributes that change during a run besides x, y and the RNG (v, accumulators,
    #: momentum buffers, memory tables): numbers, strings, None, NumPy arrays, or lists/dicts of them.
    state: ClassVar[tuple[str, ...]] = ()
    #: True when `step` draws from `rng` only through `batch`, `batches`, `batch_source` and `random_integer`:
    #: its draws are then made many iterations ahead (algorithms.index_stream, algorithms.minibatch_stream).
    #: Results are the same either way (reading `rng` puts the generator back where the draws used leave it);
    #: the flag only says drawing ahead pays. Declared on each class that qualifies, since a subclass may draw
    #: something else.
    draws_ahead: ClassVar[bool] = False
    #: Config fields that may differ between the runs of one batch (None: the step sizes and their decays).
    batch_params: ClassVar[tuple[str, ...] | None] = None
    #: State names holding one number (None before it is set): a stack's run handed to the run loop
    #: (algorithms/explicit/call_budget.py) gets them as floats.
    scalar_state: ClassVar[tuple[str, ...]] = ()
    paper: ClassVar[str] = ""

    def __init__(self, problem: Any, config: AlgorithmConfig, rng: np.random.Generator) -> None:
        if self.finite_sum and getattr(problem, "n_samples", None) is None:
            raise ParameterError(f"algorithm '{self.name}' needs a finite-sum problem (per-sample oracles, "
                                 f"n_samples); '{getattr(problem, 'name', 'problem')}' is not one")
        if self.coreset and getattr(problem, "blocks", None) is None:
            raise ParameterError(f"algorithm '{self.name}' needs a coreset-selection problem (coreset_selection); "
                                 f"'{getattr(problem, 'name', 'problem')}' is not one")
        self.problem = problem
        self.config = config
        self._rng = rng
        self.iteration = 0
        self.x, self.y = problem.initial_point()
        size = getattr(config, "batch_size", None)
        # Decided once: the minibatch size `batch()` draws, or None for full-batch oracles.
        self._batch_size = size if size is not None and getattr(problem, "stochastic", False) else None
        ahead = (self._batch_size is not None and type(self).__dict__.get("draws_ahead", False)
                 and hasattr(problem, "sample_batches") and getattr(problem, "batches_drawn_whole", lambda: False)())
        # Whole minibatches drawn ahead (a duck-typed problem may not draw several at once); from the first
        # `random_integer` on, numbers (an IndexStream: 1–2 µs dearer per take, so only where needed).
        self._stream: IndexStream | MinibatchStream | None = (
            MinibatchStream(problem, self._batch_size) if ahead else None)

    def _number_stream(self) -> IndexStream | None:
        """Numbers drawn ahead for the problem's index minibatches, when its minibatches are index draws."""
        bounds = getattr(self.problem, "index_bounds", lambda: None)()
        if bounds is None or not all(decodable(b) for b in bounds) or not numpy_draws_as_decoded():
            return None
        return IndexStream(self.problem, self._batch_size, bounds)

    @property
    def rng(self) -> np.random.Generator:
        """The algorithm's generator, in the state the draws used so far leave it (what was drawn ahead and not
        used is dropped)."""
        if self._stream is not None:
            self._stream.settle(self._rng)
        return self._rng

    @rng.setter
    def rng(self, rng: np.random.Generator) -> None:
        self._rng = rng
        if self._stream is not None:
            self._stream.reset()  # nothing of the new generator was drawn ahead

    def random_integer(self, high: int) -> int:
        """int(rng.integers(high)), the same number from numbers drawn ahead (an HIA's length)."""
        stream = self._stream
        if type(stream) is MinibatchStream:  # whole minibatches cannot serve it: numbers from now on, if they can
            stream.settle(self._rng)
            stream = self._stream = self._number_stream()
        if stream is None:
            return int(self._rng.integers(high))
        return stream.integer(self._rng, high)

    @abstractmethod
    def step(self) -> None:
        """One outer iteration (or one time step of an online problem)."""

    def diagnostics(self) -> dict[str, float]:
        """Algorithm-specific scalars to log (step sizes, λ, sub-loop lengths)."""
        return {}

    def extra_points(self) -> dict[str, Array]:
        """Further outer points to evaluate besides x (e.g. a block average), by name."""
        return {}

    def batch(self) -> Any:
        """A fresh minibatch when the config asks for one and the problem is stochastic, else None."""
        if self._batch_size is None:
            return None
        if self._stream is not None:
            return self._stream.take(self._rng, 1)[0]
        return self.problem.sample_batch(self._rng, self._batch_size)

    def batches(self, count: int) -> list[Any]:
        """`count` fresh minibatches at once: the ones `count` calls of `batch()` in turn would give.

        Drawing them together also equals drawing each where it is first used, as long as nothing draws
        from `rng` in between; oracles do not (a lazily drawn noise, as constrained_quadratic's dense
        model, draws nothing when its batch is made and only then, in the oracles' order).
        """
        if self._batch_size is None or count == 0:  # nothing to draw (an HIA of length 0, a tolerance loop)
            return [None] * count
        if self._stream is not None:
            return self._stream.take(self._rng, count)
        draw = getattr(self.problem, "sample_batches", None)  # a duck-typed problem may lack it
        if draw is None:
            return [self.batch() for _ in range(count)]
        return draw(self._rng, self._batch_size, count)

    def batch_source(self, count: int) -> BatchSource:
        """A minibatch per call: the first `count` drawn together now (`batches`), then each when asked.

        For an iteration that knows how many minibatches its next oracle calls take: the same batches as
        calling `batch()` each time, provided nothing else draws from `rng` before those are used.
        """
        return BatchSource(self, count)

    # ---- checkpointing: exactly the declared state ----
    @classmethod
    def state_fields(cls) -> tuple[str, ...]:
        """x, y and every `state` name declared along the class hierarchy (base classes first)."""
        names = ("x", "y", *(n for c in reversed(cls.__mro__) for n in c.__dict__.get("state", ())))
        return tuple(dict.fromkeys(names))

    def state_dict(self) -> dict[str, Any]:
        """A copy of the declared state and the RNG's state: arrays, numbers, strings, None, lists, dicts."""
        state = {name: _plain(getattr(self, name)) for name in self.state_fields()}
        # As if only the minibatches used were drawn: a run resumed from it draws on from there.
        state["rng"] = (copy.deepcopy(self._rng.bit_generator.state) if self._stream is None
                        else self._stream.rng_state(self._rng))
        return state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore a state from `state_dict` (or its JSON + npz round trip)."""
        for name in self.state_fields():
            current = getattr(self, name, None)
            value = copy.deepcopy(state[name])
            # A bounded deque (a window of past estimates) travels as a list and comes back bounded.
            setattr(self, name, deque(value, maxlen=current.maxlen) if isinstance(current, deque) else value)
        self._rng.bit_generator.state = copy.deepcopy(state["rng"])
        if self._stream is not None:
            self._stream.reset()  # what was drawn ahead came from the state just replaced

    @classmethod
    def search_space(cls) -> dict[str, Range]:
        """The tunable hyperparameters and their ranges: each step size log-uniform on [default/10,
        default·10], then the `tunables` declared along the class hierarchy (base classes first)."""
        defaults = cls.Config.describe()
        space: dict[str, Range | None] = {s: Range.around(defaults[s]["default"]) for s in cls.step_sizes}
        for c in reversed(cls.__mro__):
            space.update(c.__dict__.get("tunables", {}))
        return {name: r for name, r in space.items() if r is not None}

    @classmethod
    def describe(cls) -> dict[str, Any]:
        """Flags, declared step sizes and hyperparameters, for listings."""
        return {
            "doc": (cls.__doc__ or "").strip().splitlines()[0] if cls.__doc__ else "",
            "paper": cls.paper,
            "first_order": cls.first_order,
            "stochastic": cls.stochastic,
            "loops": cls.loops,
            "online": cls.online,
            "constrained": cls.constrained,
            "finite_sum": cls.finite_sum,
            "coreset": cls.coreset,
            "step_sizes": list(cls.step_sizes),
            "search_space": {n: r.as_dict() for n, r in cls.search_space().items()},
            "params": cls.Config.describe(),
        }


class BatchSource:
    """An algorithm's minibatches, one per call: those drawn ahead first, in order, then fresh ones."""

    __slots__ = ("_algorithm", "_ready")

    def __init__(self, algorithm: Algorithm, count: int) -> None:
        self._algorithm = algorithm
        self._ready = deque(algorithm.batches(count))

    def __call__(self) -> Any:
        return self._ready.popleft() if self._ready else self._algorithm.batch()

    def draw_ahead(self, count: int) -> None:
        """Draw `count` more now, together, served after those already ahead: for a count learnt mid-iteration
        (an HIA's length), the same batches as drawing each when asked, as for `Algorithm.batch_source`."""
        self._ready.extend(self._algorithm.batches(count))


def _plain(value: Any) -> Any:
    """A deep copy of a state value with deques as lists (what a checkpoint can store)."""
    if isinstance(value, deque):
        return [copy.deepcopy(v) for v in value]
    return copy.deepcopy(value)


_REGISTRY: Registry[type[Algorithm]] = Registry("algorithm")


def register(cls: type[Algorithm]) -> type[Algorithm]:
    """Class decorator adding an algorithm to the registry under `cls.name`."""
    for s in cls.step_sizes:
        if s not in {f.name for f in dataclasses.fields(cls.Config)}:
            raise KeyError(f"{cls.name}: declared step size '{s}' is not a config field")
    _check_search_space(cls)
    _REGISTRY.add(cls.name, cls)
    cls.Config.owner = f"algorithm '{cls.name}'"
    return cls


def _check_search_space(cls: type[Algorithm]) -> None:
    """Every tuned name is a config field whose paper default lies inside its range."""
    defaults = cls.Config.describe()
    for name, r in cls.search_space().items():
        if name not in defaults:
            raise KeyError(f"{cls.name}: tunable '{name}' is not a config field")
        default = defaults[name]["default"]
        if isinstance(default, bool) or not isinstance(default, (int, float)) or not r.contains(default):
            raise KeyError(f"{cls.name}: default {default!r} of '{name}' is outside its range "
                           f"[{r.low:g}, {r.high:g}]")


def get(name: str) -> type[Algorithm]:
    """The algorithm class `name`, or a one-line error naming the nearest and every known name."""
    return _REGISTRY[name]


def available() -> dict[str, dict[str, Any]]:
    """Every registered algorithm with its description."""
    return {n: c.describe() for n, c in _REGISTRY.items()}


def make_config(name: str, params: dict[str, Any] | AlgorithmConfig | None = None) -> AlgorithmConfig:
    """A validated config of algorithm `name` from a dict (or pass a config through)."""
    cls = get(name)
    if isinstance(params, cls.Config):
        return params
    return cls.Config.from_dict(params or {})
