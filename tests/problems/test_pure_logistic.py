"""Regularization selection's pure form (problems/pure_logistic.py): its oracles equal the problem's own, full batch
and on a two-set minibatch, under NumPy and JAX, and its gradients are those of its g and f by central differences."""
import numpy as np
import pytest

import problems
from problems.pure_logistic import pure_regularization
from problems.sampling import TwoSetBatch
from problems.shared.errors import ParameterError
from tests.algorithms.test_engines import needs_jax
from tests.oracle_checks import check_per_sample_oracles, fd_directional, fd_gradient

RTOL = 1e-12


@pytest.fixture(scope="module")
def problem():
    return problems.make("regularization_selection", seed=3)


@pytest.fixture(scope="module")
def point(problem):
    rng = np.random.default_rng(0)
    d = problem.dim_y
    return rng.normal(-1.0, 0.5, d), rng.standard_normal(d), rng.standard_normal(d)


def batch_and_index(problem, b=6, seed=1):
    """A two-set minibatch and the pure form's index vector for it (g's indices, then f's)."""
    (batch,) = problem.sample_batches(np.random.default_rng(seed), b, 1)
    return batch, np.concatenate([batch.inner, batch.outer])


def test_every_oracle_is_the_problems_full_batch_and_on_a_minibatch(problem, point):
    pure, (x, y, v) = pure_regularization(problem), point
    for batch, idx in ((None, None), batch_and_index(problem)):
        gx_f, gy_f = pure.on_batch("grad_f", idx, x, y)
        want_x, want_y = problem.grad_f(x, y, batch)
        np.testing.assert_allclose(gx_f, want_x, atol=1e-15)
        np.testing.assert_allclose(gy_f, want_y, rtol=RTOL)
        np.testing.assert_allclose(pure.on_batch("grad_y_g", idx, x, y), problem.grad_y_g(x, y, batch), rtol=RTOL)
        np.testing.assert_allclose(pure.on_batch("hvp_yy_g", idx, x, y, v), problem.hvp_yy_g(x, y, v, batch),
                                   rtol=RTOL)
        np.testing.assert_allclose(pure.on_batch("cross_xy_g", idx, x, y, v), problem.cross_xy_g(x, y, v, batch),
                                   rtol=RTOL)
        np.testing.assert_allclose(pure.on_batch("grad_x_g", idx, x, y), problem.grad_g(x, y, batch)[0], rtol=RTOL)
        assert pure.on_batch("g", idx, x, y)[0] == pytest.approx(problem.g(x, y, batch), rel=RTOL)
    np.testing.assert_allclose(pure.grad_y_g(x, y), problem.grad_y_g(x, y), rtol=RTOL)
    np.testing.assert_allclose(pure.hvp_yy_g(x, y, v), problem.hvp_yy_g(x, y, v), rtol=RTOL)
    np.testing.assert_allclose(pure.grad_y_f(x, y), problem.grad_y_f(x, y), rtol=RTOL)
    start = pure.initial_point(np.zeros)
    for mine, theirs in zip(start, problem.initial_point()):
        np.testing.assert_array_equal(mine, theirs)
    assert pure.index_bounds() == problem.index_bounds()


def test_the_gradients_are_gs_by_central_differences(problem, point):
    """On a minibatch (both levels' rows) and the full batch: ∇y g, ∇x g, H v and J v from g's values and gradients."""
    pure, (x, y, v) = pure_regularization(problem), point
    for idx in (None, batch_and_index(problem)[1]):
        g = lambda x_, y_: float(pure.on_batch("g", idx, x_, y_)[0])  # noqa: E731
        np.testing.assert_allclose(pure.on_batch("grad_y_g", idx, x, y), fd_gradient(lambda z: g(x, z), y),
                                   rtol=1e-6, atol=1e-8)
        np.testing.assert_allclose(pure.on_batch("grad_x_g", idx, x, y), fd_gradient(lambda z: g(z, y), x),
                                   rtol=1e-6, atol=1e-8)
        np.testing.assert_allclose(pure.on_batch("hvp_yy_g", idx, x, y, v),
                                   fd_directional(lambda z: pure.on_batch("grad_y_g", idx, x, z), y, v),
                                   rtol=1e-6, atol=1e-8)
        np.testing.assert_allclose(pure.on_batch("cross_xy_g", idx, x, y, v),
                                   fd_directional(lambda z: pure.on_batch("grad_y_g", idx, z, y), x, v),
                                   rtol=1e-6, atol=1e-8)


def test_a_minibatch_takes_gs_rows_from_its_first_half_and_fs_from_its_second(problem, point):
    pure, (x, y, _) = pure_regularization(problem), point
    batch, idx = batch_and_index(problem)
    swapped = TwoSetBatch(batch.inner, batch.outer[::-1].copy())
    # g's oracles see the training indices only, f's the validation ones only
    np.testing.assert_allclose(pure.on_batch("grad_y_g", idx, x, y), problem.grad_y_g(x, y, swapped), rtol=RTOL)
    assert not np.allclose(pure.on_batch("grad_f", idx, x, y)[1],
                           problem.grad_f(x, y, TwoSetBatch(batch.inner, batch.inner % problem.n_outer))[1])


@needs_jax
def test_under_jax_the_oracles_are_numpys(problem, point):
    import jax
    import jax.numpy as jnp

    pure, (x, y, v) = pure_regularization(problem), point
    idx = batch_and_index(problem)[1]
    with jax.enable_x64(True):
        on = jax.jit(lambda p, i, x_, y_, v_: (p.on_batch("grad_y_g", i, x_, y_), p.on_batch("hvp_yy_g", i, x_, y_, v_),
                                                p.on_batch("g", i, x_, y_), p.on_batch("grad_f", i, x_, y_)[1]))
        got = on(pure, jnp.asarray(idx), jnp.asarray(x), jnp.asarray(y), jnp.asarray(v))
        want = (pure.on_batch("grad_y_g", idx, x, y), pure.on_batch("hvp_yy_g", idx, x, y, v),
                pure.on_batch("g", idx, x, y), pure.on_batch("grad_f", idx, x, y)[1])
    for a, b in zip(got, want):
        np.testing.assert_allclose(np.asarray(a), b, rtol=1e-13)


def test_other_problems_have_no_such_form():
    with pytest.raises(ParameterError, match="^problem: 'hyper_cleaning' has no pure-array form"):
        pure_regularization(problems.make("hyper_cleaning", seed=0))


def test_the_per_sample_oracles_are_the_problems_and_average_to_the_full_batch(problem, point):
    """SABA's memory: one row per sample (every sample of its level, or those of idx), the problem's own rows."""
    x, y, v = point
    check_per_sample_oracles(pure_regularization(problem), problem, x, y, v, np.array([3, 0, 3, 100]),
                             np.array([5, 5, 1]), atol=1e-15)
