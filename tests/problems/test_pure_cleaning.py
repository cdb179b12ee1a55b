"""Hyper-cleaning's pure form (problems/pure_cleaning.py): its oracles equal the problem's own, full batch and on a
two-set minibatch (a training index drawn twice included), under NumPy and JAX, and its derivatives are those of its
g by central differences."""
import numpy as np
import pytest

import problems
from problems.pure_cleaning import pure_cleaning
from problems.sampling import TwoSetBatch
from tests.algorithms.test_engines import needs_jax
from tests.oracle_checks import check_form_derivatives

RTOL = 1e-12
NAMES = ("grad_y_g", "grad_x_g", "hvp_yy_g", "cross_xy_g", "grad_f", "g")


@pytest.fixture(scope="module")
def problem():
    return problems.make("hyper_cleaning", seed=3)


@pytest.fixture(scope="module")
def point(problem):
    rng = np.random.default_rng(0)
    return rng.normal(-1.0, 0.5, problem.dim_x), 0.1 * rng.standard_normal(problem.dim_y), \
        rng.standard_normal(problem.dim_y)


def minibatch(problem):
    """Training rows 5, 17, 5 (a repeat) and 900; validation rows 0, 3, 3, 40: the batch and the index vector."""
    inner, outer = np.array([5, 17, 5, 900]), np.array([0, 3, 3, 40])
    return TwoSetBatch(inner, outer), np.concatenate([inner, outer])


def theirs(problem, name, x, y, v, batch):
    return {"grad_y_g": lambda: problem.grad_y_g(x, y, batch), "grad_x_g": lambda: problem.grad_g(x, y, batch)[0],
            "hvp_yy_g": lambda: problem.hvp_yy_g(x, y, v, batch), "cross_xy_g": lambda: problem.cross_xy_g(x, y, v, batch),
            "grad_f": lambda: problem.grad_f(x, y, batch)[1], "g": lambda: problem.g(x, y, batch)}[name]()


def mine(form, name, idx, x, y, v):
    args = (x, y, v) if name in ("hvp_yy_g", "cross_xy_g") else (x, y)
    out = form.on_batch(name, idx, *args)
    return out[1] if name == "grad_f" else out[0] if name == "g" else out


@pytest.mark.parametrize("name", NAMES)
def test_every_oracle_is_the_problems_full_batch_and_on_a_minibatch(problem, point, name):
    form, (x, y, v) = pure_cleaning(problem), point
    for batch, idx in ((None, None), minibatch(problem)):
        np.testing.assert_allclose(mine(form, name, idx, x, y, v), theirs(problem, name, x, y, v, batch), rtol=RTOL,
                                   atol=1e-15)
    start = form.initial_point(np.zeros)
    for a, b in zip(start, problem.initial_point()):
        np.testing.assert_array_equal(a, b)


def test_the_derivatives_are_gs_by_central_differences(problem, point):
    form, (x, y, v) = pure_cleaning(problem), point
    rng = np.random.default_rng(2)
    for idx in (None, minibatch(problem)[1]):
        check_form_derivatives(form, idx, x, y, v, rng)


@needs_jax
def test_under_jax_the_oracles_are_numpys(problem, point):
    import jax
    import jax.numpy as jnp

    form, (x, y, v) = pure_cleaning(problem), point
    idx = minibatch(problem)[1]
    with jax.enable_x64(True):
        compiled = jax.jit(lambda f, i, x_, y_, v_: [mine(f, n, i, x_, y_, v_) for n in NAMES])
        got = compiled(form, jnp.asarray(idx), jnp.asarray(x), jnp.asarray(y), jnp.asarray(v))
    for name, a in zip(NAMES, got):
        np.testing.assert_allclose(np.asarray(a), mine(form, name, idx, x, y, v), rtol=1e-13, atol=1e-16)



SAMPLE_NAMES = ("grad_y_g_samples", "hvp_yy_g_samples", "cross_xy_g_samples", "grad_f_samples")


def per_sample(source, name, x, y, v, idx):
    args = (x, y, v, idx) if name in ("hvp_yy_g_samples", "cross_xy_g_samples") else (x, y, idx)
    out = getattr(source, name)(*args)
    return out[1] if name == "grad_f_samples" else out


@pytest.mark.parametrize("name", SAMPLE_NAMES)
def test_the_per_sample_oracles_are_the_problems_and_average_to_the_full_batch(problem, point, name):
    """SABA's memory rows: the problem's own rows at a minibatch with a repeat and at every sample, and their mean
    is the full-batch oracle (the definition of a finite sum's terms)."""
    form, (x, y, v) = pure_cleaning(problem), point
    n_g, n_f = form.sample_counts()
    assert (n_g, n_f) == problem.sample_counts()
    every = np.arange(n_f if name == "grad_f_samples" else n_g)
    for idx, theirs_idx in ((np.array([5, 17, 5, 40]), np.array([5, 17, 5, 40])), (None, every)):
        np.testing.assert_allclose(per_sample(form, name, x, y, v, idx), per_sample(problem, name, x, y, v, theirs_idx),
                                   rtol=RTOL, atol=1e-15)
    full = {"grad_y_g_samples": problem.grad_y_g(x, y), "hvp_yy_g_samples": problem.hvp_yy_g(x, y, v),
            "cross_xy_g_samples": problem.cross_xy_g(x, y, v), "grad_f_samples": problem.grad_y_f(x, y)}[name]
    np.testing.assert_allclose(per_sample(form, name, x, y, v, None).mean(0), full, rtol=1e-10, atol=1e-14)
    if name == "grad_f_samples":
        assert not np.any(form.grad_f_samples(x, y, None)[0])  # f does not depend on x
