"""Oracle counts of the explicit engines (algorithms/explicit/counts.py): every engine's records carry the run
loop's `calls/*` and `samples/*`, equal as integers at every evaluation point, for every defined algorithm with
its default loop counts and with other ones; ground truth is not counted; a config whose counts the engines
cannot give is refused in one line."""
import numpy as np
import pytest

import algorithms
import problems
from algorithms import explicit
from algorithms.explicit import counts as counts_module
from problems.counting import ORACLE_KINDS
from problems.shared.errors import ParameterError
from tests.algorithms.test_engines import needs_jax

ITERATIONS, N_EVALS = 30, 8
KEYS = tuple(f"{what}/{kind}" for what in ("calls", "samples") for kind in (*ORACLE_KINDS, "total"))
#: Per algorithm: the shared fields of a stack (loop counts at their defaults), and a step size with 2–3 values
#: that the stack's runs differ in (all converge on the problems below within ITERATIONS).
BASE = {
    "soba": ({}, "rho", (0.1, 0.05, 0.2)), "f2sa": ({"gamma": 0.1}, "alpha", (0.1, 0.05)),
    "amigo": ({"gamma": 0.1}, "alpha", (0.1, 0.05)), "stocbio": ({"gamma": 0.1}, "alpha", (0.1, 0.05, 0.2)),
    "aid_cg": ({"gamma": 0.1}, "alpha", (0.1, 0.05)), "aid_fp": ({"gamma": 0.1}, "alpha", (0.1, 0.05)),
    "fsla": ({"gamma": 0.1}, "alpha", (0.1, 0.05)), "mrbo": ({"gamma": 0.1}, "alpha", (0.1, 0.05)),
    "stfbo": ({}, "alpha0", (5.0, 2.0)), "dtfbo": ({"sub_loops": "fixed"}, "alpha0", (5.0, 2.0, 8.0)),
    "bome": ({}, "xi", (0.05, 0.02)), "itd": ({"gamma": 0.1}, "alpha", (0.1, 0.05)),
    "ttsa": ({"hia_mode": "expected"}, "alpha", (0.1, 0.05)),
    "saba": ({"batch_size": None}, "rho", (0.1, 0.05, 0.2)),
}
#: Per algorithm: shared fields that change its counts per step (loop counts, solves, first steps), over BASE's.
LOOPS = {
    "soba": {}, "stfbo": {},  # no loop count: one call of each kind a step
    "f2sa": {"inner_steps": 3},
    "amigo": {"inner_steps": 4, "v_steps": 3},
    "stocbio": {"inner_steps": 2, "neumann_terms": 5},
    "aid_cg": {"inner_steps": 3, "cg_steps": 2, "warm_start": False},  # no warm-start residual: one HVP fewer
    "aid_fp": {"fp_steps": 4, "warm_start": False},
    "fsla": {"momentum": 1.0, "momentum_decay": 0.0},  # ρ_t = 1 at every step: no previous-point terms
    "mrbo": {"neumann_terms": 3},
    "dtfbo": {"y_steps": 3, "v_steps": 5},
    "bome": {"T": 4},
    "itd": {"inner_steps": 5, "truncate": 3, "warm_start": False},
    "ttsa": {"hia_terms": 4},
    "saba": {"batch_size": 3, "memory_init": "full"},  # the first step fills the tables: n samples, then b
}



@pytest.fixture(scope="module")
def quadratic():
    return problems.make("quadratic", seed=1, dim_x=5, dim_y=4)


@pytest.fixture(scope="module")
def finite_sum():
    """A finite-sum quadratic small enough for SABA's memory tables (n = 6 samples of rank 2)."""
    return problems.make("quadratic", seed=2, dim_x=4, dim_y=5, n_samples=6, rank=2)


def problem_for(algorithm, quadratic, finite_sum):
    return finite_sum if algorithm == "saba" else quadratic


def stack(algorithm: str, loops: bool) -> list[dict]:
    shared, field, values = BASE[algorithm]
    shared = {**shared, **(LOOPS[algorithm] if loops else {})}
    return [{**shared, field: v} for v in values]


def counted(rec: dict) -> dict:
    return {n: v for n, v in rec.items() if n in KEYS}


def run_loop(algorithm, problem, configs) -> list[list[dict]]:
    """Per config, the run loop's counts at each of its records (seed k for run k, as the engines' default)."""
    return [[counted(r) for r in algorithms.run(algorithm, problem, c, k, {"iterations": ITERATIONS}, N_EVALS)]
            for k, c in enumerate(configs)]


def assert_counts_equal(result, today: list[list[dict]]) -> None:
    """Every run's records carry every count key, each an int equal to the run loop's at the same point."""
    mine: list[list[dict]] = [[] for _ in today]
    for k, rec in result.records():
        assert set(KEYS) <= set(rec), sorted(set(KEYS) - set(rec))
        assert all(type(rec[n]) is int for n in KEYS), {n: type(rec[n]) for n in KEYS}
        mine[k].append(counted(rec))
    for k, (ours, theirs) in enumerate(zip(mine, today)):
        assert len(ours) == len(theirs), (k, len(ours), len(theirs))
        for a, b in zip(ours, theirs):
            assert a == b, (result.engine, k, {n: (a[n], b[n]) for n in KEYS if a[n] != b[n]})
    assert today[0][-1]["calls/total"] > 0  # the runs called something: the comparison is not of zeros


CASES = [pytest.param(a, loops, id=f"{a}-{'loops' if loops else 'defaults'}")
         for a in explicit.defined() for loops in (False, True)]


def test_every_defined_algorithm_is_covered():
    assert set(BASE) == set(LOOPS) == set(explicit.defined())
    assert len(explicit.defined()) == 14


@pytest.mark.parametrize("algorithm, loops", CASES)
def test_numpy_engines_count_as_the_run_loop(quadratic, finite_sum, algorithm, loops):
    problem, configs = problem_for(algorithm, quadratic, finite_sum), stack(algorithm, loops)
    today = run_loop(algorithm, problem, configs)
    assert all(len(r) == len(today[0]) and r[-1]["calls/total"] == today[0][-1]["calls/total"] for r in today)
    for engine in ("per_run", "stacked"):
        assert_counts_equal(explicit.run(algorithm, problem, configs, ITERATIONS, N_EVALS, engine=engine), today)
    # One run alone, in a stack of its own: the same counts (the counts are a run's, not the stack's).
    alone = explicit.run(algorithm, problem, configs[-1:], ITERATIONS, N_EVALS, engine="stacked")
    assert_counts_equal(alone, today[-1:])


#: The JAX engine takes its counts from the same `counts.counts` as the NumPy engines (they do not depend on the
#: engine); a compile costs ~1 s, so it is checked on the cases whose counts differ at the first step (FSLA, MRBO,
#: SABA) or come from loop lengths (ITD, D-TFBO), not on all 28.
JAX_CASES = [c for c in CASES if c.id in ("fsla-defaults", "mrbo-loops", "saba-loops", "itd-loops", "dtfbo-loops")]
assert len(JAX_CASES) == 5


@needs_jax
@pytest.mark.parametrize("algorithm, loops", JAX_CASES)
def test_the_jax_engine_counts_as_the_run_loop(quadratic, finite_sum, algorithm, loops):
    problem, configs = problem_for(algorithm, quadratic, finite_sum), stack(algorithm, loops)
    compiled = explicit.run(algorithm, problem, configs, ITERATIONS, N_EVALS, engine="jax")
    assert_counts_equal(compiled, run_loop(algorithm, problem, configs))


@pytest.mark.parametrize("algorithm, config, per_step", [
    ("itd", {"inner_steps": 5, "truncate": 3, "warm_start": False},
     {"grad_g": 5, "hvp": 3, "cross": 3, "grad_f": 1}),
    ("dtfbo", {"sub_loops": "fixed", "y_steps": 3, "v_steps": 5}, {"grad_g": 3, "hvp": 5, "grad_f": 1, "cross": 1}),
    ("stocbio", {"inner_steps": 2, "neumann_terms": 5}, {"grad_g": 2, "hvp": 5, "grad_f": 1, "cross": 1}),
    ("aid_cg", {"cg_steps": 2, "warm_start": True}, {"grad_g": 10, "hvp": 3, "grad_f": 1, "cross": 1}),
])
def test_loop_counts_give_the_calls_per_step_they_say(quadratic, algorithm, config, per_step):
    """Not only equal to the run loop: the numbers themselves, t × (calls a step), e.g. ITD's truncated reverse
    pass (3 HVPs and 3 cross products of its 5 inner steps) and AID-CG's warm-start residual (one HVP more)."""
    last = [rec for _, rec in explicit.run(algorithm, quadratic, [config], ITERATIONS, N_EVALS).records()][-1]
    assert last["iteration"] == ITERATIONS
    assert {k: last[f"calls/{k}"] for k in ORACLE_KINDS if last[f"calls/{k}"]} == \
        {k: ITERATIONS * n for k, n in per_step.items()}
    assert last["calls/total"] == last["samples/total"] == ITERATIONS * sum(per_step.values())


def test_saba_counts_samples_per_call_and_its_first_step_fills_every_table_row(finite_sum):
    """b samples a call, except the first step under memory_init full, which touches all n = 6 samples."""
    config = {"batch_size": 2, "memory_init": "full"}
    recs = {rec["iteration"]: rec for _, rec in explicit.run("saba", finite_sum, [config], ITERATIONS, N_EVALS,
                                                            engine="stacked").records()}
    for kind in ("grad_f", "grad_g", "hvp", "cross"):
        assert recs[0][f"samples/{kind}"] == 0 and recs[1][f"samples/{kind}"] == 6
        assert recs[ITERATIONS][f"calls/{kind}"] == ITERATIONS
        assert recs[ITERATIONS][f"samples/{kind}"] == 6 + 2 * (ITERATIONS - 1)


def test_ground_truth_is_not_counted(quadratic, monkeypatch):
    """The records' metrics come from ground truth at every point; only the algorithm's oracle calls count, and
    measuring them never reaches the problem's ground truth (the run loop's CountingProblem hides it)."""
    counts_module._CACHE.clear()
    seen = []
    for name in ("y_star", "F", "grad_F", "x_opt"):
        original = getattr(type(quadratic), name)
        monkeypatch.setattr(type(quadratic), name, lambda self, *a, _o=original, _n=name, **k: (seen.append(_n),
                                                                                               _o(self, *a, **k))[1])
    measured = counts_module.counts("soba", quadratic, algorithms.make_config("soba", {}))
    assert seen == [] and measured.at(0) == (0,) * len(KEYS)
    monkeypatch.undo()
    first = next(rec for _, rec in explicit.run("soba", quadratic, [{}], 5, 3).records())
    assert first["iteration"] == 0 and first["calls/total"] == 0 and np.isfinite(first["F"])


def test_counts_are_measured_once_per_shared_config_and_problem_size(quadratic):
    counts_module._CACHE.clear()
    explicit.run("amigo", quadratic, stack("amigo", False), 5, 3, engine="per_run")
    explicit.run("amigo", quadratic, stack("amigo", False), 5, 3, engine="stacked")
    assert len(counts_module._CACHE) == 1
    explicit.run("amigo", quadratic, stack("amigo", True), 5, 3, engine="stacked")
    explicit.run("amigo", problems.make("quadratic", seed=1, dim_x=3, dim_y=4), stack("amigo", False), 5, 3)
    assert len(counts_module._CACHE) == 3


@pytest.mark.parametrize("algorithm", ["fsla", "mrbo"])
def test_a_momentum_of_one_with_a_vanishing_decay_is_refused_in_one_line(quadratic, algorithm):
    """ρ_t = ρ/(t+1)^e rounds to 1 for early steps only: the per-run algorithm's calls per step change late in
    the run, which a count of the first steps cannot foresee."""
    with pytest.raises(ParameterError) as err:
        explicit.run(algorithm, quadratic, [{"momentum": 1.0, "momentum_decay": 1e-17}], 10)
    assert "momentum_decay: 1e-17 with momentum 1" in str(err.value) and "\n" not in str(err.value)
    explicit.run(algorithm, quadratic, [{"momentum": 1.0, "momentum_decay": 1e-3}], 10)  # a real decay runs


def test_calls_per_step_that_change_after_the_first_step_are_refused(quadratic, monkeypatch):
    """The guard of the counting: a later step that calls more than the one before it is one line, not a record."""
    real = algorithms.get("soba").step

    def uneven(self):
        real(self)
        if self.iteration == 2:
            self.problem.grad_f(self.x, self.y)

    counts_module._CACHE.clear()
    monkeypatch.setattr(algorithms.get("soba"), "step", uneven)
    with pytest.raises(ParameterError, match="its oracle calls per step vary after the first step"):
        explicit.run("soba", quadratic, [{}], 10)
    counts_module._CACHE.clear()
