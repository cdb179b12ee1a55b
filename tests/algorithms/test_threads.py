"""blas_threads: the limit holds inside the block, is restored after, and bad counts are refused; pin_to_cpus."""
import subprocess
import sys

import numpy as np
import pytest
from threadpoolctl import threadpool_info

from algorithms.threads import blas_threads, pin_to_cpus
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


def test_pin_to_cpus_keeps_the_process_on_that_many_of_its_cpus():
    script = ("import os; from algorithms.threads import pin_to_cpus; before = sorted(os.sched_getaffinity(0)); "
              "pin_to_cpus(1); print(before[0], sorted(os.sched_getaffinity(0)))")
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True).stdout.split(" ", 1)
    assert out[1].strip() == f"[{out[0]}]"  # the first CPU it was allowed, alone


@pytest.mark.parametrize("bad", [0, -1, 1.5, True, "2"])
def test_pin_to_cpus_refuses_bad_counts(bad):
    with pytest.raises(ParameterError, match="'n' must be a positive integer"):
        pin_to_cpus(bad)
