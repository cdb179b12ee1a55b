"""What an explicit-state algorithm is: `init` and `step` over a NamedTuple of arrays, and its hyperparameters.

A definition is written once for ONE run (x of shape (d,), a step size a number) against an array namespace
`xp` (numpy or jax.numpy) with operators and array methods only, so that it also runs unchanged on

* a stack of K runs (x of shape (K, d), every per-run number a (K, 1) column: `algorithms.explicit.stacked`),
* `jax.vmap` over runs, compiled by `jax.jit` (`algorithms.explicit.jax_engine`).

The rules that make this hold: products multiply from the right (`y @ A.T`, see problems/pure.py),
reductions are over the last axis with `keepdims` where a per-run number results, no Python branch or
`float()` on a computed value (use `xp.where`), a per-run counter or number in the state is an array of
shape (1,) (a (K, 1) column once stacked, what a `keepdims` reduction gives), and every number that
differs between runs of one stack comes from `hyper` (a NamedTuple of the algorithm's `varying_fields`),
never from `config`, the stack's shared `AlgorithmConfig` (loop counts, flags: Python values a compiled
step may branch or loop on; `number` reads a number from whichever holds it).
"""
from __future__ import annotations

import dataclasses
import operator
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple

import numpy as np

from algorithms.base import AlgorithmConfig, get
from algorithms.stacked import group_key, varying_fields
from problems.pure import pure
from problems.shared.errors import ParameterError

State = Any  # a NamedTuple of arrays (a JAX pytree)
Init = Callable[[Any, Any, AlgorithmConfig, Any, Any], State]  # (oracles, hyper, config, key, xp) -> state
Step = Callable[[State, Any, Any, AlgorithmConfig, Any], State]  # (state, oracles, hyper, config, xp) -> state


@dataclasses.dataclass(frozen=True)
class Definition:
    """One algorithm as pure functions: `init(oracles, hyper, config, key, xp)` gives the state at iteration 0,
    `step(state, oracles, hyper, config, xp)` the state one outer iteration later (its `t` one higher),
    `diagnostics(state, hyper, config, xp)` the numbers the run loop records as `diag/<name>` (the step sizes now).

    `name` is the registered algorithm it reproduces (its Config, its varying fields); the state must
    have fields `x`, `y` and `t` (the iteration, a float array of shape (1,)).
    """

    name: str
    init: Init
    step: Step
    diagnostics: Callable[[State, Any, AlgorithmConfig, Any], dict[str, Any]]
    #: The first iteration whose record has the diagnostics (BOME's exist only after a step).
    diagnostics_from: int = 0
    #: Why a config cannot run on these engines (None: it can), e.g. a random draw the state has no stream for.
    refuses: Callable[[AlgorithmConfig], str | None] = lambda config: None
    #: The problem's pure form the definition steps on: the full-batch oracles, or with per-sample ones (SABA).
    oracles_of: Callable[[Any], Any] = pure
    #: Whether its step draws random numbers (`choose`, `draw_integers`) from the key in its state, always or for
    #: the configs this says (SOBA: those with minibatches): the engines then give run k a stream from its seed
    #: (NumPy: the generator `algorithms.run` gives the run's algorithm; JAX: its own key).
    draws: bool | Callable[[AlgorithmConfig], bool] = False
    #: For a config whose oracle calls differ between runs (TTSA's sampled HIA length): (the config making the calls
    #: every run makes, the one making one unit more a step); each run's units so far are its state's `hvp_calls`.
    #: None: every run of a stack makes the same calls (`counts.py`).
    counted: Callable[[AlgorithmConfig], tuple[AlgorithmConfig, AlgorithmConfig] | None] = lambda config: None

    def draws_for(self, config: AlgorithmConfig) -> bool:
        """Whether runs of `config` get a random stream (`draws`)."""
        return self.draws(config) if callable(self.draws) else self.draws

    @property
    def hyper_fields(self) -> tuple[str, ...]:
        """The config fields that may differ within a stack, in a fixed order."""
        return tuple(sorted(varying_fields(get(self.name))))

    def configs(self, configs: Sequence[Mapping[str, Any] | AlgorithmConfig | None]) -> list[AlgorithmConfig]:
        """The validated configs; one line naming the field when two of them differ where a stack may not."""
        cls = get(self.name)
        out = [c if isinstance(c, AlgorithmConfig) else cls.Config.from_dict(c or {}) for c in configs]
        if not out:
            raise ParameterError("configs: at least one config; allowed: a non-empty list")
        first = group_key(cls, out[0])
        shared = operator.attrgetter(*(n for n, _ in first)) if first else (lambda c: ())
        values = shared(out[0])
        for k, c in enumerate(out):
            if (reason := self.refuses(c)) is not None:
                raise ParameterError(f"configs[{k}].{reason}")
            if shared(c) == values:  # equal shared fields (a thousand configs: no text made for each)
                continue
            key = group_key(cls, c)  # as text: two NaNs are the same setting
            if key != first:
                field = next(a[0] for a, b in zip(key, first) if a != b)
                raise ParameterError(f"configs[{k}].{field}: must equal configs[0].{field} in one stack; "
                                     f"fields that may differ: {', '.join(self.hyper_fields)}")
        return out

    def hyper_type(self) -> type:
        """The NamedTuple of this algorithm's varying numbers."""
        return _hyper_type(self.name, self.hyper_fields)

    def hyper(self, config: AlgorithmConfig) -> Any:
        """One run's varying numbers as Python floats."""
        return self.hyper_type()(*(float(getattr(config, f)) for f in self.hyper_fields))

    def hyper_columns(self, configs: Sequence[AlgorithmConfig], asarray: Callable = np.asarray,
                      shape: tuple[int, ...] = (-1, 1)) -> Any:
        """Every run's varying numbers: one (K, 1) column per field (or the `shape` asked for, e.g. (-1,) to vmap)."""
        return self.hyper_type()(*(asarray(np.fromiter(map(operator.attrgetter(f), configs), float, len(configs))
                                           .reshape(shape)) for f in self.hyper_fields))


_HYPER: dict[tuple[str, tuple[str, ...]], type] = {}


def _hyper_type(name: str, fields: tuple[str, ...]) -> type:
    """A NamedTuple class per algorithm, made once (JAX caches compiled steps by the pytree's type)."""
    if (name, fields) not in _HYPER:
        _HYPER[name, fields] = NamedTuple(f"{name.capitalize()}Hyper", [(f, Any) for f in fields])
    return _HYPER[name, fields]


def number(name: str, hyper: Any, config: AlgorithmConfig) -> Any:
    """A config number: from `hyper` where it may vary within a stack, else the stack's shared value."""
    return getattr(hyper, name) if name in hyper._fields else float(getattr(config, name))


def decaying(c: Any, exponent: Any, t: Any) -> Any:
    """c / (t + 1)^exponent, the schedule of algorithms/schedules.py, on numbers, columns or traced arrays
    (exponent 0 gives c exactly there as here: (t + 1)^0 = 1)."""
    return c / (t + 1) ** exponent


_DEFINITIONS: dict[str, Definition] = {}


def define(definition: Definition) -> Definition:
    """Register `definition` under its algorithm's name (checked when used: `algorithms` discovers its modules
    in name order, so the algorithm may register after its definition)."""
    _DEFINITIONS[definition.name] = definition
    return definition


def definition(name: str) -> Definition:
    """The explicit definition of algorithm `name`; one line naming the ones there are when it has none."""
    if name not in _DEFINITIONS:
        raise ParameterError(f"algorithm: '{name}' has no explicit-state definition yet; "
                             f"allowed: {', '.join(sorted(_DEFINITIONS))}")
    return _DEFINITIONS[name]


def defined() -> list[str]:
    """The algorithms with an explicit definition."""
    return sorted(_DEFINITIONS)


def repeat(n: int, body: Callable[[Any], Any], carry: Any, xp: Any) -> Any:
    """`body` applied n times to `carry` (an inner loop of fixed length): a Python loop on NumPy, a
    `lax.fori_loop` under JAX, so a compiled step holds the body once instead of n unrolled copies."""
    if getattr(xp, "__name__", "").startswith("jax"):
        import jax

        return jax.lax.fori_loop(0, n, lambda _, c: body(c), carry)
    for _ in range(n):
        carry = body(carry)
    return carry


def scan(body: Callable[[Any, Any], tuple[Any, Any]], carry: Any, xs: Any, xp: Any, length: int | None = None,
         reverse: bool = False) -> tuple[Any, Any]:
    """`lax.scan`'s contract on either namespace: (final carry, the outputs stacked on a new first axis).

    `body(carry, x) -> (carry, out)` over the leading axis of `xs` (a tuple of arrays: x a tuple of their rows; or
    `length` times with x None), from the end when `reverse` (the outputs still in the order of `xs`). A tape of
    iterates (ITD's reverse pass) is
    kept this way: on NumPy a stack of the per-step arrays, under JAX one preallocated buffer."""
    if getattr(xp, "__name__", "").startswith("jax"):
        import jax

        return jax.lax.scan(body, carry, xs, length=length, reverse=reverse)
    n = int(length or 0) if xs is None else len(xs[0]) if isinstance(xs, tuple) else len(xs)
    order = range(n - 1, -1, -1) if reverse else range(n)
    outs: list[Any] = [None] * n
    for i in order:
        x = None if xs is None else tuple(a[i] for a in xs) if isinstance(xs, tuple) else xs[i]
        carry, outs[i] = body(carry, x)
    stacked = None if n == 0 or outs[0] is None else np.stack(outs)
    return carry, stacked


def draw_integers(key: Any, n: int, size: int, xp: Any) -> tuple[Any, Any]:
    """(key, `size` indices in [0, n) drawn with replacement) per run, as `rng.integers(0, n, size)` draws them:
    a minibatch of a finite sum (`BilevelProblem.sample_batches`). `key` as in `choose`."""
    if getattr(xp, "__name__", "").startswith("jax"):
        import jax

        key, sub = jax.random.split(key)
        return key, jax.random.randint(sub, (size,), 0, n)
    if isinstance(key, np.random.Generator):
        return key, key.integers(0, n, size=size)
    return key, np.stack([g.integers(0, n, size=size) for g in key])


def draw_below(key: Any, n: int, xp: Any) -> tuple[Any, Any]:
    """(key, one integer in [0, n) per run, as a float (1,) number or (K, 1) column), as `rng.integers(n)` draws it
    (an HIA's length: `Algorithm.random_integer`). `key` as in `choose`."""
    if getattr(xp, "__name__", "").startswith("jax"):
        import jax

        key, sub = jax.random.split(key)
        return key, jax.random.randint(sub, (1,), 0, n).astype(float)
    if isinstance(key, np.random.Generator):
        return key, np.array([float(key.integers(n))])
    return key, np.array([[float(g.integers(n))] for g in key])


def choose(key: Any, n: int, size: int, xp: Any, skip: Any = None) -> tuple[Any, Any]:
    """(key, `size` distinct indices in [0, n)) per run, as `rng.choice(n, size, replace=False)` draws them.

    `key` is a run's NumPy generator (indices (size,)), a stack's tuple of them (one row of indices per run,
    each from its own generator, so run k draws what it draws alone), or a JAX key (split; its own stream).
    `skip` (NumPy only): where true for every run, nothing is drawn and indices 0..size-1 are given, for a
    step whose indices do not matter (one the per-run algorithm makes without drawing)."""
    if getattr(xp, "__name__", "").startswith("jax"):
        import jax

        key, sub = jax.random.split(key)
        return key, jax.random.choice(sub, n, (size,), replace=False)
    if skip is not None and bool(np.all(skip)):
        first = np.arange(size)
        return key, first if isinstance(key, np.random.Generator) else np.broadcast_to(first, (len(key), size))
    if isinstance(key, np.random.Generator):
        return key, key.choice(n, size=size, replace=False)
    return key, np.stack([g.choice(n, size=size, replace=False) for g in key])
