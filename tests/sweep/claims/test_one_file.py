"""A paper claim is one file: its module registers the statements and defines the study it reads; discovery,
`bisweep list studies`, validation and the generic claim tests (test_base.py) all find it there."""
from __future__ import annotations

import sys
import textwrap

import pytest

from problems.validation import ParameterError
from sweep import claims
from sweep.claims import base
from sweep.study import spec
from tests.installed import bisweep, generic_claim_tests, install

#: A whole claim with its study in one module: a criterion quoting its paper, a setup table with a quoted `same`
#: row, and the study as YAML text (validated by the same model as a study file).
MODULE = textwrap.dedent('''
    """Toy paper: SOBA's final squared hypergradient norm is below 1e-3 on a conditioned quadratic."""
    from sweep.claims import Criterion, Estimate, Measured, chosen, claim, quoted, setting
    from sweep.report import analysis as an

    STUDY = """
    name: one_file_study
    description: SOBA on a 4-dimensional quadratic, its step sizes x0.5 and x1
    kind: stepsize_sensitivity
    axis: {factors: [0.5, 1]}
    problems: [{name: quadratic, params: {dim_x: 4, dim_y: 4}}]
    algorithms: [soba]
    seeds: 2
    budget: {iterations: 30}
    """
    SMALL = Criterion("one_file_small", "Toy §1: 'below 1e-3'", 1e-3, "max")


    def setup(meta):
        dims = meta.points[0]["problem_params"]["dim_x"]
        return [quoted(setting("dimensions", "Toy §1", f"d = {dims}"), f"on a quadratic with d = 4", f"d = {dims}"),
                chosen("seeds", f"{len(meta.seeds)} seeds")]


    @claim("one_file_claim", kind="stepsize_sensitivity", title="toy", study=STUDY, setup=setup, criteria=(SMALL,),
           statement="SOBA's final squared hypergradient norm is below 1e-3.")
    def one_file_claim(meta, runs, directory):
        finals = [an.final_value({"status": r.status, "final": r.final}, "grad_F_sq") for r in runs]
        e = Estimate.point(an.median(finals))
        return Measured("median over runs", {"measured": [{"final": e.value}]},
                        [SMALL.verdict("final below 1e-3", [e], f"{e.value:.3g}")])
''')


def test_a_claim_with_its_study_in_one_file_is_listed_loaded_and_named_back(tmp_path, monkeypatch):
    (tmp_path / "onefile_claim.py").write_text(MODULE)
    monkeypatch.syspath_prepend(str(tmp_path))
    import importlib

    importlib.import_module("onefile_claim")
    try:
        assert "one_file_study" in spec.studies() and spec.claim_study("one_file_claim") == "one_file_study"
        st = spec.load("one_file_study")
        assert (st.name, st.claim, st.kind, len(st.points), len(st.seeds)) == ("one_file_study", "one_file_claim",
                                                                               "stepsize_sensitivity", 2, 2)
        with pytest.raises(ParameterError, match=r"built-in: .*one_file_study"):
            spec.load("one_file_stud")
    finally:
        del base.CLAIMS["one_file_claim"]
        sys.modules.pop("onefile_claim", None)


def _register(name: str, study):
    return claims.claim(name, kind="comparison", title="t", statement="s", study=study)(lambda m, r, d: None)


def test_a_claims_study_must_name_that_claim_and_no_other_study():
    _register("test_claim_other", {"name": "other_study", "claim": "bome_fig1", "kind": "comparison"})
    try:
        with pytest.raises(ParameterError, match="claim: 'test_claim_other' defines a study that names claim "
                                                 "'bome_fig1'"):
            spec.studies()
    finally:
        del base.CLAIMS["test_claim_other"]
    _register("test_claim_twice", "name: bome_toys\nkind: comparison\n")
    try:
        with pytest.raises(ParameterError, match="study: 'bome_toys' is defined twice: by claim 'test_claim_twice' "
                                                 "and by sweep/studies/bome_toys.yaml"):
            spec.load("quickstart")
    finally:
        del base.CLAIMS["test_claim_twice"]
    with pytest.raises(TypeError, match="study must be a study name, YAML text or a mapping"):
        _register("test_claim_bad", 3)


def test_a_dropped_in_claim_module_is_seen_by_the_cli_and_the_generic_claim_tests(tmp_path):
    """Installed as a plugin (entry point), the one file is discovered: `bisweep list studies` names its module,
    and the generic claim tests run on it and pass (loading its study)."""
    site = install(tmp_path / "site", "onefile", {"__init__.py": "", "paper_claim.py": MODULE},
                   {"paper_claim": "onefile.paper_claim"})
    code, out, err = bisweep(["list", "studies"], site, tmp_path)
    assert code == 0 and err == []
    listed = [ln for ln in out.splitlines() if ln.startswith("one_file_study:")]
    assert listed and "SOBA on a 4-dimensional quadratic" in listed[0]
    assert str(site / "onefile" / "paper_claim.py") in out
    passed = generic_claim_tests("one_file_claim", site)
    # can disagree, names its study back, and the same-row check at default (the other scales do not exist)
    assert passed == (3, 3), passed
