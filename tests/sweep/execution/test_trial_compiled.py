"""A study's `backend: jax` (sweep/study/backend.py, sweep/execution/trial_stacks.py): its batches run as compiled
JAX programs and give the NumPy engine's records (to 1e-10 on the deterministic quadratic, oracle counts exact),
stack by stack; a stack checkpointed midway resumes on the JAX engine where it was, sending no record twice; a batch
it cannot take, or one resumed midway from the NumPy engine's states, runs on the NumPy engine; what it cannot run is
refused at validation."""
import dataclasses
import importlib.util

import pytest

from algorithms.checkpoint import decode, encode
from sweep.execution import trial_batch, trial_stacks
from sweep.execution.trial import execute_trial
from sweep.execution.trial_runs import with_records
from sweep.study import spec
from sweep.study.model import RunSpec, TrialConfig
from tests.algorithms.test_engines import needs_jax

EXACT = 1e-10
NOT_NUMBERS = ("iteration", "status", "time", "cpu_time", "eval_time", "time_mode")
STUDY = {"name": "j", "kind": "comparison", "instance_seed": 0,
         "problems": [{"name": "quadratic", "params": {"dim_x": 5, "dim_y": 4}}],
         "algorithms": [{"name": "soba", "params": {"rho": [0.05, 0.1, 0.2], "gamma": 0.05}},
                        # two stacks in one batch: y_steps may not vary within a stack
                        {"name": "dtfbo", "params": {"sub_loops": "fixed", "y_steps": [2, 3]}}],
         "seeds": 3, "budget": {"iterations": 60}, "n_evals": 6}  # stacks of 9 (SOBA: 10 rows, one padding) and 3 runs


def records_of(study, backend):
    """Every run of the study as one trial (each algorithm's runs one batch)."""
    out = {}

    def report(result, _):
        for chunk in with_records(result):
            out.setdefault(chunk["run_key"], []).extend(chunk["records"])

    runs = tuple(RunSpec.of(p, s) for p in study.points for s in study.seeds)
    execute_trial(TrialConfig("all", runs, 0.0, batched=True, backend=backend), report)
    return out


@needs_jax
def test_a_jax_study_gives_the_numpy_engines_records_stack_by_stack():
    study = spec.validate({**STUDY, "backend": "jax"})
    assert study.backend == "jax"
    numpy_records, jax_records = records_of(study, "numpy"), records_of(study, "jax")
    assert len(jax_records) == 15 and jax_records.keys() == numpy_records.keys()
    for key, ours in jax_records.items():
        theirs = numpy_records[key]
        assert [(r["iteration"], r["status"]) for r in ours] == [(r["iteration"], r["status"]) for r in theirs]
        assert ours[-1]["status"] == "finished" and ours[-1]["time_mode"] == "compiled"
        for a, b in zip(ours, theirs):
            assert set(a) == set(b)
            assert all(a[n] == b[n] for n in a if n.startswith(("calls/", "samples/")))  # exact integers
            assert max(abs(a[n] - b[n]) / max(1.0, abs(b[n])) for n in a if n not in NOT_NUMBERS) < EXACT


#: Coreset selection small (2 tasks of 10 samples): its ground truth is a Newton solve and a replay learner a point.
DATA_PARAMS = {"coreset_selection": {"pool_size": 10, "coreset_size": 3, "n_tasks": 2}}
#: The metric of the problem's own each data problem's records carry (the simulated quadratic has none).
OWN_METRIC = {"regularization_selection": "val_accuracy", "hyper_cleaning": "val_accuracy", "coreset_selection": "A_T"}


@needs_jax
@pytest.mark.parametrize("name", ["regularization_selection", "hyper_cleaning", "simulated", "coreset_selection"])
def test_a_jax_study_of_real_data_gives_the_numpy_engines_records(name):
    """Real data (problems/pure_logistic.py, pure_cleaning.py, pure_coreset.py: the steps compiled, the ground truth
    and the problem's own metrics evaluated on the host at the points)."""
    study = spec.validate({**STUDY, "problems": [{"name": name, "params": DATA_PARAMS.get(name, {})}], "backend": "jax",
                           "algorithms": [{"name": "soba", "params": {"rho": [0.05, 0.1], "gamma": 0.05}}],
                           "seeds": 2, "budget": {"iterations": 20}, "n_evals": 4})
    numpy_records, jax_records = records_of(study, "numpy"), records_of(study, "jax")
    assert len(jax_records) == 4 and jax_records.keys() == numpy_records.keys()
    for key, ours in jax_records.items():
        theirs = numpy_records[key]
        assert [(r["iteration"], r["status"]) for r in ours] == [(r["iteration"], r["status"]) for r in theirs]
        assert ours[-1]["time_mode"] == "compiled" and (name == "simulated" or OWN_METRIC[name] in ours[-1])
        for a, b in zip(ours, theirs):
            assert set(a) == set(b)
            assert max(abs(a[n] - b[n]) / max(1.0, abs(b[n])) for n in a if n not in NOT_NUMBERS) < EXACT


@needs_jax
def test_a_jax_study_with_its_own_divergence_rule_gives_the_numpy_engines_records():
    """The study's rule (the iterates only, a factor of 3) ends the same runs at the same points: γ = 1 at
    iteration 7 (its ‖x‖), which the default rule lets finish, and γ = 400 at once."""
    study = spec.validate({**STUDY, "backend": "jax", "divergence": {"factor": 3.0, "metrics": ["iterates"]},
                           "algorithms": [{"name": "soba", "params": {"rho": 0.1, "gamma": [0.05, 1.0, 400.0]}}]})
    numpy_records, jax_records = records_of(study, "numpy"), records_of(study, "jax")
    assert jax_records.keys() == numpy_records.keys()
    ends = set()
    for key, ours in jax_records.items():
        theirs = numpy_records[key]
        assert [(r["iteration"], r["status"], r.get("diverged_at"), r.get("diverged_metric")) for r in ours] == \
            [(r["iteration"], r["status"], r.get("diverged_at"), r.get("diverged_metric")) for r in theirs]
        ends.add((ours[-1]["status"], ours[-1].get("diverged_at")))
        for a, b in zip(ours, theirs):
            assert max(abs(a[n] - b[n]) / max(1.0, abs(b[n])) for n in a
                       if n not in (*NOT_NUMBERS, "diverged_at", "diverged_metric")) < EXACT
    assert ends == {("finished", None), ("diverged", 7), ("diverged", 1)}


@needs_jax
def test_runs_that_draw_take_jaxs_own_streams_deterministically():
    """Minibatches of real data and of the finite-sum quadratic, SABA, TTSA's sampled HIA: every run finishes on the
    JAX backend, the same records twice, other samples than the NumPy engine's (equal oracle counts where the calls
    do not depend on the draws)."""
    study = spec.validate({**STUDY, "backend": "jax", "seeds": 2, "budget": {"iterations": 30}, "n_evals": 4,
                           "problems": [{"name": "quadratic", "params": {"dim_x": 4, "dim_y": 5, "n_samples": 6,
                                                                        "rank": 2}},
                                        {"name": "regularization_selection"}],
                           "algorithms": [{"name": "soba", "params": {"batch_size": 2}},
                                          {"name": "saba", "params": {"batch_size": 2}, "problems": ["quadratic"]},
                                          {"name": "ttsa", "problems": ["quadratic"]}]})
    first, again = records_of(study, "jax"), records_of(study, "jax")
    numpy_records = records_of(study, "numpy")
    assert len(first) == 8 and all(".s" in key for key in first)
    for key, ours in first.items():
        assert [r["status"] for r in ours][-1] == "finished" and ours[-1]["time_mode"] == "compiled"
        assert ours == [{**r, **{n: a[n] for n in ("time", "cpu_time")}} for r, a in zip(again[key], ours)]
        theirs = numpy_records[key]
        assert ours[-1]["F"] != theirs[-1]["F"]  # other samples
        if not key.startswith("ttsa"):  # a sampled HIA's calls are its lengths': JAX's own
            assert ours[-1]["calls/total"] == theirs[-1]["calls/total"]


@needs_jax
def test_a_jax_study_of_the_toys_gives_the_numpy_engines_records():
    """The closed-form toys run on the JAX backend too (problems/pure.py), a diverging run included."""
    study = spec.validate({**STUDY, "problems": [{"name": "nonunique_toy"}, {"name": "minimax_toy"}], "backend": "jax",
                           "algorithms": [{"name": "soba", "params": {"rho": [0.05, 0.1], "gamma": [0.05, 400.0]}}]})
    numpy_records, jax_records = records_of(study, "numpy"), records_of(study, "jax")
    assert len(jax_records) == 24 and jax_records.keys() == numpy_records.keys()
    assert {r[-1]["status"] for r in jax_records.values()} == {"finished", "diverged"}
    for key, ours in jax_records.items():
        theirs = numpy_records[key]
        assert [(r["iteration"], r["status"], r.get("diverged_metric")) for r in ours] == \
            [(r["iteration"], r["status"], r.get("diverged_metric")) for r in theirs]
        for a, b in zip(ours, theirs):
            assert set(a) == set(b)
            assert max(abs(a[n] - b[n]) / max(1.0, abs(b[n])) for n in a
                       if n not in (*NOT_NUMBERS, "diverged_metric")) < EXACT


@needs_jax
def test_a_batch_resumed_midway_runs_on_the_numpy_engine():
    study = spec.validate({**STUDY, "algorithms": STUDY["algorithms"][:1], "backend": "jax"})
    config = dataclasses.replace(study.trials[0].config(0.0, ()), batched=True)  # a checkpoint with every report
    states = []
    execute_trial(config, lambda result, state: states.append(state) if state and state.get("batch") else None)
    out = {}

    def report(result, _):
        for chunk in with_records(result):
            out.setdefault(chunk["run_key"], []).extend(chunk["records"])

    execute_trial(dataclasses.replace(config, backend="jax"), report, states[0])  # both runs midway
    assert set(out) == set(config.run_keys) and all(r[-1]["time_mode"] == "batched" for r in out.values())
    assert min(r[0]["iteration"] for r in out.values()) > 0  # continued from the checkpoint, not started again


def test_a_stack_is_padded_to_one_of_four_sizes_per_doubling():
    sizes = [trial_stacks.padded(k) for k in range(1, 2049)]
    assert sizes[:17] == [1, 2, 3, 4, 5, 6, 7, 8, 10, 10, 12, 12, 14, 14, 16, 16, 20]
    assert all(k <= s <= 1.25 * k for k, s in enumerate(sizes, 1)) and len(set(sizes[1024:])) == 4  # 1025..2048


def test_validation_says_what_the_jax_backend_cannot_run(monkeypatch):
    def lines(**fields):
        with pytest.raises(spec.SpecError) as err:
            spec.validate({**STUDY, "backend": "jax", **fields})
        return str(err.value)

    assert "a seconds budget" in lines(budget={"iterations": 10, "seconds": 5})
    assert "budget: backend 'jax' runs iteration budgets only, got iterations: 10, seconds: 5" in \
        lines(budget={"iterations": 10, "seconds": 5})
    assert "algorithms[0].name: backend 'jax' runs the algorithms with an explicit definition (aid_cg, " in \
        lines(algorithms=["penalty"])
    assert "backend: 'jax' runs the problems quadratic, nonunique_toy, minimax_toy, coreset_toy, " \
        "regularization_selection, hyper_cleaning, simulated, coreset_selection, constrained_quadratic; problem " \
        "'drifting_quadratic' is not" in lines(algorithms=["f2obo"], problems=[{"name": "drifting_quadratic"}])
    assert "algorithms[0].params: backend 'jax' runs constrained_quadratic full batch" in lines(
        algorithms=[{"name": "soba", "params": {"batch_size": 4}}], problems=[{"name": "constrained_quadratic"}])
    constrained = {"name": "constrained_quadratic", "params": {"noise": 0.0}}  # noise 0: its minibatches are exact
    assert spec.validate({**STUDY, "backend": "jax", "problems": [constrained],
                          "algorithms": [{"name": "soba", "params": {"batch_size": 4}}]}).backend == "jax"
    assert "algorithms[0].name: backend 'jax' runs SABA (its per-sample memory) on the 'quadratic' with n_samples, " \
        "regularization_selection, simulated, hyper_cleaning; problem 'coreset_selection' is not" in lines(
            algorithms=["saba"], problems=[{"name": "coreset_selection"}])
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "jax" else object())
    assert "backend: 'jax' needs JAX, which is not installed" in lines()
    monkeypatch.undo()
    assert spec.validate({**STUDY, "backend": "numpy"}).backend == "numpy"
    toys = [{"name": "nonunique_toy"}, {"name": "minimax_toy", "params": {"bound": 5.0}}]  # the toys' pure forms
    assert spec.validate({**STUDY, "problems": toys, "backend": "jax"}).backend == "jax"
    drawing = spec.validate({**STUDY, "backend": "jax", "algorithms": ["ttsa", {"name": "soba", "params": {
        "batch_size": [None, 4]}}], "problems": [{"name": "quadratic", "params": {"dim_x": 4, "dim_y": 5, "n_samples": 6, "rank": 2}}]})
    numpy_keys = {p.label + str(p.algorithm_params): p.key for p in spec.validate(
        {**STUDY, "algorithms": ["ttsa", {"name": "soba", "params": {"batch_size": [None, 4]}}],
         "problems": [{"name": "quadratic", "params": {"dim_x": 4, "dim_y": 5, "n_samples": 6, "rank": 2}}]}).points}
    for point in drawing.points:  # runs that draw on JAX's streams are other runs; the others keep NumPy's keys
        draws = point.algorithm == "ttsa" or point.algorithm_params.get("batch_size") is not None
        assert point.streams == ("jax" if draws else None)
        assert (point.key == numpy_keys[point.label + str(point.algorithm_params)]) is not draws
    assert spec.validate({k: v for k, v in STUDY.items()}).backend == "numpy"  # the default


@needs_jax
def test_a_stack_whose_program_raises_runs_one_run_after_another(monkeypatch):
    study = spec.validate({**STUDY, "algorithms": STUDY["algorithms"][:1], "backend": "jax"})

    def broken(*args, **kwargs):
        raise MemoryError("the device ran out of memory")

    monkeypatch.setattr(trial_stacks, "CompiledStack", broken)
    out = records_of(study, "jax")
    assert len(out) == 9 and all(r[-1]["status"] == "finished" and "time_mode" not in r[-1] for r in out.values())


def gathered(into, checkpoints=None):
    """A report function that adds each run's records to `into` and, given `checkpoints`, notes each checkpoint with
    midway states (as a checkpoint stores it) beside a copy of the records sent up to it."""
    def report(result, state):
        for chunk in with_records(result):
            into.setdefault(chunk["run_key"], []).extend(chunk["records"])
        if checkpoints is not None and state and state.get("batch"):
            arrays = {}
            doc = encode(state, arrays)
            checkpoints.append(({k: list(v) for k, v in into.items()}, decode(doc, arrays)))
    return report


@needs_jax
@pytest.mark.parametrize("resumed_on", ["jax", "numpy"])
def test_a_jax_trial_checkpoints_its_stacks_midway_and_a_resume_sends_nothing_twice(monkeypatch, resumed_on):
    """A window per evaluation point, a checkpoint after each; a trial resumed from one in the middle (on the JAX
    engine, or on NumPy's when JAX cannot take the states: each run again from its start, its records sent before
    not sent again) gives every run's records of the uninterrupted trial, each once."""
    monkeypatch.setattr(trial_stacks, "MIN_WINDOW_SECONDS", 1e-9)  # the shortest windows: one stretch each
    study = spec.validate({**STUDY, "backend": "jax", "budget": {"iterations": 120}, "n_evals": 10})
    runs = tuple(RunSpec.of(p, s) for p in study.points for s in study.seeds)
    config = TrialConfig("all", runs, 0.0, batched=True, backend="jax")  # a checkpoint with every report
    whole, checkpoints = {}, []
    execute_trial(config, gathered(whole, checkpoints))
    assert len(whole) == 15 and len(checkpoints) >= 10
    before, state = checkpoints[len(checkpoints) // 2]
    midway = state["batch"]
    assert midway and all(s["engine"] == "jax" and s["point"] > 0 for s in midway.values())
    after = {}
    if resumed_on == "numpy":  # JAX cannot take them now (e.g. another engine asked): NumPy's run loop
        monkeypatch.setattr(trial_batch, "run_stacks", lambda *args: False)
    execute_trial(config, gathered(after), state)
    assert set(after) == set(midway) | (set(whole) - set(before))  # the runs going on, and those not begun
    for key, records in whole.items():
        mine = before.get(key, []) + after.get(key, [])
        assert [r["iteration"] for r in mine] == [r["iteration"] for r in records]  # each point once
        assert [r["status"] for r in mine] == [r["status"] for r in records]
        for a, b in zip(mine, records):
            assert max(abs(a[n] - b[n]) / max(1.0, abs(b[n])) for n in b if n not in NOT_NUMBERS) < EXACT
        if key in midway:
            assert after[key][0]["iteration"] > before[key][-1]["iteration"]
            assert after[key][-1].get("time_mode") == ("compiled" if resumed_on == "jax" else None)


@needs_jax
def test_a_run_that_draws_is_not_continued_on_numpys_streams_after_jax_records(monkeypatch):
    """SOBA with minibatches draws from JAX's keys: resumed midway where JAX cannot take it, it fails saying why,
    rather than follow JAX's samples with NumPy's under one run key."""
    monkeypatch.setattr(trial_stacks, "MIN_WINDOW_SECONDS", 1e-9)
    finite = {"name": "quadratic", "params": {"dim_x": 4, "dim_y": 5, "n_samples": 6, "rank": 2}}
    study = spec.validate({**STUDY, "backend": "jax", "problems": [finite], "seeds": 1, "n_evals": 10,
                           "algorithms": [{"name": "soba", "params": {"batch_size": 2, "rho": [0.05, 0.1]}}]})
    runs = tuple(RunSpec.of(p, s) for p in study.points for s in study.seeds)
    assert all(trial_stacks.draws(r) for r in runs)
    config = TrialConfig("all", runs, 0.0, batched=True, backend="jax")
    checkpoints = []
    execute_trial(config, gathered({}, checkpoints))
    monkeypatch.setattr(trial_batch, "run_stacks", lambda *args: False)
    with pytest.raises(RuntimeError, match="draws from JAX's random streams, which the NumPy run loop cannot continue"):
        execute_trial(config, gathered({}), checkpoints[0][1])


def test_a_padded_stacks_seconds_are_shared_among_its_runs_not_its_rows():
    """A stack of 2 runs computed in 3 rows (one padding row): each sent record's `time` and `cpu_time` are the
    engine's per-row seconds times 3/2, the padding row's records are not sent, and the engine's own are unchanged."""
    import problems
    from algorithms import explicit
    from algorithms.explicit.numpy_engines import NumpyStack

    class Out:
        def __init__(self):
            self.records = []

        def add(self, index, spec, record, span, seconds):
            self.records.append((spec, record))

    class FakeBody:
        out, ended = Out(), staticmethod(lambda keys: None)

    defn, problem = explicit.definition("soba"), problems.make("quadratic", seed=0, dim_x=3, dim_y=2)
    configs = defn.configs([{"rho": 0.1, "gamma": 0.1}, {"rho": 0.05, "gamma": 0.1}, {"rho": 0.05, "gamma": 0.1}])
    stack = NumpyStack(defn, problem, configs, explicit.points(20, 4), [0, 1, 1])
    stack.advance(len(stack.points) - 1)
    specs = [dataclasses.make_dataclass("Spec", ["run_key"])(f"r{k}") for k in range(2)]
    members = [(k, specs[k], None, None) for k in range(2)]
    body = FakeBody()
    trial_stacks._send(body, members, stack, 0, 3, 0.0, 0.0, [0, 0])
    engine = [(k, r) for k, r in stack.result().records() if k < 2]
    assert engine[-1][1]["time"] > 0 and engine[-1][1]["cpu_time"] > 0
    assert [s.run_key for s, _ in body.out.records] == [f"r{k}" for k, _ in engine]
    for (_, sent), (_, own) in zip(body.out.records, engine):
        assert sent["time"] == own["time"] * 1.5 and sent["cpu_time"] == own["cpu_time"] * 1.5
        assert {n: v for n, v in sent.items() if n not in ("time", "cpu_time")} == \
            {n: v for n, v in own.items() if n not in ("time", "cpu_time")}
