"""A study that grows in rounds, driven without Ray: one session per round, the report after the last, an
interrupted round ends the call, failed runs are not run again in the same call, and the rounds recorded in
study.json come back (a study of another identity does not)."""
import copy
import dataclasses
import io

from sweep.execution import rounds
from sweep.results.store import ResultStore
from sweep.study import spec

STUDY = {"name": "grow", "kind": "benchmark",
         "axis": {"trials": 3, "studies": 1, "sampler": "optuna", "batch": 1, "held_out": 1},
         "problems": [{"name": "quadratic", "params": {"dim_x": 3, "dim_y": 3}}], "algorithms": ["soba"],
         "seeds": 2, "budget": {"iterations": 5}}


def study(**axis):
    data = copy.deepcopy(STUDY)
    data["axis"].update(axis)
    return spec.validate(data)


class Sessions:
    """A fake runner session: ends every pending run (as `status`), records what it was asked."""

    def __init__(self, root, status=lambda key: "finished", stop_after=None):
        self.root, self.status, self.stop_after, self.calls, self.tried = root, status, stop_after, [], set()

    def __call__(self, st, report):
        store = ResultStore(self.root)
        store.write_study(st)
        pending = [k for k in st.run_keys if store.status(k) is None or (store.status(k) == "failed" and
                                                                          k not in self.tried)]
        self.calls.append((len(st.points), len(pending), report))
        missing = 0
        for k in pending:
            self.tried.add(k)
            if self.stop_after is not None and len(self.calls) > self.stop_after:
                missing += 1
                continue
            store.finish(k, {"status": self.status(k), "final": {"F": float(len(k) % 7)}})
        return type("Outcome", (), {"counts": {"missing": missing}, "study": st})()


def test_one_session_a_round_and_the_report_once_after_the_last(tmp_path):
    sessions = Sessions(tmp_path)
    out = rounds.run_rounds(study(), ResultStore(tmp_path), sessions, True, io.StringIO())
    # round 0: trial 0 + 1 draw (2 points, 4 runs); rounds 1 and 2 add one point each; then the report.
    assert sessions.calls == [(2, 4, False), (3, 2, False), (4, 2, False), (4, 0, True)]
    assert out.study.spec_hash == study().spec_hash and len(out.study.points) == 4


def test_an_interrupted_round_ends_the_call_and_the_next_call_continues_it(tmp_path):
    first = Sessions(tmp_path, stop_after=1)
    out = rounds.run_rounds(study(), ResultStore(tmp_path), first, True, io.StringIO())
    assert out.counts["missing"] == 2 and first.calls == [(2, 4, False), (3, 2, False)]
    again = Sessions(tmp_path)
    rounds.run_rounds(study(), ResultStore(tmp_path), again, True, io.StringIO())
    # round 1 came back from study.json and runs its 2 missing runs; nothing of round 0 runs again.
    assert again.calls == [(3, 2, False), (4, 2, False), (4, 0, True)]


def test_failed_runs_are_not_run_again_within_one_call(tmp_path):
    sessions = Sessions(tmp_path, status=lambda key: "failed" if key.endswith(".s0") else "finished")
    rounds.run_rounds(study(), ResultStore(tmp_path), sessions, False, io.StringIO())
    assert sessions.calls == [(2, 4, False), (3, 2, False), (4, 2, False), (4, 0, False)]


def test_rounds_recorded_in_study_json_come_back_only_for_the_same_identity(tmp_path):
    st = study()
    grown = dataclasses.replace(st, points=st.points + [dataclasses.replace(
        st.points[1], algorithm_params={**st.points[1].algorithm_params, "gamma": 0.5},
        coords={**st.points[1].coords, "tuning": [[1, 2]]})], identity=st.spec_hash)
    ResultStore(tmp_path).write_study(grown)
    back = rounds.proposed_before(st, ResultStore(tmp_path))
    assert [p.to_dict() for p in back.points] == [p.to_dict() for p in grown.points]
    assert back.spec_hash == st.spec_hash
    other = study(seed=9)
    assert rounds.proposed_before(other, ResultStore(tmp_path)) is other
