"""`bilevel_benchmark --scale ci` end to end on Ray and MLflow: every tuning trial an ordinary run logged under
the parent, the benchmark's report attached to it, a calls-to-target checked against the raw records, and a
second run of the study doing nothing (exactly once)."""
from tests.sweep import stored
import json
import os

import pytest

from sweep.execution.runner import run_study
from sweep.report import analysis
from sweep.study import spec

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def benchmark_ci(tmp_path_factory):
    root = tmp_path_factory.mktemp("bench") / "results"
    with open(os.devnull, "w") as sink:
        return run_study(spec.load("bilevel_benchmark", scale="ci"), root, num_cpus=1, out=sink)


def test_the_ci_benchmark_runs_every_tuning_trial_once_and_attaches_its_report(benchmark_ci, read_csv):
    from mlflow import MlflowClient

    outcome = benchmark_ci
    st = outcome.study
    # 2 algorithms x 4 problems x (one-shot + 1 draw) configurations x 2 instance seeds (1 tuning, 1 held out).
    assert len(st.points) == 16 and len(st.run_keys) == 32 and outcome.complete
    client = MlflowClient(outcome.tracking_uri)
    exp = client.get_experiment_by_name("bilevel_benchmark")
    runs = client.search_runs([exp.experiment_id], max_results=1000)
    kids = [r for r in runs if r.data.tags.get("bisweep.role") == "run"]
    assert len(kids) == 32 and len({k.data.tags["bisweep.run_key"] for k in kids}) == 32
    arts = {a.path for a in client.list_artifacts(outcome.parent_run_id, "report")}
    assert {"report/performance_profile.png", "report/data_profile.png", "report/ranking.csv", "report/tuning.csv",
            "report/pairwise.csv", "report/choices.csv"} <= arts
    rep = outcome.report_dir
    tuning_rows = read_csv(rep / "tuning.csv")
    assert len(tuning_rows) == 2 * 4 * 3 and {r["budget"] for r in tuning_rows} == {"one-shot", "small", "large"}
    # The quadratic knows its optimum: the ranking's calls to F − F* <= τ (F0 − F*) on the one held-out unit
    # is the first record of the chosen run that reaches it.
    held = st.axis["held_out"][0]
    chosen = {(r["algorithm"], r["problem"]): r for r in read_csv(rep / "choices.csv") if r["budget"] == "large"}
    ranking = read_csv(rep / "ranking.csv")
    for label in ("soba", "saba"):
        key = chosen[(label, "quadratic")]["key"]
        records = stored.stored_records(outcome.results_dir, f"{key}.s{held}")
        for tau in st.axis["taus"]:
            direct = analysis.first_reach(records, "F_gap", tau * records[0]["F_gap"], "calls/total")
            row = next(r for r in ranking if r["problem"] == "quadratic" and r["budget"] == "large"
                       and r["algorithm"] == label and float(r["tau"]) == tau)
            assert float(row["calls_median"]) == (direct if direct == direct else float("inf"))
    # The same tables through the results loader, as DataFrames.
    import sweep

    tables = sweep.load_results(outcome.results_dir).tables
    assert {"ranking", "tuning", "choices", "pairwise", "profiles"} <= set(tables)
    assert len(tables["ranking"]) == len(ranking) and len(tables["tuning"]) == len(tuning_rows)
    assert sorted(tables["tuning"]["budget"].unique()) == ["large", "one-shot", "small"]


def test_running_the_study_again_runs_nothing(benchmark_ci):
    import io

    out = io.StringIO()
    again = run_study(spec.load("bilevel_benchmark", scale="ci"), benchmark_ci.results_dir, num_cpus=1, out=out,
                      report=False)
    assert "all 32 runs already done" in out.getvalue() and again.counts == benchmark_ci.counts


# ---------------------------------------------------------------- model-based tuning in rounds
def optuna_ci():
    """bilevel_benchmark at ci scale tuned by Optuna's TPE: trials 1 (round 0: a Sobol draw), 2 and 3 (rounds 1, 2)."""
    from sweep.study.sources import builtin_studies, read

    data = read(builtin_studies()["bilevel_benchmark"])
    data["scales"]["ci"]["axis"].update(sampler="optuna", trials=3, batch=1, budgets={"small": 1, "large": 3})
    return spec.load(data, scale="ci")


@pytest.fixture(scope="module")
def optuna_run(tmp_path_factory):
    import io

    root = tmp_path_factory.mktemp("bench-optuna") / "results"
    out = io.StringIO()
    return run_study(optuna_ci(), root, num_cpus=1, out=out), out.getvalue()


def test_an_optuna_benchmark_runs_its_rounds_as_trials_of_one_study(optuna_run, read_csv):
    from mlflow import MlflowClient

    from sweep.compare import adaptive
    from sweep.kinds import get
    from sweep.results.store import ResultStore

    outcome, printed = optuna_run
    st = outcome.study
    # 2 algorithms x 4 problems x (one-shot + 3 trials) x 2 instance seeds, every run ended.
    assert len(st.points) == 32 and len(st.run_keys) == 64 and outcome.complete
    assert printed.count("bisweep: next tuning round: 8 new configurations") == 2
    assert printed.count("bisweep: starting") == 1  # one Ray for the three rounds
    assert len({adaptive.problem_id(p) for p in st.points}) == 4
    for label in ("soba", "saba"):
        for prob in {adaptive.problem_id(p) for p in st.points}:
            got = sorted(t for p in st.points if p.label == label and adaptive.problem_id(p) == prob
                         for _, t in p.coords["tuning"])
            assert got == [0, 1, 2, 3]
    # Each round is what the searcher proposes from the stored results of the rounds before it.
    store = ResultStore(outcome.results_dir)
    first = spec.load(optuna_ci().source, scale=None)  # round 0, as validated
    again = get("benchmark").next_points(first, store.summary)
    later = {p.key for p in st.points} - {p.key for p in first.points}
    assert {p.key for p in again} - {p.key for p in first.points} <= later and len(again) == 24
    # One MLflow parent for every round, 64 child runs, the report attached.
    client = MlflowClient(outcome.tracking_uri)
    exp = client.get_experiment_by_name("bilevel_benchmark")
    runs = client.search_runs([exp.experiment_id], max_results=1000)
    assert len([r for r in runs if r.data.tags.get("bisweep.role") == "study"]) == 1
    assert len([r for r in runs if r.data.tags.get("bisweep.role") == "run"]) == 64
    assert "report/tuning.csv" in {a.path for a in client.list_artifacts(outcome.parent_run_id, "report")}
    rows = read_csv(outcome.report_dir / "tuning.csv")
    assert {(r["budget"], r["trials_per_study"]) for r in rows} == {("one-shot", "0"), ("small", "1"), ("large", "3")}
    assert json.loads((outcome.results_dir / "study.json").read_text())["spec_hash"] == first.spec_hash


def test_an_optuna_benchmark_resumed_without_its_record_of_later_rounds_proposes_them_again(optuna_run):
    import io

    from sweep.results.store import ResultStore

    outcome, _ = optuna_run
    # study.json back at round 0, as if the driver died before recording round 1: the rounds are proposed
    # again from the stored results, equal to the first time, so nothing runs.
    ResultStore(outcome.results_dir).write_study(optuna_ci())
    out = io.StringIO()
    again = run_study(optuna_ci(), outcome.results_dir, num_cpus=1, out=out, report=False)
    assert "all 64 runs already done" in out.getvalue() and again.counts == outcome.counts
    assert [p.to_dict() for p in again.study.points] == [p.to_dict() for p in outcome.study.points]
