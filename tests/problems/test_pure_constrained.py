"""The constrained quadratic's pure form (problems/pure_constrained.py): its oracles and start equal the problem's
exact (full-batch) ones, under NumPy and JAX; its derivatives are those of its g by central differences; its records
carry the problem's constraint violation and ground truth, which the JAX engine leaves to the host."""
import numpy as np
import pytest

import problems
from problems.pure_constrained import pure_constrained
from tests.algorithms.test_engines import needs_jax
from tests.oracle_checks import fd_directional, fd_gradient

NAMES = ("grad_y_g", "grad_x_g", "hvp_yy_g", "cross_xy_g", "grad_x_f", "grad_y_f", "g")


@pytest.fixture(scope="module", params=["linear", "box"])
def problem(request):
    return problems.make("constrained_quadratic", seed=2, d=7, p=3, constraints=request.param)


@pytest.fixture(scope="module")
def point(problem):
    rng = np.random.default_rng(0)
    return rng.standard_normal(7), rng.standard_normal(7), rng.standard_normal(7)


def theirs(problem, name, x, y, v):
    return {"grad_y_g": lambda: problem.grad_y_g(x, y), "grad_x_g": lambda: problem.grad_g(x, y)[0],
            "hvp_yy_g": lambda: problem.hvp_yy_g(x, y, v), "cross_xy_g": lambda: problem.cross_xy_g(x, y, v),
            "grad_x_f": lambda: problem.grad_f(x, y)[0], "grad_y_f": lambda: problem.grad_y_f(x, y),
            "g": lambda: np.array([problem.g(x, y)])}[name]()


def mine(form, name, x, y, v):
    return getattr(form, name)(*((x, y, v) if name in ("hvp_yy_g", "cross_xy_g") else (x, y)))


@pytest.mark.parametrize("name", NAMES)
def test_every_oracle_is_the_problems_exact_one(problem, point, name):
    form, (x, y, v) = pure_constrained(problem), point
    np.testing.assert_allclose(mine(form, name, x, y, v), theirs(problem, name, x, y, v), rtol=1e-13, atol=1e-15)
    for a, b in zip(form.initial_point(np.zeros), problem.initial_point()):
        np.testing.assert_array_equal(a, b)


def test_the_derivatives_are_gs_and_fs_by_central_differences(problem, point):
    form, (x, y, v) = pure_constrained(problem), point
    g = lambda x_, y_: float(form.g(x_, y_)[0])  # noqa: E731
    np.testing.assert_allclose(form.grad_y_g(x, y), fd_gradient(lambda z: g(x, z), y), rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(form.grad_x_g(x, y), fd_gradient(lambda z: g(z, y), x), rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(form.hvp_yy_g(x, y, v), fd_directional(lambda z: form.grad_y_g(x, z), y, v),
                               rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(form.cross_xy_g(x, y, v), fd_gradient(lambda z: form.grad_y_g(z, y) @ v, x),
                               rtol=1e-6, atol=1e-8)
    f = lambda x_, y_: problem.f(x_, y_)  # noqa: E731  (the form has no f: the algorithms take its gradients)
    np.testing.assert_allclose(form.grad_x_f(x, y), fd_gradient(lambda z: f(z, y), x), rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(form.grad_y_f(x, y), fd_gradient(lambda z: f(x, z), y), rtol=1e-6, atol=1e-8)


@needs_jax
def test_under_jax_the_oracles_are_numpys(problem, point):
    import jax
    import jax.numpy as jnp

    form, (x, y, v) = pure_constrained(problem), point
    with jax.enable_x64(True):
        got = jax.jit(lambda f, *a: [mine(f, n, *a) for n in NAMES])(form, *(jnp.asarray(a) for a in point))
    for name, a in zip(NAMES, got):
        np.testing.assert_allclose(np.asarray(a), mine(form, name, x, y, v), rtol=1e-13, atol=1e-15)


@needs_jax
def test_a_jax_run_records_the_constraint_violation_and_the_constrained_ground_truth(problem):
    from algorithms import explicit

    configs = [{"rho": 0.1, "gamma": 0.05}, {"rho": 0.2, "gamma": 0.02}]
    jax_run = explicit.run("soba", problem, configs, 30, 4, engine="jax")
    numpy_run = explicit.run("soba", problem, configs, 30, 4, engine="stacked")
    for (_, a), (_, b) in zip(jax_run.records(), numpy_run.records()):
        assert {"F", "grad_F_sq", "y_err_sq", "constraint_violation"} <= set(a) and set(a) - {"time_mode"} == \
            set(b) - {"time_mode"}
        for name in ("F", "grad_F_sq", "y_err_sq", "constraint_violation"):
            assert a[name] == pytest.approx(b[name], rel=1e-10, abs=1e-12), name
    if problem.constraints.A.any():  # the linear rows: the unconstrained iterates leave the set, the host measured it
        assert dict(jax_run.records())[0]["constraint_violation"] > 1e-3
