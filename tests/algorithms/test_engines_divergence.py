"""The explicit engines end runs by any divergence rule of the run loop (algorithms.run.Divergence: its factor and
its watched quantities), as `algorithms.run` ends them: the same records, the same statuses and iterations, the same
reason (`diverged_metric`: "‖x‖", "y non-finite", the grown metric...)."""
import numpy as np
import pytest

import algorithms
import problems
from algorithms import explicit
from problems.shared.errors import ParameterError
from tests.algorithms.test_engines import CONFIGS, DIVERGING, EXACT, NOT_NUMBERS, needs_jax, records_by_run

ITERATIONS, N_EVALS = 60, 12
#: Rules that end runs earlier or later than the default, or by other quantities: a tight factor (the quadratic's
#: ‖∇F‖² first grows by more than 10 under the larger steps), one metric, the iterates only, no iterates.
RULES = [{"factor": 10.0}, {"factor": 1e3, "metrics": ["grad_F_sq"]}, {"factor": 3.0, "metrics": ["iterates"]},
         {"factor": 1e4, "metrics": ["objective", "y_err_sq"]}]
SKIP = (*NOT_NUMBERS, "diverged_at", "diverged_metric")


@pytest.fixture(scope="module")
def problem():
    return problems.make("quadratic", seed=1, dim_x=5, dim_y=4)


def configs_of(algorithm):
    return [*CONFIGS[algorithm][:2], DIVERGING[algorithm], {**CONFIGS[algorithm][0], **{
        n: 4 * v for n, v in CONFIGS[algorithm][0].items() if n in ("gamma", "rho", "alpha")}}]


@pytest.mark.parametrize("rule", RULES, ids=lambda r: "-".join(f"{k}={v}" for k, v in r.items()))
@pytest.mark.parametrize("algorithm", ["soba", "stocbio", "bome"])
def test_a_rule_ends_each_run_where_the_run_loop_does(problem, algorithm, rule):
    configs = configs_of(algorithm)
    ends = set()
    for engine in ("per_run", "stacked"):
        mine = records_by_run(explicit.run(algorithm, problem, configs, ITERATIONS, N_EVALS, engine=engine,
                                           divergence=rule).records())
        for k, config in enumerate(configs):
            today = list(algorithms.run(algorithm, problem, config, 0, {"iterations": ITERATIONS}, N_EVALS, rule))
            assert [(r["iteration"], r["status"], r.get("diverged_at")) for r in mine[k]] == \
                [(r["iteration"], r["status"], r.get("diverged_at")) for r in today], (engine, k)
            assert mine[k][-1].get("diverged_metric") == today[-1].get("diverged_metric")  # in the run loop's words
            for a, b in zip(mine[k], today):
                assert max(abs(a[n] - b[n]) / max(1.0, abs(b[n])) for n in a if n not in SKIP) < EXACT
            ends.add((today[-1]["status"], today[-1]["iteration"]))
    assert len(ends) >= 2  # the rule ends some runs and not others


def test_the_rule_changes_where_runs_end(problem):
    """The same runs under the default rule and a tight one end at different iterations (the rule is used)."""
    configs = configs_of("soba")
    default = explicit.run("soba", problem, configs, ITERATIONS, N_EVALS)
    tight = explicit.run("soba", problem, configs, ITERATIONS, N_EVALS, divergence={"factor": 10.0})
    assert [r["iteration"] for _, r in default.records()] != [r["iteration"] for _, r in tight.records()]


@needs_jax
@pytest.mark.parametrize("rule", RULES, ids=lambda r: "-".join(f"{k}={v}" for k, v in r.items()))
def test_jax_ends_runs_by_the_rule_as_the_numpy_engines(problem, rule):
    configs = configs_of("soba")
    mine = records_by_run(explicit.run("soba", problem, configs, ITERATIONS, N_EVALS, engine="jax",
                                       divergence=rule).records())
    theirs = records_by_run(explicit.run("soba", problem, configs, ITERATIONS, N_EVALS, divergence=rule).records())
    for k in theirs:
        assert [(r["iteration"], r["status"], r.get("diverged_at")) for r in mine[k]] == \
            [(r["iteration"], r["status"], r.get("diverged_at")) for r in theirs[k]]
        for a, b in zip(mine[k], theirs[k]):
            assert max(abs(a[n] - b[n]) / max(1.0, abs(b[n])) for n in a if n not in SKIP) < EXACT


def test_a_bad_rule_is_one_line_before_any_work(problem):
    with pytest.raises(ParameterError, match="factor"):
        explicit.run("soba", problem, [{}], 10, divergence={"factor": 0.5})
    with pytest.raises(ParameterError, match="metrics"):
        explicit.run("soba", problem, [{}], 10, divergence={"metrics": ["speed"]})


def test_the_iterate_check_names_the_first_failure_as_the_run_loop_does():
    """x before y, non-finite (or past 1e100) before past the limit; a run keeps its first failure."""
    from collections import namedtuple

    from algorithms.explicit.divergence import ITERATE_REASONS, NEVER, watch_iterates

    State = namedtuple("State", "x y t")
    x = np.array([[1.0, 0.0], [np.nan, 0.0], [50.0, 0.0], [1.0, 0.0], [1.0, 0.0], [1e101, 0.0]])
    y = np.array([[0.0], [0.0], [np.inf], [np.nan], [50.0], [0.0]])
    limits = (np.full((6, 1), 100.0), np.full((6, 1), 100.0))  # squared norms: ‖·‖ past 10
    failed, reason = np.full((6, 1), NEVER), np.zeros((6, 1))
    failed, reason = watch_iterates(State(x, y, np.full((6, 1), 3.0)), failed, reason, limits, np)
    assert failed.ravel().tolist() == [NEVER, 3.0, 3.0, 3.0, 3.0, 3.0]
    assert [ITERATE_REASONS.get(c, "") for c in reason.ravel()] == ["", "x non-finite", "‖x‖", "y non-finite", "‖y‖",
                                                                     "x non-finite"]
    later = State(np.full((6, 2), np.nan), np.zeros((6, 1)), np.full((6, 1), 4.0))
    again, reason_again = watch_iterates(later, failed, reason, limits, np)
    assert again.ravel().tolist() == [4.0, 3.0, 3.0, 3.0, 3.0, 3.0]  # the first failure stays
    np.testing.assert_array_equal(reason_again[1:], reason[1:])


@pytest.mark.parametrize("engine", ["run loop", "per_run", "stacked", pytest.param("jax", marks=needs_jax)])
def test_a_record_changed_by_its_reader_does_not_change_the_run_s_diverged_record(problem, engine):
    """A run ended by its iterates repeats its last record as "diverged"; a reader that scales a record's seconds
    in place (as a padded JAX stack's trial does) scales that repeat once, not twice."""
    configs, rule = [CONFIGS["soba"][0], {"rho": 50.0, "gamma": 50.0}], {"metrics": ["iterates"]}
    if engine == "run loop":
        pairs = ((1, r) for r in algorithms.run("soba", problem, configs[1], 0, {"iterations": ITERATIONS}, N_EVALS,
                                                rule))
    else:
        pairs = explicit.run("soba", problem, configs, ITERATIONS, N_EVALS, engine=engine, divergence=rule).records()
    untouched, changed = {}, {}
    for k, record in pairs:
        untouched.setdefault(k, []).append(dict(record))  # as made, before the reader changes it
        record["time"] *= 2.0
        changed.setdefault(k, []).append(record)
    ended = untouched[1][-1]
    assert ended["status"] == "diverged" and ended["diverged_metric"] == "‖x‖" and len(untouched[1]) >= 3
    assert ended["time"] > 0 and ended["time"] == untouched[1][-2]["time"]  # the record it repeats
    assert [r["time"] for r in changed[1]] == [2.0 * r["time"] for r in untouched[1]]
