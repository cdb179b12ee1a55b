"""Row-wise reductions: a 1-D vector's number as the sequential code computes it, a stack's column per run."""
import math

import numpy as np

from algorithms import rowwise


def test_dot_norm_sqrt_give_a_number_for_a_vector_and_a_column_for_a_stack():
    a = np.array([[3.0, 4.0], [1.0, 0.0]])
    assert rowwise.dot(a[0], a[0]) == 25.0 and type(rowwise.dot(a[0], a[0])) is float
    np.testing.assert_array_equal(rowwise.norm(a), [[5.0], [1.0]])
    assert rowwise.sqrt(2.0) == math.sqrt(2.0)
    np.testing.assert_array_equal(rowwise.sqrt(np.array([[4.0]])), [[2.0]])


def test_all_at_most_is_every_rows_comparison():
    assert rowwise.all_at_most(1.0, 1.0) and not rowwise.all_at_most(1.0 + 1e-16 * 3, 1.0)
    assert not rowwise.all_at_most(math.nan, 1.0)  # NaN is above no bound and below none, as in np.all
    assert rowwise.all_at_most(np.array([[0.5], [1.0]]), 1.0) is True
    assert rowwise.all_at_most(np.array([[0.5], [1.5]]), 1.0) is False
    assert not rowwise.all_at_most(np.array([[0.5], [np.nan]]), 1.0)
