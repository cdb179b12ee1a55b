"""The run loop: evaluation points, budgets, time accounting, metric definitions, reproducibility,
divergence and checkpoint/resume."""
import importlib
import types

import numpy as np
import pytest

import algorithms
import problems
from problems.shared.errors import ParameterError

run_module = importlib.import_module("algorithms.run")  # the package re-exports a function named `run`

SOBA_CONST = {"rho": 0.5, "gamma": 0.1, "rho_decay": 0.0, "gamma_decay": 0.0}
ORACLES = ("f", "g", "grad_f", "grad_g", "grad_y_f", "grad_y_g", "hvp_yy_g", "cross_xy_g")
NON_TIME = ("time", "cpu_time", "eval_time")


def quad(**kw):
    base = dict(seed=4, dim_x=6, dim_y=5, mu=0.5, L=1.0, outer_curvature=0.5)
    return problems.make("quadratic", **{**base, **kw})


def strip_time(rec):
    return {k: v for k, v in rec.items() if k not in NON_TIME}


class FakeClock:
    """A clock that moves only when the problem is used: 1 ms per oracle call, 1 s per y*(x)."""

    def __init__(self):
        self.now = 0.0
        self.depth = 0

    def perf_counter(self):
        return self.now


@pytest.fixture
def clocked(monkeypatch):
    clock = FakeClock()
    monkeypatch.setattr(run_module, "time", types.SimpleNamespace(perf_counter=clock.perf_counter,
                                                                   thread_time=clock.perf_counter))

    def make(**kw):
        p = quad(**kw)
        for name in ORACLES:
            setattr(p, name, _ticking(getattr(p, name), clock, 1e-3))
        p.y_star = _ticking(p.y_star, clock, 1.0)  # every ground-truth metric goes through y*(x)
        return p

    return make


def _ticking(fn, clock, cost):
    def wrapped(*args, **kwargs):
        # Only the outermost call costs time: oracles that delegate to others are still one call.
        if clock.depth == 0:
            clock.now += cost
        clock.depth += 1
        try:
            return fn(*args, **kwargs)
        finally:
            clock.depth -= 1
    return wrapped


def test_records_come_at_log_spaced_iterations():
    recs = list(algorithms.run("soba", quad(), SOBA_CONST, budget={"iterations": 1000}, n_evals=10))
    # round(geomspace(1, 1000, 10)) = 1, 2, 5, 10, 22, 46, 100, 215, 464, 1000, plus the start
    assert [r["iteration"] for r in recs] == [0, 1, 2, 5, 10, 22, 46, 100, 215, 464, 1000]
    assert [r["status"] for r in recs] == ["running"] * 10 + ["finished"]


def test_without_an_iteration_budget_records_grow_geometrically_until_the_budget_ends():
    recs = list(algorithms.run("soba", quad(), SOBA_CONST, budget={"oracle_calls": 400}))
    # Points k ← max(1.25 k, k + 1) from 1, truncated: 1..7, 9, 12, 15, ...; 4 calls per iteration end it at 100.
    assert [r["iteration"] for r in recs] == [0, 1, 2, 3, 4, 5, 6, 7, 9, 12, 15, 19, 23, 29, 37, 46, 58, 72, 90, 100]


def test_iteration_budget_stops_at_the_budget():
    recs = list(algorithms.run("soba", quad(), SOBA_CONST, budget={"iterations": 37}))
    assert recs[-1]["iteration"] == 37 and recs[-1]["status"] == "finished"
    assert recs[-1]["calls/total"] == 4 * 37  # ∇y g, H v, J v, ∇f per SOBA iteration


def test_oracle_budget_stops_at_the_first_iteration_reaching_it():
    recs = list(algorithms.run("soba", quad(), SOBA_CONST, budget={"iterations": 10**6, "oracle_calls": 50}))
    last = recs[-1]
    # 4 calls per iteration: 12 iterations make 48 < 50; the 13th is cut after 2 calls, where the budget ends.
    assert (last["iteration"], last["calls/total"], last["status"]) == (12, 50, "finished")


def test_seconds_budget_counts_compute_time_only(clocked):
    p = clocked()
    recs = list(algorithms.run("soba", p, SOBA_CONST, budget={"iterations": 10**6, "seconds": 0.0305}))
    last = recs[-1]
    # 4 ms of oracle time per iteration: 7 iterations make 28 ms < 30.5 ms, the 8th makes 32 ms.
    assert (last["iteration"], last["status"]) == (8, "finished")
    assert last["time"] == pytest.approx(0.032, rel=1e-12)
    assert last["eval_time"] >= 1.0 * len(recs)  # evaluations ran (and cost 1 s each) but were not budgeted


def test_compute_time_excludes_evaluation_time(clocked):
    p = clocked()
    recs = list(algorithms.run("aid_cg", p, {"alpha": 0.5}, budget={"iterations": 40}, n_evals=8))
    for r in recs:
        assert r["time"] == pytest.approx(1e-3 * r["calls/total"], rel=1e-12, abs=1e-15)
        assert r["cpu_time"] == pytest.approx(r["time"], rel=1e-12, abs=1e-15)  # one clock for both here
    # Each evaluation solves for y*(x) at least twice (F and ∇F): ≥ 2 s of evaluation per record.
    assert recs[-1]["eval_time"] >= 2.0 * len(recs)
    times = [r["eval_time"] for r in recs]
    assert times == sorted(times)


def test_online_compute_time_excludes_the_regret_evaluation(monkeypatch):
    # The regret term is evaluated between steps, in the same stretch: its 1 s per ∇F must not count.
    clock = FakeClock()
    monkeypatch.setattr(run_module, "time", types.SimpleNamespace(perf_counter=clock.perf_counter,
                                                                   thread_time=clock.perf_counter))
    p = problems.make("oscillating_toy", T=30)
    real_at = p.at

    def at(t):
        inst = real_at(t)
        for name in ORACLES:
            setattr(inst, name, _ticking(getattr(inst, name), clock, 1e-3))
        inst.grad_F = _ticking(inst.grad_F, clock, 1.0)
        inst.y_star = _ticking(inst.y_star, clock, 1.0)
        return inst

    p.at = at
    # Constants given: 'auto' would measure them with (counted, untimed) gradients before the first step.
    recs = list(algorithms.run("af2obo", p, {"lipschitz_g": 1.0, "lambda1": 10.0}, budget={"iterations": 30}, n_evals=5))
    assert recs[-1]["iteration"] == 30 and recs[-1]["calls/total"] > 30
    for r in recs:
        assert r["time"] == pytest.approx(1e-3 * r["calls/total"], rel=1e-12, abs=1e-15)
        assert r["cpu_time"] == pytest.approx(r["time"], rel=1e-12, abs=1e-15)
    assert recs[-1]["eval_time"] >= 30.0  # one ∇F per step for the regret, plus the records' metrics


def test_every_metric_equals_its_definition():
    p = quad()
    A, C, P, a, e, c, m = p.A, p.C, p.P, p.a, p.e, p.c, p.m
    hess_F = C.T @ np.linalg.inv(A) @ P @ np.linalg.inv(A) @ C + m * np.eye(p.dim_x)

    def F_and_grad(x):
        ys = np.linalg.solve(A, C @ x - a)
        F = 0.5 * (ys - e) @ P @ (ys - e) + 0.5 * m * x @ x + c @ x
        return ys, F, m * x + c + C.T @ np.linalg.solve(A, P @ (ys - e))

    x_opt = np.linalg.solve(hess_F, -F_and_grad(np.zeros(p.dim_x))[2])
    F_opt = F_and_grad(x_opt)[1]
    run = algorithms.Run("soba", p, SOBA_CONST, seed=0, budget={"iterations": 60}, n_evals=6)
    n = 0
    while not run.done:
        rec = run.advance()
        x, y = run.algorithm.x, run.algorithm.y
        ys, F, grad = F_and_grad(x)
        assert rec["F"] == pytest.approx(F, rel=1e-12, abs=1e-12)
        assert rec["grad_F_sq"] == pytest.approx(grad @ grad, rel=1e-10, abs=1e-14)
        assert rec["y_err_sq"] == pytest.approx((y - ys) @ (y - ys), rel=1e-10, abs=1e-14)
        assert rec["F_gap"] == pytest.approx(F - F_opt, rel=1e-9, abs=1e-12)
        n += 1
    assert n == 7  # iterations 0, 1, 2, 5, 12, 26, 60


def test_same_seed_reproduces_every_non_time_metric_bit_for_bit():
    def go(seed):
        p = quad(n_samples=32, rank=1)
        return [strip_time(r) for r in algorithms.run("soba", p, {**SOBA_CONST, "batch_size": 4}, seed=seed,
                                                       budget={"iterations": 200})]
    first, again, other = go(3), go(3), go(4)
    assert first == again
    assert [r["F"] for r in first] != [r["F"] for r in other]


def test_divergence_ends_with_the_last_finite_record_and_no_exception():
    recs = list(algorithms.run("soba", quad(), {"rho": 1e3, "gamma": 1e3, "rho_decay": 0.0, "gamma_decay": 0.0},
                               budget={"iterations": 1000}))
    last = recs[-1]
    assert last["status"] == "diverged"
    assert all(np.isfinite(last[k]) for k in ("F", "grad_F_sq", "y_err_sq"))
    assert last["diverged_at"] > last["iteration"]
    assert last["iteration"] == recs[-2]["iteration"]  # the last finite record, repeated with its status
    assert last["diverged_at"] < 1000


def test_checkpoint_resumes_to_the_identical_result():
    cfg = {**SOBA_CONST, "batch_size": 4}
    budget = {"iterations": 300}
    full = [strip_time(r) for r in algorithms.run("soba", quad(n_samples=32, rank=1), cfg, seed=5, budget=budget)]
    first = algorithms.Run("soba", quad(n_samples=32, rank=1), cfg, seed=5, budget=budget)
    head = [strip_time(first.advance()) for _ in range(8)]
    state = first.state_dict()
    first.advance()  # the original run moves on: the checkpoint must not share its state
    resumed = algorithms.Run("soba", quad(n_samples=32, rank=1), cfg, seed=99, budget=budget)
    resumed.load_state_dict(state)
    tail = [strip_time(r) for r in resumed.records()]
    assert head + tail == full


def test_bad_budget_and_config_are_one_line_errors():
    with pytest.raises(ParameterError, match="'iterations' must be set") as err:
        algorithms.Run("soba", quad(), budget={})
    assert "\n" not in str(err.value)
    with pytest.raises(ParameterError, match="'rho' must be a positive number"):
        algorithms.Run("soba", quad(), {"rho": -1.0})
    with pytest.raises(ParameterError, match="unknown parameter 'bogus'"):
        algorithms.Run("soba", quad(), {"bogus": 1})


@pytest.fixture
def blowup():
    """A throwaway algorithm whose third step overflows (mode 'raise') or returns NaN (mode 'nan')."""
    import dataclasses

    from algorithms.base import _REGISTRY, AlgorithmConfig
    from problems.validation import param

    @dataclasses.dataclass(frozen=True)
    class Cfg(AlgorithmConfig):
        mode: str = param("raise", "str", choices=("raise", "nan"))

    class Blowup(algorithms.Algorithm):
        name = "test_blowup"
        Config = Cfg

        def step(self):
            self.x = self.x + 1.0
            if self.iteration == 2:
                if self.config.mode == "raise":
                    np.exp(np.array([1e4]))  # overflow: raised under the run loop's errstate
                self.x = self.x * np.nan

    algorithms.register(Blowup)
    yield "test_blowup"
    _REGISTRY.pop("test_blowup")


@pytest.mark.parametrize("mode", ["raise", "nan"])
def test_diverged_at_numbers_the_failing_step_the_same_way(blowup, mode):
    recs = list(algorithms.run(blowup, quad(), {"mode": mode}, budget={"iterations": 10}, n_evals=10))
    assert [r["iteration"] for r in recs] == [0, 1, 2, 2]
    assert recs[-1]["status"] == "diverged" and recs[-1]["diverged_at"] == 3
    np.testing.assert_array_equal(recs[-1]["F"], quad().F(np.full(6, 2.0)))


def test_constraint_violation_is_the_norm_of_the_positive_part_of_h():
    # SOBA ignores the lower-level box y ∈ [−1, 1]^d, so its y leaves the box and the metric is nonzero.
    p = problems.make("constrained_quadratic", seed=0, d=8, p=3, constraints="box")
    cons = p.constraints
    run = algorithms.Run("soba", p, {"rho": 0.5, "gamma": 0.05, "rho_decay": 0.0}, budget={"iterations": 50},
                         n_evals=5)
    seen = []
    while not run.done:
        rec = run.advance()
        x, y = run.algorithm.x, run.algorithm.y
        h = cons.A @ x - cons.B @ y - cons.b
        expected = np.sqrt(np.sum(np.clip(h, 0.0, None) ** 2))
        assert rec["constraint_violation"] == pytest.approx(expected, rel=1e-12, abs=1e-15)
        ys = p.y_star(x)
        assert np.all(cons.A @ x - cons.B @ ys - cons.b <= 1e-9)  # y*(x) itself is feasible
        assert rec["y_err_sq"] == pytest.approx((y - ys) @ (y - ys), rel=1e-12)
        seen.append(rec["constraint_violation"])
    assert seen[0] == 0.0 and seen[-1] > 0.1


def test_cpu_time_counts_the_stepping_threads_cpu_seconds_only():
    # A step that sleeps 20 ms uses (almost) no CPU: wall-clock compute time grows, CPU time does not.
    import time as real_time

    p = quad()
    real = p.grad_y_g

    def sleepy(*args, **kwargs):
        real_time.sleep(0.02)
        return real(*args, **kwargs)

    p.grad_y_g = sleepy
    last = list(algorithms.run("soba", p, SOBA_CONST, budget={"iterations": 10}, n_evals=2))[-1]
    assert last["time"] >= 10 * 0.02
    assert 0 < last["cpu_time"] < 0.25 * last["time"]
    # A CPU-bound step: its CPU seconds are at most its wall seconds (equal on an idle core).
    busy = list(algorithms.run("f2csa", problems.make("constrained_quadratic", seed=0, d=40, constraints="box"), {},
                               budget={"iterations": 5}, n_evals=2))[-1]
    assert 0 < busy["cpu_time"] <= busy["time"] * 1.05 + 1e-3


@pytest.mark.parametrize("seed", [0, 1, 7, 2**40 + 3, np.int64(5)])
def test_a_runs_generator_is_numpys_default_generator_of_its_seed(seed):
    from algorithms.run import generator
    got, want = generator(seed), np.random.default_rng(seed)
    assert got.bit_generator.state == want.bit_generator.state
    assert got.integers(0, 1000, 20).tolist() == want.integers(0, 1000, 20).tolist()
    assert generator(seed).random() == np.random.default_rng(seed).random()  # a second one starts afresh
