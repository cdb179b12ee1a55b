"""Driving an algorithm step by step without the run loop (shared by the algorithm tests)."""
import numpy as np

import algorithms
import problems


def build(name, p, cfg, seed=0):
    """The algorithm `name` on the counted problem `p` with config `cfg` and rng seed `seed`."""
    return algorithms.get(name)(problems.counted(p), algorithms.make_config(name, cfg), np.random.default_rng(seed))


def trajectory(name, p, cfg, iterations, seed=0):
    """x after every iteration, stepping as the run loop does; (xs, the algorithm)."""
    alg = build(name, p, cfg, seed)
    xs = []
    for _ in range(iterations):
        alg.step()
        alg.iteration += 1
        xs.append(alg.x.copy())
    return np.array(xs), alg


class Hiding:
    """A duck-typed view of `problem`: everything of it but the attributes `hidden`."""

    def __init__(self, problem, *hidden):
        self._problem, self._hidden = problem, hidden

    def __getattr__(self, name):
        if name in self._hidden:
            raise AttributeError(name)
        return getattr(self._problem, name)
