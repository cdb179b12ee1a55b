"""The documentation site builds with warnings as errors (broken links, missing references, failing
gallery examples), and its generated reference pages list what the registries and the parser hold."""
import fcntl
import json
import subprocess
import sys
from pathlib import Path

import pytest

from sweep import cli

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("html")
    # sphinx-gallery writes docs/gallery in the source tree: one build at a time when pytest-xdist gives this
    # module's tests to several workers (`-n 2` without `--dist loadfile`), whose temporary roots share a parent.
    with open(tmp_path_factory.getbasetemp().parent / "docs-build.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        proc = subprocess.run([sys.executable, "-m", "sphinx", "-W", "--keep-going", "-q", "-b", "html",
                               "-d", str(out / ".doctrees"), str(REPO / "docs"), str(out)],
                              capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return out


def test_the_site_builds_with_warnings_as_errors(site: Path):
    for page in ("index", "getting-started", "changelog", "reference/cli", "reference/study-schema",
                 "reference/algorithms", "reference/problems", "reference/api", "gallery/index"):
        assert (site / f"{page}.html").is_file(), page


def built_in(what: str) -> list[str]:
    """The built-in names of a registry, from a fresh process (tests here register toy ones)."""
    code = f"import json, {what}; print(json.dumps(list({what}.available())))"
    return json.loads(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                                     cwd=REPO).stdout)


def test_the_reference_lists_every_algorithm_problem_and_option(site: Path):
    algos = (site / "reference/algorithms.html").read_text()
    names = built_in("algorithms")
    assert len(names) >= 30 and all(f'id="{name.replace("_", "-")}"' in algos for name in names)
    probs = (site / "reference/problems.html").read_text()
    names = built_in("problems")
    assert len(names) >= 10 and all(f'id="{name.replace("_", "-")}"' in probs for name in names)
    cli_page = (site / "reference/cli.html").read_text()
    for action in cli.parser()._subparsers._group_actions[0].choices["run"]._actions:
        if action.dest == "help":  # the parser's own -h, not shown
            continue
        assert all(opt in cli_page for opt in action.option_strings), action.option_strings
    schema = (site / "reference/study-schema.html").read_text()
    assert "report.converged_below" in schema and "a positive number" in schema


def test_the_gallery_examples_ran_and_drew_their_figures(site: Path):
    images = sorted(p.name for p in (site / "_images").glob("sphx_glr_plot_*"))
    for example in ("tfbo_vs_soba", "stepsize_sensitivity", "small_study"):  # the last one runs a study on Ray
        assert any(example in n for n in images), (example, images)
