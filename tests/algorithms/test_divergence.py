"""The divergence rule: a watched quantity non-finite or past factor × max(|start|, 1) ends a run as
diverged; checked against the rule's definition applied to an uninterrupted run's records."""
import importlib
import math
import warnings

import numpy as np
import pytest

import algorithms
import problems
from algorithms.run import Budget, Divergence
from problems.shared.errors import ParameterError
from tests.sweep import toy_algorithms  # noqa: F401  (toy_growth)

run_module = importlib.import_module("algorithms.run")  # the package re-exports a function named `run`

NEVER = {"factor": 1e300}


def quad(**kw):
    return problems.make("quadratic", seed=2, dim_x=3, dim_y=4, **kw)


def first_crossing(records, key, factor):
    """The first evaluated iteration at which |key| > factor · max(|start|, 1) (the rule's definition)."""
    limit = factor * max(abs(records[0][key]), 1.0)
    return next((r["iteration"] for r in records if abs(r[key]) > limit), None)


@pytest.mark.parametrize("key", ["F_gap", "grad_F_sq", "y_err_sq"])
def test_a_single_watched_metric_ends_the_run_where_the_definition_says(key):
    budget = {"iterations": 60}
    free = list(algorithms.run("toy_growth", quad(), {"rate": 1.5}, budget=budget, n_evals=100, divergence=NEVER))
    at = first_crossing(free, key, 1e6)
    assert at is not None and 5 < at < 60
    recs = list(algorithms.run("toy_growth", quad(), {"rate": 1.5}, budget=budget, n_evals=100,
                               divergence={"metrics": [key]}))
    last = recs[-1]
    assert last["status"] == "diverged" and last["diverged_metric"] == key
    assert last["diverged_at"] == last["iteration"] == at
    assert abs(last[key]) > 1e6 * max(abs(free[0][key]), 1.0)  # the crossing record is kept, finite
    assert math.isfinite(last[key])


def test_the_default_watch_list_stops_at_the_earliest_crossing():
    budget = {"iterations": 60}
    free = list(algorithms.run("toy_growth", quad(), {"rate": 1.5}, budget=budget, n_evals=100, divergence=NEVER))
    metric_at = min(first_crossing(free, k, 1e6) for k in ("F_gap", "grad_F_sq", "y_err_sq"))
    iterate_at = min(norm_crossing(d, 1.5, 1e6) for d in (3, 4))
    last = list(algorithms.run("toy_growth", quad(), {"rate": 1.5}, budget=budget, n_evals=100))[-1]
    assert last["status"] == "diverged"
    assert last["diverged_at"] == min(metric_at, iterate_at)


def norm_crossing(dim, rate, factor):
    """First t with ‖x_t‖ = √dim (rate^t − 1)/(rate − 1) > factor · max(‖x_0‖ = 0, 1)."""
    return next(t for t in range(1, 1000) if math.sqrt(dim) * (rate**t - 1) / (rate - 1) > factor)


def test_iterate_norms_alone_closed_form():
    p = quad()
    assert not np.any(p.initial_point()[0]) and not np.any(p.initial_point()[1])
    want = min(norm_crossing(d, 2.0, 1e3) for d in (3, 4))
    last = list(algorithms.run("toy_growth", p, {"rate": 2.0}, budget={"iterations": 80}, n_evals=5,
                               divergence={"factor": 1e3, "metrics": ["iterates"]}))[-1]
    assert last["status"] == "diverged" and last["diverged_at"] == want
    assert last["diverged_metric"] in ("‖x‖", "‖y‖")


def test_a_converging_run_is_finished_and_a_smaller_factor_only_flags_growth():
    recs = list(algorithms.run("soba", quad(), {"batch_size": None}, budget={"iterations": 200}))
    assert recs[-1]["status"] == "finished"
    assert recs[-1]["grad_F_sq"] < recs[0]["grad_F_sq"]
    # Bounded iterates (x_t → 2·1, ‖x_t‖ < 2√4 = 4) stay under a limit of 10, and cross one of 3.
    ok = list(algorithms.run("toy_growth", quad(), {"rate": 0.5}, budget={"iterations": 50},
                             divergence={"factor": 10, "metrics": ["iterates"]}))
    assert ok[-1]["status"] == "finished"
    tight = list(algorithms.run("toy_growth", quad(), {"rate": 0.5}, budget={"iterations": 50},
                                divergence={"factor": 3, "metrics": ["iterates"]}))
    # ‖y_t‖ = 2(2 − 2·0.5^t) first exceeds 3 at t = 3 (3.5), as does ‖x_t‖ = √3(2 − 2·0.5^t) (3.03).
    assert tight[-1]["status"] == "diverged" and tight[-1]["diverged_at"] == 3


def test_a_resumed_run_limits_iterates_by_the_start_values_it_loads():
    # toy_growth from 0 with rate 2: ‖x_t‖ = √3 (2^t − 1), ‖y_t‖ = 2 (2^t − 1); limit 10 · max(start, 1).
    def resumed(start):
        run = run_module.Run("toy_growth", quad(), {"rate": 2.0}, budget={"iterations": 40},
                             divergence={"factor": 10, "metrics": ["iterates"]})
        state = run.state_dict()
        state["start_values"] = {"x": start, "y": start}
        run.load_state_dict(state)
        return list(run.records())[-1]

    # Limit 10: ‖y_3‖ = 14 (‖y_2‖ = 6). Limit 1000 (a start of 100 loaded): ‖y_9‖ = 1022 (‖y_8‖ = 510).
    assert resumed(0.0)["diverged_at"] == 3
    assert resumed(100.0)["diverged_at"] == 9


def test_non_finite_still_diverges_with_the_rule_off():
    recs = list(algorithms.run("toy_growth", quad(), {"rate": 1e200}, budget={"iterations": 10}, divergence=NEVER))
    assert recs[-1]["status"] == "diverged" and recs[-1]["diverged_metric"].endswith("non-finite")


def test_an_iterate_whose_square_overflows_is_caught_quietly_at_its_step():
    # x_2 = 1e160 + 1: finite, but x·x overflows inside the run loop's raising error state
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        recs = list(algorithms.run("toy_growth", quad(), {"rate": 1e160}, budget={"iterations": 10}, divergence=NEVER))
    assert recs[-1]["status"] == "diverged" and recs[-1]["diverged_at"] == 2
    assert recs[-1]["diverged_metric"] == "x non-finite"  # x is checked before y


@pytest.mark.parametrize("bad, message", [
    ({"factor": 1.0}, "'factor' must be a number greater than 1, got 1.0"),
    ({"factor": math.inf}, "'factor' must be a positive number, got inf"),
    ({"metrics": ["F", "loss"]}, "'metrics' must be names from objective, F, F_gap, grad_F_sq, y_err_sq, iterates, got 'loss'"),
    ({"metrics": "F"}, "'metrics' must be a list of names"),
    ({"window": 3}, "unknown parameter 'window'"),
])
def test_bad_divergence_settings_are_one_line_errors(bad, message):
    with pytest.raises(ParameterError) as err:
        Divergence.from_dict(bad)
    assert message in str(err.value) and "\n" not in str(err.value)
    assert str(err.value).startswith("divergence: ")


@pytest.mark.parametrize("bad, message", [
    ({"seconds": math.inf}, "budget: 'seconds' must be at most 604800 (a run must end), got inf"),
    ({"iterations": 10**18}, "budget: 'iterations' must be at most 1e+09 (a run must end)"),
    ({"oracle_calls": 10**13}, "budget: 'oracle_calls' must be at most 1e+12"),
])
def test_absurd_budgets_are_refused(bad, message):
    with pytest.raises(ParameterError) as err:
        Budget.from_dict(bad)
    assert message in str(err.value)


def _reference_norm(v):
    """The elementwise rule: None unless every entry is finite and below DIVERGENCE_NORM, else ‖v‖."""
    finite = np.all(np.isfinite(v)) and np.max(np.abs(v), initial=0) < run_module.DIVERGENCE_NORM
    return float(np.linalg.norm(v)) if finite else None



def test_one_dot_product_gives_the_elementwise_rule_and_the_norm_to_the_bit():
    rng = np.random.default_rng(0)
    cases = [rng.standard_normal(int(rng.integers(1, 300))) * 10.0 ** rng.uniform(-160, 99) for _ in range(3000)]
    big = np.full(10_000, 2e98)  # every entry in range, yet v·v = 4e200 ≥ 1e200: the elementwise path
    bad = [np.array([1.0, np.nan]), np.array([np.inf, 1.0]), np.array([-np.inf]), np.array([1.0, 1e100]),
           np.array([1e160, 1.0]), np.full(3, -2e100)]
    other = [np.arange(5.0)[::2], np.arange(4), np.ones((2, 2)), np.zeros(0)]  # strided, int, 2-D, empty
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # an overflowing v·v must stay quiet
        for v in cases + [big] + bad + other:
            with np.errstate(over="ignore"):
                got = run_module._checked_norm(v)
            assert got == _reference_norm(v)
    with np.errstate(over="ignore"):
        # A sum of 10,000 equal squares may round by up to ~n·ε, as the BLAS build sums it (3.7e-15 in the norm
        # with NumPy 2.4's OpenBLAS).
        assert run_module._checked_norm(big) == pytest.approx(2e98 * 100, rel=1e-12)
        assert all(run_module._checked_norm(v) is None for v in bad)
