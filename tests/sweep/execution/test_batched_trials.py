"""Batched trials without Ray: the same records as one run after another (rtol 1e-10), each run's records and end
exactly once, resume mid-batch, divergence and a failing batch per run on the NumPy stack, and runs resumed from
the run loop's states going on one after another; `batched: auto | off` and its resolution; the dispatch keeping a
batch's runs together."""
import copy
import dataclasses
import json

import numpy as np
import pytest

from sweep.execution import batching
from sweep.execution.dispatch import FIRST_BATCH, RunQueue
from sweep.execution.trial_runs import with_records
from sweep.study import spec
from sweep.study.model import RunSpec, TrialConfig
from tests.sweep.execution.test_trainable import by_run, collect

VOLATILE = ("time", "cpu_time", "eval_time", "time_mode")
STUDY = {"name": "b", "kind": "stepsize_sensitivity", "axis": {"values": [0.01, 0.05, 0.1, 0.2]},
         "problems": [{"name": "quadratic", "params": {"dim_x": 5, "dim_y": 5, "n_samples": 200}}],
         "algorithms": ["soba", {"name": "saba", "params": {"batch_size": 8}}], "seeds": [0, 1],
         "budget": {"iterations": 60}, "n_evals": 6, "report": {"target": None}}


def break_batches(monkeypatch, when):
    """Make the NumPy stacks raise at an advance where `when(rhos of the stack's runs, advances so far)` holds."""
    from algorithms.explicit.numpy_engines import NumpyStack
    real, calls = NumpyStack.advance, []

    def broken(self, *args):
        calls.append(1)
        if when([c.rho for c in self.configs], len(calls)):
            raise RuntimeError("a bad run")
        return real(self, *args)

    monkeypatch.setattr(NumpyStack, "advance", broken)
    return calls


def saved_iteration(state, st):
    """The iteration a run's midway state was saved at (the NumPy stack's at one of its points)."""
    from algorithms import explicit
    return explicit.points(st.points[0].budget["iterations"], st.points[0].n_evals)[state["point"]]


def killed_midway(cfg):
    """(the results sent, the last checkpoint) of a trial killed halfway through its reports (the stack reports once a
    window, the run loop once a round), or before, where the last checkpoint holds midway states (a stack's end
    checkpoints none)."""
    reports = len(collect(cfg)[0])
    for stop in range(reports // 2 + 1, 0, -1):
        first, states = collect(cfg, stop_after=stop)
        if states and states[-1].get("batch"):
            return first, states[-1]
    raise AssertionError("no checkpoint held midway states")


def study(**over):
    return spec.validate({**copy.deepcopy(STUDY), **over})


def config(st, batched=True, checkpoint_seconds=1e9, report_seconds=0.0):
    """One trial of every run of `st`, in the order the driver hands out batched runs."""
    pending = batching.grouped([(p, s) for p in st.points for s in st.seeds])
    runs = tuple(RunSpec.of(p, s) for p, s in pending)
    return TrialConfig("all", runs, checkpoint_seconds, report_seconds, tuple(st.imports), batched=batched)


def close(got, want):
    """Each run's records equal (deterministic values to rtol 1e-10, the rest exactly)."""
    assert got.keys() == want.keys()
    for key in want:
        assert len(got[key]) == len(want[key]), key
        for a, b in zip(got[key], want[key]):
            assert a.keys() - {"time_mode"} == b.keys() - {"time_mode"}
            for k in b:
                if k in VOLATILE:
                    continue
                if isinstance(b[k], float):
                    np.testing.assert_allclose(a[k], b[k], rtol=1e-10, atol=0, err_msg=f"{key} {k}")
                else:
                    assert a[k] == b[k], (key, k)


@pytest.fixture(scope="module")
def unbatched():
    st = study()
    results, _ = collect(config(st, batched=False))
    return st, by_run(results)


def test_batched_trial_reports_each_runs_records_once_equal_to_unbatched(unbatched):
    st, (want, want_ended) = unbatched
    results, _ = collect(config(st))
    got, ended = by_run(results)
    close(got, want)
    assert sorted(ended) == sorted(want_ended) and len(ended) == len(set(ended)) == len(st.points) * 2
    assert all(r["time_mode"] == "batched" for recs in got.values() for r in recs)
    assert all(r["iteration"] < s["iteration"] for recs in got.values() for r, s in zip(recs, recs[1:]))
    done = [ch for res in results for ch in with_records(res) if ch["done"]]
    assert all(0 < ch["seconds"] <= ch["span"][1] - ch["span"][0] for ch in done)  # a share of the batch's time


def test_a_killed_batch_resumes_its_unfinished_runs_only(unbatched):
    st, (want, _) = unbatched
    cfg = config(st, checkpoint_seconds=0.0)
    first, state = killed_midway(cfg)
    assert state.get("batch") and not state["current"]  # the midway states of the runs of the batch going on
    rest, _ = collect(cfg, state=state)
    redone = {ch["run_key"] for res in rest for ch in with_records(res)}
    assert redone and not redone & set(state["done"])  # finished runs are not run again
    for res in rest:
        for ch in with_records(res):  # the others continue from their state, not from the start
            if ch["run_key"] in state["batch"]:
                assert ch["records"][0]["iteration"] > saved_iteration(state["batch"][ch["run_key"]], st) - 1 >= 0
    got, ended = by_run(first + rest)
    by_iteration = {k: list({(r["iteration"], r["status"]): r for r in recs}.values()) for k, recs in got.items()}
    close(by_iteration, want)
    assert sorted(ended) == sorted(want)


def test_a_diverging_run_leaves_the_batch_without_disturbing_the_others():
    st = study(axis={"values": [0.05, 50.0]}, algorithms=["soba"], seeds=[0])
    want, _ = by_run(collect(config(st, batched=False))[0])
    got, ended = by_run(collect(config(st))[0])
    close(got, want)
    assert sorted(r[-1]["status"] for r in got.values()) == ["diverged", "finished", "finished"]


def test_a_batch_that_raises_runs_its_runs_again_alone_and_sends_each_record_once(unbatched, monkeypatch):
    st, (want, _) = unbatched
    calls = break_batches(monkeypatch, lambda rhos, n: n == 3)
    got, ended = by_run(collect(config(st))[0])
    assert len(calls) > 3  # it did break, and the batches after it went on batched
    close(got, want)
    assert len(ended) == len(set(ended)) == len(want)


def test_unbatchable_algorithms_and_other_instances_run_as_before():
    st = study(algorithms=[{"name": "toy_aid"}], imports=["tests.sweep.toy_algorithms"], axis={"factors": [0.5, 1]})
    want, _ = by_run(collect(config(st, batched=False))[0])
    got, _ = by_run(collect(config(st))[0])
    assert json.dumps(got, default=repr).count("time_mode") == 0
    close(got, want)


def test_batched_field_and_when_auto_is_off(spec_error):
    assert study().batched == "auto" and batching.resolve(study()).on
    assert study(batched=False).batched == "off" and not batching.resolve(study(batched="off")).on
    spec_error({**STUDY, "batched": "on"}, "batched", "one of auto, off", "got 'on'")
    for over, why in (({"budget": {"iterations": 60, "seconds": 5}}, "a seconds budget"),
                      ({"report": {"target": 1e-3}}, "report.target"),
                      ({"kind": "dimension_scaling", "axis": {"param": "dim_x", "values": [2, 4]}},
                       "dimension_scaling")):
        mode = batching.resolve(study(**over))
        assert not mode.on and why in mode.why


def test_the_queue_hands_out_a_batchs_runs_together():
    st = study(seeds=3, axis={"values": [0.01 * k for k in range(1, 21)]})
    runs = batching.grouped([(p, s) for p in st.points for s in st.seeds])
    keys = [batching.batch_key(p, s) for p, s in runs]
    assert len(set(keys)) == 2 * 3  # per algorithm and instance (the seed builds it: instance_seed null)
    assert all(keys[i] != keys[j] for i in range(len(keys)) for j in range(i + 2, len(keys)) if keys[i] != keys[i + 1])
    q = RunQueue(runs, lambda key, rs: TrialConfig(key, rs), slots=1, batch_key=batching.batch_key)
    sizes = []
    while (cfg := q.next_trial()) is not None:
        assert len({batching.batch_key(*next((p, s) for p, s in runs if p.run_key(s) == r.run_key))
                     for r in cfg.runs}) == 1  # one batch per trial
        sizes.append(len(cfg.runs))
        q.trial_ended()  # without a run's seconds: the next trial is sized blind again
    assert sum(sizes) == len(runs) and max(sizes) <= FIRST_BATCH
    assert sizes[0] == keys.count(keys[0])  # the whole first batch




def test_the_run_that_raises_in_a_batch_fails_alone(unbatched, monkeypatch):
    st, (want, _) = unbatched
    from algorithms.run import Run
    cfg = config(st)
    bad = cfg.runs[2]
    real_run = Run.advance
    calls = break_batches(monkeypatch, lambda rhos, n: bad.algorithm_params["rho"] in rhos)

    def broken_run(self):
        if self.algorithm.config.rho == bad.algorithm_params["rho"] and self.algorithm.iteration > 3:
            raise RuntimeError("a bad run")
        return real_run(self)

    monkeypatch.setattr(Run, "advance", broken_run)
    results = []
    with pytest.raises(RuntimeError, match="a bad run"):
        from sweep.execution.trial import execute_trial
        execute_trial(cfg, lambda res, ck: results.append(copy.deepcopy(res)))
    assert calls  # the batch raised
    got, ended = by_run(results)
    assert ended == [r.run_key for r in cfg.runs[:2]]  # the runs before it finished, with every record
    close({k: got[k] for k in ended}, {k: want[k] for k in ended})
    assert bad.run_key in got and not set(got) - {r.run_key for r in cfg.runs[:3]}  # the rest did not start


def test_a_batch_key_is_its_points_encoding_whether_or_not_points_share_their_mappings():
    """Made once for the points sharing their problem parameters, budget and rule (by identity), a key equals the
    encoding of the point's own fields: copies give the same key, another value another."""
    st = study(axis={"values": [0.01, 0.02]})
    a, b = st.points[0], st.points[1]
    assert a.problem_params is b.problem_params and a.budget is b.budget  # a grid's points share them
    own = dataclasses.replace(a, problem_params=copy.deepcopy(a.problem_params), budget=dict(a.budget))
    other = dataclasses.replace(a, problem_params={**a.problem_params, "dim_x": 6})
    longer = dataclasses.replace(b, budget={**b.budget, "iterations": 61})

    def encoding(p, seed):
        fields = [p.algorithm, p.problem, p.problem_params, p.budget, p.n_evals, p.divergence, p.blas_threads]
        return json.dumps(fields, sort_keys=True, default=repr) + f"|{seed}"

    for point in (a, b, own, other, longer, a):
        assert batching.batch_key(point, 3) == encoding(point, 3)
    assert batching.batch_key(a, 3) == batching.batch_key(own, 3) != batching.batch_key(other, 3)
    assert batching.batch_key(b, 3) != batching.batch_key(longer, 3)


def test_validate_only_says_how_batched_runs_are_cut_into_trials(tmp_path, capsys):
    """The CLI spares itself the dispatcher's import (Ray Tune): its text must say the dispatcher's seconds."""
    from sweep.cli import main
    from sweep.execution.dispatch import BATCH_TRIAL_SECONDS, TARGET_TRIAL_SECONDS

    path = tmp_path / "b.yaml"
    for batched, want in (("auto", f"about {TARGET_TRIAL_SECONDS:g} s of runs each, of batched runs about "
                                   f"{BATCH_TRIAL_SECONDS:g} s (a large batch in equal parts, at least one per slot)"),
                          ("off", f"about {TARGET_TRIAL_SECONDS:g} s of runs each\n")):
        path.write_text(json.dumps({**STUDY, "batched": batched}))
        assert main(["run", str(path), "--validate-only"]) == 0
        assert want in capsys.readouterr().out


def test_the_stack_takes_iteration_and_oracle_call_budgets(monkeypatch):
    """A batch with an iteration budget and one with an oracle-call budget both run on the NumPy stack (under the
    call budget, each run's cut step on the run loop: algorithms/explicit/call_budget.py); both give the records of
    the runs alone."""
    from algorithms.explicit.numpy_engines import NumpyStack
    made = []
    real = NumpyStack.__init__
    monkeypatch.setattr(NumpyStack, "__init__", lambda self, *a, **k: made.append(NumpyStack) or real(self, *a, **k))
    for budget in ({"iterations": 60}, {"oracle_calls": 302}):
        st = study(algorithms=["soba"], budget=budget)
        made.clear()
        got, ended = by_run(collect(config(st))[0])
        assert set(made) == {NumpyStack}, budget
        made.clear()
        want, _ = by_run(collect(config(st, batched=False))[0])
        assert not made
        close(got, want)
        assert sorted(ended) == sorted(want) and all(r[-1]["status"] == "finished" for r in got.values())
        assert all(r[-1]["calls/total"] == budget.get("oracle_calls", 240) for r in got.values())


def test_a_killed_batch_under_an_oracle_call_budget_resumes_and_ends_as_the_runs_alone():
    st = study(budget={"oracle_calls": 250})  # SOBA 4 calls a step, SABA its own: both cut mid-step
    want, _ = by_run(collect(config(st, batched=False))[0])
    cfg = config(st, checkpoint_seconds=0.0)
    reports = len(collect(cfg)[0])
    first, states = collect(cfg, stop_after=reports // 2 + 1)
    state = states[-1]  # the last checkpoint: midway stack states, or none when a stack had just ended
    assert any(s.get("batch") and all(r["engine"] == "numpy" for r in s["batch"].values()) for s in states)
    rest, _ = collect(cfg, state=state)
    got, ended = by_run(first + rest)
    by_iteration = {k: list({(r["iteration"], r["status"]): r for r in recs}.values()) for k, recs in got.items()}
    close(by_iteration, want)
    assert sorted(ended) == sorted(want)
    assert all(r[-1]["calls/total"] == 250 for r in got.values())


def test_a_stack_whose_runs_diverged_goes_on_without_their_rows(monkeypatch):
    """Once a quarter of a NumPy stack's runs have diverged, its going runs go on after the window as a stack without
    them (from their saved states), with the records of the runs alone."""
    from algorithms.explicit.numpy_engines import NumpyStack
    st = study(axis={"values": [0.05, 40.0, 60.0, 0.1]}, algorithms=["soba"], seeds=[0])
    want, _ = by_run(collect(config(st, batched=False))[0])
    rows, real = [], NumpyStack.__init__
    monkeypatch.setattr(NumpyStack, "__init__", lambda self, defn, problem, configs, *a, **k: rows.append(
        (len(configs), k.get("saved", a[3] if len(a) > 3 else None) is not None)) or real(self, defn, problem, configs,
                                                                                            *a, **k))
    got, ended = by_run(collect(config(st))[0])
    assert sorted(r[-1]["status"] for r in got.values()).count("diverged") == 2
    assert rows == [(4, False), (3, True)]  # 4 runs; one diverged in the first window, the 3 others go on
    close(got, want)
    assert sorted(ended) == sorted(want)


def test_a_saved_stack_state_the_stack_refuses_runs_again_alone_and_sends_each_record_once(unbatched):
    """A checkpoint's NumPy stack states read back and refused (here: another algorithm's) are data, not a failure:
    their runs run again one after another from their starts, the records sent before not sent again."""
    st, (want, _) = unbatched
    cfg = config(st, checkpoint_seconds=0.0)
    first, state = killed_midway(cfg)
    state = copy.deepcopy(state)
    assert state["batch"] and all(s["engine"] == "numpy" for s in state["batch"].values())
    for saved in state["batch"].values():
        saved["algorithm"] = "bome"
    rest, _ = collect(cfg, state=state)
    got, ended = by_run(first + rest)
    close(got, want)  # each record once: the refused runs' first records were not sent again
    assert sorted(ended) == sorted(want)


def test_runs_resumed_from_run_loop_states_go_on_one_after_another_from_them(unbatched):
    """A checkpoint holding `Run` states for a batch's runs (the run loop's, as batched trials saved them before the
    stacks took every batch) resumes each run from its state, one after another: its records from there equal the
    run's alone, and nothing runs again from the start."""
    from sweep.execution.trial_runs import make_run
    st, (want, _) = unbatched
    cfg = config(st)
    midway = {}
    for run_spec in cfg.runs[:3]:
        run = make_run(run_spec)
        for _ in range(3):
            run.advance()
        midway[run_spec.run_key] = run.state_dict()
    rest, _ = collect(cfg, state={"done": [], "current": None, "batch": midway})
    got, ended = by_run(rest)
    assert sorted(ended) == sorted(want)
    for key, state in midway.items():
        assert got[key][0]["iteration"] > state["iteration"]  # from its state, not from its start
        close({key: got[key]}, {key: [r for r in want[key] if r["iteration"] > state["iteration"]]})
    others = [k for k in want if k not in midway]
    close({k: got[k] for k in others}, {k: want[k] for k in others})
