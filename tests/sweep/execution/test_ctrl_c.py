"""Ctrl-C during Tune's experiment: a stopper that stops everything once SIGINT came, says so once, and
leaves the previous handler in place after its block (the driver's study flow is in test_resume.py)."""
import os
import pickle
import signal
import threading

from sweep.execution.ctrl_c import CtrlC


def test_sigint_stops_every_trial_says_so_once_and_the_next_one_is_the_previous_handlers():
    said = []
    stop = CtrlC(said.append)
    before = signal.getsignal(signal.SIGINT)
    with stop.catching():
        assert not stop.stop_all() and not stop("trial", {})
        os.kill(os.getpid(), signal.SIGINT)
        assert stop.pressed.is_set()
        assert signal.getsignal(signal.SIGINT) is before  # a second Ctrl-C: at once
        assert stop.stop_all() and stop.stop_all() and not stop("trial", {})
    assert said == ["bisweep: stopping the running trials (Ctrl-C again to stop at once)"]
    assert signal.getsignal(signal.SIGINT) is before


def test_the_handler_is_removed_after_the_block_without_a_sigint():
    before = signal.getsignal(signal.SIGINT)
    with CtrlC(print).catching():
        assert signal.getsignal(signal.SIGINT) is not before
    assert signal.getsignal(signal.SIGINT) is before


def test_off_the_main_thread_nothing_is_caught():
    stop, seen = CtrlC(print), []

    def body():
        with stop.catching():
            seen.append(signal.getsignal(signal.SIGINT))

    before = signal.getsignal(signal.SIGINT)
    worker = threading.Thread(target=body)
    worker.start()
    worker.join()
    assert seen == [before]


def test_tune_can_pickle_it_with_its_run_config():
    stop = CtrlC(print)
    stop.pressed.set()
    copy = pickle.loads(pickle.dumps(stop))
    assert isinstance(copy, CtrlC) and not copy.stop_all()  # a fresh one: the live stopper stays in the driver
