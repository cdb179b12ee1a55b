"""Batched runs (`algorithms.run_batched`: NumPy stacks of the explicit definitions) equal their sequential runs:
every batchable algorithm on quadratic, simulated and logistic problems (full batch and minibatches), with runs that
diverge and runs that end on an oracle-call budget; what cannot stack (another algorithm, a tolerance D-TFBO, a
seconds budget) runs one after another. Records are compared key by key (floats to rtol 1e-10, the rest exactly),
times aside; the configs avoid chaotic regimes, where rounding differences (a stacked product sums in another
order) grow without diverging. Resuming a stack from saved states: tests/algorithms/test_engines_windows.py."""
import pytest

import algorithms
import problems
from algorithms import explicit
from algorithms.batched import batchable, run_batched
from algorithms.explicit.numpy_engines import NumpyStack
from algorithms.run import Run

TIMES = ("time", "cpu_time", "eval_time", "time_mode")
#: Per algorithm: two converging configs and one that diverges (its steps named as the config names them).
CONFIGS = {
    "soba": ({"rho": 0.1, "gamma": 0.1}, {"rho": 0.05, "gamma": 0.2, "gamma_decay": 0.0}, {"rho": 0.1, "gamma": 400.0}),
    "saba": ({"rho": 0.1, "gamma": 0.1}, {"rho": 0.05, "gamma": 0.2, "memory_init": "zero"}, {"rho": 0.1, "gamma": 400.0}),
    "amigo": ({"alpha": 0.1, "gamma": 0.1}, {"alpha": 0.05, "eta": 0.2, "gamma": 0.2}, {"alpha": 0.1, "gamma": 400.0}),
    "stocbio": ({"alpha": 0.1, "gamma": 0.1}, {"alpha": 0.05, "eta": 0.2, "gamma": 0.2}, {"alpha": 0.1, "gamma": 400.0}),
    "ttsa": ({"alpha": 0.1, "gamma": 0.1}, {"alpha": 0.05, "eta": 0.2, "gamma": 0.2}, {"alpha": 0.1, "gamma": 400.0}),
    "aid_cg": ({"alpha": 0.1, "gamma": 0.1}, {"alpha": 0.05, "gamma": 0.2}, {"alpha": 0.1, "gamma": 400.0}),
    "aid_fp": ({"alpha": 0.1, "gamma": 0.1}, {"alpha": 0.05, "eta": 0.2, "gamma": 0.2}, {"alpha": 0.1, "gamma": 400.0}),
    "itd": ({"alpha": 0.1, "gamma": 0.1}, {"alpha": 0.05, "gamma": 0.2}, {"alpha": 0.1, "gamma": 400.0}),
    "fsla": ({"alpha": 0.1, "gamma": 0.1}, {"alpha": 0.05, "gamma": 0.2}, {"alpha": 0.1, "gamma": 400.0}),
    "mrbo": ({"alpha": 0.1, "gamma": 0.1}, {"alpha": 0.05, "eta": 0.2, "gamma": 0.2}, {"alpha": 0.1, "gamma": 400.0}),
    "f2sa": ({"alpha": 0.1, "gamma": 0.1}, {"alpha": 0.05, "beta": 0.2, "gamma": 0.2}, {"alpha": 0.1, "gamma": 400.0}),
    "dtfbo": ({"sub_loops": "fixed"}, {"sub_loops": "fixed", "eta_x": 0.5, "eta_y": 0.5},
              {"sub_loops": "fixed", "eta_x": 1e4}),
    "stfbo": ({}, {"eta_x": 0.5, "eta_y": 0.5}, {"eta_x": 1e4}),
    "bome": ({"xi": 0.05}, {"xi": 0.02, "alpha": 0.1}, {"xi": 400.0}),
}
PROBLEMS = {
    "quadratic": dict(seed=1, dim_x=5, dim_y=4),
    "quadratic_sum": dict(seed=1, dim_x=5, dim_y=4, n_samples=20, rank=2),
    "simulated": dict(seed=1, dim_x=5, dim_y=4, n_samples_inner=32, n_samples_outer=24),
    "regularization_selection": dict(seed=0, dataset="breast_cancer"),
    "logistic_minibatch": dict(seed=0, dataset="breast_cancer"),  # regularization_selection on minibatches
}
NAMES = {"quadratic_sum": "quadratic", "logistic_minibatch": "regularization_selection"}
STOCHASTIC = ("quadratic_sum", "simulated", "logistic_minibatch")
LOGISTIC = ("regularization_selection", "logistic_minibatch")
SEEDS = [0, 1, 2]


def make(name):
    kwargs = dict(PROBLEMS[name])
    return problems.make(NAMES.get(name, name), **kwargs)


def assert_same(got, want, where=""):
    assert [r["iteration"] for r in got] == [r["iteration"] for r in want], where
    for a, b in zip(got, want):
        assert set(a) - {"time_mode"} == set(b), where
        for key, expected in b.items():
            if key in TIMES:
                continue
            if isinstance(expected, float):
                # abs: a diverging logistic x leaves values like 1e-102, rounding noise around zero
                assert a[key] == pytest.approx(expected, rel=1e-10, abs=1e-60, nan_ok=True), (where, a["iteration"], key)
            else:
                assert a[key] == expected, (where, a["iteration"], key)


def sequential(algorithm, name, configs, budget, seeds=SEEDS, divergence=None):
    return [list(algorithms.run(algorithm, make(name), c, s, budget, 8, divergence)) for c, s in zip(configs, seeds)]


def batched(algorithm, name, configs, budget, seeds=SEEDS, divergence=None):
    out = [[] for _ in configs]
    for k, rec in run_batched(algorithm, make(name), configs, seeds, budget, 8, divergence):
        out[k].append(rec)
    return out


def configs_for(algorithm, name):
    stochastic = name in STOCHASTIC
    full = None if algorithms.get(algorithm).Config().batch_size is None else 64  # SABA's default is 64
    # On logistic minibatches the diverging config overflows exp(x) inside a step before any stored value is
    # non-finite: alone that step raises, stacked it computes on (algorithms/explicit): not a case of equality.
    chosen = CONFIGS[algorithm][:2] if name == "logistic_minibatch" else CONFIGS[algorithm]
    return [dict(c, batch_size=4) if stochastic else dict(c, batch_size=full) for c in chosen]


@pytest.mark.parametrize("algorithm,name", [(a, n) for a in CONFIGS for n in PROBLEMS
                                            if not (algorithms.get(a).finite_sum and n == "quadratic")])
def test_batched_runs_equal_sequential_runs(algorithm, name):
    budget = {"iterations": 6 if name in LOGISTIC else 25}
    configs = configs_for(algorithm, name)
    seeds = SEEDS[:len(configs)]
    got, want = batched(algorithm, name, configs, budget, seeds), sequential(algorithm, name, configs, budget, seeds)
    for k in range(len(configs)):
        assert_same(got[k], want[k], f"{algorithm} {name} run {k}")
        assert all(r["time_mode"] == "batched" for r in got[k])
    if name not in LOGISTIC and algorithm != "stfbo":  # too few iterations there; S-TFBO adapts
        assert want[2][-1]["status"] == "diverged", algorithm


def test_the_fourteen_algorithms_are_batchable_and_others_are_not():
    assert len(CONFIGS) == 14 and set(CONFIGS) == set(explicit.defined())
    assert all(batchable(n, make("quadratic")) for n in CONFIGS) and not batchable("bsa", make("quadratic"))


@pytest.mark.parametrize("algorithm,name", [("soba", "quadratic_sum"), ("aid_cg", "quadratic_sum"),
                                            ("stfbo", "quadratic_sum"), ("ttsa", "quadratic_sum"),
                                            ("saba", "simulated"), ("mrbo", "simulated"),
                                            ("stocbio", "logistic_minibatch"), ("f2sa", "logistic_minibatch")])
def test_an_oracle_budget_ends_runs_between_evaluation_points(algorithm, name):
    budget = {"oracle_calls": 333}
    configs = configs_for(algorithm, name)
    seeds = SEEDS[:len(configs)]
    got, want = batched(algorithm, name, configs, budget, seeds), sequential(algorithm, name, configs, budget, seeds)
    for k in range(len(configs)):
        assert_same(got[k], want[k], f"run {k}")
    assert want[0][-1]["calls/total"] >= 333 and want[0][-1]["status"] == "finished"


def test_a_divergence_between_evaluation_points_leaves_the_others_undisturbed():
    configs = [{"rho": 0.1, "gamma": 0.1}] + [{"rho": 0.1, "gamma": g, "gamma_decay": 0.0} for g in (25.0, 40.0)]
    budget, watch = {"iterations": 200}, {"metrics": ["iterates"]}  # points 0, 1, 2, 4, 10, 21, 44, 94, 200
    got = batched("soba", "quadratic", configs, budget, divergence=watch)
    want = sequential("soba", "quadratic", configs, budget, divergence=watch)
    for k in range(3):
        assert_same(got[k], want[k], f"run {k}")
    assert [(r[-1]["diverged_at"], r[-1]["iteration"], r[-1]["diverged_metric"]) for r in want[1:]] == \
        [(30, 21, "‖x‖"), (11, 10, "‖x‖")]
    assert got[0][-1]["status"] == "finished" and got[0][-1]["iteration"] == 200


def test_runs_with_different_structural_settings_form_separate_stacks():
    configs = [{"inner_steps": 3, "gamma": 0.1}, {"inner_steps": 5, "gamma": 0.2}, {"inner_steps": 3, "gamma": 0.3}]
    budget = {"iterations": 20}
    got, want = batched("amigo", "quadratic", configs, budget), sequential("amigo", "quadratic", configs, budget)
    for k in range(3):
        assert_same(got[k], want[k], f"run {k}")


def test_a_problem_without_stacked_oracles_runs_through_the_loop_fallback():
    p_kwargs = dict(seed=0)
    configs, seeds, budget = [{"rho": 0.05}, {"rho": 0.1, "gamma": 0.05}], [0, 3], {"iterations": 30}
    out = [[] for _ in configs]
    for k, rec in run_batched("soba", problems.make("minimax_toy", **p_kwargs), configs, seeds, budget, n_evals=8):
        out[k].append(rec)
    for k, (c, s) in enumerate(zip(configs, seeds)):
        assert_same(out[k], list(algorithms.run("soba", problems.make("minimax_toy", **p_kwargs), c, s, budget, n_evals=8)))


def test_an_algorithm_that_cannot_batch_runs_one_after_another():
    configs, budget = [{"batch_size": 4}, {"batch_size": 4, "gamma": 0.05}], {"iterations": 15}
    out = [[] for _ in configs]
    for k, rec in run_batched("bsa", make("quadratic_sum"), configs, [0, 1], budget, n_evals=8):
        out[k].append(rec)
    for k, (c, s) in enumerate(zip(configs, [0, 1])):
        want = list(algorithms.run("bsa", make("quadratic_sum"), c, s, budget, n_evals=8))
        assert out[k] == [{**r, "time": o["time"], "cpu_time": o["cpu_time"], "eval_time": o["eval_time"]}
                          for r, o in zip(want, out[k])]


def test_ttsa_runs_stop_their_hia_at_their_own_length():
    """Each run's HIA length is its own draw: the runs' HVP counts differ, as they do alone."""
    configs = [dict(c, batch_size=4) for c in CONFIGS["ttsa"][:2]] * 2
    got = batched("ttsa", "quadratic_sum", configs, {"iterations": 12}, seeds=[0, 1, 2, 3])
    want = sequential("ttsa", "quadratic_sum", configs, {"iterations": 12}, seeds=[0, 1, 2, 3])
    for k in range(4):
        assert_same(got[k], want[k], f"run {k}")
    assert len({r[-1]["calls/hvp"] for r in want}) > 1


def test_a_tolerance_dtfbo_runs_one_after_another_and_a_seed_per_config_is_required():
    budget = {"iterations": 8}
    got = batched("dtfbo", "quadratic", [{}, {"eta_x": 0.5}], budget, seeds=[0, 1])
    want = sequential("dtfbo", "quadratic", [{}, {"eta_x": 0.5}], budget, seeds=[0, 1])
    for k in range(2):
        assert_same(got[k], want[k], f"run {k}")
        assert all("time_mode" not in r for r in got[k])  # its own seconds: not a stack's share
    fixed = batched("dtfbo", "quadratic", [{"sub_loops": "fixed"}] * 2, budget, seeds=[0, 1])
    assert all(r["time_mode"] == "batched" for run in fixed for r in run)
    with pytest.raises(algorithms.base.ParameterError, match="one seed per config"):
        run_batched("soba", make("quadratic"), [{}, {}], [0])


def test_batched_compute_seconds_are_shares_of_the_batch():
    configs = [{"rho": 0.1, "gamma": g} for g in (0.05, 0.1, 0.2, 0.4)]
    finals = {}
    for k, rec in run_batched("soba", make("quadratic"), configs, [0] * 4, {"iterations": 300}, n_evals=5):
        finals[k] = rec
    times = [finals[k]["cpu_time"] for k in range(4)]
    assert all(t > 0 for t in times) and max(times) == pytest.approx(min(times), rel=1e-9)
    assert {finals[k]["time_mode"] for k in range(4)} == {"batched"}


def test_a_seconds_budget_ends_every_run_of_the_batch():
    configs = [{"rho": 0.1, "gamma": 0.1}] * 3
    finals = {}
    for k, rec in run_batched("soba", make("quadratic"), configs, [0, 1, 2], {"seconds": 0.05}, n_evals=5):
        finals[k] = rec
    for k in range(3):
        assert finals[k]["status"] == "finished" and 0.05 <= finals[k]["time"] < 1.0
        assert finals[k]["iteration"] > 10


def test_a_stack_makes_every_record_and_no_run_loop_steps(monkeypatch):
    configs = [{"rho": r, "gamma": g} for r in (0.05, 0.1) for g in (0.05, 0.1, 0.2)]
    seeds, budget = [0] * 6, {"iterations": 40}
    want = sequential("soba", "quadratic", configs, budget, seeds)
    alone, stacks = [], []
    monkeypatch.setattr(Run, "__init__", lambda self, *a, **k: alone.append(1))
    real = NumpyStack.__init__
    monkeypatch.setattr(NumpyStack, "__init__", lambda self, *a, **k: stacks.append(len(a[2])) or real(self, *a, **k))
    got = batched("soba", "quadratic", configs, budget, seeds)
    assert not alone and stacks == [6]  # one stack of the six runs, no run loop
    for k in range(6):
        assert_same(got[k], want[k], f"run {k}")
        assert got[k][-1]["status"] == "finished" and got[k][-1]["iteration"] == 40


def test_a_metric_past_its_limit_ends_its_run_as_it_would_alone():
    configs = [{"rho": 0.1, "gamma": 0.1}, {"rho": 0.1, "gamma": 40.0, "gamma_decay": 0.0}]
    budget, watch = {"iterations": 200}, {"metrics": ["y_err_sq"], "factor": 100.0}
    got = batched("soba", "quadratic", configs, budget, seeds=[0, 0], divergence=watch)
    want = sequential("soba", "quadratic", configs, budget, seeds=[0, 0], divergence=watch)
    for k in range(2):
        assert_same(got[k], want[k], f"run {k}")
    assert (want[1][-1]["status"], want[1][-1]["diverged_metric"]) == ("diverged", "y_err_sq")
    assert got[0][-1]["status"] == "finished" and got[0][-1]["iteration"] == 200


@pytest.mark.parametrize("config", [CONFIGS["soba"][0], CONFIGS["soba"][2]])
def test_a_batch_of_one_run_gives_its_run_loops_records_exactly(config):
    """A batch of one (a study of many problem instances has one per instance) is a stack of one: its run loop's
    records to 1e-10, the diverging one included, labelled batched."""
    budget = {"iterations": 25}
    want = sequential("soba", "quadratic_sum", [config], budget, [3])[0]
    got = batched("soba", "quadratic_sum", [config], budget, [3])[0]
    assert_same(got, want)
    assert all(r["time_mode"] == "batched" for r in got) and got[-1]["status"] == want[-1]["status"]
