"""The plugin recipe: a study kind and a paper claim from outside the platform (tests/sweep/toy_plugins.py),
brought in by a study's `imports:`, validated, run through the trial body and reported; and an installed
package's plugins, found through its entry points without `imports:`."""
import math
import sys

import numpy as np
import pytest
import yaml

import algorithms
import problems
from problems.counting import counted
from problems.shared.errors import ParameterError
from sweep import claims, kinds
from sweep.study import spec
from sweep.cli import main
from sweep.report.build import build_report
from tests.installed import bisweep, install

PLUGINS = ["tests.sweep.toy_algorithms", "tests.sweep.toy_plugins"]


def budget_study(toy_study, **fields):
    return toy_study(imports=PLUGINS, kind="budget_scaling", axis={"values": [5, 10, 20]}, seeds=2,
                     claim="toy_more_budget_helps", **fields)


def test_the_study_imports_register_the_kind_and_the_claim(toy_study):
    st = budget_study(toy_study)
    assert "budget_scaling" in kinds.names() and claims.CLAIMS["toy_more_budget_helps"].kind == "budget_scaling"
    assert [(p.budget["iterations"], p.coords["axis"]) for p in st.points] == [(5, 5), (10, 10), (20, 20)]
    assert st.axis_name == "iterations" and st.report.metric == "grad_F_sq" and len(st.run_keys) == 6


def test_the_plugin_kind_schema_reports_its_own_errors(spec_error):
    data = {"name": "b", "imports": PLUGINS, "kind": "budget_scaling", "problems": ["quadratic"],
            "algorithms": ["toy_aid"], "budget": {"iterations": 30}}
    spec_error({**data, "axis": {"values": [5, 0]}}, "axis.values[1]", "must be a positive integer, got 0")
    lines = spec_error({**data, "axis": {"valuez": [5]}}, "axis.values", "iteration budgets, got None", count=2)
    assert lines[1] == "axis.valuez: unknown field; did you mean 'values'? allowed: values"
    spec_error({**data, "axis": {"values": [5]}, "claim": "tfbo_table2"}, "claim",
               "checks a stepsize_sensitivity study, but this study's kind is budget_scaling")
    spec_error({**data, "kind": "stepsize_sensitivity", "axis": {"factors": [1]}, "claim": "toy_more_budget_helps"},
               "claim", "checks a budget_scaling study")


def test_the_plugin_kind_and_claim_report_the_plain_runs_numbers(tmp_path, toy_study, run_through_platform, read_csv):
    st = budget_study(toy_study)
    run_through_platform(st, tmp_path)
    rep = build_report(tmp_path, quiet=True)
    (row,) = rep.tables["budget"]
    # Independent: the plain run loop at each budget, median over the two seeds of the final ‖∇F‖².
    want = {}
    for b in (5, 10, 20):
        finals = [list(algorithms.run("toy_aid", problems.make("quadratic", seed=s, dim_x=4, dim_y=5), {}, seed=s,
                                      budget={"iterations": b}, n_evals=6))[-1]["grad_F_sq"] for s in (0, 1)]
        want[b] = float(np.median(finals))
        assert row[f"iterations={b}"] == pytest.approx(want[b], rel=1e-12)
    assert row["exponent"] == pytest.approx(np.polyfit(np.log([5, 10, 20]), np.log(list(want.values())), 1)[0],
                                            rel=1e-9)
    (verdict,) = read_csv(rep.directory / "verdicts.csv")
    falls = want[5] > want[10] > want[20]
    assert verdict["verdict"] == ("agrees" if falls else "disagrees") and math.isfinite(float(verdict["measured"].split(",")[0]))
    assert "== paper claim: more iterations, lower final metric (toy) ==" in (rep.directory / "summary.txt").read_text()
    assert (rep.directory / "budget.png").exists() and (rep.directory / "budget.csv").exists()


def test_the_cli_validates_a_study_of_the_plugin_kind(tmp_path, capsys):
    path = tmp_path / "b.yaml"
    path.write_text("imports: [tests.sweep.toy_algorithms, tests.sweep.toy_plugins]\nkind: budget_scaling\n"
                    "axis: {values: [5, 10]}\nproblems: [quadratic]\nalgorithms: [toy_aid]\nbudget: {iterations: 5}\n"
                    "seeds: 2\n")
    assert main(["run", str(path), "--validate-only"]) == 0
    assert "2 configurations x 2 seeds = 4 runs; trials sized to about 2 s of runs each" in capsys.readouterr().out


# ---------------------------------------------------------------- plugins of an installed package
#: A package a user installed: an algorithm, a problem, a study kind and a claim, one module each, found by its
#: own `discover`; it declares itself in the entry-point group bisweep.plugins, and no study imports it.
EP_PACKAGE = {
    "__init__.py": "from problems.shared.registries import discover\ndiscover(__name__, __path__)\n",
    "algorithm.py": '''
import dataclasses
from algorithms.base import Algorithm, AlgorithmConfig, register
from problems.validation import param


@dataclasses.dataclass(frozen=True)
class DescentConfig(AlgorithmConfig):
    lr: float = param(0.1, "positive", "step size of x and y")


@register
class Descent(Algorithm):
    """One step on y along ∇y g, then one on x along ∇x f."""
    name = "ep_descent"
    Config = DescentConfig
    step_sizes = ("lr",)

    def step(self):
        p, lr = self.problem, self.config.lr
        self.y = self.y - lr * p.grad_y_g(self.x, self.y)
        self.x = self.x - lr * p.grad_f(self.x, self.y)[0]
''',
    "problem.py": '''
import dataclasses
from problems.quadratic import QuadraticParams
from problems.registry import entry, register


@dataclasses.dataclass(frozen=True)
class Params(QuadraticParams):
    """The quadratic's parameters."""


@register("ep_quadratic", Params)
def build(p, seed):
    """The built-in quadratic under a plugin's name."""
    return entry("quadratic").build(p, seed)
''',
    "kind.py": '''
from sweep.kinds import register
from sweep.kinds.comparison import Comparison


@register
class Side(Comparison):
    """The comparison kind under a plugin's name."""
    name = "ep_comparison"
''',
    "claim.py": '''
from sweep.claims import Measured, claim


@claim("ep_claim", kind="ep_comparison", title="nothing", statement="nothing is claimed.")
def ep_claim(meta, runs, directory):
    return Measured("nothing measured.", {}, [])
''',
}
EP_STUDY = ("kind: ep_comparison\nclaim: ep_claim\nproblems: [{name: ep_quadratic, params: {dim_x: 3, dim_y: 4}}]\n"
            "algorithms: [{name: ep_descent, params: {lr: [0.1, 0.2]}}]\nseeds: 2\nbudget: {iterations: 5}\n")


@pytest.fixture
def installed(tmp_path, monkeypatch, registries_restored):
    """install(files, entry_points): a plugin package on sys.path; the registries and modules put back after."""
    site = tmp_path / "site"

    def put(package, files, entry_points):
        install(site, package, files, entry_points)
        monkeypatch.syspath_prepend(str(site))
        return site

    yield put
    for name in [m for m in sys.modules if m.split(".")[0] in ("bisweep_eptoy", "bisweep_broken")]:
        del sys.modules[name]


def test_an_installed_package_registers_all_four_without_imports(installed, capsys):
    installed("bisweep_eptoy", EP_PACKAGE, {"eptoy": "bisweep_eptoy"})
    assert "bisweep_eptoy" not in sys.modules  # nothing imported it: the first read of a registry loads it
    cls = algorithms.get("ep_descent")
    assert "ep_comparison" in kinds.names() and claims.CLAIMS["ep_claim"].kind == "ep_comparison"
    st = spec.validate({"name": "ep", **yaml.safe_load(EP_STUDY)})
    assert (st.kind, st.claim, st.imports, len(st.points), len(st.run_keys)) == ("ep_comparison", "ep_claim", [], 2, 4)
    # Its algorithm on its problem: the recursion in matrix algebra (∇y g = Ay − Cx + a, ∇x f = m x + c).
    p = problems.make("ep_quadratic", seed=1, dim_x=3, dim_y=4)
    alg = cls(counted(p), algorithms.make_config("ep_descent", {"lr": 0.2}), np.random.default_rng(0))
    x, y = p.initial_point()
    for _ in range(4):
        alg.step()
        y = y - 0.2 * (p.A @ y - p.C @ x + p.a)
        x = x - 0.2 * (p.m * x + p.c)
    np.testing.assert_allclose(alg.x, x, rtol=1e-12)
    np.testing.assert_allclose(alg.y, y, rtol=1e-12)
    assert main(["list", "algorithms"]) == 0
    assert "ep_descent: One step on y along ∇y g, then one on x along ∇x f." in capsys.readouterr().out.splitlines()


def test_the_cli_runs_a_study_of_an_installed_plugin_without_imports(tmp_path):
    site = install(tmp_path / "site", "bisweep_eptoy", EP_PACKAGE, {"eptoy": "bisweep_eptoy"})
    (tmp_path / "ep.yaml").write_text(EP_STUDY)
    code, out, err = bisweep(["run", "ep.yaml", "--validate-only"], site, tmp_path)
    assert (code, err) == (0, [])
    assert "study 'ep' (scale default) is valid: 2 configurations x 2 seeds = 4 runs" in out


BROKEN = "plugin: entry point 'broken' (bisweep_broken) of bisweep.plugins cannot be imported: RuntimeError: no licence"


def test_a_plugin_that_fails_to_import_is_one_line_naming_the_entry_point(installed, tmp_path):
    site = installed("bisweep_broken", {"__init__.py": "raise RuntimeError('no licence\\nmore')\n"},
                     {"broken": "bisweep_broken"})
    for _ in range(2):  # every read says it again, not only the first
        with pytest.raises(ParameterError) as info:
            algorithms.get("soba")
        assert str(info.value) == BROKEN
    code, out, err = bisweep(["list", "algorithms"], site, tmp_path)
    assert (code, out, err) == (2, "", [f"bisweep: error: {BROKEN}"])


def test_every_registry_reports_an_unknown_name_alike():
    for read, line in (
            (lambda: algorithms.get("sobaa"), "algorithm: unknown name 'sobaa'; did you mean 'soba'? allowed: "),
            (lambda: problems.make("quadratc"), "problem: unknown name 'quadratc'; did you mean 'quadratic'? allowed: "),
            (lambda: kinds.get("comparisn"), "kind: unknown name 'comparisn'; did you mean 'comparison'? allowed: "),
            (lambda: claims.CLAIMS["bome_fig"], "claim: unknown name 'bome_fig'; did you mean 'bome_fig1'? allowed: ")):
        with pytest.raises(ParameterError) as info:
            read()
        assert str(info.value).startswith(line), str(info.value)
    assert str(info.value).endswith(", ".join(sorted(claims.CLAIMS)))
