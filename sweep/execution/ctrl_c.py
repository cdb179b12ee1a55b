"""Ctrl-C while a study's Tune experiment runs: the experiment stops as Tune itself would stop it (no new
trials, the running ones stopped, its state saved), and the driver knows it was asked to, so that it ends the
study as interrupted (exit code 130) rather than as runs that did not run. A second Ctrl-C interrupts at once.

Tune's own SIGINT handler (off here: TUNE_DISABLE_SIGINT_HANDLER in ray_cluster.tune_env) stops the same way but
tells no one.
"""
from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Callable, Iterator
from typing import Any

from ray import tune


class CtrlC(tune.Stopper):
    """A Tune stopper that stops the whole experiment once Ctrl-C was pressed (inside `catching`)."""

    def __init__(self, say: Callable[[str], None]) -> None:
        self.pressed = threading.Event()
        self._say = say
        self._said = False

    def __getstate__(self) -> dict[str, Any]:
        return {}  # Tune pickles its run config, and an Event cannot be pickled (experiments are never restored)

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(lambda line: None)

    def __call__(self, trial_id: str, result: dict[str, Any]) -> bool:
        return False

    def stop_all(self) -> bool:
        # Said here, on Tune's loop, not in the signal handler: a print there could land inside another print.
        if self.pressed.is_set() and not self._said:
            self._said = True
            self._say("bisweep: stopping the running trials (Ctrl-C again to stop at once)")
        return self.pressed.is_set()

    @contextlib.contextmanager
    def catching(self) -> Iterator[None]:
        """SIGINT sets `pressed` for the block (on the main thread; elsewhere signals cannot be caught)."""
        if threading.current_thread() is not threading.main_thread():
            yield
            return
        previous = signal.getsignal(signal.SIGINT)

        def pressed(signum: int, frame: Any) -> None:
            self.pressed.set()
            signal.signal(signal.SIGINT, previous)  # the next Ctrl-C: at once

        signal.signal(signal.SIGINT, pressed)
        try:
            yield
        finally:
            signal.signal(signal.SIGINT, previous)
