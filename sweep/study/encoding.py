"""The JSON text point keys, batch keys and study.json are made of: `json.dumps(..., sort_keys=True, default=repr)`
exactly (a point's key names its runs' results, so one character more would orphan them), made faster for the
many points of a grid."""
from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

#: id(value) -> (value, its JSON): the parameter mappings and budgets a grid's points share (kept alive, so an
#: id is never reused while cached), encoded once instead of once per point (10⁵ points: 10 s -> 1 s).
_ENCODED: dict[int, tuple[Any, str]] = {}
_ENCODED_MAX = 4096
_STRING = json.encoder.encode_basestring_ascii  # what json.dumps gives a str (ensure_ascii)


def json_encoder(sort_keys: bool) -> Callable[[Any], str]:
    """json.dumps(value, sort_keys=sort_keys, default=repr) of acyclic values (a study's are plain data) with one
    encoder made once: json.dumps makes one per call, and JSONEncoder.encode one C encoder per call with its
    cycle check (3.7 -> 1.8 µs for an algorithm's config, which every point has its own of)."""
    make = json.encoder.c_make_encoder
    if make is None:  # a Python without json's C speedups
        return json.JSONEncoder(sort_keys=sort_keys, default=repr).encode
    encode = make(None, repr, _STRING, None, ": ", ", ", sort_keys, False, True)
    return lambda value: "".join(encode(value, 0))


_JSON = json_encoder(sort_keys=True)


def encoded_list(parts: Sequence[Any]) -> str:
    """json.dumps(list(parts), sort_keys=True, default=repr), each mapping among the parts encoded once for the
    many points sharing it."""
    return "[" + ", ".join(map(_encoded, parts)) + "]"


def _encoded(value: Any) -> str:
    """json.dumps(value, sort_keys=True, default=repr), cached for mappings."""
    kind = type(value)
    if kind is str:  # the usual scalars without json.dumps' per-call set-up (~2 µs; 4 of a point's 7 parts)
        return _STRING(value)
    if kind is int:
        return int.__repr__(value)
    if value is None:
        return "null"
    if kind is not dict:
        return _JSON(value)
    hit = _ENCODED.get(id(value))
    if hit is not None and hit[0] is value:
        return hit[1]
    if len(_ENCODED) >= _ENCODED_MAX:
        _ENCODED.clear()
    text = _JSON(value)
    _ENCODED[id(value)] = (value, text)
    return text
