"""The table of every ended run and what ranks each run, read column by column from the store: checked against
each run's summary read whole (`RunColumns.summary`), for runs of every kind a store holds."""
import dataclasses
import math

import numpy as np
import pytest

from sweep.results import run_columns
from sweep.results.shards import shard_lines
from sweep.results.store import ResultStore
from sweep.tracking import run_table
from sweep.tracking import child_params as params_module
from sweep.tracking.child_params import child_params, shared_params

LRS = [0.1, 0.2, 0.3, 0.4, 0.5]


@pytest.fixture()
def study(toy_study):
    return toy_study(name="tbl", algorithms=[{"name": "toy_aid", "params": {"lr": LRS}}], seeds=2,
                     budget={"iterations": 4}, n_evals=3, report={"metric": "F"})


def records(i, s, status="finished", extra=None):
    out = [{"iteration": it, "status": "running", "F": 1.0 + i + 0.1 * s + 4 - it, "flag": it > 0} for it in (0, 4)]
    out[-1].update({"status": status, **(extra or {})})
    return out


def summary(key, seed, recs, trial="t"):
    return {"run_key": key, "trial_key": trial, "seed": seed, "status": recs[-1]["status"], "final": recs[-1],
            "where": {"node": "n", "host": "h"}, "span": [1.0, 2.0], "point": {"key": key.rsplit(".s", 1)[0]}}


def mixed_store(root, study):
    """Runs of every kind: ended in Parquet shards (one with a field the others lack, one diverged, one that
    repeats an iteration), ended in a JSON shard, a failed run's file with an error, an older driver's files, and
    a run still running (no row)."""
    store = ResultStore(root)
    store.ensure()
    p = study.points
    shard = {p[0].run_key(0): records(0, 0), p[0].run_key(1): records(0, 1, extra={"G": 7}),
             p[1].run_key(0): records(1, 0, "diverged"), p[1].run_key(1): records(1, 1)}
    store.write_shard([(k, r, None) for k, r in shard.items()],
                      [(k, summary(k, int(k[-1]), r)) for k, r in shard.items()])
    again = p[2].run_key(0)  # its iteration 4 stored as running, then again as finished: read whole
    store.write_shard([(again, records(2, 0)[:1] + [{**records(2, 0)[1], "status": "running"}], None)], [])
    store.write_shard([(again, records(2, 0)[1:], None)], [(again, summary(again, 0, records(2, 0)))])
    js = p[2].run_key(1)
    store.write_shard([(js, records(2, 1), shard_lines(js, records(2, 1)))],
                      [(js, {"run_key": js, "status": "finished", "final": records(2, 1)[-1], "where": {}})])
    failed = p[3].run_key(0)
    store.finish(failed, {"run_key": failed, "status": "failed", "final": None, "error": "boom " * 200, "where": {}})
    old = p[3].run_key(1)
    store.append_many(old, records(3, 1))
    store.finish_many([(old, {"status": "finished", "final": records(3, 1)[-1], "span": [1.0, 2.0]})])
    store.write_shard([(p[4].run_key(0), records(4, 0)[:1], None)], [])  # running
    with open(root / "ended.txt", "a") as fh:  # listed as ended, its summary lost (a torn file): no row
        fh.write(f"finished {p[4].run_key(1)}\n")
    return store


def expected_rows(study, stored, ended):
    """Each ended run's row made the plain way: its summary read whole."""
    where = {p.run_key(s): (p, s) for p in study.points for s in study.seeds}
    rows = []
    for key in (k for k in ended if k in where and stored.summary(k) is not None):
        point, seed = where[key]
        whole = stored.summary(key)
        final = whole.get("final") or {}
        rows.append({"run_key": key, "configuration": point.key, "label": point.label, "seed": seed,
                     **{k: str(v) for k, v in child_params(point, None, study.axis_name).items()},
                     "status": whole["status"], "error": (whole.get("error") or "")[:500],
                     **{f"final.{k}": float(v) for k, v in final.items() if isinstance(v, (int, float))}})
    return rows


def test_the_table_and_outcomes_equal_each_run_read_whole(tmp_path, study):
    store = mixed_store(tmp_path, study)
    stored = run_columns.load(store)
    ended = store.ended()
    got = run_table.gather(study, stored, ended)
    table = run_table.table(study, got).to_pylist()
    want = expected_rows(study, stored, ended)
    assert len(want) == 8 and [r["run_key"] for r in table] == [r["run_key"] for r in want]
    assert study.points[4].run_key(1) in ended and study.points[4].run_key(1) not in got.outcomes.keys
    for row, expect in zip(table, want):
        assert {k: v for k, v in row.items() if v is not None} == expect
    assert table[1]["final.G"] == 7.0 and table[0]["final.G"] is None and table[0]["final.flag"] == 1.0
    failed = next(r for r in table if r["status"] == "failed")
    assert failed["error"] == ("boom " * 200)[:500] and failed["final.F"] is None
    runs = got.outcomes
    assert runs.keys == [r["run_key"] for r in want] and runs.status == [r["status"] for r in want]
    values = [r.get("final.F", math.nan) for r in want]
    np.testing.assert_array_equal(runs.value, values)
    points = [study.points.index(next(p for p in study.points if p.key == r["configuration"])) for r in want]
    assert runs.point.tolist() == points and runs.seed.tolist() == [study.seeds.index(r["seed"]) for r in want]


def test_no_ended_run_is_an_empty_table(tmp_path, study):
    store = ResultStore(tmp_path)
    store.ensure()
    got = run_table.gather(study, run_columns.load(store), {})
    assert got.outcomes.keys == [] and run_table.table(study, got).num_rows == 0


def test_a_parameter_column_is_its_values_as_text_whether_or_not_one_object_fills_it():
    shared = {"a": 1}
    for values in ([0.1] * 3, [None] * 2, [shared, shared], [1, True, 1.0], [0.1, 0.2, None], [], [True] * 2):
        assert run_table._texts(values).to_pylist() == [None if v is None else str(v) for v in values], values


def test_a_childs_parameters_are_its_configurations_with_shared_mappings_made_once(toy_study):
    def plain(point, seed, axis):  # the definition, without the cache
        params = {"algorithm": point.algorithm, "label": point.label, "problem": point.problem, "seed": seed,
                  "instance_seed": point.instance_seed, "n_evals": point.n_evals,
                  **{f"alg.{k}": v for k, v in point.algorithm_params.items()},
                  **{f"problem.{k}": v for k, v in point.problem_params.items()},
                  **{f"budget.{k}": v for k, v in point.budget.items()}}
        return {k: v for k, v in params.items() if v is not None}

    study = toy_study(algorithms=[{"name": "toy_aid", "params": {"lr": LRS}}], seeds=1)
    points = study.points
    assert points[0].problem_params is points[1].problem_params  # a grid's points share it
    for point in points + points:  # the second pass from the cache
        assert child_params(point, 3, None) == plain(point, 3, None)
        assert list(child_params(point, 3, None)) == list(plain(point, 3, None))  # the columns' order too
    other = dataclasses.replace(points[0], problem_params={**points[0].problem_params, "dim_x": 7})
    assert child_params(other, None, None)["problem.dim_x"] == 7  # another mapping: not the cached one's values
    params_module._PREFIXED.clear()
    for i in range(params_module._PREFIXED_MAX + 5):  # the cache stays bounded
        params_module._prefixed("problem.", {"k": i})
    assert len(params_module._PREFIXED) <= params_module._PREFIXED_MAX


@pytest.mark.parametrize("seeds", [1, 3])
def test_shared_params_are_those_of_one_text_in_every_run(toy_study, seeds):
    """The parent's parameters: each of one text (as MLflow stores it) in every configuration's child (the seed too,
    when there is one)."""
    study = toy_study(seeds=seeds, algorithms=[{"name": "toy_aid", "params": {"lr": [0.1, 0.2], "inner_lr": 0.3}},
                                               {"name": "toy_aid", "label": "other", "params": {"inner_lr": 0.3}}],
                      problems=[{"name": "quadratic", "params": {"dim_x": 4, "dim_y": 5, "mu": 0.2}},
                                {"name": "quadratic", "params": {"dim_x": 4, "dim_y": 5, "mu": 0.5}}])
    texts = [{k: str(v)[:6000] for k, v in child_params(p, study.seeds[0], study.axis_name).items()}
             for p in study.points]
    expected = {k: v for k, v in texts[0].items() if all(t.get(k) == v for t in texts)}
    if seeds > 1:
        expected.pop("seed")
    assert shared_params(study) == expected
    assert {"alg.inner_lr", "problem.dim_y"} <= set(expected) and not {"alg.lr", "label", "problem.mu"} & set(expected)


@pytest.mark.parametrize("fixed", [{"inner_lr": 0.3}, {"inner_lr": 0.3, "fail_at": 99}])
def test_shared_params_of_a_grid_on_one_problem_are_those_of_one_text_in_every_run(toy_study, fixed):
    """A grid's points on one problem differ only in their algorithm's parameters (read without making every
    point's whole child parameters): the same definition."""
    study = toy_study(seeds=1, algorithms=[{"name": "toy_aid", "params": {"lr": [0.1, 0.2, 0.3], "inner_steps": [2, 3],
                                                                          **fixed}}])
    assert study.points[0].problem_params is study.points[-1].problem_params
    texts = [{k: str(v)[:6000] for k, v in child_params(p, 0, study.axis_name).items()} for p in study.points]
    expected = {k: v for k, v in texts[0].items() if all(t.get(k) == v for t in texts)}
    assert shared_params(study) == expected
    assert "alg.inner_lr" in expected and not {"alg.lr", "alg.inner_steps"} & set(expected)
    assert ("alg.fail_at" in expected) == ("fail_at" in fixed)


def test_the_parameter_columns_are_each_configurations_child_parameters_in_first_seen_order(toy_study):
    """Made from the mappings a grid shares once per mapping, they equal the definition: each configuration's
    `child_params` (no seed), a column per name in the order names first appear, None where one has no such name."""
    study = toy_study(name="cols", kind="stepsize_sensitivity", axis={"factors": [0.5, 2.0]}, seeds=1,
                      algorithms=[{"name": "toy_aid", "params": {"inner_steps": [2, 3]}}])
    base = study.points
    assert base[0].problem_params is base[1].problem_params and any("axis" in p.coords for p in base)
    replace = dataclasses.replace
    points = [
        *base,
        replace(base[0], instance_seed=None, coords={}),  # no axis value, no instance seed
        replace(base[1], algorithm_params={"inner_lr": 0.2, "lr": None, "new": 1}),  # another order, a None, a name
        replace(base[0], problem_params={**base[0].problem_params, "dim_x": 9, "extra": "x", "mu": None}),
        replace(base[1], budget={"iterations": 7, "oracle_calls": None}, coords={"reference": True}),
        replace(base[0], label="late", coords={"axis": None, "reference": True}),
    ]
    for ps, axis in ((points, study.axis_name), (points[::-1], study.axis_name), (points, None), (points[:1], "f"),
                     ([], "f")):
        expected: dict = {}
        for i, point in enumerate(ps):
            for name, v in child_params(point, None, axis).items():
                expected.setdefault(name, [None] * len(ps))[i] = v
        got = run_table._param_columns(ps, axis)
        assert got == expected and list(got) == list(expected)


def test_values_are_the_same_parameter_only_when_their_texts_are():
    from sweep.tracking.child_params import _same

    pairs = [(1, 1), (0.5, 0.5), ("a", "a"), (None, None), ([1, 2], [1, 2]), (1, 1.0), (True, 1), ([1, 2], [1.0, 2.0]),
             ({"a": 1}, {"a": 1.0}), ((1,), [1]), (2, 3)]
    assert [_same(a, b) for a, b in pairs] == [str(a) == str(b) for a, b in pairs]
