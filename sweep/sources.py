"""Where studies come from: the built-in YAML files and user files, read with a YAML 1.2-style float rule."""
from __future__ import annotations

import importlib
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

from problems.validation import ParameterError
from sweep.errors import fail, shown
from sweep.model import DEFAULT_SCALE

STUDIES_DIR = Path(__file__).parent / "studies"
#: What a study name may be (as `run` checks it): never a path.
STUDY_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")


class _Loader(yaml.SafeLoader):
    """YAML loader that reads 1e-6 as a float (YAML 1.1 needs a dot in the mantissa) and refuses duplicate keys."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: dict[Any, int] = {}
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            if isinstance(key, (str, int, float, bool)) and key in seen:
                raise yaml.constructor.ConstructorError(
                    None, None, f"duplicate key {key!r} (first on line {seen[key] + 1})", key_node.start_mark)
            if isinstance(key, (str, int, float, bool)):
                seen[key] = key_node.start_mark.line
        return super().construct_mapping(node, deep=deep)


_Loader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"^[-+]?(?:\d+\.?\d*|\.\d+)[eE][-+]?\d+$|^[-+]?\d+\.\d*$|^[-+]?\.\d+$|^[-+]?\.(?:inf|Inf|INF)$|^\.(?:nan|NaN|NAN)$"),
    list("-+0123456789."),
)


def builtin_studies() -> dict[str, Path]:
    """Built-in study names and their files."""
    return {p.stem: p for p in sorted(STUDIES_DIR.glob("*.yaml"))}


def resolve(study: str) -> Path:
    """The YAML file of a built-in name or a path."""
    path = Path(study)
    if path.suffix in (".yaml", ".yml") or path.exists():
        if not path.is_file():
            fail("study", f"file {str(path)!r} does not exist")
        return path
    known = builtin_studies()
    if study not in known:
        fail("study", f"unknown study {study!r}; built-in: {', '.join(known)} (or give a .yaml file)")
    return known[study]


def read(path: Path) -> dict[str, Any]:
    """The mapping of study fields in a YAML file (a parse error names the line)."""
    try:
        data = yaml.load(path.read_text(), Loader=_Loader)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" line {mark.line + 1}" if mark is not None else ""
        fail("study", f"{path} is not valid YAML{where}: {getattr(exc, 'problem', exc)}")
    if not isinstance(data, dict):
        fail("study", f"{path} must hold a mapping of study fields, got {shown(data)}")
    return data


def import_plugins(modules: Sequence[str]) -> None:
    """Import modules that register further algorithms, problems, kinds or claims."""
    for m in modules:
        importlib.import_module(m)


# ---------------------------------------------------------------- where a study's results are
def study_name(study: str) -> str:
    """The name of a study (built-in, YAML file or bare name), checked like `run` checks it."""
    try:
        path = resolve(study)
    except ParameterError:
        name: Any = study
    else:
        try:
            data = yaml.safe_load(path.read_text()) or {}
        except yaml.YAMLError:
            data = {}
        name = data.get("name", path.stem) if isinstance(data, dict) else path.stem
    if not isinstance(name, str) or not STUDY_NAME.fullmatch(name):
        raise ParameterError(f"study: the name must be letters, digits, '_', '.', '-' (no path), got {name!r}")
    return name


def results_dir(name: str, scale: str | None = None, given: str | Path | None = None) -> Path:
    """`given`, else ./results/<name> (./results/<name>-<scale> at a named scale other than the default)."""
    suffix = f"-{scale}" if scale and scale != DEFAULT_SCALE else ""
    return Path(given or Path("results") / f"{name}{suffix}").resolve()
