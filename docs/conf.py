"""Sphinx configuration of the bilevel-sweep documentation (MyST Markdown pages, furo theme).

The reference pages are generated from the code when the site is built: the CLI from `sweep.cli.parser`,
the study schema from the pydantic models, algorithms and problems from their registries, the Python API
by autodoc; the gallery's examples are executed by sphinx-gallery.
"""
from __future__ import annotations

import sys
from pathlib import Path

DOCS = Path(__file__).resolve().parent
sys.path[:0] = [str(DOCS.parent), str(DOCS / "_ext")]

project = "bilevel-sweep"
author = "the bilevel-sweep developers"
copyright = "2026, the bilevel-sweep developers"
try:
    from importlib.metadata import version as _version

    release = _version("bilevel-sweep")
except Exception:  # noqa: BLE001  building from a tree that is not installed
    release = "0.1.0"

extensions = [
    "myst_parser",
    "sphinx.ext.autodoc",
    "sphinx.ext.napoleon",
    "sphinx.ext.mathjax",
    "sphinxarg.ext",
    "sphinx_gallery.gen_gallery",
    "bisweep_reference",
]
source_suffix = {".md": "markdown", ".rst": "restructuredtext"}
myst_enable_extensions = ["colon_fence", "dollarmath", "deflist"]
myst_heading_anchors = 3
exclude_patterns = ["_build", "_generated", "results/generated", "examples/*.md", "examples/README.txt"]
html_theme = "furo"
html_title = "bilevel-sweep"
html_static_path = ["_static"]
html_css_files = ["wide.css"]
autodoc_member_order = "bysource"
autodoc_typehints = "description"
autodoc_default_options = {"members": True, "undoc-members": False}
nitpicky = False

sphinx_gallery_conf = {
    "examples_dirs": "examples",
    "gallery_dirs": "gallery",
    "filename_pattern": r"/plot_",
    "download_all_examples": False,
    "remove_config_comments": True,
    "within_subsection_order": "FileNameSortKey",
}
default_role = "code"  # docstrings mark code with single backticks
