"""blas_threads: the limit holds inside the block, is restored after, and bad counts are refused."""
import numpy as np
import pytest
from threadpoolctl import threadpool_info

from algorithms.threads import blas_threads
from problems.shared.errors import ParameterError


def blas_counts():
    return [i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"]


def test_limit_inside_and_restored_after():
    np.ones((2, 2)) @ np.ones((2, 2))  # BLAS is loaded
    before = blas_counts()
    assert before
    n = 2 if set(before) == {1} else 1  # a count other than the one in force (the tests run at 1)
    with blas_threads(n):
        assert blas_counts() == [n] * len(before)
    assert blas_counts() == before


@pytest.mark.parametrize("bad", [0, -1, 1.5, True, "2"])
def test_bad_thread_counts_give_one_clear_error(bad):
    with pytest.raises(ParameterError, match="'n' must be a positive integer"):
        with blas_threads(bad):
            pass
