"""Coreset selection's pure form (problems/pure_coreset.py): its oracles, projection and start equal the problem's
own, full batch and on a minibatch (an index drawn twice included), under NumPy and JAX; its derivatives are those of
its g by central differences; JAX's minibatches of it average to the full batch."""
import numpy as np
import pytest

import problems
from problems.coreset import top_k
from problems.pure_coreset import _top_k_counts, pure_coreset
from tests.algorithms.test_engines import needs_jax
from tests.oracle_checks import check_form_derivatives

RTOL = 1e-12
NAMES = ("grad_y_g", "grad_x_g", "hvp_yy_g", "cross_xy_g", "grad_f", "grad_x_f", "g")
#: Samples 0, 3, 3 (a repeat), 7 of the first task and 15 of the second (10 samples a task).
MINIBATCH = np.array([0, 3, 3, 7, 15])


@pytest.fixture(scope="module")
def problem():
    return problems.make("coreset_selection", seed=1, pool_size=10, coreset_size=3, n_tasks=2)


@pytest.fixture(scope="module")
def point(problem):
    rng = np.random.default_rng(0)
    return problem.project_x(rng.uniform(0.0, 0.3, problem.dim_x)), 0.1 * rng.standard_normal(problem.dim_y), \
        rng.standard_normal(problem.dim_y)


def theirs(problem, name, x, y, v, batch):
    return {"grad_y_g": lambda: problem.grad_y_g(x, y, batch), "grad_x_g": lambda: problem.grad_g(x, y, batch)[0],
            "hvp_yy_g": lambda: problem.hvp_yy_g(x, y, v, batch),
            "cross_xy_g": lambda: problem.cross_xy_g(x, y, v, batch), "grad_f": lambda: problem.grad_f(x, y, batch)[1],
            "grad_x_f": lambda: problem.grad_f(x, y, batch)[0], "g": lambda: problem.g(x, y, batch)}[name]()


def mine(form, name, idx, x, y, v):
    args = (x, y, v) if name in ("hvp_yy_g", "cross_xy_g") else (x, y)
    out = form.on_batch("grad_f" if name == "grad_x_f" else name, idx, *args)
    return out[0] if name in ("grad_x_f", "g") else out[1] if name == "grad_f" else out


@pytest.mark.parametrize("name", NAMES)
def test_every_oracle_is_the_problems_full_batch_and_on_a_minibatch(problem, point, name):
    form, (x, y, v) = pure_coreset(problem), point
    for idx in (None, MINIBATCH):
        np.testing.assert_allclose(mine(form, name, idx, x, y, v), theirs(problem, name, x, y, v, idx), rtol=RTOL,
                                   atol=1e-15)


def test_the_start_the_projection_and_the_top_k_gradient_are_the_problems(problem, point):
    form, rng = pure_coreset(problem), np.random.default_rng(5)
    for a, b in zip(form.initial_point(np.zeros), problem.initial_point()):
        np.testing.assert_array_equal(a, b)
    for z in (rng.normal(0.0, 0.3, problem.dim_x), rng.normal(0.0, 3.0, problem.dim_x), np.zeros(problem.dim_x),
              np.full(problem.dim_x, 0.1), point[0]):  # spread, far, ties everywhere, already on the simplices
        np.testing.assert_array_equal(form.project_x(z), problem.project_x(z))
        np.testing.assert_array_equal(form.regularizer_grad(z), problem._regularizer_grad(z))
    assert form.regularizer_grad(point[0]).sum() == pytest.approx(-problem.coreset_size * problem.n_tasks)


def test_the_top_k_counts_are_the_problems_with_ties_too():
    """The sort-free top-K (k rounds of a maximum, ties to the lower index) against `top_k`'s stable argsort on 400
    random matrices, half of them of small integers (ties at the K-th value everywhere)."""
    rng = np.random.default_rng(7)
    for case in range(400):
        rows, n = int(rng.integers(1, 6)), int(rng.integers(2, 12))
        k = int(rng.integers(1, n))
        P = rng.integers(0, 4, size=(rows, n)).astype(float) if case % 2 else rng.standard_normal((rows, n))
        want = np.bincount(top_k(P, k).ravel(), minlength=n)
        np.testing.assert_array_equal(_top_k_counts(P, k, np), want)


def test_the_derivatives_are_gs_by_central_differences(problem, point):
    form, (x, y, v) = pure_coreset(problem), point
    rng = np.random.default_rng(2)
    for idx in (None, MINIBATCH):
        check_form_derivatives(form, idx, x, y, v, rng)


@needs_jax
def test_under_jax_the_oracles_and_the_projection_are_numpys(problem, point):
    import jax
    import jax.numpy as jnp

    form, (x, y, v) = pure_coreset(problem), point
    z = np.random.default_rng(6).normal(0.0, 0.3, problem.dim_x)
    with jax.enable_x64(True):
        compiled = jax.jit(lambda f, i, x_, y_, v_, z_: ([mine(f, n, i, x_, y_, v_) for n in NAMES],
                                                         f.project_x(z_)))
        got, projected = compiled(form, jnp.asarray(MINIBATCH), jnp.asarray(x), jnp.asarray(y), jnp.asarray(v),
                                  jnp.asarray(z))
    for name, a in zip(NAMES, got):
        np.testing.assert_allclose(np.asarray(a), mine(form, name, MINIBATCH, x, y, v), rtol=1e-13, atol=1e-16)
    np.testing.assert_allclose(np.asarray(projected), problem.project_x(z), rtol=1e-15, atol=1e-16)


@needs_jax
def test_jaxs_minibatches_of_it_average_to_the_full_batch(problem, point):
    """One index set over all N samples, scaled N/B: the mean of 16,000 of JAX's minibatch gradients is the full
    batch's (a missing N/B scale, or indices of one task only, moves it by far more than the 5% allowed)."""
    import jax

    from algorithms import explicit
    from algorithms.explicit.minibatch import at, chunks, grad_f_at
    from problems.pure import as_arrays

    form, (x, y, _) = as_arrays(pure_coreset(problem), jax.numpy.asarray), point
    config = explicit.definition("soba").configs([{"batch_size": 4}])[0]
    with jax.enable_x64(True):
        _, drawn = chunks(form, jax.random.PRNGKey(3), config, 16000, jax.numpy)
        mean = jax.vmap(lambda i: (at(form, "grad_y_g", i, x, y), grad_f_at(form, i, x, y)[1]))(drawn)
    assert np.asarray(drawn).min() >= 0 and np.asarray(drawn).max() == problem.n_samples - 1
    for got, want in zip(mean, (problem.grad_y_g(x, y), problem.grad_y_f(x, y))):
        assert np.linalg.norm(np.asarray(got).mean(0) - want) < 0.05 * np.linalg.norm(want)
