"""A lost node without Ray: the platform's actor pinned to the driver's node, a trial that cannot reach it runs
without it, and the driver keeps one copy of a run that such a trial ran again."""
import ray
import ray.exceptions
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from sweep.execution import recording, trainable
from sweep.execution.recording import StoreCallback
from sweep.execution.trainable import execute_trial
from sweep.results.store import ResultStore
from sweep.study import spec
from tests.sweep import toy_algorithms  # noqa: F401


def test_the_done_registry_is_pinned_to_the_drivers_node_not_softly(monkeypatch):
    class Context:
        def get_node_id(self):
            return "ab" * 28

    monkeypatch.setattr(ray, "get_runtime_context", Context)
    strategy = recording.on_driver_node()["scheduling_strategy"]
    assert isinstance(strategy, NodeAffinitySchedulingStrategy)
    assert (strategy.node_id, strategy.soft) == ("ab" * 28, False)


def test_a_registry_that_cannot_be_reached_is_no_registry(monkeypatch):
    class Method:
        def remote(self, keys):
            return "ref"

    class Actor:
        done_among = Method()

    def lost(ref, timeout=None):
        assert timeout == trainable.REGISTRY_SECONDS  # never waits for ever
        raise ray.exceptions.RayActorError()

    monkeypatch.setattr(ray, "get_actor", lambda name: Actor())
    monkeypatch.setattr(ray, "get", lost)
    assert trainable._registry_skip("bisweep-done-x")(["a", "b"]) == set()

    def gone(name):
        raise ValueError(f"Failed to look up actor with name '{name}'")

    monkeypatch.setattr(ray, "get_actor", gone)
    assert trainable._registry_skip("bisweep-done-x") is None


def test_a_run_that_ended_and_is_run_again_is_recorded_once(tmp_path):
    study = spec.validate({"name": "t", "imports": ["tests.sweep.toy_algorithms"], "kind": "comparison",
                           "problems": [{"name": "quadratic", "params": {"dim_x": 2, "dim_y": 2}}],
                           "algorithms": ["toy_aid"], "seeds": [0, 1], "budget": {"iterations": 10}, "n_evals": 4})
    store = ResultStore(tmp_path)
    store.write_study(study)
    callback = StoreCallback(store, {p.run_key(s): (p, s) for p in study.points for s in study.seeds})
    config = study.trials[0].config(0.0, study.imports)
    results = []

    def report(result, state):
        results.append(result)
        callback.on_trial_result(0, [], None, result)

    execute_trial(config, report)
    before = {p.name: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}
    first = len(results)
    execute_trial(config, report)  # a retried trial without a registry runs both runs again
    assert len(results) > first and all(r["bisweep"]["runs"] == [] for r in results[first:])  # nothing for MLflow
    assert {p.name: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()} == before
    assert (tmp_path / "ended.txt").read_text().split()[0::2] == ["finished", "finished"]


def test_max_failures_on_the_command_line_replaces_the_study_files_and_keeps_its_identity(tmp_path, capsys):
    from sweep.cli import main
    from sweep.execution.options import with_max_failures

    study = spec.load("quickstart")
    again = with_max_failures(study, 5)
    assert (study.max_failures, again.max_failures, again.spec_hash) == (2, 5, study.spec_hash)
    assert with_max_failures(study, None) is study
    assert main(["run", "quickstart", "--max-failures", "-1", "--results-dir", str(tmp_path / "out")]) == 2
    assert capsys.readouterr().err.splitlines() == [
        "bisweep: error: max-failures: must be a non-negative integer (retries of a failed trial), got -1"]
    assert not (tmp_path / "out").exists()
