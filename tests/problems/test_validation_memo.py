"""A value that passed its field's check is not checked again; the memo changes no outcome: a bad value fails
after a good one, an int given for a float field is converted every time, a type that equals another's value
(True == 1, 1 == 1.0) is checked on its own."""
import pytest

from algorithms.stochastic_hypergradient import SOBAConfig
from problems.shared.errors import ParameterError


def test_a_bad_value_fails_after_good_ones_of_its_field():
    for _ in range(2):
        assert SOBAConfig.from_dict({"rho": 0.3}).rho == pytest.approx(0.3, rel=0, abs=0)
    with pytest.raises(ParameterError, match="'rho' must be a positive number, got -0.3"):
        SOBAConfig.from_dict({"rho": -0.3})


def test_an_int_for_a_float_field_is_converted_each_time():
    for _ in range(2):
        value = SOBAConfig.from_dict({"gamma": 2}).gamma
        assert type(value) is float and value == pytest.approx(2.0, rel=0, abs=0)


def test_equal_values_of_other_types_are_checked_on_their_own():
    assert SOBAConfig.from_dict({"batch_size": 1}).batch_size == 1
    with pytest.raises(ParameterError, match="'batch_size' must be a positive integer or null, got True"):
        SOBAConfig.from_dict({"batch_size": True})
    converted = SOBAConfig.from_dict({"batch_size": 1.0}).batch_size  # a whole float: made an int, not memoised
    assert type(converted) is int and converted == 1
