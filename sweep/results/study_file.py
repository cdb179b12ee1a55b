"""study.json's layout: the study's head, then its points, each value that every point shares written once.

    {"name": ..., <the rest of the head>,
     "point_fields": ["key", "algorithm", "label", ...],          a point's fields, in order
     "point_common": {"algorithm": "soba", "budget": {...}, ...},  the values every point has
     "points": [{"key": ..., "algorithm_params": {...}, "coords": {...}}, ...]}   the others, point by point

A grid's points differ in a few fields (the gridded parameters, their coordinates) and share the rest (the
problem and its parameters, the budget, the labels). Written once, those take neither bytes per point in the file
nor an object per point once read: every point read holds the same objects for them (at 10⁵ configurations the
points as dicts took ~200 MB and ~1.3 s to parse, most of it copies of the shared values). A reader must therefore
treat a point as unchanging (as reports, kinds and claims do). A file without `point_common` (older drivers)
reads as it is.
"""
from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from problems.shared.errors import ParameterError

from sweep.results import gc_pause
from sweep.results.safe_files import open_file
from sweep.study.encoding import json_encoder
from sweep.study.model import OPTIONAL_POINT_FIELDS, Point


def common_fields(points: Sequence[Point]) -> tuple[list[str] | None, dict[str, Any]]:
    """(a point's fields in order, the values of those every point has equal); (None, {}) when the points do not
    all have the same fields (a JAX study's drawing points alone have `streams`)."""
    first = points[0].to_dict()
    shared = {n: v for n, v in first.items() if n != "key"}
    has = [n in first for n in OPTIONAL_POINT_FIELDS]
    for point in points[1:]:  # read as attributes, not as each point's `to_dict` (10⁵ points: 0.3 -> 0.1 s)
        if [getattr(point, n) is not None for n in OPTIONAL_POINT_FIELDS] != has:
            return None, {}
        for n in [n for n, v in shared.items() if (mine := getattr(point, n)) is not v and mine != v]:
            del shared[n]
    return list(first), shared


def write(path: Path, head: dict[str, Any], points: Sequence[Point]) -> None:
    """study.json at `path`, written point by point (at 10⁵ configurations the whole text at once took ~70 MB
    and seconds) to a temporary file renamed into place: each point's own values, with the values every point
    shares written once (`point_common`), or each point whole when they do not all have the same fields."""
    fields, common = common_fields(points) if points else ([], {})
    layout = {} if fields is None else {"point_fields": fields, "point_common": common}
    own = [n for n in fields or () if n not in common]
    tmp = path.with_suffix(".json.tmp")
    with open_file(tmp, "w") as fh:
        fh.write("{\n")
        for k, v in {**head, **layout}.items():
            fh.write(f" {json.dumps(k)}: {json.dumps(v, default=repr)},\n")
        fh.write(' "points": [')
        encode = json_encoder(sort_keys=False)  # one encoder, not one per point (json.dumps')
        for i, point in enumerate(points):
            d = {n: getattr(point, n) for n in own} if common else point.to_dict()
            fh.write(("\n  " if i == 0 else ",\n  ") + encode(d))
        fh.write("\n ]\n}\n")
    os.replace(tmp, path)


def read(path: Path) -> Any:
    """The parsed study.json at `path`, its points whole again (sharing the common values); the head and the
    points' keys are the caller's to check."""
    meta = gc_pause.json_loads(path.read_text())
    if not isinstance(meta, dict) or "point_common" not in meta:
        return meta
    fields, common, points = meta.pop("point_fields", None), meta.pop("point_common"), meta.get("points")
    if not isinstance(common, dict) or "key" in common:
        raise ParameterError(f"study.json: point_common must be a mapping of the fields every point shares "
                             f"(never 'key'), got {str(common)[:80]!r}")
    if not isinstance(fields, list) or not all(isinstance(f, str) for f in fields) or not set(common) <= set(fields):
        raise ParameterError(f"study.json: point_fields must list a point's field names (point_common's among "
                             f"them), got {str(fields)[:80]!r}")
    if not isinstance(points, list) or not all(isinstance(p, dict) for p in points):
        return meta  # the caller says what is wrong with the points
    try:
        meta["points"] = [{f: p[f] if f in p else common[f] for f in fields} for p in points]
    except KeyError as exc:
        raise ParameterError(f"study.json: a point lacks its field {exc.args[0]!r} (neither its own nor in "
                             "point_common)") from None
    return meta
