"""The compiled programs of the JAX engine: a stack's start, and its advance over a window of evaluation points.

`start` makes the K runs' initial state (`jax.vmap` of the definition's `init`), their iterate limits and the values
at the first point. `advance` runs the stretches between evaluation points as a `lax.scan`, each stretch's steps a
`lax.fori_loop` (its length an argument) followed by the evaluation at its end; a stretch of length 0 is skipped,
evaluation included (a `lax.cond`), so one compiled program serves any window of the points: the stretches outside
the window are given length 0. Within `advance` the runs are on the axis the problem's form puts them (`runs_axis`:
the small quadratic's products are faster with them last). The iteration count `t` is not mapped (the stack's runs
step together), nor is a hyperparameter the whole stack shares (a scalar), so that a schedule's (t + 1)^e is computed
once a step.
"""
from __future__ import annotations

from typing import Any

from algorithms.base import AlgorithmConfig
from algorithms.explicit.definition import Definition
from algorithms.explicit.divergence import NEVER, iterate_limits, watch_iterates
from algorithms.explicit.result import UNITS
from algorithms.run_settings import Divergence
from problems.shared.errors import ParameterError


def jax_modules() -> tuple[Any, Any]:
    """(jax, jax.numpy), or one line saying how to install them."""
    try:
        import jax
        import jax.numpy as jnp
    except ImportError as exc:
        raise ParameterError(f"backend: 'jax' needs JAX ({exc}); pip install 'bilevel-sweep[jax]' "
                             "or use backend 'numpy'") from None
    return jax, jnp


def device() -> str:
    """The platform JAX runs on here (cpu, gpu, tpu), as `JAX_PLATFORMS` chose it."""
    jax, _ = jax_modules()
    return jax.default_backend()


def state_axes(state: Any, axis: int = 0) -> Any:
    """The vmap axes of a stacked state: every field mapped on `axis` but the shared iteration count t."""
    return type(state)(*(None if name == "t" else axis for name in state._fields))


def moved(state: Any, source: int, destination: int) -> Any:
    """The stacked state with its runs' axis moved from `source` to `destination` (the count t as it is)."""
    jax, jnp = jax_modules()
    return type(state)(*(v if name == "t" or v is None else
                         jax.tree_util.tree_map(lambda a: jnp.moveaxis(a, source, destination), v)
                         for name, v in zip(state._fields, state)))


def hyper_axes(hyper: Any) -> Any:
    """The vmap axes of the hyperparameters: a vector per run is mapped, a number the stack shares is not."""
    return type(hyper)(*(None if v.ndim == 0 else 0 for v in hyper))


def programs(defn: Definition, config: AlgorithmConfig, rule: Divergence) -> tuple[Any, Any]:
    """(start(oracles, hyper, seeds), advance(oracles, hyper, lengths, state, failed, limits)), for jax.jit.

    start -> (state, failed, limits, values at the first point); advance -> (state, failed, values at the end of
    each stretch, zeros where a stretch has length 0). `failed` is (iteration, reason) per run (divergence.py); a
    form without ground truth gives the iterates (x, y) as its values, for the host to evaluate."""
    jax, jnp = jax_modules()

    def evaluate(oracles: Any, hyper: Any, s: Any, axis: int = 0) -> dict[str, Any]:
        diag = jax.vmap(lambda s1, h: defn.diagnostics(s1, h, config, jnp),
                        in_axes=(state_axes(s, axis), hyper_axes(hyper)))(s, hyper)
        values = (jax.vmap(oracles.metrics, in_axes=axis)(s.x, s.y) if hasattr(oracles, "metrics")
                  else {"x": jnp.moveaxis(s.x, axis, 0), "y": jnp.moveaxis(s.y, axis, 0)})
        units = {UNITS: s.hvp_calls} if defn.counted(config) is not None else {}
        return {**values, **{f"diag/{n}": v for n, v in diag.items()}, **units}

    def start(oracles: Any, hyper: Any, seeds: Any) -> tuple[Any, Any, Any, Any]:
        def one(h: Any, seed: Any) -> Any:  # a run's key from its seed, when the definition draws
            return defn.init(oracles, h, config, jax.random.PRNGKey(seed) if defn.draws_for(config) else None, jnp)

        shape = jax.eval_shape(one, jax.tree_util.tree_map(lambda v: v[0] if v.ndim else v, hyper), seeds[0])
        state = jax.vmap(one, in_axes=(hyper_axes(hyper), 0), out_axes=state_axes(shape))(hyper, seeds)
        limits = jax.vmap(lambda s: iterate_limits(s, jnp, rule), in_axes=(state_axes(state),))(state)
        failed = (jnp.full((state.x.shape[0], 1), NEVER), jnp.zeros((state.x.shape[0], 1)))
        return state, failed, limits, evaluate(oracles, hyper, state)

    def advance(oracles: Any, hyper: Any, lengths: Any, state: Any, failed: Any, limits: Any
                ) -> tuple[Any, Any, Any]:
        # Within the loop the runs are on the axis the form's products put them (problems/pure.py, `runs_axis`):
        # moved there and back once a window, not once a product.
        axis = getattr(oracles, "runs_axis", 0)
        state = moved(state, 0, axis)
        axes = state_axes(state, axis)

        def one(s: Any, f: Any, h: Any, lim: Any) -> tuple[Any, Any]:
            s = defn.step(s, oracles, h, config, jnp)
            return s, watch_iterates(s, *f, lim, jnp)

        step = jax.vmap(one, in_axes=(axes, 0, hyper_axes(hyper), 0), out_axes=(axes, 0))
        shapes = jax.eval_shape(lambda s: evaluate(oracles, hyper, s, axis), state)

        def skipped(s: Any) -> dict[str, Any]:
            return jax.tree_util.tree_map(lambda a: jnp.zeros(a.shape, a.dtype), shapes)

        def stretch(carry: tuple[Any, Any], n: Any) -> tuple[tuple[Any, Any], dict[str, Any]]:
            carry = jax.lax.fori_loop(0, n, lambda _, c: step(c[0], c[1], hyper, limits), carry)
            return carry, jax.lax.cond(n > 0, lambda s: evaluate(oracles, hyper, s, axis), skipped, carry[0])

        (state, failed), later = jax.lax.scan(stretch, (state, failed), lengths)
        return moved(state, axis, 0), failed, later

    return start, advance
