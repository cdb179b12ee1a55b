"""Oracle-call budgets on the NumPy stack (algorithms/explicit/call_budget.py): a stack runs the whole steps a budget
pays for and hands each run going at their end to the run loop for the cut step, so that every run's records equal
the run loop's alone (`algorithms.run` with the same budget and seed): the same points, statuses and counts, every
number to 1e-10 (seconds aside); for every defined algorithm, with its default loop counts and others, at budgets
that end before the first step, within it, exactly at a step's end and mid-step later; with minibatches drawn from
each run's stream, a run that diverges, and a stack resumed from saved states."""
import math

import numpy as np
import pytest

import algorithms
import problems
from algorithms import explicit
from algorithms.explicit import call_budget
from algorithms.explicit.call_budget import hand_over, plan
from algorithms.explicit.counts import Counts, run_counts
from algorithms.explicit.numpy_engines import NumpyStack
from algorithms.run_settings import Budget, Divergence
from problems.shared.errors import ParameterError
from tests.algorithms.test_engines import DIVERGING
from tests.algorithms.test_explicit_calls import BASE, LOOPS, finite_sum, quadratic  # noqa: F401  (fixtures)

SEEDS = (3, 5, 7, 9)
N_EVALS = 12
SECONDS = {"time", "cpu_time", "eval_time", "time_mode"}  # the stack's share, not a run's own


def budgets(defn, problem, config):
    """Budgets ending: in the first step, at its end, one call after it, at a later step's end, mid-step later."""
    counts = run_counts(defn, problem, config)[0]
    total = counts.names.index("calls/total")
    start, first, later = (int(c[total]) for c in (counts.start, counts.first, counts.later))
    return sorted({start + 1, start + first, start + first + 1, start + first + 7 * later,
                   start + first + 40 * later + later // 2})


def stacked(defn, problem, configs, budget, seeds=SEEDS, divergence=Divergence()):
    course = plan(defn, problem, configs[0], budget, N_EVALS)
    stack = NumpyStack(defn, problem, configs, course.points, list(seeds[:len(configs)]), divergence, calls=course)
    if len(stack.points) > 1:
        stack.advance(len(stack.points) - 1)
    return stack


def by_run(pairs):
    out = {}
    for k, record in pairs:
        out.setdefault(k, []).append(record)
    return out


def assert_run_loop_records(name, problem, configs, budget, got, seeds=SEEDS, divergence=None):
    for k, config in enumerate(configs):
        expected = list(algorithms.run(name, problem, config, seed=seeds[k], budget=budget, n_evals=N_EVALS,
                                       divergence=divergence))
        mine = got.get(k, [])
        assert [(r["iteration"], r["status"]) for r in mine] == [(r["iteration"], r["status"]) for r in expected], k
        for a, b in zip(mine, expected):
            assert a.keys() - SECONDS == b.keys() - SECONDS
            for n in a.keys() - SECONDS:
                x, y = a[n], b[n]
                assert x == y or (x != x and y != y) or \
                    (type(x) is float and math.isclose(x, y, rel_tol=1e-10, abs_tol=1e-10)), (k, a["iteration"], n, x, y)


def cases():
    for name, (base, field, values) in BASE.items():
        for loops in ({}, LOOPS[name]):
            yield pytest.param(name, [{**base, **loops, field: v} for v in values], id=f"{name}-{len(loops)}")
    yield pytest.param("soba", [{"rho": r, "gamma": 0.1, "batch_size": 2} for r in (0.1, 0.05)], id="soba-minibatches")
    # a cut step that moves y before its calls end, on minibatches drawn from each run's stream
    yield pytest.param("dtfbo", [{"sub_loops": "fixed", "batch_size": 2, "alpha0": a} for a in (5.0, 2.0)],
                       id="dtfbo-minibatches")


@pytest.mark.parametrize("name, configs", list(cases()))
def test_every_run_of_a_stack_under_a_call_budget_ends_as_the_run_loop_ends_it(name, configs, quadratic, finite_sum):
    problem = finite_sum if name == "saba" or "batch_size" in configs[0] else quadratic
    defn = explicit.definition(name)
    configs = defn.configs(configs)
    for calls in budgets(defn, problem, configs[0]):
        budget = Budget.from_dict({"oracle_calls": calls})
        got = by_run(stacked(defn, problem, configs, budget).result().records())
        assert_run_loop_records(name, problem, configs, budget, got)
        assert all(r[-1]["calls/total"] <= calls for r in got.values())


@pytest.mark.parametrize("name", ["soba", "dtfbo", "bome", "aid_cg"])
def test_an_iteration_limit_with_a_call_budget_ends_the_runs_where_it_comes_first(name, quadratic):
    base, field, values = BASE[name]
    defn = explicit.definition(name)
    configs = defn.configs([{**base, field: v} for v in values])
    calls = budgets(defn, quadratic, configs[0])[-2] + 1  # the calls of 8 whole steps and one more
    for iterations in (3, 7, 8, 40):
        budget = Budget.from_dict({"oracle_calls": calls, "iterations": iterations})
        course = plan(defn, quadratic, configs[0], budget, N_EVALS)
        assert (course.steps, course.cut) == ((iterations, False) if iterations <= 8 else (8, True)), iterations
        got = by_run(stacked(defn, quadratic, configs, budget).result().records())
        assert_run_loop_records(name, quadratic, configs, budget, got)


@pytest.mark.parametrize("name, params", [("coreset_toy", {}), ("simulated", {}), ("regularization_selection", {}),
                                          ("nonunique_toy", {})])
def test_problems_of_every_form_end_their_cut_runs_as_the_run_loop(name, params):
    """The cut points' metrics, computed for all runs at once, on a problem with a pure form, with its own oracles
    (ground truth on the host), with its own F gap (coreset_toy) and without a known optimum."""
    problem = problems.make(name, seed=0, **params)
    for algorithm, configs in (("soba", [{"rho": r, "gamma": 0.05} for r in (0.05, 0.1, 0.02)]),
                               ("dtfbo", [{"sub_loops": "fixed", "alpha0": a} for a in (5.0, 8.0)])):  # y moves mid-step
        defn = explicit.definition(algorithm)
        configs = defn.configs(configs)
        calls = budgets(defn, problem, configs[0])[-1]  # 41 whole steps and half of one
        budget = Budget.from_dict({"oracle_calls": calls})
        got = by_run(stacked(defn, problem, configs, budget).result().records())
        assert_run_loop_records(algorithm, problem, configs, budget, got)
        assert all(r[-1]["calls/total"] == calls and r[-1]["status"] == "finished" for r in got.values())


def test_the_plan_pays_for_whole_steps_and_cuts_the_next_one(quadratic):
    """SOBA: 1 call to start (none), then 4 a step (grad_f, grad_g, hvp, cross)."""
    defn = explicit.definition("soba")
    config = defn.configs([{}])[0]
    counts = run_counts(defn, quadratic, config)[0]
    total = counts.names.index("calls/total")
    start, first, later = (int(c[total]) for c in (counts.start, counts.first, counts.later))
    assert (start, first, later) == (0, 4, 4)
    for calls, steps, cut in ((1, 0, True), (4, 1, False), (5, 1, True), (400, 100, False), (402, 100, True)):
        course = plan(defn, quadratic, config, Budget.from_dict({"oracle_calls": calls}), N_EVALS)
        assert (course.steps, course.cut) == (steps, cut), calls
        assert course.points[-1] == steps and course.natural == (steps in course.points[:-1] or steps in (0, 1))


def test_a_run_that_diverges_in_the_stack_ends_there_and_the_others_take_the_cut_step(quadratic):
    defn = explicit.definition("soba")
    configs = defn.configs([{"rho": 0.1, "gamma": 0.1}, DIVERGING["soba"], {"rho": 0.05, "gamma": 0.2}])
    budget = Budget.from_dict({"oracle_calls": 4 * 60 + 2})
    got = by_run(stacked(defn, quadratic, configs, budget).result().records())
    assert got[1][-1]["status"] == "diverged" and got[0][-1]["status"] == "finished"
    assert_run_loop_records("soba", quadratic, configs, budget, got)


def test_the_cut_steps_records_are_each_readers_own(quadratic):
    """The records a cut step ends runs with are kept for the next `result()`: a reader changing them in place
    (a trial scaling its seconds) changes neither the next reader's nor the stack's."""
    defn = explicit.definition("soba")
    stack = stacked(defn, quadratic, defn.configs([{"rho": 0.1, "gamma": 0.1}, {"rho": 0.05, "gamma": 0.2}]),
                    Budget.from_dict({"oracle_calls": 4 * 60 + 2}))
    first = by_run(stack.result().records())
    assert stack.result().ends and all(first[k][-1]["status"] == "finished" for k in (0, 1))
    kept = {k: [dict(r) for r in rs] for k, rs in first.items()}
    for records in first.values():
        for record in records:
            record["time"] = -1.0
    assert by_run(stack.result().records()) == kept


def test_a_stack_resumed_from_saved_states_ends_as_one_that_was_not(finite_sum):
    defn = explicit.definition("soba")
    configs = defn.configs([{"rho": r, "gamma": 0.1, "batch_size": 2} for r in (0.1, 0.05, 0.2)])
    budget = Budget.from_dict({"oracle_calls": 4 * 50 + 3})
    course = plan(defn, finite_sum, configs[0], budget, N_EVALS)
    first = NumpyStack(defn, finite_sum, configs, course.points, list(SEEDS[:3]), calls=course)
    first.advance(3)
    before = list(first.result().records())
    order = [2, 0, 1]
    saved = first.saved()
    again = NumpyStack(defn, finite_sum, [configs[k] for k in order], course.points, [SEEDS[k] for k in order],
                       saved=[saved[k] for k in order], calls=course)
    again.advance(len(course.points) - 1)
    after = [(order[k], r) for k, r in again.result().records(since=4)]
    assert_run_loop_records("soba", finite_sum, configs, budget, by_run(before + after))


def test_a_budget_below_the_start_a_step_without_calls_or_calls_of_a_runs_own_are_refused_in_one_line(
        quadratic, monkeypatch):
    ttsa = explicit.definition("ttsa")
    sampled = ttsa.configs([{"hia_mode": "sampled"}])[0]
    with pytest.raises(ParameterError, match="budget.oracle_calls: ttsa's runs with this config make calls"):
        plan(ttsa, quadratic, sampled, Budget.from_dict({"oracle_calls": 100}), N_EVALS)
    soba = explicit.definition("soba")
    config = soba.configs([{}])[0]
    counts = run_counts(soba, quadratic, config)[0]
    total = counts.names.index("calls/total")
    for start, later, message in ((5, 4, "'oracle_calls' 4 is less than the calls 'soba' makes to start"),
                                  (0, 0, "a step of soba with this config makes no oracle call")):
        made = Counts(counts.names, counts.start.copy(), counts.first.copy(), counts.later.copy())
        made.start[total], made.later[total] = start, later
        monkeypatch.setattr(call_budget, "run_counts", lambda *args, made=made: (made, None))
        with pytest.raises(ParameterError, match=message):
            plan(soba, quadratic, config, Budget.from_dict({"oracle_calls": 4}), N_EVALS)


def test_the_hand_over_takes_the_stacks_state_not_a_fresh_runs(quadratic):
    """A mutation check: a run handed over with another x ends elsewhere than the stack's run would."""
    defn = explicit.definition("soba")
    configs = defn.configs([{}])
    budget = Budget.from_dict({"oracle_calls": 4 * 20 + 2})
    stack = stacked(defn, quadratic, configs, budget)
    last = [r for _, r in stack.result().records()]
    row = {n: (v if v is None else v[0]) for n, v in zip(stack.state._fields, stack.state)}
    course = stack.calls
    counts = stack.result().counts
    counted = dict(zip(counts.names, counts.at(course.steps)))  # T = 20 is not a point: the last record is at 19
    seconds = {n: last[-2][n] for n in ("time", "cpu_time", "eval_time")}
    first = {n: v[0, 0] for n, v in stack.values.items()}

    def end(at):
        return list(hand_over("soba", quadratic, configs[0], SEEDS[0], course, Divergence(), at, counted, seconds,
                              {**last[-2], "status": "running"}, first).records())[-1]

    assert (course.steps, course.natural, last[-2]["iteration"]) == (20, False, 19)
    assert end(row)["F"] == pytest.approx(last[-1]["F"], rel=1e-12)
    assert abs(end({**row, "x": np.asarray(row["x"]) + 1.0})["F"] - last[-1]["F"]) > 1e-6
