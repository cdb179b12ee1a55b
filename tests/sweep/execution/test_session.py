"""A driver session's clock and its background work: when the process started, threads that yield the CPU to
Ray's start, the Tune side imported on a thread (or here when that fails)."""
from __future__ import annotations

import os
import subprocess
import sys
import threading
import time

import pytest

from sweep.execution import background, runner
from sweep.execution.session import Timeline


def test_process_start_is_when_the_process_started_not_when_it_asked():
    before = time.time()
    out = subprocess.run([sys.executable, "-c", "import time; time.sleep(0.5); from sweep.execution.session import "
                          "process_start; print(process_start(), time.time())"], capture_output=True, text=True,
                         check=True).stdout.split()
    start, asked = map(float, out)
    tick = 1 / os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 0.0
    assert before - 2 * tick - 0.01 <= start <= before + 0.3  # started right after `before`, ...
    assert asked - start >= 0.5  # ... not when it asked (after its 0.5 s sleep)


def test_timeline_marks_once_in_seconds_after_the_start():
    t = Timeline(time.time() - 2.0)
    t.mark("a")
    first = t.marks["a"]
    t.mark("a")
    assert t.marks["a"] == first and 2.0 <= first < 3.0 and t.marks["a_cpu"] >= 0


@pytest.mark.skipif(not hasattr(os, "setpriority"), reason="thread priorities are a Linux feature")
def test_a_yielding_thread_runs_at_lower_priority_and_the_caller_keeps_its_own():
    def nice() -> int:
        return os.getpriority(os.PRIO_PROCESS, threading.get_native_id())

    own = nice()
    assert background.Background(nice, "t", yielding=True).result() == min(own + background.YIELDING_NICE, 19)
    assert background.Background(nice, "t").result() == own and nice() == own


def test_the_tune_side_is_imported_here_when_the_thread_failed():
    def fail():
        raise RuntimeError("deadlock detected by _ModuleLock('ray.tune')")  # importlib's _DeadlockError

    module = runner._loaded(background.Background(fail, "t"))
    assert module.__name__ == "sweep.execution.experiment" and hasattr(module, "run")


def test_the_tune_side_is_not_imported_by_the_runner_itself():
    code = "import sys, sweep.execution.runner; print('ray.tune' in sys.modules, 'sweep.execution.experiment' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split() \
        == ["False", "False"]


def test_long_lived_objects_skip_full_collections_in_the_block_and_go_back_to_the_collector_after():
    import gc
    import weakref

    from sweep.execution.session import long_lived

    class Cycle:
        pass

    old = [Cycle() for _ in range(3)]
    for a, b in zip(old, old[1:] + old[:1]):
        a.peer = b  # a garbage cycle once dropped: only the collector frees it
    ref = weakref.ref(old[0])
    with pytest.raises(KeyError), long_lived():
        assert gc.get_freeze_count() > 0
        del old, a, b
        gc.collect()
        assert ref() is not None  # a full collection in the block does not walk (nor free) what was alive before
        raise KeyError("the block fails")
    assert gc.get_freeze_count() == 0  # handed back to the collector, even when the block raised
    gc.collect()
    assert ref() is None
