"""Exact oracle budgets: no run of any registered algorithm spends more calls than its budget, run alone
or batched, and a step whose calls would pass the budget is cut where the budget ends."""
import pytest

import algorithms
from algorithms import explicit
from problems.shared.errors import ParameterError
from tests.algorithms.test_state import setting

EXTRA = (3, 61)  # calls past those made to start: 3, less than one step of most methods; 61, a last step cut part way


def calls_per_iteration(name, p, cfg):
    recs = list(algorithms.run(name, p, cfg, seed=1, budget={"iterations": 3}, n_evals=10))
    return recs[-1]["calls/total"] / max(recs[-1]["iteration"], 1)


CALL_FREE = {"kmeans_features", "uniform"}  # coreset baselines that make no oracle calls (and evaluate slowly)


@pytest.mark.parametrize("name", sorted(set(algorithms.available()) - CALL_FREE))
def test_no_run_spends_more_calls_than_its_budget(name):
    p, cfg = setting(name)
    start = algorithms.Run(name, p, cfg, seed=1).view.counter.total_calls
    # Coreset selection evaluates slowly (seconds a record): one short budget, two records.
    slow = algorithms.get(name).coreset
    for calls in (start + extra for extra in (EXTRA[:1] if slow else EXTRA)):
        recs = list(algorithms.run(name, p, cfg, seed=1, budget={"oracle_calls": calls, "iterations": 2 if slow else 300},
                                   n_evals=2 if slow else 30))
        totals = [r["calls/total"] for r in recs]
        assert max(totals) <= calls, (name, calls, max(totals))
        last = recs[-1]
        if last["status"] == "finished" and last["iteration"] < (2 if slow else 300):  # the budget ended it: spent to the call
            assert last["calls/total"] == calls, (name, calls, last["calls/total"])
            assert totals == sorted(totals)


@pytest.mark.parametrize("name", explicit.defined())
def test_batched_runs_stop_at_the_budget_as_runs_alone_do(name):
    p, cfg = setting(name)
    calls = algorithms.Run(name, p, cfg, seed=1).view.counter.total_calls + 61
    budget = {"oracle_calls": calls, "iterations": 300}
    configs, seeds = [cfg, cfg, cfg], [1, 2, 3]
    got: dict[int, list] = {}
    for k, rec in algorithms.run_batched(name, p, configs, seeds, budget=budget):
        got.setdefault(k, []).append(rec)
    for k in range(3):
        alone = list(algorithms.run(name, p, configs[k], seed=seeds[k], budget=budget))
        assert max(r["calls/total"] for r in got[k]) <= calls
        assert [(r["iteration"], r["calls/total"], r["status"]) for r in got[k]] == \
            [(r["iteration"], r["calls/total"], r["status"]) for r in alone], (name, k)
        assert got[k][-1]["F"] == pytest.approx(alone[-1]["F"], rel=1e-9, abs=1e-12)


def test_a_cut_step_ends_at_the_budget_with_the_iteration_not_counted():
    p, _ = setting("soba")
    cfg = {"batch_size": 4}
    per_step = calls_per_iteration("soba", p, cfg)  # 4 calls: ∇f, ∇g, one HVP, one cross
    assert per_step == 4
    recs = list(algorithms.run("soba", p, cfg, seed=1, budget={"oracle_calls": 10, "iterations": 100}))
    last = recs[-1]
    # Two whole steps (8 calls), then the third cut after its 2 calls: 10 spent, iteration 2.
    assert (last["iteration"], last["calls/total"], last["status"]) == (2, 10, "finished")


def test_a_budget_below_the_calls_to_start_is_a_clear_error():
    p, cfg = setting("af2obo")
    start = algorithms.Run("af2obo", p, cfg, seed=1).view.counter.total_calls
    assert start > 1
    with pytest.raises(ParameterError, match="budget: 'oracle_calls' 1 is less than the calls 'af2obo'"):
        algorithms.Run("af2obo", p, cfg, seed=1, budget={"oracle_calls": 1})
