"""The report's per-run numbers read from the store's columns at once equal those read run by run."""
import dataclasses
import math

import numpy as np
import pytest

from sweep.report import analysis as an
from sweep.report import run_arrays as ra
from sweep.report.runs_table import runs_columns
from sweep.report.tables import KEY_METRICS, PROGRESS, best_table, final_columns, identity, stable, stats
from sweep.results import run_columns
from sweep.results.runs import ColumnRun, RunData
from sweep.results.store import ResultStore
from sweep.study.model import ReportOptions
from sweep.study.record import StudyRecord

OPTS = ReportOptions(metric="F", goal="min", converged_metric="F", converged_below=0.3, converged_relative=True,
                     best_by="robust")
META = StudyRecord(name="s", kind="comparison", seeds=[], report=OPTS, points=[])


def point(key, label="a", gamma=0.1):
    return {"key": key, "algorithm": "soba", "label": label, "problem": "quadratic", "instance_seed": None,
            "algorithm_params": {"gamma": gamma}, "problem_params": {"dim_x": 2}, "budget": {"iterations": 3},
            "coords": {"grid": {"gamma": gamma}, "axis": None}}


def recs(values, status="finished", extra=None):
    out = [{"iteration": i, "status": "running", "F": v, **(extra or {})} for i, v in enumerate(values)]
    out[-1]["status"] = status
    return out


def mixed_runs(tmp_path):
    """Runs from a Parquet shard (read by row index) and runs given as dicts (read one by one) in one list:
    finished, diverged, failed, without the metric, with a value above the start, and a final record of its own."""
    store = ResultStore(tmp_path)
    stored = {"c0.s0": recs([1.0, 0.2]), "c0.s1": recs([1.0, 0.5, 0.25]), "c1.s0": recs([2.0, 4.0]),
              "c1.s1": recs([2.0, 1e3], "diverged"), "c2.s0": recs([1.0, 0.1], extra={"calls/total": 4}),
              "c2.s1": [{"iteration": 0, "status": "finished", "G": 1.5}]}
    store.write_shard([(k, r, None) for k, r in stored.items()],
                      [(k, {"run_key": k, "seed": int(k[-1]), "status": r[-1]["status"], "final": r[-1],
                            "where": {"node": "n1"}}) for k, r in stored.items()])
    cols = run_columns.load(ResultStore(tmp_path))
    points = {c: point(c, gamma=g) for c, g in (("c0", 0.1), ("c1", 0.2), ("c2", 0.3), ("c3", 0.4))}
    runs = [ColumnRun(k, points[k[:2]], int(k[-1]), cols.summaries[k]["status"], records=cols.records(k),
                      where={"node": "n1"}) for k in stored]
    own = recs([3.0, 0.05])
    runs.append(RunData("c3.s0", points["c3"], 0, "finished", {**own[-1], "F": 0.04, "extra": 7}, own, {}, None))
    runs.append(RunData("c3.s1", points["c3"], 1, "failed", None, [], {}, "boom"))
    return runs


def same(a, b):
    return (isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b)) or a == b


def test_final_values_convergence_and_stability_equal_the_run_by_run_ones(tmp_path):
    runs = mixed_runs(tmp_path)
    index = ra.RunIndex(runs)
    assert index.fast.tolist() == [True] * 6 + [False, False]
    for goal in ("min", "max"):
        vals = ra.final_values(index, "F", goal)
        want = [an.final_value({"status": r.status, "final": r.final}, "F", goal) for r in runs]
        assert all(same(float(a), b) for a, b in zip(vals, want)), (vals, want)
        assert ra.stable(index, "F", goal, vals).tolist() == [stable(r, "F", goal) for r in runs]
    for relative, below in ((True, 0.3), (False, 0.2)):
        opts = dataclasses.replace(OPTS, converged_relative=relative, converged_below=below)
        got = ra.converged(index, opts).tolist()
        assert got == [an.converged(r.records, r.status, "F", below, relative) for r in runs]
    assert ra.converged(index, OPTS).tolist() == [True, True, False, False, True, False, True, False]


def test_the_final_value_columns_are_each_runs_final_record(tmp_path):
    runs = mixed_runs(tmp_path)
    cols = ra.final_columns(ra.RunIndex(runs), ("F", *KEY_METRICS, *PROGRESS))
    assert list(cols)[:3] == ["F", "iteration", "calls/total"]  # the metric, then where the run ended
    for i, r in enumerate(runs):
        want = final_columns(r.final, "F")
        assert {k: v[i] for k, v in cols.items() if v[i] is not None} == want, r.key
    assert cols["iteration"][0] == 1 and isinstance(cols["iteration"][0], int)  # ints stay ints
    assert cols["extra"] == [None] * 6 + [7, None]


def test_the_runs_table_has_the_row_each_run_makes(tmp_path):
    runs = mixed_runs(tmp_path)
    table = runs_columns(runs, META)
    for i, r in enumerate(runs):
        p = r.point
        row = {**identity(p, r.seed, META), "status": r.status,
               "converged": an.converged(r.records, r.status, "F", 0.3, True), **final_columns(r.final, "F"),
               "algorithm_name": "soba", "problem_name": "quadratic", "instance_seed": None, "alg.gamma":
               p["algorithm_params"]["gamma"], "problem.dim_x": 2, "budget.iterations": 3,
               "node": r.where.get("node", ""), "run_key": r.key, "error": r.error or ""}
        assert {k: v[i] for k, v in table.items() if v[i] is not None} == {k: v for k, v in row.items()
                                                                            if v is not None}, r.key
    assert list(table)[:6] == ["study", "problem", "algorithm", "configuration", "seed", "status"]


def test_group_medians_are_numpys_medians_without_nan_with_inf():
    rng = np.random.default_rng(3)
    ids = rng.integers(0, 40, 400)
    vals = rng.normal(size=400)
    vals[rng.random(400) < 0.2] = np.nan
    vals[rng.random(400) < 0.1] = np.inf
    vals[ids == 7] = np.nan  # a group with no value: NaN
    got = ra.group_medians(ids, vals, 41)
    want = [an.median(vals[ids == g].tolist()) for g in range(41)]
    assert np.allclose(got, want, rtol=0, atol=0, equal_nan=True)


def reference_best(runs, opts):
    """The best configuration per (problem, label) as the report picked it run by run: (label, key, median)."""
    by_cfg = {}
    for r in runs:
        by_cfg.setdefault((r.point["label"], r.point["key"]), []).append(r)
    out = {}
    for (label, key), rs in by_cfg.items():
        ok = all(stable(r, opts.metric, opts.goal) for r in rs)
        out.setdefault(label, []).append((key, ok, stats(rs, opts)["median"]))
    best = {}
    for label, cfgs in out.items():
        pool = [c for c in cfgs if c[1]] if any(c[1] for c in cfgs) else cfgs
        pick = None
        for c in pool:
            if pick is None or an.better(c[2], pick[2], opts.goal):
                pick = c
        best[label] = pick
    return best


@pytest.mark.parametrize("goal", ["min", "max"])
def test_the_best_table_picks_what_the_run_by_run_rule_picks(goal):
    rng = np.random.default_rng(0)
    runs = []
    for c in range(60):
        p = point(f"c{c}", label="ab"[c % 2], gamma=0.01 * (c + 1))
        for s in range(3):
            start, end = 1.0, float(rng.choice([0.5, 2.0, 0.7]) * rng.uniform(0.5, 1.5))
            status = "diverged" if rng.random() < 0.05 else "failed" if rng.random() < 0.05 else "finished"
            records = recs([start, end], status)
            runs.append(RunData(f"c{c}.s{s}", p, s, status, records[-1] if status != "failed" else None,
                                records, {}, None))
    opts = dataclasses.replace(OPTS, goal=goal)
    rows = best_table(runs, opts)
    want = reference_best(runs, opts)
    assert {r["algorithm"] for r in rows} == {"a", "b"}
    for row in rows:
        key, ok, median = want[row["algorithm"]]
        assert row["best_config"].startswith("a(" if row["algorithm"] == "a" else "b(")
        assert row["stable_on_all_seeds"] == ok and same(row["median_F"], median)
        gamma = next(r.point["algorithm_params"]["gamma"] for r in runs if r.point["key"] == key)
        assert f"gamma={gamma}" in row["best_config"] and row["configurations"] == 30


def test_the_spread_table_gives_each_groups_best_worst_and_quantiles_over_configurations():
    from sweep.report import spread

    rng = np.random.default_rng(5)
    runs, medians = [], {"a": {}, "b": {}}
    for c in range(80):
        label = "ab"[c % 2]
        p = point(f"c{c}", label=label, gamma=0.01 * (c + 1))
        finals = rng.uniform(0.1, 0.9, 3)
        status = ["finished"] * 3
        if c == 7:
            status = ["diverged"] * 3  # its median is +inf: the worst of b
        if c == 9:
            status = ["failed"] * 3  # no median: counted, never picked
        for s in range(3):
            records = recs([1.0, float(finals[s])], status[s])
            runs.append(RunData(f"c{c}.s{s}", p, s, status[s], None if status[s] == "failed" else records[-1],
                                records, {}, None))
        if c != 9:
            medians[label][0.01 * (c + 1)] = math.inf if c == 7 else float(np.median(finals))
    assert spread.configurations(runs) == 80 > spread.SUMMARISE
    rows = {r["algorithm"]: r for r in spread.spread_table(runs, OPTS)}
    for label, med in medians.items():
        row, vals = rows[label], np.array(list(med.values()))
        best, worst = min(med, key=med.get), max(med, key=med.get)
        assert row["configurations"] == 40 and row["best_median_F"] == pytest.approx(med[best], rel=1e-12)
        assert f"gamma={best}" in row["best_config"] and f"gamma={worst}" in row["worst_config"]
        finite = vals[np.isfinite(vals)]
        if label == "a":
            assert row["q10"] == pytest.approx(np.quantile(vals, 0.1)) and row["q50"] == pytest.approx(np.median(vals))
            assert row["worst_median_F"] == pytest.approx(finite.max()) and row["failed_configurations"] == 0
        else:
            assert row["worst_median_F"] == math.inf and row["diverged_configurations"] == 1
            assert row["failed_configurations"] == 1  # left out of the quantiles; the diverged one counts as +inf
            assert row["q25"] == pytest.approx(np.quantile(vals, 0.25)) and row["q90"] == pytest.approx(np.quantile(vals, 0.9))
            assert np.quantile(vals, 0.9) != np.quantile(finite, 0.9)


def test_a_summary_past_the_threshold_prints_the_spread_and_points_to_long_tables():
    from sweep.report import spread
    from sweep.report.build import _summary_text

    meta = META
    long = [{"configuration": f"c{i}", "F": 0.1 * i} for i in range(spread.SUMMARISE + 1)]
    tables = {"runs": long, "best": long[:2], "choices": long, "spread": [{"problem": "q", "q50": 0.5}]}
    small = _summary_text(meta, {k: v for k, v in tables.items() if k != "spread"})
    assert "c50" in small and "spread" not in small  # a small study: every table whole, as before
    big = _summary_text(meta, tables, many=60)
    assert big.index("60 configurations (more than 50)") < big.index("== spread ==") < big.index("== best ==")
    assert "== choices ==\n  51 rows: see choices.csv\n" in big and "c50" not in big and "c1 " in big


def test_varied_parameters_are_those_with_two_distinct_values_among_the_configurations_that_have_them():
    from types import SimpleNamespace

    from sweep.report.run_arrays import varied_parameters

    def run(key, label, **params):
        return SimpleNamespace(point={"key": key, "label": label, "algorithm_params": params})

    nan = float("nan")
    runs = [run("a", "soba", lr=1, tol=nan, only_some=3, flag=None),
            run("a", "soba", lr=1, tol=nan, only_some=3, flag=None),  # a second seed of "a": counted once
            run("b", "soba", lr=1.0, tol=nan, flag=None),  # 1 and 1.0 differ; NaN equals NaN; only_some absent
            run("c", "soba", lr=1, tol=nan, flag=True),  # None and True differ
            run("d", "saba", lr=0.5)]
    got = varied_parameters(runs, {"a": "q", "b": "q", "c": "q", "d": "q"})
    assert got == {("q", "soba"): ["flag", "lr"], ("q", "saba"): []}
