"""The parameters of a child run (a configuration and seed) as MLflow stores them, and those every run of a
study shares (they go on the parent run instead, sweep/tracking/tracker.py)."""
from __future__ import annotations

from typing import Any

from sweep.study.model import Point, Study


def child_params(point: Point, seed: int | None, axis_name: str | None) -> dict[str, Any]:
    """Every parameter a child run of (configuration, seed) could carry (`None`s left out)."""
    axis = {}
    if axis_name and ("axis" in point.coords or point.coords.get("reference")):
        value = point.coords.get("axis")
        axis = {f"axis.{axis_name}": "reference" if value is None else value}
    params = {"algorithm": point.algorithm, "label": point.label, "problem": point.problem, "seed": seed,
              "instance_seed": point.instance_seed, "n_evals": point.n_evals, **axis,
              **{f"alg.{k}": v for k, v in point.algorithm_params.items() if v is not None},
              **_prefixed("problem.", point.problem_params), **_prefixed("budget.", point.budget)}
    return {k: v for k, v in params.items() if v is not None}


#: (prefix, id of a mapping) -> (the mapping, its prefixed values): the points of a grid share their problem's
#: parameters and budget (sweep.results.study_file), made once for them all (at 10⁵ points the per-point copies were
#: half of the runs table's time).
_PREFIXED: dict[tuple[str, int], tuple[Any, dict[str, Any]]] = {}
_PREFIXED_MAX = 4096


def _prefixed(prefix: str, mapping: dict[str, Any]) -> dict[str, Any]:
    """{prefix + name: value} of a mapping's values that are not None (a point's mappings never change)."""
    hit = _PREFIXED.get((prefix, id(mapping)))
    if hit is not None and hit[0] is mapping:  # the cache holds the mapping: its id is not another's meanwhile
        return hit[1]
    if len(_PREFIXED) >= _PREFIXED_MAX:
        _PREFIXED.clear()
    out = {f"{prefix}{k}": v for k, v in mapping.items() if v is not None}
    _PREFIXED[(prefix, id(mapping))] = (mapping, out)
    return out


def shared_params(study: Study) -> dict[str, str]:
    """The parameters (as MLflow stores them) of equal value in every run of the study."""
    shared: dict[str, Any] | None = None  # name -> the first point's value, while every point has it (type and value)
    before, alg = None, []  # the point before; the alg.* names among `shared`
    for point in study.points:
        if shared is not None and _same_frame(point, before, study.axis_name):
            # Only its algorithm's parameters may differ from the point before's (a grid's points; 10⁵: 0.48 -> 0.1 s).
            mine = point.algorithm_params
            gone = [k for k in alg if not _same(mine.get(k[4:]), shared[k])]  # (never None: child_params drops those)
        else:
            params = child_params(point, study.seeds[0], study.axis_name)
            if shared is None:
                shared = dict(params)
            gone = [k for k, v in shared.items() if not _same(params.get(k, _ABSENT), v)]
        if gone or before is None:
            for name in gone:
                del shared[name]
            alg = [k for k in shared if k.startswith("alg.")]
        if not shared:
            break
        before = point
    if shared and len(study.seeds) > 1:
        shared.pop("seed", None)
    return {k: str(v)[:6000] for k, v in (shared or {}).items()}


_ABSENT = object()


def _same_frame(point: Point, before: Point | None, axis_name: str | None) -> bool:
    """Whether the child parameters of `point` and `before` can differ only in `alg.*` (no axis; the same problem
    parameters and budget, one mapping each; the same values besides)."""
    return (before is not None and axis_name is None and point.problem_params is before.problem_params
            and point.budget is before.budget and all(getattr(point, n) == getattr(before, n) for n in _FRAME))


_FRAME = ("algorithm", "label", "problem", "instance_seed", "n_evals")


def _same(a: Any, b: Any) -> bool:
    """Values whose text is the same, compared without making it for the usual scalars: equal and of one type (1 and
    1.0, or True and 1, are not); a container also by its text ([1, 2] and [1.0, 2.0] are equal, not the same)."""
    if a is b:
        return True
    if type(a) is not type(b) or a != b:
        return False
    return type(a) in _SCALARS or str(a) == str(b)


_SCALARS = frozenset({int, float, str, bool})
