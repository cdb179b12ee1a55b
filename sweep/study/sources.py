"""Where studies come from: the built-in YAML files and user files, read with a YAML 1.2-style float rule.

A file is checked before it is parsed: at most `MAX_FILE_BYTES`, UTF-8 text (not binary, not UTF-16 or
Latin-1), nested at most `MAX_DEPTH` deep (counted on the parser's events, so a list nested 10,000 deep
is refused without recursing into it). libyaml parses it (the pure-Python parser took 93 s on 10 MB).
"""
from __future__ import annotations

import codecs
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

from problems.shared.errors import ParameterError
from sweep.study.errors import fail, shown
from sweep.study.limits import MAX_DEPTH
from sweep.study.model import DEFAULT_SCALE

STUDIES_DIR = Path(__file__).parents[1] / "studies"
#: What a study name may be (as `run` checks it): never a path.
STUDY_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")


#: The largest study file read: a 100 × 100 matrix written out takes ~100 kB; parsing 256 kB takes ~1 s.
MAX_FILE_BYTES = 1 << 18
_SafeLoader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml's parser when PyYAML was built with it


class _Loader(_SafeLoader):  # type: ignore[valid-type,misc]
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


def is_path(study: str) -> bool:
    """Whether `study` names a file (a .yaml/.yml name or an existing path) rather than a built-in study."""
    return Path(study).suffix in (".yaml", ".yml") or Path(study).exists()


def resolve(study: str, others: Sequence[str] = ()) -> Path:
    """The YAML file of a built-in name or a path (`others`: the built-in studies defined elsewhere, for the error)."""
    path = Path(study)
    if is_path(study):
        if not path.is_file():
            fail("study", f"file {str(path)!r} does not exist")
        return path
    known = builtin_studies()
    if study not in known:
        fail("study", f"unknown study {study!r}; built-in: {', '.join(sorted([*known, *others]))} (or give a .yaml file)")
    return known[study]


def text(path: Path) -> str:
    """The text of a study file: at most MAX_FILE_BYTES of UTF-8, else a one-line error saying what it is."""
    try:
        size = path.stat().st_size
        if size > MAX_FILE_BYTES:
            fail("study", f"{path} is {size:,} bytes, more than the {MAX_FILE_BYTES:,} a study file may have")
        raw = path.read_bytes()
    except OSError as exc:
        fail("study", f"cannot read {path} ({exc.strerror or exc})")
    for bom, name in ((codecs.BOM_UTF32_LE, "UTF-32"), (codecs.BOM_UTF32_BE, "UTF-32"), (codecs.BOM_UTF16_LE, "UTF-16"),
                      (codecs.BOM_UTF16_BE, "UTF-16")):
        if raw.startswith(bom):
            fail("study", f"{path} is {name} text; save it as UTF-8")
    if b"\0" in raw:
        fail("study", f"{path} is a binary file (it holds NUL bytes), not YAML text")
    try:
        return raw.decode("utf-8").removeprefix("\ufeff")
    except UnicodeDecodeError as exc:
        line = raw[:exc.start].count(b"\n") + 1
        fail("study", f"{path} is not UTF-8 text (byte 0x{raw[exc.start]:02x} on line {line}); save it as UTF-8")


def _check_depth(source: str, path: Path) -> None:
    """Nesting of at most MAX_DEPTH, counted on the parser's events (no recursion, stops at the first excess)."""
    depth = 0
    for event in yaml.parse(source, Loader=_SafeLoader):
        if isinstance(event, (yaml.SequenceStartEvent, yaml.MappingStartEvent)):
            depth += 1
            if depth > MAX_DEPTH:
                fail("study", f"{path} nests lists and mappings more than {MAX_DEPTH} deep (line "
                              f"{event.start_mark.line + 1})")
        elif isinstance(event, (yaml.SequenceEndEvent, yaml.MappingEndEvent)):
            depth -= 1


def read(path: Path) -> dict[str, Any]:
    """The mapping of study fields in a YAML file (a parse error names the line)."""
    return parse(text(path), path)


def parse(source: str, where: Path | str) -> dict[str, Any]:
    """The mapping of study fields in YAML text read from `where` (a file, a claim's module)."""
    if len(source.encode()) > MAX_FILE_BYTES:
        fail("study", f"{where} holds a study of more than the {MAX_FILE_BYTES:,} bytes a study file may have")
    try:
        _check_depth(source, Path(where))
        data = yaml.load(source, Loader=_Loader)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = f" line {mark.line + 1}" if mark is not None else ""
        fail("study", f"{where} is not valid YAML{line}: {getattr(exc, 'problem', exc)}")
    if not isinstance(data, dict):
        fail("study", f"{where} must hold a mapping of study fields, got {shown(data)}")
    return data


# ---------------------------------------------------------------- where a study's results are
def study_name(study: str) -> str:
    """The name of a study (built-in, YAML file or bare name), checked like `run` checks it."""
    try:
        path = resolve(study)
    except ParameterError:
        name: Any = study
    else:
        try:
            data = read(path)
        except ParameterError:  # run names the file's errors; here the name is what counts
            data = {}
        name = data.get("name", path.stem) if isinstance(data, dict) else path.stem
    if not isinstance(name, str) or not STUDY_NAME.fullmatch(name):
        raise ParameterError(f"study: the name must be letters, digits, '_', '.', '-' (no path), got {name!r}")
    return name


def results_dir(name: str, scale: str | None = None, given: str | Path | None = None) -> Path:
    """`given`, else ./results/<name> (./results/<name>-<scale> at a named scale other than the default)."""
    suffix = f"-{scale}" if scale and scale != DEFAULT_SCALE else ""
    return checked_dir(given or Path("results") / f"{name}{suffix}")


def checked_dir(path: str | Path, field: str = "results-dir") -> Path:
    """`path` resolved; one line when it holds a control character (a newline would split every line that names
    it) or is a symbolic link loop."""
    if any(ord(c) < 32 or ord(c) == 127 for c in str(path)):
        raise ParameterError(f"{field}: {str(path)[:200]!r} holds a control character (a newline, a tab...); "
                             "give a path without one")
    try:
        return Path(path).resolve()
    except (RuntimeError, OSError) as exc:  # Python 3.11 raises RuntimeError('Symlink loop ...')
        raise ParameterError(f"{field}: {str(path)[:200]} cannot be resolved: a symbolic link loop "
                             f"({str(exc)[:120]})") from None
