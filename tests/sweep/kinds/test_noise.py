"""The noise kind: a parameter of every problem or, if not, of every algorithm."""
from sweep.report.build import build_report


def test_a_batch_size_axis_lands_on_the_algorithms(toy_study):
    st = toy_study(kind="noise", axis={"param": "batch_size", "values": [1, 8]})
    assert [p.algorithm_params["batch_size"] for p in st.points] == [1, 8] and st.axis["on"] == "algorithm"


def test_a_problem_parameter_axis_lands_on_the_problems_and_the_table_has_the_plain_final_values(
        tmp_path, toy_study, run_through_platform):
    import algorithms
    import problems

    st = toy_study(kind="noise", axis={"param": "mu", "values": [0.2, 0.5]}, seeds=1)
    assert [p.problem_params["mu"] for p in st.points] == [0.2, 0.5] and st.axis["on"] == "problem"
    run_through_platform(st, tmp_path)
    rep = build_report(tmp_path, quiet=True)
    rows = {r["mu"]: r for r in rep.tables["noise"]}
    for mu in (0.2, 0.5):
        p = problems.make("quadratic", seed=0, dim_x=4, dim_y=5, mu=mu)
        plain = list(algorithms.run("toy_aid", p, {}, seed=0, budget={"iterations": 30}, n_evals=6))[-1]
        assert rows[mu]["median_grad_F_sq"] == plain["grad_F_sq"]
    assert (rep.directory / "noise.png").exists()
