"""What a session dispatches: the runs not done yet, handed to Ray Tune as trials one at a time, lazily.

Tune's grid search deep-copies the whole search space for every variant, so passing every trial config
as one grid costs O(N²) before the first trial starts (108 ms per variant at N = 6,400). A searcher that
builds a trial's config only when Tune asks for the next trial costs O(runs of that trial), and Tune
holds only the trials made so far. The config travels as the `TrialConfig` object itself (immutable:
deep copies are the same object, its text is its key), so Tune's tags and copies stay O(1) too.

A trial takes consecutive runs of the queue (configuration by configuration): `runs_per_trial` of them,
or, when that is not set, as many as take about `TARGET_TRIAL_SECONDS` by the durations of finished runs
of the same shape (algorithm, problem and its parameters, budget), and a single run of a shape not seen
yet. Near the end trials shrink so that the last ones end together on every slot. Runs that batch (`batch_key`,
sweep.batching) go together: a trial takes consecutive runs of one batch, `FIRST_BATCH` of a shape not seen yet
(one such trial per slot; the next waits for their seconds), then about `BATCH_TRIAL_SECONDS` by their observed
shares of a batch's time; a batch larger than that is cut once into equal trials, at least one per slot, and a
smaller one is joined by the following whole batches of its shape. When a trial fails for good, only the run that
raised has failed: the runs after it go back to the queue for another trial, so the searcher says FINISHED only
once no trial is in flight.
"""
from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

from ray.tune.search import Searcher

from sweep.study.encoding import encoded_list
from sweep.study.model import Point, RunSpec, TrialConfig

#: Wall time a trial of automatically grouped runs aims at: Tune's per-trial cost (~0.1 s) stays small
#: against it, and the study's tail (the last trials) stays short.
TARGET_TRIAL_SECONDS = 2.0
#: Most runs one trial takes (its config and its report stay small).
MAX_RUNS_PER_TRIAL = 1000
#: Most runs one trial of batched runs takes: a trial costs ~0.1-0.2 s of Tune and Ray around its runs, which
#: 1,000 tiny batched runs (~0.1 ms each) do not amortize.
MAX_BATCH_RUNS_PER_TRIAL = 10_000
#: Wall time a trial of batched runs aims at: a larger batch steps each run faster.
BATCH_TRIAL_SECONDS = 10.0
#: Runs of a batch whose shape has not been seen yet that one trial takes.
FIRST_BATCH = 32
#: Near the end, a trial of batched runs still takes about this much work.
MIN_BATCH_TRIAL_SECONDS = 1.0
#: Weight of the newest duration in a shape's running estimate.
SMOOTHING = 0.2

#: Runs whose batch keys are made at once (not all of a 10⁶-run session's before its first trial).
KEY_BLOCK = 4096

MakeConfig = Callable[[str, tuple[RunSpec, ...]], TrialConfig]
#: batch_key(point, seed) -> what the runs of one batch share (None: the run cannot be batched).
BatchKey = Callable[[Point, int], "str | None"]


class RunQueue:
    """The pending runs of a session, cut into trials on demand and sized by the durations observed."""

    def __init__(self, runs: Sequence[tuple[Point, int]], make: MakeConfig, runs_per_trial: int | None = None,
                 slots: int = 1, batch_key: BatchKey | None = None) -> None:
        self._runs = runs
        self._next = 0
        self._again: list[tuple[Point, int]] = []  # runs of failed trials that never started, handed out first
        self.in_flight = 0  # trials made and not yet ended
        self._make = make
        self.runs_per_trial = runs_per_trial
        self.slots = max(1, slots)
        self.trials_made = 0
        self._seconds: dict[str, float] = {}  # shape -> running estimate of a run's wall time
        self._plans: dict[str, int] = {}  # batch key -> its trials' size (0: by the estimate, trial by trial)
        self.batch_key = batch_key
        self._keys: list[str | None] = []  # the batch keys of `runs` from `_keys_from` on, made block by block
        self._keys_from = 0
        self._same: dict[str | None, str | None] = {}  # a batch's runs share one key object (10⁵ copies: 34 MB)

    @property
    def remaining(self) -> int:
        """Runs not yet handed to a trial."""
        return len(self._runs) - self._next + len(self._again)

    def requeue(self, runs: Sequence[tuple[Point, int]]) -> None:
        """Hand these runs out again (the runs a failed trial never started)."""
        self._again.extend(runs)

    def trial_ended(self) -> None:
        """A trial completed or failed for good."""
        self.in_flight -= 1

    def _peek(self, i: int) -> tuple[Point, int]:
        return self._again[i] if i < len(self._again) else self._runs[self._next + i - len(self._again)]

    def _key(self, i: int) -> str | None:
        """The batch key of the i-th run still to hand out (`batch_key` must be set)."""
        if i < len(self._again):
            return self.batch_key(*self._again[i])
        at = self._next + i - len(self._again) - self._keys_from
        while at >= len(self._keys):  # each run's once (a batch's plan and its trials walk it again: ~1.5 µs a key)
            first = self._keys_from + len(self._keys)
            if len(self._same) > KEY_BLOCK:  # bounded: the batches of the last block or so
                self._same.clear()
            keys = (self.batch_key(p, s) for p, s in self._runs[first:first + KEY_BLOCK])
            self._keys.extend(self._same.setdefault(k, k) for k in keys)
        return self._keys[at]

    def _take(self, k: int) -> list[tuple[Point, int]]:
        out = self._again[:k]
        self._again = self._again[k:]
        more = k - len(out)
        out += self._runs[self._next:self._next + more]
        self._next += more
        if (handed := self._next - self._keys_from) >= KEY_BLOCK:  # the keys of runs handed out are not read again
            del self._keys[:handed]
            self._keys_from = self._next
        return out

    def shape(self, point: Point) -> str:
        """Runs of one shape take about the same time (the algorithm's hyperparameters aside)."""
        # the points of a grid share their problem's and budget's mappings: each encoded once (`encoded_list`)
        return encoded_list([point.algorithm, point.problem, point.problem_params, point.budget, point.n_evals])

    def observe(self, point: Point, seconds: float) -> None:
        """A run of `point` took `seconds` of wall time (fed by the driver as runs end)."""
        self.observe_many([(point, seconds)])

    def observe_many(self, runs: Sequence[tuple[Point, float]]) -> None:
        """Runs that ended in one report, each (point, its wall time), in order."""
        last, shape = None, ""
        for point, seconds in runs:  # a report's runs mostly share one shape: encoded once (10⁵ runs: 0.6 s)
            ident = (point.algorithm, point.problem, id(point.problem_params), id(point.budget), point.n_evals)
            if ident != last:
                last, shape = ident, self.shape(point)
            old = self._seconds.get(shape)
            self._seconds[shape] = seconds if old is None else (1 - SMOOTHING) * old + SMOOTHING * seconds

    def _size(self) -> int:
        """How many runs the next trial takes."""
        if self.runs_per_trial is not None:
            return min(self.runs_per_trial, MAX_RUNS_PER_TRIAL, self.remaining)
        key = self._key(0) if self.batch_key is not None else None
        if key is not None:
            return self._batch_size(key)
        cap = min(MAX_RUNS_PER_TRIAL, self.remaining, self._tail())
        total, k = 0.0, 0
        while k < cap:
            est = self._seconds.get(self.shape(self._peek(k)[0]))
            if est is None:  # an unknown shape runs alone first (its duration is then known)
                return max(k, 1)
            total += est
            if total > TARGET_TRIAL_SECONDS and k:
                break
            k += 1
        return max(k, 1)

    def _tail(self) -> int:
        """The most runs a trial takes near the end, so that every slot gets work."""
        return max(1, -(-self.remaining // (2 * self.slots)))

    def _batch_size(self, key: str) -> int:
        """How many consecutive runs the next trial takes, starting with batch `key`.

        A shape not seen yet: `FIRST_BATCH` runs. Then about `BATCH_TRIAL_SECONDS` of runs by their observed shares;
        near the end fewer, so that every slot gets work, but not below `MIN_BATCH_TRIAL_SECONDS` of them (tiny
        runs would otherwise end in a trail of ever smaller trials, each costing Tune and Ray ~0.1-0.2 s). A batch
        larger than that is cut once into equal parts, at least one per slot (`_planned`): a larger stack steps
        each of its runs faster, so halving the rest at every trial would cost. When batch `key` ends before the
        trial is full, the following batches of the same shape join it, each whole (a study of many problem
        instances has as many batches, one or a few runs each: a trial apiece cost ~25 ms of the driver a run)."""
        shape = self.shape(self._peek(0)[0])
        est = self._seconds.get(shape)
        if est is None:
            cap = FIRST_BATCH
        else:
            least = int(MIN_BATCH_TRIAL_SECONDS / max(est, 1e-9))
            cap = min(int(BATCH_TRIAL_SECONDS / max(est, 1e-9)), max(self._tail(), least))
            cap = self._planned(key, est, cap, least) or cap
        cap = max(1, min(cap, MAX_BATCH_RUNS_PER_TRIAL, self.remaining))
        k = self._batch_end(0, key, cap)
        while k < cap:
            following = self._key(k)
            if following is None or self.shape(self._peek(k)[0]) != shape:
                break
            end = self._batch_end(k, following, cap + 1)
            if end > cap:  # it does not fit whole: it starts the next trial
                break
            k = end
        return k

    def _planned(self, key: str, est: float, cap: int, least: int) -> int:
        """The size of batch `key`'s trials when what is left of it (counted once, when its runs' seconds are first
        known) is more than one trial takes (`cap`): that rest in equal parts, as few as `BATCH_TRIAL_SECONDS` and
        `MAX_BATCH_RUNS_PER_TRIAL` allow but at least one per slot, none under `least` runs; else 0. A batch longer
        than every slot's largest trial is not counted to its end (10⁶ runs: 2 s on Tune's thread): its trials are
        as large as those bounds allow."""
        if key not in self._plans:
            longest = self.slots * MAX_BATCH_RUNS_PER_TRIAL + 1
            rest = self._batch_end(0, key, longest)
            if rest >= longest:
                self._plans[key] = min(MAX_BATCH_RUNS_PER_TRIAL, max(int(BATCH_TRIAL_SECONDS / max(est, 1e-9)), least))
            else:
                parts = max(self.slots, math.ceil(rest * est / BATCH_TRIAL_SECONDS),
                            math.ceil(rest / MAX_BATCH_RUNS_PER_TRIAL))
                self._plans[key] = max(math.ceil(rest / parts), min(rest, least)) if rest > cap else 0
        return self._plans[key]

    def _batch_end(self, start: int, key: str, cap: int) -> int:
        """The index after the run of batch `key` that ends the stretch beginning at `start`, at most `cap`."""
        k = start + 1
        while k < min(cap, self.remaining) and self._key(k) == key:
            k += 1
        return k

    def waiting(self) -> bool:
        """Whether the next trial waits for a run's seconds: its runs batch, their shape has none observed yet, and
        every slot has a trial (Tune asks for trials ahead; sized blind, they would all be `FIRST_BATCH`)."""
        return (self.batch_key is not None and self.in_flight >= self.slots and self.remaining > 0
                and self._key(0) is not None and self.shape(self._peek(0)[0]) not in self._seconds)

    def next_trial(self) -> TrialConfig | None:
        """The config of the next trial, or None when every run has been handed out or the next one `waiting`."""
        if not self.remaining or self.waiting():
            return None
        runs = tuple(RunSpec.of(p, s) for p, s in self._take(self._size()))
        k = len(runs)
        self.trials_made += 1
        self.in_flight += 1
        key = runs[0].run_key if k == 1 else f"{runs[0].run_key}+{k - 1}"
        return self._make(key, runs)


class StudySearcher(Searcher):
    """A Tune searcher handing out the queue's trials ({"trial": TrialConfig}), then FINISHED."""

    def __init__(self, queue: RunQueue) -> None:
        super().__init__()
        self.queue = queue

    def suggest(self, trial_id: str) -> dict[str, Any] | str | None:
        cfg = self.queue.next_trial()
        if cfg is not None:
            return {"trial": cfg}
        if self.queue.in_flight == 0 and not self.queue.remaining:
            return Searcher.FINISHED
        return None  # a failing trial may hand runs back, or the next trial waits for a run's seconds

    def on_trial_complete(self, trial_id: str, result: dict[str, Any] | None = None, error: bool = False) -> None:
        """Nothing to learn: the driver's callbacks record every run."""

    # Tune pickles its tuner, this searcher in it, into tuner.pkl for a restore this platform never does: with the
    # queue's pending runs that took ~0.5 s of the driver at 10⁵ runs. Pickled, it is a searcher with nothing left.
    def __reduce__(self) -> tuple[Any, tuple[()]]:
        return _finished_searcher, ()

    def save(self, checkpoint_path: str) -> None:
        """Nothing to save: a later session finds what is left from the study's own records."""

    def restore(self, checkpoint_path: str) -> None:
        """Never restored (see `save`)."""


def _finished_searcher() -> StudySearcher:
    """What a pickled `StudySearcher` reads back as: one with no runs left."""
    return StudySearcher(RunQueue([], lambda key, runs: TrialConfig(key, runs)))
