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


def test_a_retried_trial_finds_its_finished_runs_in_the_registry_started_for_it(tmp_path, monkeypatch):
    """No registry actor until a trial is retried; then, before the retry starts, it holds that trial's ended runs
    (and only those)."""
    study = spec.validate({"name": "t", "imports": ["tests.sweep.toy_algorithms"], "kind": "comparison",
                           "problems": [{"name": "quadratic", "params": {"dim_x": 2, "dim_y": 2}}],
                           "algorithms": ["toy_aid"], "seeds": [0, 1, 2], "budget": {"iterations": 10}, "n_evals": 4,
                           "runs_per_trial": 3})
    store = ResultStore(tmp_path)
    store.write_study(study)
    started, held = [], []

    class Method:
        def remote(self, keys):
            held.extend(keys)
            return "ref"

    class Actor:
        add_all = Method()

    monkeypatch.setattr(recording, "_registry_actor", lambda name: started.append(name) or Actor())
    monkeypatch.setattr(ray, "get", lambda ref, timeout=None: None)
    registry = recording.DoneRegistry("bisweep-done-t")
    callback = StoreCallback(store, {p.run_key(s): (p, s) for p in study.points for s in study.seeds}, registry)
    config = study.trials[0].config(0.0, study.imports)
    first_two = []

    def report(result, state):
        chunk = result["bisweep"]["runs"]
        if len(first_two) < 2 or not any(c["done"] for c in chunk):
            callback.on_trial_result(0, [], None, result)
            first_two.extend(c["run_key"] for c in chunk if c["done"])

    execute_trial(config, report)  # the third run's end is lost with its node
    assert started == [] and store.status(config.runs[2].run_key) not in ("finished", "diverged")

    class Trial:
        trial_id = "x"

    trial = Trial()
    trial.config = {"trial": config}
    callback.on_trial_recover(0, [], trial)
    assert started == ["bisweep-done-t"] and held == [r.run_key for r in config.runs[:2]] == first_two
    registry.add([])
    assert started == ["bisweep-done-t"]  # started once, nothing sent for nothing
