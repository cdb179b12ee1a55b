"""A study's `resources` per trial: CPUs and GPUs passed to Tune, checked against a local Ray before it starts,
a warning on a cluster that has fewer now."""
import pytest

from problems.shared.errors import ParameterError
from sweep.execution import experiment, options
from sweep.study import spec


def study(**resources):
    return spec.validate({"name": "g", "problems": [{"name": "quadratic", "params": {"dim_x": 2, "dim_y": 2}}],
                          "algorithms": ["soba"], "seeds": 1, "budget": {"iterations": 5}, "n_evals": 2,
                          "resources": resources})


def test_a_trials_gpus_reach_tune_with_its_cpus(monkeypatch):
    asked = []
    monkeypatch.setattr(experiment.tune, "with_resources", lambda fn, res: asked.append(res) or fn)
    for st in (study(cpu=2, gpu=0.5), study()):
        experiment._tuner(st, None, "/tmp/x/exp", [], None)
    assert asked == [{"cpu": 2.0, "gpu": 0.5}, {"cpu": 1.0}]


def test_gpus_a_local_ray_does_not_have_are_one_line_before_anything_starts(monkeypatch):
    monkeypatch.setattr(options, "local_gpus", lambda: 0.0)
    with pytest.raises(ParameterError, match=r"^resources.gpu: a trial asks for 1 GPUs but this machine has 0; "
                                             r"0 here, or --address a cluster with GPU nodes$"):
        options.check_resources(study(gpu=1).resources, None, None)
    options.check_resources(study(gpu=1).resources, "10.0.0.1:6379", None)  # a cluster may scale up
    monkeypatch.setattr(options, "local_gpus", lambda: 2.0)
    options.check_resources(study(gpu=2).resources, None, None)


def test_a_cluster_with_fewer_gpus_now_is_a_warning():
    assert options.cluster_warning({"cpu": 1, "gpu": 1}, {"CPU": 8.0}) == (
        "bisweep: warning: a trial asks for 1 GPUs and the cluster has 0 now; trials wait until it scales up")
    assert options.cluster_warning({"cpu": 4, "gpu": 0}, {"CPU": 2.0}) == (
        "bisweep: warning: a trial asks for 4 CPUs and the cluster has 2 now; trials wait until it scales up")
    assert options.cluster_warning({"cpu": 1, "gpu": 1}, {"CPU": 8.0, "GPU": 1.0}) is None
