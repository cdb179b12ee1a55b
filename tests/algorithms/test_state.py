"""Explicit algorithm state: every registered algorithm declares what changes during a run, and a
checkpoint of exactly that (JSON + npz, no pickle) resumes bit for bit."""
import copy
import dataclasses

import numpy as np
import pytest

import algorithms
import problems
from algorithms.checkpoint import decode, encode, load_state, save_state
from tests.sweep import toy_algorithms  # noqa: F401  (registers the test algorithms too)

FRAMEWORK = {"problem", "config", "_rng", "_stream", "iteration"}
ITERATIONS = 10


def setting(name):
    """A problem and a config exercising the algorithm's randomness where it has any."""
    cls = algorithms.get(name)
    if cls.online:
        return problems.make("drifting_quadratic", seed=3), {}
    if cls.constrained:
        return problems.make("constrained_quadratic", seed=3, d=12, noise=0.01), {}
    if cls.coreset:
        return problems.make("coreset_selection", seed=3, n_tasks=2, pool_size=10, coreset_size=3), {}
    fields = {f.name for f in dataclasses.fields(cls.Config)}
    p = problems.make("quadratic", seed=3, dim_x=4, dim_y=5, n_samples=32, rank=1)
    cfg = {"batch_size": 4} if "batch_size" in fields else {}
    if "max_sub_steps" in fields:  # minibatch gradients never meet D-TFBO's tolerances: 10,000 steps a loop else
        cfg["max_sub_steps"] = 50
    return p, cfg


def strip(rec):
    return {k: v for k, v in rec.items() if k not in ("time", "cpu_time", "eval_time")}


def same(a, b):
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return isinstance(a, np.ndarray) and isinstance(b, np.ndarray) and a.shape == b.shape and np.array_equal(a, b)
    if isinstance(a, (list, tuple)):
        return type(a) is type(b) and len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if hasattr(a, "__dict__") and not isinstance(a, type):
        return type(a) is type(b) and same(vars(a), vars(b))
    if hasattr(a, "maxlen"):  # a deque
        return same(list(a), list(b))
    return a == b or (a != a and b != b)


@pytest.mark.parametrize("name", sorted(algorithms.available()))
def test_save_load_continue_equals_an_uninterrupted_run(name, tmp_path):
    p, cfg = setting(name)
    budget = {"iterations": ITERATIONS}
    full = [strip(r) for r in algorithms.run(name, p, cfg, seed=7, budget=budget, n_evals=100)]
    first = algorithms.Run(name, p, cfg, seed=7, budget=budget, n_evals=100)
    head = [strip(first.advance()) for _ in range(5)]
    save_state(first.state_dict(), str(tmp_path))
    first.advance()  # the original moves on: the files must not share its state
    resumed = algorithms.Run(name, p, cfg, seed=12345, budget=budget, n_evals=100)
    resumed.load_state_dict(load_state(str(tmp_path)))
    tail = [strip(r) for r in resumed.records()]
    assert len(full) == ITERATIONS + 1
    assert head + tail == full


@pytest.mark.parametrize("name", sorted(algorithms.available()))
def test_every_attribute_a_run_changes_is_declared_state(name):
    p, cfg = setting(name)
    run = algorithms.Run(name, p, cfg, seed=7, budget={"iterations": ITERATIONS})
    fresh = copy.deepcopy({k: v for k, v in vars(run.algorithm).items() if k not in FRAMEWORK})
    list(run.records())
    declared = set(run.algorithm.state_fields())
    changed = sorted(k for k, v in vars(run.algorithm).items()
                     if k not in FRAMEWORK and k not in declared and not (k in fresh and same(fresh[k], v)))
    assert changed == [], f"{name}: undeclared state {changed}"


def test_state_fields_extend_along_the_class_hierarchy():
    assert algorithms.get("dtfbo").state_fields() == (
        "x", "y", "alpha", "beta", "gamma", "v", "y_loop", "v_loop", "y_cap_hits", "v_cap_hits")
    assert algorithms.get("sobow").state_fields() == ("x", "y", "hypergradient", "inner_total", "v", "memory")


def test_codec_round_trips_every_allowed_type_exactly(tmp_path):
    state = {"a": np.arange(6.0).reshape(2, 3), "i": np.int64(3), "f": np.float32(0.1), "t": (1, "x", None),
             "l": [np.zeros(0), {"nested": True}], "big": 2**100, "nan": float("nan"), "s": "run"}
    save_state(state, str(tmp_path))
    back = load_state(str(tmp_path))
    assert same(back, state)
    assert type(back["i"]) is np.int64 and type(back["f"]) is np.float32 and back["big"] == 2**100
    assert isinstance(back["t"], tuple)


def test_codec_refuses_what_json_and_npz_cannot_hold_naming_the_path():
    with pytest.raises(TypeError, match=r"state\.alg\.poly: a object cannot be stored"):
        encode({"alg": {"poly": object()}}, {})
    with pytest.raises(TypeError, match=r"state\.m\[1\]: an object array"):
        encode({"m": [1, np.array([None])]}, {})
    with pytest.raises(TypeError, match="key 3 cannot be stored"):
        encode({3: 1}, {})
    assert decode(encode({"x": [1, 2]}, {}), {}) == {"x": [1, 2]}


def test_checkpoint_files_are_json_and_a_pickle_free_npz(tmp_path):
    save_state({"x": np.ones(2)}, str(tmp_path))
    assert sorted(f.name for f in tmp_path.iterdir()) == ["arrays.npz", "state.json"]
    with np.load(tmp_path / "arrays.npz", allow_pickle=False) as z:
        assert list(z.keys()) == ["a0"]
