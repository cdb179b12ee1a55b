"""The stepsize_sensitivity kind: factors or values on every declared initial step size, the reference, the
sensitivity table against independent numbers."""
import numpy as np
import pytest

from sweep.report.build import build_report


def test_axis_names_and_the_default_metric(toy_study):
    st = toy_study(kind="stepsize_sensitivity", axis={"factors": [0.5, 2]})
    assert st.axis_name == "step_size_factor" and st.report.metric == "F"
    assert [p.coords["axis"] for p in st.points if p.coords["in_grid"]] == [0.5, 2]
    assert toy_study(kind="stepsize_sensitivity", axis={"values": [1]}).axis_name == "initial_step_size"


def test_values_axis_adds_the_unscaled_reference_when_it_is_not_in_the_grid(toy_study):
    st = toy_study(kind="stepsize_sensitivity", axis={"values": [2, 4, 6, 8]})
    grid = [p for p in st.points if p.coords["in_grid"]]
    assert [(p.algorithm_params["lr"], p.algorithm_params["inner_lr"]) for p in grid] == [(2, 2), (4, 4), (6, 6), (8, 8)]
    ref = [p for p in st.points if p.coords["reference"]]
    assert len(ref) == 1 and not ref[0].coords["in_grid"] and ref[0].algorithm_params["lr"] == 0.5


def test_sensitivity_table_relative_change_and_converged_fraction(tmp_path, toy_study, write_synthetic, read_csv):
    st = toy_study(kind="stepsize_sensitivity", axis={"values": [2, 4, 6, 8]}, seeds=[0, 1, 2])
    finals = {2: [59.7, 59.71, 59.9], 4: [59.62, 59.5, 59.7], 6: [59.11, 58.0, 60.0], 8: [59.08, 59.0, 70.0]}

    def final_of(p, s):
        a = p.coords.get("axis")
        if a is None:  # the unscaled reference configuration
            return "finished", {"iteration": 30, "status": "finished", "F": [59.54, 59.0, 60.0][s], "grad_F_sq": 1e-9}
        if a == 8 and s == 2:
            return "diverged", {"iteration": 12, "status": "diverged", "F": 70.0, "grad_F_sq": 1e3}
        return "finished", {"iteration": 30, "status": "finished", "F": finals[a][s], "grad_F_sq": 1e-2 if a == 6 else 1e-9}

    def records_of(p, s):
        first = {"iteration": 0, "status": "running", "F": 100.0, "grad_F_sq": 1.0}
        return [first, final_of(p, s)[1]]

    write_synthetic(st, tmp_path, final_of, records_of)
    rep = build_report(tmp_path, quiet=True)
    (row,) = rep.tables["sensitivity"]
    medians = {2: 59.71, 4: 59.62, 6: 59.11, 8: 59.08}  # seed 2 at 8 diverged: +inf, still the median is 59.08
    for a, m in medians.items():
        assert row[f"initial_step_size={a}"] == pytest.approx(m, rel=1e-12)
    assert row["reference"] == pytest.approx(59.54)
    assert row["relative_average_change"] == pytest.approx(abs(np.mean(list(medians.values())) - 59.54) / 59.54, rel=1e-12)
    # Converged: final grad_F_sq ≤ 1e-3 × its initial 1.0; the 3 runs at step 6 (1e-2) and the diverged one do not.
    assert row["grid_runs"] == 12 and row["diverged_runs"] == 1
    assert row["converged_fraction"] == pytest.approx(8 / 12)
    on_disk = read_csv(rep.directory / "sensitivity.csv")
    assert float(on_disk[0]["relative_average_change"]) == pytest.approx(row["relative_average_change"], rel=1e-9)
    assert (rep.directory / "sensitivity.png").exists()


def test_the_sensitivity_of_a_metric_that_reaches_machine_precision_is_its_log10_spread(tmp_path, toy_study,
                                                                                        write_synthetic):
    """The quickstart's case: a method converged at every step size (4.8e-22 … 2.4e-7) is not the most sensitive,
    and one that never converges is not the least; ‖∇F‖² starts at 1, so converged means ≤ 1e-3."""
    st = toy_study(kind="stepsize_sensitivity", axis={"factors": [0.5, 1, 2]}, seeds=[0],
                   algorithms=[{"name": "toy_aid", "label": lab} for lab in ("always", "never", "once")],
                   report={"metric": "grad_F_sq", "converged_metric": "grad_F_sq"})
    finals = {"always": {0.5: 2.4e-7, 1: 1e-15, 2: 4.8e-22}, "never": {0.5: 0.5, 1: 0.4, 2: 0.29},
              "once": {0.5: 0.4, 1: 1e-12, 2: 0.2}}

    def final_of(p, s):
        v = finals[p.label][p.coords["axis"] if p.coords.get("axis") is not None else 1]
        return "finished", {"iteration": 30, "status": "finished", "grad_F_sq": v, "F": 1.0}

    write_synthetic(st, tmp_path, final_of,
                    lambda p, s: [{"iteration": 0, "status": "running", "grad_F_sq": 1.0, "F": 2.0}, final_of(p, s)[1]])
    rows = {r["algorithm"]: r for r in build_report(tmp_path, quiet=True).tables["sensitivity"]}
    assert {r["sensitivity_measure"] for r in rows.values()} == {"log10_spread"}
    assert rows["always"]["sensitivity"] == 0.0  # every step size below the threshold 1e-3
    assert rows["never"]["sensitivity"] == pytest.approx(np.log10(0.5 / 0.29), rel=1e-12)
    assert rows["once"]["sensitivity"] == pytest.approx(np.log10(0.4 / 1e-3), rel=1e-12)
    # The relative average change ranks them the other way round (the headline it replaces).
    assert rows["always"]["relative_average_change"] > 1e7 > rows["never"]["relative_average_change"]


def test_a_maximised_metric_keeps_the_relative_average_change_as_its_sensitivity(tmp_path, toy_study, write_synthetic):
    st = toy_study(kind="stepsize_sensitivity", axis={"factors": [0.5, 2]}, seeds=[0],
                   report={"metric": "F", "goal": "max"})
    write_synthetic(st, tmp_path, lambda p, s: ("finished", {"iteration": 30, "status": "finished",
                                                             "F": {0.5: 0.9, 2: 0.7, None: 1.0}[p.coords.get("axis")]}))
    (row,) = build_report(tmp_path, quiet=True).tables["sensitivity"]
    assert row["sensitivity_measure"] == "relative_average_change"
    assert row["sensitivity"] == row["relative_average_change"] == pytest.approx(0.2, rel=1e-12)


def test_best_config_names_the_step_sizes_each_factor_ran_with(tmp_path, toy_study, write_synthetic):
    """A step-size study's best table names each row's configuration by what varies (toy_aid's defaults: lr 0.5
    and inner_lr 0.5, both scaled by the factor), not by the algorithm's name alone."""
    st = toy_study(kind="stepsize_sensitivity", axis={"factors": [0.5, 2]}, seeds=[0])

    def final_of(p, s):
        return "finished", {"iteration": 30, "status": "finished", "grad_F_sq": 0.1, "F": 1.0}

    write_synthetic(st, tmp_path, final_of,
                    lambda p, s: [{"iteration": 0, "status": "running", "grad_F_sq": 1.0, "F": 2.0}, final_of(p, s)[1]])
    rows = build_report(tmp_path, quiet=True).tables["best"]
    by_axis = {r["axis"]: r["best_config"] for r in rows}
    assert by_axis == {0.5: "toy_aid(inner_lr=0.25, lr=0.25)", 2: "toy_aid(inner_lr=1, lr=1)",
                       "reference": "toy_aid(inner_lr=0.5, lr=0.5)"}
