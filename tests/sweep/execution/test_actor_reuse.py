"""Tune's actor reuse inside `keep_starting_actors`: a staged trial whose own actor holds its resources keeps it;
one whose actor waits for resources takes the cached actor, as Tune does by itself."""
from ray.tune.execution.tune_controller import TuneController

from sweep.execution import actor_reuse


class Manager:
    def __init__(self, live):
        self._live_actors_to_ray_actors_resources = {a: ("ray actor", "resources") for a in live}


class Controller:
    """What `_maybe_reuse_cached_actor` reads of Tune's controller, with Tune's own method."""

    reuse = TuneController._maybe_reuse_cached_actor

    def __init__(self, trial_to_actor, live):
        self._trial_to_actor, self._actor_manager = dict(trial_to_actor), Manager(live)
        self._resetting_trials = set()
        self.asked = []

        class Cache:  # Tune's cache with nothing in it: Tune's method then says no reuse
            def has_cached_object(_, request):
                self.asked.append(request)
                return False

        self._actor_cache = Cache()


class Trial:
    placement_group_factory = "1 CPU"


def test_a_trial_whose_actor_is_starting_keeps_it_inside_the_block_only():
    trial = Trial()
    starting = Controller({trial: "own"}, live={"own"})
    waiting = Controller({trial: "own"}, live=set())
    fresh = Controller({}, live=set())
    with actor_reuse.keep_starting_actors():
        assert TuneController._maybe_reuse_cached_actor(starting, trial) is False and starting.asked == []
        assert TuneController._maybe_reuse_cached_actor(waiting, trial) is False and waiting.asked == ["1 CPU"]
        assert TuneController._maybe_reuse_cached_actor(fresh, trial) is False and fresh.asked == ["1 CPU"]
    assert TuneController._maybe_reuse_cached_actor is Controller.reuse  # Tune's own again
    TuneController._maybe_reuse_cached_actor(starting, trial)
    assert starting.asked == ["1 CPU"]  # outside the block Tune looks in its cache for that trial too


def test_a_controller_without_what_the_rule_reads_runs_as_tune_would():
    assert not actor_reuse._own_actor_has_resources(object(), Trial())
    assert not actor_reuse._own_actor_has_resources(Controller({}, live={"x"}), Trial())


def test_without_tunes_method_the_block_changes_nothing(monkeypatch):
    monkeypatch.delattr(TuneController, "_maybe_reuse_cached_actor")
    with actor_reuse.keep_starting_actors():
        assert not hasattr(TuneController, "_maybe_reuse_cached_actor")
