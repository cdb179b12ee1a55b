"""The lazy dispatch of a session's runs: trial sizes from run durations, the tail, and runs handed back."""
import pytest
from ray.tune.search import Searcher

from sweep.execution.dispatch import MAX_RUNS_PER_TRIAL, TARGET_TRIAL_SECONDS, RunQueue, StudySearcher
from sweep.study.model import TrialConfig
from tests.sweep import toy_algorithms  # noqa: F401


@pytest.fixture()
def study(toy_study):
    # 2 problem sizes (two shapes) x 300 step sizes x 2 seeds = 1,200 runs, configuration by configuration
    lrs = [round(0.01 + 0.001 * i, 6) for i in range(300)]
    return toy_study(name="q", problems=[{"name": "quadratic", "params": {"dim_x": [2, 3], "dim_y": 2}}],
                     algorithms=[{"name": "toy_aid", "params": {"lr": lrs}}], seeds=2)


def queue_of(study, runs_per_trial=None, slots=2):
    runs = [(p, s) for p in study.points for s in study.seeds]
    return RunQueue(runs, lambda key, rs: TrialConfig(key, rs), runs_per_trial, slots), runs


def keys(cfg):
    return list(cfg.run_keys)


def test_a_fixed_number_of_runs_per_trial_in_order(study):
    q, runs = queue_of(study, runs_per_trial=500)
    sizes, got = [], []
    while (cfg := q.next_trial()) is not None:
        sizes.append(len(cfg.runs))
        got += keys(cfg)
    assert sizes == [500, 500, 200] and got == [p.run_key(s) for p, s in runs]
    assert q.trials_made == 3 and q.remaining == 0


def test_trials_take_about_two_seconds_of_runs_of_a_known_shape(study):
    q, runs = queue_of(study)
    by_key = {p.key: p for p, _ in runs}
    small, large = (next(p for p, _ in runs if p.problem_params["dim_x"] == d) for d in (2, 3))
    first = q.next_trial()
    assert len(first.runs) == 1 and first.key == runs[0][0].run_key(0)  # nothing known: one run alone
    q.observe(small, 0.03)  # the small problem's runs are known, the large one's not yet:
    cfg = q.next_trial()    # the trial stops before the first run of the unknown shape
    assert all(by_key[r.run_key.rsplit(".", 1)[0]].problem_params["dim_x"] == 2 for r in cfg.runs)
    assert q._peek(0)[0].problem_params["dim_x"] == 3
    q.observe(large, 0.03)
    q.observe(large, 0.13)  # the estimate moves by a fifth of the difference: 0.05 s
    est = {2: 0.03, 3: 0.05}
    for _ in range(3):
        cfg = q.next_trial()
        total = sum(est[by_key[r.run_key.rsplit(".", 1)[0]].problem_params["dim_x"]] for r in cfg.runs)
        following = est[q._peek(0)[0].problem_params["dim_x"]]
        assert total <= TARGET_TRIAL_SECONDS < total + following + 1e-12 and len(cfg.runs) > 40
        assert cfg.key == f"{cfg.runs[0].run_key}+{len(cfg.runs) - 1}"


def test_a_reports_runs_observed_at_once_move_each_shapes_estimate_as_one_by_one(study):
    runs = [p for p, _ in queue_of(study)[1]]
    small, large = (next(p for p in runs if p.problem_params["dim_x"] == d) for d in (2, 3))
    other_small = next(p for p in runs if p.problem_params["dim_x"] == 2 and p is not small)
    seen = [(small, 0.03), (other_small, 0.13), (large, 1.0), (small, 0.08), (large, 2.0)]
    at_once, one_by_one = queue_of(study)[0], queue_of(study)[0]
    at_once.observe_many(seen)
    for p, seconds in seen:
        one_by_one.observe(p, seconds)
    assert at_once._seconds == pytest.approx(one_by_one._seconds, rel=1e-15)
    assert at_once._seconds[at_once.shape(small)] == pytest.approx(0.8 * (0.8 * 0.03 + 0.2 * 0.13) + 0.2 * 0.08)
    assert at_once._seconds[at_once.shape(large)] == pytest.approx(0.8 * 1.0 + 0.2 * 2.0)


def test_the_tail_is_shared_by_every_slot_and_a_trial_is_bounded(study):
    q, runs = queue_of(study, slots=4)
    for p, _ in runs:
        q.observe(p, 1e-6)  # instant runs: only the caps bound a trial
    assert len(q.next_trial().runs) == min(MAX_RUNS_PER_TRIAL, -(-1200 // 8)) == 150
    sizes = []
    while (cfg := q.next_trial()) is not None:
        sizes.append(len(cfg.runs))
    assert sum(sizes) == 1050 and sizes[-1] == 1 and sizes == sorted(sizes, reverse=True)


def test_runs_handed_back_are_dispatched_and_finished_only_when_nothing_is_in_flight(study):
    runs = [(p, s) for p in study.points[:2] for s in study.seeds]
    q = RunQueue(runs, lambda key, rs: TrialConfig(key, rs), runs_per_trial=4)
    searcher = StudySearcher(q)
    only = searcher.suggest("t1")["trial"]
    assert keys(only) == [p.run_key(s) for p, s in runs] and q.in_flight == 1
    assert searcher.suggest("t2") is None  # the trial may fail and hand runs back: not finished yet
    q.requeue(runs[2:])  # it failed at its third run
    q.trial_ended()
    again = searcher.suggest("t3")["trial"]
    assert keys(again) == [p.run_key(s) for p, s in runs[2:]]
    assert searcher.suggest("t4") is None
    q.trial_ended()
    assert searcher.suggest("t5") == Searcher.FINISHED


@pytest.mark.parametrize("share, want", [
    (1e-4, [32, 1168]),  # tiny runs: after the first batch, the rest is under a second's work: one trial
    (1e-2, [32, 584, 584]),  # 11.7 s of runs left: in halves, one per slot (a larger stack steps its runs faster)
    (0.05, [32, 195, 195, 195, 195, 195, 193]),  # 58.4 s left: six equal parts of at most BATCH_TRIAL_SECONDS
])
def test_a_large_batch_is_cut_once_into_equal_trials_of_a_second_of_work_or_more(study, share, want):
    from sweep.execution.dispatch import FIRST_BATCH, MIN_BATCH_TRIAL_SECONDS

    runs = [(p, s) for p in study.points for s in study.seeds]
    q = RunQueue(runs, lambda key, rs: TrialConfig(key, rs), None, 2, batch_key=lambda p, s: "one batch")
    sizes = [len(q.next_trial().runs)]
    for p, _ in runs:
        q.observe(p, share)  # each run's share of its batch's wall time
    while (cfg := q.next_trial()) is not None:
        sizes.append(len(cfg.runs))
    assert sizes == want and sizes[0] == FIRST_BATCH and sum(sizes) == 1200
    assert all(n >= MIN_BATCH_TRIAL_SECONDS / share for n in sizes[1:-1])


def _sizes(q):
    out = []
    while (cfg := q.next_trial()) is not None:
        out.append(len(cfg.runs))
    return out


def test_batched_trials_take_whole_following_batches_of_the_same_shape(study):
    """A study of many problem instances has a batch per instance: a trial takes several whole batches (up to the
    seconds it aims at), never part of a following one, never one of another shape or one that does not batch."""
    from sweep.execution.dispatch import BATCH_TRIAL_SECONDS, FIRST_BATCH

    runs = sorted(((p, s) for p in study.points for s in study.seeds), key=lambda r: r[0].problem_params["dim_x"])
    index = {p.run_key(s): i for i, (p, s) in enumerate(runs)}

    def shape_of(p):  # the runs: 600 of dim_x 2, then 600 of dim_x 3
        return p.problem_params["dim_x"]

    def batches_of(size, unbatchable=()):
        return lambda p, s: None if index[p.run_key(s)] in unbatchable else f"{shape_of(p)}:{index[p.run_key(s)] // size}"

    # one run per batch: the first trial takes FIRST_BATCH of them, then BATCH_TRIAL_SECONDS of runs
    q = RunQueue(runs, lambda key, rs: TrialConfig(key, rs), None, 1, batch_key=batches_of(1))
    assert len(q.next_trial().runs) == FIRST_BATCH
    for p, _ in runs:
        q.observe(p, 0.0625)
    sizes = _sizes(q)
    assert sizes[0] == BATCH_TRIAL_SECONDS / 0.0625 == 160
    assert sum(sizes) == 1200 - FIRST_BATCH and sizes[:4] == [160, 160, 160, 88]  # the rest of dim_x 2, alone
    # batches of 20: a trial of FIRST_BATCH (32) takes the first whole and not part of the second
    for seconds, want in ((0.07, 140), (0.0625, 160)):  # 142 runs' worth: 7 whole batches; 160: 8, ending at the cap
        q = RunQueue(runs, lambda key, rs: TrialConfig(key, rs), None, 1, batch_key=batches_of(20))
        assert len(q.next_trial().runs) == 20
        q.observe(runs[0][0], seconds)
        assert len(q.next_trial().runs) == want
    # a run that does not batch ends the stretch; the next trial starts with it, alone
    q = RunQueue(runs, lambda key, rs: TrialConfig(key, rs), None, 1, batch_key=batches_of(1, unbatchable={5}))
    assert len(q.next_trial().runs) == 5
    assert len(q.next_trial().runs) == 1


def test_trials_of_a_batch_not_timed_yet_wait_once_every_slot_has_one(study):
    """Tune asks for trials ahead: sized blind, every one would be FIRST_BATCH runs. Once every slot has a trial of a
    shape whose runs have no seconds yet, the searcher waits (None, not FINISHED) until they come or a trial ends."""
    from sweep.execution.dispatch import FIRST_BATCH

    runs = [(p, s) for p in study.points for s in study.seeds]
    q = RunQueue(runs, lambda key, rs: TrialConfig(key, rs), None, 2, batch_key=lambda p, s: "one batch")
    searcher = StudySearcher(q)
    assert [len(searcher.suggest(f"t{i}")["trial"].runs) for i in range(2)] == [FIRST_BATCH] * 2
    assert q.waiting() and searcher.suggest("t2") is None and searcher.suggest("t3") is None
    q.trial_ended()  # one failed, nothing observed: a slot is free, sized blind again
    assert not q.waiting() and len(searcher.suggest("t4")["trial"].runs) == FIRST_BATCH and q.waiting()
    q.observe(runs[0][0], 0.01)  # the rest (1,104 runs, 11 s) in two equal trials
    assert not q.waiting()
    assert [len(searcher.suggest(f"t{i}")["trial"].runs) for i in (5, 6)] == [552, 552]
    assert searcher.suggest("t7") is None
    for _ in range(q.in_flight):
        q.trial_ended()
    assert searcher.suggest("t8") == Searcher.FINISHED


def test_a_batch_longer_than_every_slots_largest_trial_is_cut_into_the_largest_trials(study, monkeypatch):
    """Counted only as far as every slot's largest trial (a million-run batch is not walked to its end on Tune's
    thread): its trials are as large as MAX_BATCH_RUNS_PER_TRIAL and BATCH_TRIAL_SECONDS allow."""
    from sweep.execution import dispatch

    monkeypatch.setattr(dispatch, "MAX_BATCH_RUNS_PER_TRIAL", 100)
    monkeypatch.setattr(dispatch, "KEY_BLOCK", 50)
    runs = [(p, s) for p in study.points for s in study.seeds]
    calls = []

    def batch_key(p, s):
        calls.append((p.key, s))
        return " ".join(["one", "batch"])  # a new string object each time, as a real key is

    q = RunQueue(runs, lambda key, rs: TrialConfig(key, rs), None, 2, batch_key=batch_key)
    assert [len(q.next_trial().runs) for _ in range(2)] == [32, 32]
    q.observe(runs[0][0], 1e-4)
    assert len(q.next_trial().runs) == 100 and len(calls) <= 64 + 2 * 100 + 1 + 50  # not 1,200 runs' keys made
    # the keys kept are only those of runs not handed out, one object for equal ones
    assert q._keys_from == 164 and len({id(k) for k in q._keys}) == 1
    assert _sizes(q) == [100] * 10 + [36]
    assert sorted(calls) == sorted((p.key, s) for p, s in runs)  # each run's key made once


def test_a_pickled_searcher_holds_no_runs_and_reads_back_finished(study):
    # Tune pickles its tuner, the searcher in it, into tuner.pkl (a restore this platform never does)
    import pickle

    q, runs = queue_of(study)
    searcher = StudySearcher(q)
    packed = pickle.dumps(searcher)
    assert len(packed) < 500 < len(pickle.dumps(runs))
    again = pickle.loads(packed)
    assert again.suggest("t0") == Searcher.FINISHED
    assert searcher.suggest("t1")["trial"].runs  # the live searcher still hands out its runs
