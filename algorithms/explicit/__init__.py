"""Explicit-state algorithms: one definition, three engines (per run, stacked, compiled with JAX).

    import problems
    from algorithms import explicit
    p = problems.make("quadratic", seed=0, dim_x=10, dim_y=10)
    configs = [{"rho": r, "gamma": 0.1} for r in (0.05, 0.1, 0.2)]
    result = explicit.run("soba", p, configs, iterations=200, engine="jax")   # or "stacked", "per_run"
    for k, record in result.records():
        print(k, record["iteration"], record["grad_F_sq"])

The design, in the style of optax's `init`/`update`:

* An algorithm is a `Definition` (definition.py): `init(oracles, hyper, config, key, xp) -> state` and
  `step(state, oracles, hyper, config, xp) -> state` over a NamedTuple of arrays, written ONCE for one run
  against an array namespace `xp` (numpy or jax.numpy). `hyper` holds the numbers that may differ between
  runs of a stack (the algorithm's `varying_fields`: step sizes and their decays), `config` the stack's
  shared `AlgorithmConfig` (loop counts, flags; `number` reads a number from whichever holds it). Inner
  loops of fixed length go through `repeat` (a Python loop on NumPy, a `lax.fori_loop` under JAX). Its
  randomness comes from a key carried in the state; on a deterministic problem there is none (`key` None).
* Defined so far (one module per family): SOBA (soba.py), F2SA (f2sa.py), FSLA and MRBO (momentum.py), AmIGO,
  StocBiO, AID-FP and AID-CG (double_loop.py), ITD (itd.py: its reverse pass over a `scan` tape), S-TFBO and
  D-TFBO with fixed sub-loops (tfbo.py), BOME (bome.py), TTSA with the sampled or the expected HIA (ttsa.py), SABA (saba.py:
  its per-sample memory tables in the state, its minibatches drawn from the run's stream): the 14 algorithms
  whose runs stack.
* A problem is a NamedTuple of arrays whose methods are its oracles and ground truth (problems/pure.py), so
  the step runs under `jit` and its arrays are arguments, not constants; a definition names the form it
  needs (`Definition.oracles_of`: the full-batch quadratic or the closed-form toys `nonunique_toy` and
  `minimax_toy`, or the finite-sum quadratic with per-sample oracles); other problems below.
* Engines execute that same definition: `run_per_run` (NumPy, each run alone, 1-D iterates), `run_stacked`
  (NumPy, (K, d) iterates and (K, 1) hyperparameter columns), `run_jax` (`jax.vmap` over runs, `jax.jit`,
  `lax.scan` over evaluation points, float64, on JAX's default device). They give the same iterates to
  rounding (1e-10 in tests/algorithms/test_engines.py), and the same as `algorithms.run` on the deterministic
  quadratic and the two toys (but AID-CG on `nonunique_toy`,
  whose lower-level Hessian is singular: CG there follows rounding, in the run loop as in the engines).
* Randomness: a definition that draws (`Definition.draws`, SABA) takes its draws from a per-run stream in its
  state, made from the run's seed: on the NumPy engines the generator `algorithms.run` gives that run (the
  same draws, the same iterates), under JAX `jax.random` keys (its own streams: on a stochastic problem its
  runs are other samples of the same algorithm, equal in distribution, not in value). On deterministic
  problems all engines agree.

* Divergence: the run loop's rule (divergence.py): x and y checked after every step (inside the compiled loop
  too), metrics at the points; a diverged run's row computes on but is not recorded.

* Oracle counts: records carry the run loop's `calls/<kind>` and `samples/<kind>` (counts.py: the registered
  algorithm started and stepped three times on the counted problem, then start + first step + (t − 1) × a
  later step); ground truth, which the engines evaluate at every point, is not counted, as in the run loop.

* Seconds: records carry the run loop's `time`, `cpu_time` (the steps' wall and thread CPU seconds) and
  `eval_time` (the evaluations'), cumulative. Per run: each run's own. Stacked: the stack's divided among its K
  runs, `time_mode: batched`. JAX: the one program's wall and process CPU seconds
  shared out by steps done, evaluations included in `time` (`eval_time` 0), `time_mode: compiled`.

* Other problems: the NumPy engines run any `BilevelProblem` without a pure form (the real-data and simulated
  finite sums, coreset selection, the constrained quadratic) through its own oracles (problem_oracles.py: a run's
  vectors to its oracles, a stack's rows to its `*_rows` oracles, minibatches drawn by its `sample_batches`), equal
  to `algorithms.run` seed by seed; the JAX engine needs a pure form.

* Divergence: any rule of the run loop (`divergence=`: its factor, its watched quantities); default its default.

Windows and checkpoints: `CompiledStack` (JAX) and `NumpyStack` (NumPy; `run_stacked` is it in one window) advance a
stack a window of points at a time and save each run's state between windows (a NumPy run's generator state
with it), from which a new stack of any of those runs goes on; a study's batches and `algorithms.run_batched` run
through them (sweep/execution/trial_stacks.py, algorithms/batched.py). Oracle-call budgets: the NumPy stack runs
the whole steps a budget pays for and hands each going run to the run loop for its cut step (call_budget.py). What
the engines do not do: seconds budgets, online problems. `Result.records()` gives the run loop's records.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from algorithms.base import AlgorithmConfig
from algorithms.explicit import bome, double_loop, f2sa, itd, momentum  # noqa: F401  (registers)
from algorithms.explicit import saba, soba, tfbo, ttsa  # noqa: F401  (registers)
from algorithms.explicit.definition import Definition, decaying, define, defined, definition, repeat
from algorithms.explicit.jax_engine import jax_form, run_jax
from algorithms.explicit.numpy_engines import NumpyStack, run_per_run, run_stacked, stack_states
from algorithms.explicit.result import METRICS, Result, points
from algorithms.run_settings import Divergence
from problems.shared.errors import ParameterError

ENGINES = {"per_run": run_per_run, "stacked": run_stacked, "jax": run_jax}


def run(algorithm: str, problem: Any, configs: Sequence[Mapping[str, Any] | AlgorithmConfig | None],
        iterations: int, n_evals: int = 30, engine: str = "stacked", seeds: Sequence[int] | None = None,
        divergence: Divergence | Mapping[str, Any] | None = None) -> Result:
    """K runs of `algorithm` on `problem`, one per config, for `iterations` outer iterations, evaluated at the
    run loop's points; run k's random stream from seeds[k] (default k; used by definitions that draw); runs end
    by the run loop's `divergence` rule (its default unless given); every argument checked before any work."""
    if engine not in ENGINES:
        raise ParameterError(f"engine: unknown '{engine}'; allowed: {', '.join(ENGINES)}")
    if not isinstance(iterations, int) or iterations < 1:
        raise ParameterError(f"iterations: a positive integer, got {iterations!r}")
    if seeds is not None and (len(seeds) != len(configs) or not all(type(s) is int and s >= 0 for s in seeds)):
        raise ParameterError(f"seeds: one non-negative integer per config ({len(configs)}), got {list(seeds)!r}")
    rule = divergence if isinstance(divergence, Divergence) else Divergence.from_dict(divergence)
    defn = definition(algorithm)
    return ENGINES[engine](defn, problem, defn.configs(configs), points(iterations, n_evals), seeds, rule)


__all__ = ["Definition", "NumpyStack", "Result", "ENGINES", "METRICS", "decaying", "define", "defined", "definition",
           "points", "jax_form", "repeat", "run", "run_jax", "run_per_run", "run_stacked", "stack_states"]
