"""Reference pages generated from the code at build time, so they cannot go stale.

Directives (RST; from a MyST page inside an ```{eval-rst}``` block, whose content is parsed as RST):
- ``bisweep-registry algorithms|problems``: every registered entry with its flags, paper and parameters
  (default, check, description), from the same records `bisweep list --json` prints;
- ``bisweep-schema``: every study field with its type, default and description, from the pydantic models;
- ``bisweep-studies``: the built-in studies, their kinds, algorithms, problems and scales.
"""
from __future__ import annotations

import typing
from typing import Any

from docutils import nodes
from docutils.parsers.rst import directives
from docutils.statemachine import StringList
from sphinx.application import Sphinx
from sphinx.util.docutils import SphinxDirective
from sphinx.util.nodes import nested_parse_with_titles


def _cell(text: Any) -> str:
    """One table cell on one line (list-table cells are RST paragraphs)."""
    s = " ".join(str(text).split())
    return s.replace("|", "\\|") if s else " "


def _literal(value: Any) -> str:
    text = repr(value)
    return f"``{text}``" if "`" not in text else text


def list_table(header: list[str], rows: list[list[str]], widths: str = "auto") -> list[str]:
    """An RST list-table."""
    out = [".. list-table::", "   :header-rows: 1", f"   :widths: {widths}", ""]
    for row in [header, *rows]:
        out.append(f"   * - {_cell(row[0])}")
        out.extend(f"     - {_cell(c)}" for c in row[1:])
    return out + [""]


def registry_rst(what: str) -> list[str]:
    """Sections of every algorithm or problem of the registry `what`."""
    from sweep.cli import _listing

    out: list[str] = []
    for name, info in sorted(_listing(what).items()):
        out += [name, "~" * len(name), "", _cell(info.get("doc", "")), ""]
        facts = [f"**{k.replace('_', ' ')}**" for k in ("first_order", "stochastic", "online", "constrained",
                                                        "finite_sum") if info.get(k)]
        if "loops" in info:
            facts.insert(0, f"**{info['loops']} loop**")
        if info.get("step_sizes"):
            facts.append("initial step sizes: " + ", ".join(f"``{s}``" for s in info["step_sizes"]))
        if info.get("paper"):
            facts.append("paper: " + _cell(info["paper"]))
        if facts:
            out += [" · ".join(facts), ""]
        params = info.get("params") or {}
        if params:
            rows = [[f"``{p}``", _literal(d["default"]),
                     f"one of {', '.join(map(str, d['choices']))}" if "choices" in d else d["check"], d["doc"]]
                    for p, d in params.items()]
            out += list_table(["parameter", "default", "allowed", "meaning"], rows, "20 15 20 45")
    return out


def _type_name(field: Any) -> str:
    """What a field accepts, in words: the `allowed` text its check carries, else the Python type."""
    annotation = field.annotation
    for meta in [*field.metadata, *getattr(annotation, "__metadata__", ())]:
        allowed = getattr(meta, "allowed", None)
        if allowed:
            return allowed
    inner = typing.get_args(annotation)[0] if typing.get_origin(annotation) is typing.Annotated else annotation
    if isinstance(inner, type) and hasattr(inner, "model_fields"):
        return f"mapping ({inner.__name__})"
    text = getattr(inner, "__name__", None) or str(inner).replace("typing.", "")
    return "any" if text == "Any" else text


def _default(field: Any) -> str:
    value = field.default
    if hasattr(value, "model_dump"):
        value = value.model_dump()
    return _literal(value)


def _examples(field: Any) -> str:
    """The field's examples as YAML flow values (``{factors: [0.5, 1, 2]}``), or a dash."""
    import yaml

    shown = [yaml.safe_dump(e, default_flow_style=True, width=10**6).strip().removesuffix("...").strip()
             for e in field.examples or ()]
    return " or ".join(f"``{e}``" for e in shown) or "-"


def _title(text: str, rubric: bool) -> list[str]:
    """A section title, or a rubric (a heading that is no section, so a page may hold the tables twice)."""
    return [f".. rubric:: {text}", ""] if rubric else [text, "~" * len(text), ""]


def schema_rst(rubrics: bool = False) -> list[str]:
    """Tables of the study fields, the report and resources blocks, and each kind's axis."""
    from sweep import kinds
    from sweep.study import schema

    def table(model: Any, prefix: str = "") -> list[str]:
        rows = [[f"``{prefix}{n}``", _type_name(f), _default(f), _examples(f),
                 f.description or (model.__doc__ or "").split("\n")[0]]
                for n, f in model.model_fields.items()]
        return list_table(["field", "type", "default", "example", "meaning"], rows, "15 22 12 21 30")

    out = _title("Study fields", rubrics) + table(schema.StudyBase)
    out += _title("``report``", rubrics) + table(schema.ReportSpec, "report.")
    out += _title("``resources``", rubrics) + table(schema.Resources, "resources.")
    out += _title("Axes by kind", rubrics)
    rows = []
    for name in kinds.names():
        axis_type, axis_default = kinds.get(name).axis_field()
        fields = getattr(typing.get_args(axis_type)[0] if typing.get_args(axis_type) else axis_type,
                         "model_fields", None) or getattr(axis_type, "model_fields", {}) or {}
        doc = (kinds.get(name).__doc__ or "").strip().split("\n")[0]
        rows.append([f"``{name}``", ", ".join(f"``{f}``" for f in fields) or "none", doc])
    return out + list_table(["kind", "axis fields", "what varies"], rows, "20 35 45")


def studies_rst() -> list[str]:
    """A table of the built-in studies."""
    from sweep.cli import _listing

    rows = [[f"``{n}``", i["kind"], i["doc"], ", ".join(i["algorithms"]), ", ".join(i["problems"]),
             ", ".join(i["scales"])] for n, i in _listing("studies").items()]
    return list_table(["study", "kind", "what it runs", "algorithms", "problems", "scales"], rows,
                      "14 12 30 20 14 10")


class _Generated(SphinxDirective):
    """Parse generated RST in place."""

    optional_arguments = 1

    def lines(self) -> list[str]:
        raise NotImplementedError

    def run(self) -> list[nodes.Node]:
        container = nodes.section()  # titles allowed: each entry is a section of the page
        nested_parse_with_titles(self.state, StringList(self.lines(), source="<generated>"), container)
        return container.children


class RegistryDirective(_Generated):
    required_arguments = 1
    optional_arguments = 0

    def lines(self) -> list[str]:
        if self.arguments[0] not in ("algorithms", "problems"):
            raise self.error(f"bisweep-registry: expected algorithms or problems, got {self.arguments[0]!r}")
        return registry_rst(self.arguments[0])


class SchemaDirective(_Generated):
    optional_arguments = 0
    option_spec = {"rubrics": directives.flag}

    def lines(self) -> list[str]:
        return schema_rst(rubrics="rubrics" in self.options)


class StudiesDirective(_Generated):
    optional_arguments = 0

    def lines(self) -> list[str]:
        return studies_rst()


def setup(app: Sphinx) -> dict[str, Any]:
    app.add_directive("bisweep-registry", RegistryDirective)
    app.add_directive("bisweep-schema", SchemaDirective)
    app.add_directive("bisweep-studies", StudiesDirective)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
