"""problems.softmax: scipy.special.softmax's values bit for bit (the same formula without its dispatch)."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from scipy.special import softmax as scipy_softmax

from problems.softmax import softmax


@settings(max_examples=200, deadline=None)
@given(hnp.arrays(np.float64, hnp.array_shapes(min_dims=1, max_dims=2, max_side=12),
                  elements=st.floats(-700, 700)), st.sampled_from([None, 0, -1]))
def test_equals_scipys_softmax_bit_for_bit(z, axis):
    np.testing.assert_array_equal(softmax(z, axis), scipy_softmax(z, axis=axis))


def test_sums_to_one_along_the_axis_and_survives_large_entries():
    z = np.array([[1000.0, 999.0, -1000.0], [0.0, 0.0, 0.0]])
    p = softmax(z, axis=1)
    np.testing.assert_allclose(p.sum(axis=1), 1.0, rtol=1e-15)
    assert p[0, 0] == pytest.approx(1 / (1 + np.exp(-1.0)), rel=1e-15) and p[1, 2] == pytest.approx(1 / 3, rel=1e-15)
