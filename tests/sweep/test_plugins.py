"""The plugin recipe: a study kind and a paper claim from outside the platform (tests/sweep/toy_plugins.py),
brought in by a study's `imports:`, validated, run through the trial body and reported."""
import math

import numpy as np
import pytest

import algorithms
import problems
from sweep import claims, kinds
from sweep.cli import main
from sweep.report.build import build_report

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
