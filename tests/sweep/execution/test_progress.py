"""The progress display: counts by run, fraction done, time left, output cadence, and O(1) work per event."""
import io
import time

import pytest

from sweep.execution.progress import Progress, format_seconds


class Clock:
    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now


def make(toy_study, monkeypatch, out, done_before=0):
    st = toy_study(name="p", problems=["quadratic"], algorithms=[{"name": "toy_aid", "params": {"lr": [0.1, 0.2, 0.3, 0.4]}}],
                   seeds=2, budget={"iterations": 100}, n_evals=20)
    clock = Clock()
    monkeypatch.setattr("sweep.execution.progress.time.monotonic", clock)
    return st, Progress(st, done_before, out), clock


def chunk(key, iteration, status="running", done=False):
    return {"run_key": key, "seed": 0, "index": 0, "records": [{"iteration": iteration, "status": status}], "done": done}


def test_counts_fraction_and_time_left(monkeypatch, toy_study):
    out = io.StringIO()
    st, pr, clock = make(toy_study, monkeypatch, out, done_before=2)  # 8 runs, 2 done by an earlier driver
    c = pr.counts()
    assert (c["done"], c["pending"], c["running"], c["total"]) == (2, 6, 0, 8)
    assert pr.fraction() == pytest.approx(0.25) and pr.seconds_left() is None
    pr.trial_started("t1")
    pr.trial_started("t2")
    clock.now += 10
    pr.result("t1", [chunk("a", 100, "finished", True), chunk("b", 50)])  # one run ended, the next half way
    pr.result("t2", [chunk("c", 100, "diverged", True)])
    assert pr.counts() == {"done": 4, "running": 2, "pending": 2, "failed": 0, "diverged": 1, "total": 8}
    assert pr.fraction() == pytest.approx((4 + 0.5) / 8)
    # 2.5/8 of the study took 10 s this session; 3.5/8 is left.
    assert pr.seconds_left() == pytest.approx(10 * (1 - 4.5 / 8) / (4.5 / 8 - 0.25))
    assert pr.line().startswith("runs 4/8 done, 2 running, 2 pending, 0 failed | diverged 1 | 0:00:10 elapsed, ~0:00:14 left")
    pr.result("t1", [chunk("a", 100, "finished", True)])  # a retried trial reports an ended run again: counted once
    assert pr.counts()["done"] == 4
    pr.runs_failed(["b", "d", "a"])  # t2's trial failed with b and d unfinished (a had ended)
    pr.trial_ended("t1")
    pr.trial_ended("t2")
    c = pr.counts()
    assert (c["done"], c["failed"], c["running"], c["pending"]) == (4, 2, 0, 2)


def test_non_terminal_output_prints_a_line_every_interval(monkeypatch, toy_study):
    out = io.StringIO()
    _, pr, clock = make(toy_study, monkeypatch, out)
    assert not pr.tty and pr.interval == 5.0
    pr.show()
    clock.now += 4.9
    pr.show()
    clock.now += 0.2
    pr.show()
    pr.message("bisweep: trial x failed: boom")
    assert out.getvalue().count("\n") == 3 and "\r" not in out.getvalue()
    assert format_seconds(3725.4) == "1:02:05"


def test_an_event_costs_the_same_at_any_number_of_runs(toy_study):
    """Feeding and printing cost O(1) per event: 10^5 runs cost what 10^2 runs cost (within noise)."""
    class Big:
        def __init__(self, n):
            self.run_keys = range(n)
            self.budget = {"iterations": 100}

    def cost(n):
        pr = Progress(Big(n), 0, io.StringIO())
        for t in range(4):
            pr.trial_started(f"t{t}")
        start = time.perf_counter()
        for i in range(2000):
            pr.result(f"t{i % 4}", [chunk(f"r{i}", 100, "finished", True), chunk(f"r{i}x", 10)])
            pr.line()
        return time.perf_counter() - start

    small = min(cost(100) for _ in range(3))
    large = min(cost(100_000) for _ in range(3))
    assert large < 3 * small + 0.05, (small, large)


def test_diverged_counts_the_runs_an_earlier_driver_ended_too(monkeypatch, toy_study):
    st = toy_study(name="p", problems=["quadratic"], algorithms=[{"name": "toy_aid", "params": {"lr": [0.1, 0.2]}}],
                   seeds=2, budget={"iterations": 100}, n_evals=20)
    monkeypatch.setattr("sweep.execution.progress.time.monotonic", Clock())
    pr = Progress(st, 2, io.StringIO(), diverged_before=1)  # 2 runs ended before this driver, 1 of them diverged
    pr.result("t1", [chunk("a", 100, "diverged", True), chunk("b", 100, "finished", True)])
    assert pr.counts() == {"done": 4, "running": 0, "pending": 0, "failed": 0, "diverged": 2, "total": 4}
    assert pr.line().startswith("runs 4/4 done, 0 running, 0 pending, 0 failed | diverged 2 |")
