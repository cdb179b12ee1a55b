"""`bisweep cluster check cluster.yaml`: a Ray cluster-launcher file checked offline, as `ray up` would check it
before its first cloud call (Ray's own defaults, then Ray's own JSON schema), with one line per error. Imports
Ray's launcher: `bisweep` loads this module only for that command.

Also checks that a node type with GPUs runs a GPU image, says which optional packages `ray up` needs for the
file's cloud (the `[aws]` and `[gcp]` extras), and what it cannot check offline (credentials, quota, images).
"""
from __future__ import annotations

import copy
import importlib.util
import json
import logging
from pathlib import Path
from typing import Any

import jsonschema
import ray.autoscaler
import yaml
from ray.autoscaler._private.util import prepare_config, validate_config

#: The packages `ray up` imports for a provider, and the extra of this project that installs them.
PROVIDER_PACKAGES = {"aws": (("boto3", "botocore"), "aws"), "gcp": (("googleapiclient", "google_auth_httplib2"), "gcp")}


def check(path: str | Path) -> tuple[list[str], list[str]]:
    """(errors, notes) of the cluster file: each error one line naming the field; notes say what `ray up` lacks."""
    name = str(path)
    try:
        raw = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        return [f"{name}: cannot read the file ({exc})"], []
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        return [f"{name}: not valid YAML{f' (line {mark.line + 1})' if mark else ''}: {getattr(exc, 'problem', exc)}"], []
    if not isinstance(raw, dict):
        return [f"{name}: must hold a mapping of cluster fields, got {type(raw).__name__}"], []
    provider = raw.get("provider")
    if not isinstance(provider, dict) or not isinstance(provider.get("type"), str):
        return [f"{name}: provider.type: required (aws, gcp, azure, local, ...)"], []
    errors = _schema_errors(name, raw)
    if not errors:
        errors = _gpu_errors(name, raw)
    return errors, ([] if errors else [*_missing_packages(provider["type"]), UNCHECKED])


#: What no offline check can know, said after every check that passes.
UNCHECKED = ("not checked (offline): credentials and the nodes' access to --storage, that the region, zones and "
             "project exist and have quota for these instance types, and that the docker images can be pulled")


def _gpu_errors(name: str, raw: dict[str, Any]) -> list[str]:
    """A node type with GPUs that runs a CPU-only image (Ray's `-cpu` images have no CUDA): its trials would find
    no GPU to use."""
    docker = raw.get("docker") or {}
    lines = []
    for node_type, spec in (raw.get("available_node_types") or {}).items():
        if not (spec.get("resources") or {}).get("GPU"):
            continue
        head = node_type == raw.get("head_node_type")
        image = ((spec.get("docker") or {}).get("worker_image") if not head else None) \
            or docker.get("head_image" if head else "worker_image") or docker.get("image")
        if image and str(image).endswith("-cpu"):
            lines.append(f"{name}: available_node_types.{node_type}: has GPUs but runs the CPU-only image {image}; "
                         "give it a GPU image (docker.worker_image: rayproject/ray:<version>-py311-gpu)")
    return lines


def _schema_errors(name: str, raw: dict[str, Any]) -> list[str]:
    """What Ray's schema says of the file as written (a field Ray's defaults fill may be left out), then of the file
    with Ray's defaults for its provider filled in, as `ray up` checks it."""
    schema = json.loads((Path(ray.autoscaler.__file__).parent / "ray-schema.json").read_text())
    lines = _validate(name, raw, schema, skip=("required",))
    if lines:
        return lines
    quiet = logging.getLogger("ray.autoscaler")
    level = quiet.level
    quiet.setLevel(logging.WARNING)  # Ray logs each default it fills in
    try:
        config = prepare_config(copy.deepcopy(raw))
        lines = _validate(name, config, schema)
        if not lines:
            validate_config(config)  # Ray's checks beyond the schema (head node type, worker counts)
    except Exception as exc:  # noqa: BLE001  Ray's preparation and checks name the problem in their message
        lines.append(f"{name}: {_first_line(exc)}")
    finally:
        quiet.setLevel(level)
    return lines


def _validate(name: str, config: Any, schema: dict[str, Any], skip: tuple[str, ...] = ()) -> list[str]:
    """One line per error of Ray's JSON schema (draft 7), in the order of the fields."""
    found = [e for e in jsonschema.Draft7Validator(schema).iter_errors(config) if e.validator not in skip]
    found.sort(key=lambda e: list(map(str, e.path)))
    return [f"{name}: {'.'.join(map(str, e.path)) or '(top level)'}: {_first_line(e.message)}" for e in found]


def _missing_packages(provider: str) -> list[str]:
    """A note when `ray up` would stop at once for lack of the provider's packages."""
    packages, extra = PROVIDER_PACKAGES.get(provider, ((), ""))
    missing = [p for p in packages if importlib.util.find_spec(p) is None]
    if not missing:
        return []
    return [f"note: `ray up` needs {', '.join(missing)} for provider {provider}: pip install -e '.[{extra}]'"]


def _first_line(exc: object) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0][:300]
