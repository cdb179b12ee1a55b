"""A study larger than its `mlflow_children`: which runs get MLflow children, what the summaries and the table of
every run hold, and the option's one-line errors (no Ray here)."""
import contextlib
import io
import os

import math

import numpy as np
import pandas as pd
import pytest
import yaml
from mlflow.artifacts import download_artifacts

from sweep import cli
from sweep.execution import options
from sweep.results.store import ResultStore
from sweep.tracking import browse
from sweep.tracking.run_table import Outcomes
from sweep.tracking.tracker import ROLE, RUN_KEY, Tracker, default_tracking_uri, local_artifact_location

LRS = [0.1, 0.2, 0.3, 0.4, 0.5]
#: Final F by (configuration index, seed): configuration 0 is the best by its median seed, 4 the worst.
FINAL = {(i, s): 1.0 + i + 0.1 * s for i in range(5) for s in range(3)}


@pytest.fixture()
def grid(toy_study):
    return toy_study(name="brw", algorithms=[{"name": "toy_aid", "params": {"lr": LRS}}], seeds=3,
                     budget={"iterations": 4}, n_evals=3, mlflow_children=6,
                     report={"metric": "F"})


def stored(root, study, status=lambda i, s: "finished"):
    """Every run ended with final F = FINAL[i, s] (two records each); the store."""
    store = ResultStore(root)
    store.ensure()
    ended = []
    for i, point in enumerate(study.points):
        for s in study.seeds:
            key = point.run_key(s)
            recs = [{"iteration": it, "status": "running", "F": FINAL[i, s] + 4 - it} for it in (0, 4)]
            recs[-1]["status"] = status(i, s)
            store.append_many(key, recs)
            ended.append((key, {"status": status(i, s), "final": recs[-1], "span": [1.0, 2.0]}))
    store.finish_many(ended)
    return store


def outcomes(study, ends):
    """Outcomes of the runs {(configuration index, seed index): (status, final F)}, in that order."""
    keys = list(ends)
    return Outcomes([study.points[i].run_key(study.seeds[j]) for i, j in keys], np.array([i for i, _ in keys]),
                    np.array([j for _, j in keys]), [ends[k][0] for k in keys], np.array([ends[k][1] for k in keys]))


def test_a_configuration_ranks_by_its_median_seed_and_its_children_are_its_best_and_worst(toy_study):
    study = toy_study(algorithms=[{"name": "toy_aid", "params": {"lr": LRS}}], seeds=3, mlflow_children=6,
                      report={"metric": "F"})
    ends = {(i, s): ("finished", FINAL[i, s]) for i in range(5) for s in range(3)}
    ends[4, 0] = ("diverged", 0.0)  # after every finished seed, whatever its value
    ends[2, 1] = ("failed", math.nan)
    ends[1, 2] = ("finished", math.nan)  # no value: last among the finished
    ends[3, 0] = ("finished", FINAL[3, 2])  # a tie: the earlier seed first
    chosen = browse.select(study, outcomes(study, dict(reversed(list(ends.items())))))
    p = study.points
    assert chosen == {p[0].key: [p[0].run_key(0), p[0].run_key(2)], p[4].key: [p[4].run_key(1), p[4].run_key(0)]}
    everything = toy_study(algorithms=[{"name": "toy_aid", "params": {"lr": LRS}}], seeds=3, mlflow_children=15,
                           report={"metric": "F"})
    chosen = browse.select(everything, outcomes(everything, ends))
    assert list(chosen) == [q.key for q in p]
    assert chosen[p[1].key] == [p[1].run_key(0), p[1].run_key(2)]
    assert chosen[p[2].key] == [p[2].run_key(0), p[2].run_key(1)]
    assert chosen[p[3].key] == [p[3].run_key(1), p[3].run_key(2)]
    assert browse.select(everything, outcomes(everything, {})) == {}


def tracker_of(root, study):
    uri = default_tracking_uri(root)
    t = Tracker(uri, study.name, local_artifact_location(uri))
    t.start_study(study)
    return t


def runs_by_key(t):
    return {r.data.tags[RUN_KEY]: r for r in t.client.search_runs([t.experiment_id], f"tags.`{ROLE}` != 'study'")}


def test_a_study_within_the_limit_is_not_browsed_and_all_means_no_limit(toy_study):
    assert not browse.browsing(toy_study(seeds=3, mlflow_children=3))
    assert browse.browsing(toy_study(seeds=3, mlflow_children=2))
    assert not browse.browsing(toy_study(seeds=3, mlflow_children="all"))
    assert toy_study(seeds=3).mlflow_children == 10_000


def test_children_are_the_best_and_worst_configurations_summaries_and_their_best_and_worst_seeds(tmp_path, grid):
    store = stored(tmp_path, grid, status=lambda i, s: "diverged" if (i, s) == (4, 0) else "finished")
    t = tracker_of(tmp_path, grid)
    done = browse.sync_browsed(t, store, grid, set())
    assert done == set(grid.run_keys)
    p0, p4 = grid.points[0], grid.points[4]
    runs = runs_by_key(t)
    # 6 children at most, 3 per configuration: the best configuration (0) and the worst (4) by their median seed
    assert set(runs) == {p0.key + ".seeds", p0.run_key(0), p0.run_key(2), p4.key + ".seeds", p4.run_key(1),
                         p4.run_key(0)}
    summary = runs[p4.key + ".seeds"]
    assert summary.data.tags[ROLE] == "configuration" and summary.data.tags["mlflow.parentRunId"] == t.parent_id
    m = summary.data.metrics  # the finished seeds 1 and 2 of configuration 4: F = 5.1 and 5.2
    assert m["Seeds/F/median"] == pytest.approx(5.15) and m["Seeds/F/best"] == pytest.approx(5.1)
    assert m["Seeds/F/worst"] == pytest.approx(5.2)
    assert (m["Seeds/finished"], m["Seeds/diverged"], m["Seeds/failed"]) == (2.0, 1.0, 0.0)
    best, worst = runs[p4.run_key(1)], runs[p4.run_key(0)]  # the diverged seed ranks after the finished ones
    assert (best.data.tags[browse.SEED_TAG], worst.data.tags[browse.SEED_TAG]) == ("best", "worst")
    assert best.data.tags["mlflow.parentRunId"] == summary.info.run_id and worst.data.tags["status"] == "diverged"
    assert [h.value for h in t.client.get_metric_history(best.info.run_id, "Metrics/F")] == pytest.approx([9.1, 5.1])
    table = pd.read_parquet(download_artifacts(run_id=t.parent_id, artifact_path="runs/runs.parquet",
                                               tracking_uri=t.tracking_uri, dst_path=str(tmp_path / "dl")))
    assert len(table) == 15 and set(table["run_key"]) == set(grid.run_keys)
    row = table.set_index("run_key").loc[grid.points[2].run_key(1)]
    assert row["final.F"] == pytest.approx(FINAL[2, 1]) and row["status"] == "finished" and row["alg.lr"] == "0.3"
    # a later session with nothing new: no child written twice, the summary not rewritten
    t2 = tracker_of(tmp_path, grid)
    browse.sync_browsed(t2, store, grid, done)
    again = runs_by_key(t2)
    assert set(again) == set(runs)
    assert len(t2.client.get_metric_history(again[p4.key + ".seeds"].info.run_id, "Seeds/F/median")) == 1


def test_one_seed_a_configuration_is_its_run_and_the_limit_bounds_them(toy_study):
    study = toy_study(algorithms=[{"name": "toy_aid", "params": {"lr": LRS}}], seeds=1, mlflow_children=2,
                      report={"metric": "F"})
    summaries = outcomes(study, {(i, 0): ("finished", 10.0 - i) for i in range(5)})
    chosen = browse.select(study, summaries)
    assert chosen == {study.points[4].key: [study.points[4].run_key(0)],  # the best (F = 6)
                      study.points[0].key: [study.points[0].run_key(0)]}  # and the worst (F = 10)
    higher = toy_study(algorithms=[{"name": "toy_aid", "params": {"lr": LRS}}], seeds=1, mlflow_children=3,
                       report={"metric": "F", "goal": "max"})  # 3 children: the two best and the worst
    assert list(browse.select(higher, summaries)) == [higher.points[0].key, higher.points[1].key,
                                                      higher.points[4].key]


@pytest.mark.parametrize("value", ["0", "-3", "many", "1.5"])
def test_a_bad_mlflow_children_option_is_one_line_exit_2_and_writes_nothing(tmp_path, value):
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump({"problems": ["quadratic"], "algorithms": ["soba"], "seeds": 1,
                                    "budget": {"iterations": 2}}))
    cwd, err = os.getcwd(), io.StringIO()
    os.chdir(tmp_path)
    try:
        with contextlib.redirect_stderr(err):
            code = cli.main(["run", str(path), "--validate-only", "--mlflow-children", value])
    finally:
        os.chdir(cwd)
    assert code == 2
    assert err.getvalue().strip() == \
        f"bisweep: error: mlflow-children: must be a positive integer or 'all', got {value!r}"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.yaml"]


def test_the_option_overrides_the_study_field_and_a_bad_field_names_itself(toy_study):
    from problems.validation import ParameterError

    study = toy_study(mlflow_children=5)
    assert options.with_mlflow_children(study, "ALL").mlflow_children is None
    assert options.with_mlflow_children(study, "7").mlflow_children == 7
    assert options.with_mlflow_children(study, None).mlflow_children == 5
    with pytest.raises(ParameterError, match="mlflow_children: .*a positive integer or all"):
        toy_study(mlflow_children=0)


@pytest.mark.parametrize("bulk, writes", [(1, 4), (10**9, 1)])
def test_browsed_seeds_are_written_in_writes_of_bulk_metrics(tmp_path, grid, monkeypatch, bulk, writes):
    """The children of ended runs go to MLflow in writes of at least `BULK_METRICS` points (fewer transactions), the
    same runs whatever the size."""
    store = stored(tmp_path, grid)
    t = tracker_of(tmp_path, grid)
    monkeypatch.setattr(browse, "BULK_METRICS", bulk)
    seen = []
    write = t.sink.write
    monkeypatch.setattr(t.sink, "write", lambda batch, ids: (seen.append(sorted(batch.new)), write(batch, ids)))
    browse.sync_browsed(t, store, grid, set())
    seeds = [w for w in seen if not all(k.endswith(browse.SUMMARY_SUFFIX) for k in w)]  # the summaries' write aside
    assert len(seeds) == writes and sum(map(len, seeds)) == 4  # the best and worst seeds of 2 configurations
    assert len(runs_by_key(t)) == 6
