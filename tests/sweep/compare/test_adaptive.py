"""Model-based tuning in rounds (`sampler: optuna`): round 0 is the quasi-random protocol's start, each later
round is what a seeded TPE searcher (Ray Tune's OptunaSearch) proposes when told the tuning scores, checked
against Optuna driven directly; equal slots for every algorithm, reproducible, blind to held-out instances."""
import copy
import dataclasses
import math

import numpy as np
import optuna
import pytest

from sweep.compare import adaptive, tuning
from sweep.kinds import get
from sweep.study import spec
from sweep.study.model import Point

STUDY = {"name": "adapt", "kind": "benchmark",
         "axis": {"trials": 5, "studies": 2, "sampler": "optuna", "batch": 2, "held_out": [3], "seed": 4},
         "problems": [{"name": "quadratic", "params": {"dim_x": [3, 4], "dim_y": 3, "n_samples": 8}}],
         "algorithms": [{"name": "soba"}, {"name": "aid_cg", "params": {"inner_steps": 5}}, {"name": "itd"}],
         "seeds": 4, "budget": {"oracle_calls": 300}, "n_evals": 4}
TARGET = 0.03  # the loss of a configuration: |log10 gamma − log10 TARGET| (+ a per-instance offset)


def study(**axis):
    data = copy.deepcopy(STUDY)
    data["axis"].update(axis)
    return spec.validate(data)


def loss_of(point, seed):
    return abs(math.log10(point.algorithm_params["gamma"] / TARGET)) + 0.1 * seed


def summaries(st, held_value=None, diverged=()):
    """summary(run_key) of every run: F = loss_of (held-out runs: `held_value` when given)."""
    out = {}
    for p in st.points:
        for s in st.seeds:
            f = held_value if held_value is not None and s in st.axis["held_out"] else loss_of(p, s)
            status = "diverged" if (p.coords["tuning"][0][1], s) in diverged else "finished"
            out[p.run_key(s)] = {"status": status, "final": {"F": f}}
    return out.get


def grow(st, summary):
    points = get("benchmark").next_points(st, summary)
    return None if points is None else dataclasses.replace(st, points=points, identity=st.spec_hash)


def slots(st, label, problem):
    return sorted(tuple(s) for p in st.points if p.label == label and p.problem_params["dim_x"] == problem
                  for s in p.coords["tuning"])


def all_rounds(st, **kw):
    rounds = [st]
    while (nxt := grow(rounds[-1], summaries(rounds[-1], **kw))) is not None:
        rounds.append(nxt)
    return rounds


def test_round_zero_is_the_paper_default_and_the_first_batch_of_the_sobol_protocol():
    st = study()
    axis = {k: v for k, v in STUDY["axis"].items() if k != "batch"}
    quasi = spec.validate({**copy.deepcopy(STUDY), "axis": {**axis, "sampler": "sobol"}})
    first = {(p.label, p.problem_params["dim_x"], tuple(map(tuple, p.coords["tuning"]))): p.algorithm_params
             for p in st.points}
    want = {(p.label, p.problem_params["dim_x"], tuple((s, t) for s, t in p.coords["tuning"] if t <= 2)):
            p.algorithm_params for p in quasi.points if any(t <= 2 for _, t in p.coords["tuning"])}
    assert first == want and len(st.points) == 3 * 2 * (1 + 2 * 2)
    assert st.axis["batch"] == 2 and get("benchmark").growth(quasi) is None
    assert get("benchmark").growth(st).startswith("round 0 of 3: optuna then proposes 2 trials per algorithm")


def test_every_algorithm_gets_the_same_slots_in_every_round_on_every_problem():
    rounds = all_rounds(study())
    assert len(rounds) == 3  # trials 1-2 (round 0), 3-4, 5: batch 2 up to 5 trials
    for r, st in enumerate(rounds):
        last = min(2 + 2 * r, 5)
        want = [(s, t) for s in (1, 2) for t in range(last + 1)]
        for label in ("soba", "aid_cg", "itd"):
            for dim in (3, 4):
                assert slots(st, label, dim) == want
    final = rounds[-1]
    assert all(p.algorithm_params["inner_steps"] == 5 for p in final.points if p.label == "aid_cg")  # fixed
    for p in final.points:
        assert all(r.contains(p.algorithm_params[k]) for k, r in tuning.tunable_space(
            p.algorithm, {"inner_steps": 5} if p.label == "aid_cg" else {}).items())
    # Proposals are per problem (each problem's searcher sees its own scores): 3 new trials x 2 studies x 2.
    late = {(p.problem_params["dim_x"], p.algorithm_params["gamma"]) for p in final.points
            if p.label == "soba" and any(t > 2 for _, t in p.coords["tuning"])}
    assert len(late) == 2 * 2 * 3


def test_a_round_is_what_optuna_proposes_when_told_the_mean_tuning_loss_of_every_trial():
    st = study()
    nxt = grow(st, summaries(st))
    group = {t: p for p in st.points if p.label == "soba" and p.problem_params["dim_x"] == 3
             for s, t in p.coords["tuning"] if s == 2}
    tune = st.axis["tune"]
    assert tune == [0, 1, 2]
    # Directly with Optuna (no Ray): told trials 0, 1, 2 with the mean loss over the tuning seeds.
    dist = {name: optuna.distributions.FloatDistribution(0.01, 1.0, log=True) for name in ("rho", "gamma")}
    seed = adaptive.group_seed(4, 2, 2, "soba", adaptive.problem_id(group[0]))
    sampler = optuna.samplers.TPESampler(seed=seed, n_startup_trials=1, constant_liar=True)
    direct = optuna.create_study(sampler=sampler, direction="minimize")
    for t in (0, 1, 2):
        value = float(np.mean([loss_of(group[t], s) for s in tune]))
        params = {name: group[t].algorithm_params[name] for name in dist}
        direct.add_trial(optuna.trial.create_trial(params=params, distributions=dist, value=value))
    want = [direct.ask(fixed_distributions=dist).params for _ in range(2)]
    got = [{name: p.algorithm_params[name] for name in dist} for t in (3, 4) for p in nxt.points
           if p.label == "soba" and p.problem_params["dim_x"] == 3 and [2, t] in p.coords["tuning"]]
    assert got == want


def test_rounds_are_reproducible_and_change_with_the_seed():
    a = [p.to_dict() for p in all_rounds(study())[-1].points]
    b = [p.to_dict() for p in all_rounds(study())[-1].points]
    c = [p.to_dict() for p in all_rounds(study(seed=5))[-1].points]
    assert a == b and a != c


def test_held_out_instances_never_steer_the_search_and_tuning_instances_do():
    st = study()
    base = grow(st, summaries(st)).points
    assert grow(st, summaries(st, held_value=-100.0)).points == base
    assert grow(st, summaries(st, diverged={(1, 0)})).points != base  # a tuning run of trial 1 diverged


def test_the_search_moves_towards_the_better_configurations():
    final = all_rounds(study(trials=12, batch=2))[-1]
    dist = {}
    for p in final.points:
        if p.label == "soba":
            for _, t in p.coords["tuning"]:
                dist.setdefault(t, []).append(abs(math.log10(p.algorithm_params["gamma"] / TARGET)))
    start = np.median(dist[1] + dist[2])  # round 0: Sobol
    late = np.median([d for t in range(9, 13) for d in dist[t]])
    assert late < 0.5 * start


def test_diverged_and_failed_trials_are_told_as_the_worst_loss():
    st = study()
    group = {t: p for p in st.points if p.label == "soba" and p.problem_params["dim_x"] == 3
             for s, t in p.coords["tuning"] if s == 1}
    summ = summaries(st, diverged={(1, 0)})
    failed = lambda key: ({"status": "failed", "final": None} if key.startswith(group[2].key) else summ(key))  # noqa: E731
    losses = adaptive._losses(group, "soba", 1, st.axis["tune"], "F", "min", failed)
    assert losses[1] == math.inf and losses[2] == math.inf
    assert losses[0] == pytest.approx(np.mean([loss_of(group[0], s) for s in (0, 1, 2)]), rel=1e-12)


def test_a_round_is_asked_only_after_every_run_before_it_ended():
    st = study()
    with pytest.raises(RuntimeError, match="has not ended"):
        get("benchmark").next_points(st, lambda key: None)


def test_an_algorithm_without_tunables_still_fills_every_slot():
    assert adaptive.propose({}, [], 3, 0) == [{}, {}, {}]


def test_points_round_trip_through_their_recorded_form():
    for p in all_rounds(study())[-1].points:
        assert Point.from_dict(p.to_dict()) == p
    bad = {**study().points[0].to_dict(), "key": "soba.quadratic.0000000000"}
    with pytest.raises(ValueError, match="recorded"):
        Point.from_dict(bad)
