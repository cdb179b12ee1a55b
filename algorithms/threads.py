"""BLAS threads per run: a run given k cores should keep BLAS to k threads.

OpenBLAS starts one thread per core by default, so two runs side by side on two cores run four BLAS
threads, and after every parallel call (a dense solve in an evaluation, say) its idle threads spin for
a while before sleeping, taking cycles from the other run. Ray sets OMP_NUM_THREADS to a trial's CPUs
when the variable is unset, which OpenBLAS reads when NumPy loads; `blas_threads` enforces a limit
whatever the environment says.

The thread count can move last bits: OpenBLAS may split a matrix–vector product along its summed
dimension (Dᵀr over 40 000 samples differs between 1 and 2 threads), so runs are reproducible bit for
bit only at a fixed thread count. The record digests (tests/algorithms/test_record_digests.py) hold at
1 and at 2 threads.
"""
from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager

from threadpoolctl import threadpool_limits

from problems.shared.errors import ParameterError


@contextmanager
def blas_threads(n: int) -> Iterator[None]:
    """Limit every loaded BLAS library (OpenBLAS, MKL, BLIS) to `n` threads inside the block."""
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ParameterError(f"blas_threads: 'n' must be a positive integer, got {n!r}")
    with threadpool_limits(limits=n, user_api="blas"):
        yield


def pin_to_cpus(n: int) -> None:
    """Keep this process, and every thread it starts later, on `n` of the CPUs it may use now.

    XLA's CPU client sizes its thread pools from the process's CPU affinity when JAX starts, and no longer
    reads the flags that used to limit them (`--xla_cpu_multi_thread_eigen`): with JAX 0.10 on this 2-core
    machine a compiled run used five threads, 0.91 s of CPU for 0.68 s of wall time, against 0.58 s of both
    when pinned to one CPU. Call it before `jax` is imported.
    """
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ParameterError(f"pin_to_cpus: 'n' must be a positive integer, got {n!r}")
    allowed = sorted(os.sched_getaffinity(0))
    os.sched_setaffinity(0, allowed[:n])
