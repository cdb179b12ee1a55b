"""Search spaces: every algorithm's tuning ranges hold valid configs at every corner, contain the paper
defaults, follow the default rule for step sizes, and map the unit cube as documented."""
import dataclasses
import itertools
import json
import math

import numpy as np
import pytest

import algorithms
from algorithms.base import Algorithm, AlgorithmConfig, register
from algorithms.search_space import Range
from problems.shared.errors import ParameterError
from problems.validation import param

NAMES = sorted(algorithms.available())


@pytest.mark.parametrize("name", NAMES)
def test_every_corner_of_the_search_space_builds_a_valid_config(name):
    cls = algorithms.get(name)
    space = cls.search_space()
    # Only a coreset selection rule without step sizes (uniform, k-means, greedy) has nothing to tune.
    assert space or (cls.coreset and not cls.step_sizes), f"{name} declares nothing tunable"
    for corner in itertools.product(*[(r.low, r.high) for r in space.values()]):
        values = {k: r.value(v) for (k, r), v in zip(space.items(), corner)}
        cfg = algorithms.make_config(name, values)
        assert {k: getattr(cfg, k) for k in values} == values


@pytest.mark.parametrize("name", NAMES)
def test_the_paper_default_lies_inside_and_step_sizes_are_searched(name):
    cls = algorithms.get(name)
    space, defaults = cls.search_space(), cls.Config.describe()
    for k, r in space.items():
        assert r.contains(defaults[k]["default"]), (k, r)
        assert r.integer == (defaults[k]["check"] == "positive_int")
    # Every declared step size is tuned (no algorithm drops one).
    assert set(cls.step_sizes) <= set(space)


def test_default_rule_and_declared_overrides():
    soba = algorithms.get("soba").search_space()
    assert soba == {"rho": Range(0.01, 1.0), "gamma": Range(0.01, 1.0)}  # defaults 0.1: [0.1/10, 0.1·10]
    assert algorithms.get("f2csa").search_space()["eta"] == Range(1e-6, 1e-4)  # no binary noise in bounds
    # S-TFBO needs α0 ≥ 1: the default rule's 0.5 is invalid, so the range is clipped to [1, 50].
    with pytest.raises(ParameterError, match="alpha0"):
        algorithms.make_config("stfbo", {"alpha0": 0.5})
    assert algorithms.get("stfbo").search_space()["alpha0"] == Range(1.0, 50.0)
    assert algorithms.get("dtfbo").search_space()["alpha0"] == Range(0.5, 50.0)
    # Declarations merge along the hierarchy: DoubleLoop's inner_steps, HIASolver's hia_terms, BSA's steps.
    assert set(algorithms.get("bsa").search_space()) == {"alpha", "eta", "gamma", "inner_steps", "hia_terms"}
    assert set(algorithms.get("sobow").search_space()) == {"alpha", "gamma", "eta", "K", "M", "window"}
    assert algorithms.get("dsblo").search_space()["momentum"] == Range(0.5, 0.99, log=False)


def test_describe_lists_the_search_space_as_plain_data():
    d = algorithms.available()["f2ba"]["search_space"]
    assert d["lam"] == {"low": 1.0, "high": 100.0, "log": True, "integer": False}
    assert d["inner_steps"] == {"low": 1, "high": 100, "log": True, "integer": True}
    json.dumps(algorithms.available())  # the --json listing needs no repr fallback


def test_range_maps_the_unit_interval_as_documented():
    lin = Range(2.0, 6.0, log=False)
    np.testing.assert_allclose(lin.from_unit([0.0, 0.25, 0.5]), [2.0, 3.0, 4.0], rtol=0, atol=1e-15)
    log = Range(0.01, 1.0)
    np.testing.assert_allclose(log.from_unit([0.0, 0.5, 0.75]), [0.01, 0.1, 10 ** -0.5], rtol=1e-14)
    # Integers: each whole value owns [k − ½, k + ½) before rounding, so the ends are not half as likely.
    ints = Range(1, 3, log=False, integer=True)
    u = (np.arange(3000) + 0.5) / 3000
    counts = np.bincount(ints.from_unit(u).astype(int))[1:]
    np.testing.assert_array_equal(counts, [1000, 1000, 1000])
    # Log integers: value k has mass log((k + ½)/(k − ½)) / log(100.5/0.5); u = ½ maps to √(0.5·100.5) ≈ 7.09.
    logint = Range(1, 100, integer=True)
    assert logint.from_unit([0.5])[0] == 7.0 and logint.value(7.0) == 7 and isinstance(logint.value(7.0), int)
    mass_of_1 = math.log(1.5 / 0.5) / math.log(100.5 / 0.5)
    assert np.mean(logint.from_unit(u) == 1) == pytest.approx(mass_of_1, abs=1 / 3000)


def test_bad_ranges_and_declarations_are_refused():
    with pytest.raises(ValueError, match="low <= high"):
        Range(2.0, 1.0)
    with pytest.raises(ValueError, match="low > 0"):
        Range(0.0, 1.0)
    with pytest.raises(ValueError, match="integer bounds"):
        Range(1.5, 10.0, integer=True)

    @dataclasses.dataclass(frozen=True)
    class Cfg(AlgorithmConfig):
        lr: float = param(0.1, "positive", "step")

    def algorithm(tunables):
        return type("Bad", (Algorithm,), {"name": "bad_search_space", "Config": Cfg, "step_sizes": ("lr",),
                                          "tunables": tunables, "step": lambda self: None})

    with pytest.raises(KeyError, match="'momentum' is not a config field"):
        register(algorithm({"momentum": Range(0.1, 0.9, log=False)}))
    with pytest.raises(KeyError, match="outside its range"):
        register(algorithm({"lr": Range(1.0, 10.0)}))
    assert "bad_search_space" not in algorithms.available()
