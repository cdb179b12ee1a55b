"""CONTRIBUTING.md is true: its algorithm, problem, kind and claim files work as written, their tests pass,
the study using all four validates, runs through the trial body and reports, and the package installed with
the page's entry points serves the same study without `imports:`."""
from __future__ import annotations

import importlib.util
import re
import tomllib
from pathlib import Path

import numpy as np
import pytest

from tests.installed import bisweep, generic_claim_tests, install

REPO = Path(__file__).resolve().parents[1]


def blocks() -> dict[str, str]:
    """The files CONTRIBUTING.md shows: `<!-- contributing: path -->` followed by a fenced block."""
    text = (REPO / "CONTRIBUTING.md").read_text()
    return {m.group(1): m.group(2) for m in
            re.finditer(r"<!-- contributing: (\S+) -->\n```\w+\n(.*?)```", text, flags=re.S)}


@pytest.fixture(scope="module")
def mypackage(tmp_path_factory):
    """The recipe's files written as the package `mypackage` on sys.path."""
    root = tmp_path_factory.mktemp("contributing")
    (root / "mypackage").mkdir()
    (root / "mypackage" / "__init__.py").write_text("")
    files = blocks()
    for name, code in files.items():
        (root / name).write_text(code)
    with pytest.MonkeyPatch.context() as mp:
        mp.syspath_prepend(str(root))
        yield root, files


def test_the_page_shows_four_modules_and_two_tests_the_claims_module_holding_the_study():
    assert sorted(blocks()) == ["mypackage/instance_claim.py", "mypackage/instances.py", "mypackage/my_gd.py",
                                "mypackage/my_scalar.py", "pyproject.toml", "test_my_gd.py", "test_my_scalar.py"]


@pytest.mark.parametrize("test_file", ["test_my_gd.py", "test_my_scalar.py"])
def test_the_recipe_tests_pass(mypackage, test_file):
    root, _ = mypackage
    spec = importlib.util.spec_from_file_location(test_file[:-3], root / test_file)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    tests = [getattr(module, n) for n in dir(module) if n.startswith("test_")]
    assert tests
    for t in tests:
        t()


def test_the_recipe_study_runs_and_reports(mypackage, tmp_path, run_through_platform):
    import algorithms
    import problems
    from sweep.report.build import build_report
    from sweep.study import spec

    from problems.shared.registries import import_modules

    root, _ = mypackage
    import_modules(["mypackage.instance_claim"])  # the claim's module defines the study
    st = spec.load("contributing")
    assert st.kind == "instances" and st.claim == "instances_robust" and len(st.points) == 2 * 3
    assert sorted({p.instance_seed for p in st.points}) == [0, 1, 2]
    run_through_platform(st, tmp_path)
    rep = build_report(tmp_path, quiet=True)
    rows = {(r["algorithm"], r["instance_seed"]): r for r in rep.tables["instances"]}
    for s in (0, 1, 2):  # my_gd is deterministic: both seeds end where the plain run loop ends
        plain = list(algorithms.run("my_gd", problems.make("my_scalar", seed=s), {}, seed=0,
                                    budget={"iterations": 50}))[-1]
        assert rows[("my_gd", s)]["median_F"] == pytest.approx(plain["F"], rel=1e-12)
    measured = {r["algorithm"]: r for r in rep.tables["claim_measured"]}
    finals = [rows[("my_gd", s)]["median_F"] for s in (0, 1, 2)]
    assert measured["my_gd"]["spread"] == pytest.approx(max(finals) / min(finals), rel=1e-12)
    assert [v["verdict"] for v in rep.tables["verdicts"]] == [
        "agrees" if measured[a]["spread"] <= 10 else "disagrees" for a in ("my_gd", "soba")]
    assert np.isfinite(measured["soba"]["spread"]) and (rep.directory / "instances.png").exists()


def test_the_installed_recipe_serves_the_claims_study_by_name_and_passes_the_generic_claim_tests(tmp_path):
    """Installed with the page's entry points, the claim's study is a built-in name, and the generic claim tests
    (tests/sweep/claims/test_base.py) pick the documented claim up and pass on it as written."""
    files = blocks()
    points = tomllib.loads(files["pyproject.toml"])["project"]["entry-points"]["bisweep.plugins"]
    assert sorted(points.values()) == sorted(n[:-3].replace("/", ".") for n in files if n.startswith("mypackage/"))
    modules = {n.removeprefix("mypackage/"): code for n, code in files.items() if n.startswith("mypackage/")}
    site = install(tmp_path / "site", "mypackage", {"__init__.py": "", **modules}, points)
    code, out, err = bisweep(["run", "contributing", "--validate-only"], site, tmp_path)
    assert (code, err) == (0, [])  # 2 algorithms x 3 instances
    assert "study 'contributing' (scale default) is valid: 6 configurations x 2 seeds = 12 runs" in out
    # can disagree, names its study back, its `same` row quotes the value (at the default scale; no others)
    assert generic_claim_tests("instances_robust", site) == (3, 3)
