"""Ray's start for a session, without a running Ray: Tune's trial actors on idle workers, the environment Ray's
processes inherit, the raylet's connection retries."""
from __future__ import annotations

import os

from ray.tune.execution.class_cache import _ActorClassCache

from sweep.execution import ray_cluster


class Trainable:
    pass


def runtime_env(actor_class) -> dict | None:
    return actor_class._default_options.get("runtime_env")


def test_trial_actors_have_no_runtime_environment_inside_the_block_only():
    tune_cls = _ActorClassCache().get(Trainable)
    assert runtime_env(tune_cls)["env_vars"]["PL_DISABLE_FORK"] == "1"  # what Tune does by itself
    with ray_cluster.trials_on_idle_workers():
        cache = _ActorClassCache()
        ours = cache.get(Trainable)
        assert runtime_env(ours) is None and cache.get(Trainable) is ours  # cached, as Tune's
    assert runtime_env(_ActorClassCache().get(Trainable)) is not None  # Tune's again after the block


def test_trial_actors_keep_tunes_runtime_environment_on_a_cluster():
    with ray_cluster.trials_on_idle_workers(enabled=False):
        assert runtime_env(_ActorClassCache().get(Trainable))["env_vars"] == {"PL_DISABLE_FORK": "1"}


def test_the_environment_is_set_for_the_block_and_restored(monkeypatch):
    monkeypatch.setenv("BISWEEP_T_KEPT", "before")
    monkeypatch.delenv("BISWEEP_T_NEW", raising=False)
    with ray_cluster._environ({"BISWEEP_T_KEPT": "inside", "BISWEEP_T_NEW": "1"}):
        assert os.environ["BISWEEP_T_KEPT"] == "inside" and os.environ["BISWEEP_T_NEW"] == "1"
    assert os.environ["BISWEEP_T_KEPT"] == "before" and "BISWEEP_T_NEW" not in os.environ


def test_tune_settings_leave_a_value_the_user_set(monkeypatch):
    monkeypatch.setenv("RAY_AIR_NEW_OUTPUT", "1")
    monkeypatch.delenv("TUNE_MAX_PENDING_TRIALS_PG", raising=False)
    with ray_cluster.tune_env(max_pending=5):
        assert os.environ["RAY_AIR_NEW_OUTPUT"] == "1" and os.environ["TUNE_MAX_PENDING_TRIALS_PG"] == "5"
    assert "TUNE_MAX_PENDING_TRIALS_PG" not in os.environ


def test_the_raylet_retries_its_store_connection_often_within_rays_default_budget():
    cfg = ray_cluster._LOCAL_CONFIG
    assert cfg["raylet_client_connect_timeout_milliseconds"] <= 100
    # Ray's default: 10 tries a second apart
    assert cfg["raylet_client_connect_timeout_milliseconds"] * cfg["raylet_client_num_connect_attempts"] >= 10 * 1000


def test_no_ray_started_here_without_a_ray():
    import ray

    assert not ray.is_initialized() and not ray_cluster.started_here()
