"""Problem registry: name -> (parameter record, builder)."""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from problems.base import BilevelProblem, OnlineProblem
from problems.shared.errors import ParameterError
from problems.shared.registries import Registry
from problems.validation import Params

Builder = Callable[[Any, int], "BilevelProblem | OnlineProblem"]


@dataclass(frozen=True)
class ProblemEntry:
    """A registered problem family."""

    name: str
    params: type[Params]
    build: Builder
    online: bool
    doc: str


_REGISTRY: Registry[ProblemEntry] = Registry("problem")


def register(name: str, params: type[Params], online: bool = False) -> Callable[[Builder], Builder]:
    """Decorator registering `build(params, seed)` under `name`."""

    def deco(build: Builder) -> Builder:
        doc = (build.__doc__ or "").strip().splitlines()[0] if build.__doc__ else ""
        _REGISTRY.add(name, ProblemEntry(name, params, build, online, doc))
        params.owner = f"problem '{name}'"
        return build

    return deco


def entry(name: str) -> ProblemEntry:
    """The registered entry, or a one-line error naming the nearest and every known name."""
    return _REGISTRY[name]


def check_seed(seed: Any) -> int:
    """Seeds are non-negative integers."""
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise ParameterError(f"problem: 'seed' must be a non-negative integer, got {seed!r}")
    return seed


def make(name: str, seed: int = 0, **params: Any) -> BilevelProblem | OnlineProblem:
    """Build the seeded instance `name` with validated `params`."""
    e = entry(name)
    p = e.params.from_dict(params)
    problem = e.build(p, check_seed(seed))
    problem.name = name
    problem.params = p
    return problem


def available() -> dict[str, dict[str, Any]]:
    """Every problem with its description, online flag and parameters (default, check, doc)."""
    return {
        n: {"doc": e.doc, "online": e.online, "params": e.params.describe()}
        for n, e in _REGISTRY.items()
    }
