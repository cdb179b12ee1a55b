"""The coreset toy's pure form (problems/pure_coreset_toy.py): its oracles equal the problem's own and its gradients
are its g's and f's by central differences."""
import numpy as np
import pytest

import problems
from problems.pure_coreset_toy import pure_coreset_toy
from tests.oracle_checks import fd_directional, fd_gradient


@pytest.fixture(scope="module", params=["code", "paper"])
def problem(request):
    return problems.make("coreset_toy", seed=0, points=request.param)


def test_the_oracles_are_the_problems_and_gs_derivatives(problem):
    form, rng = pure_coreset_toy(problem), np.random.default_rng(0)
    x, y, v = rng.standard_normal(problem.dim_x), rng.standard_normal(2), rng.standard_normal(2)
    pairs = [(form.grad_y_g(x, y), problem.grad_y_g(x, y)), (form.grad_x_g(x, y), problem.grad_g(x, y)[0]),
             (form.hvp_yy_g(x, y, v), problem.hvp_yy_g(x, y, v)), (form.cross_xy_g(x, y, v), problem.cross_xy_g(x, y, v)),
             (form.grad_y_f(x, y), problem.grad_f(x, y)[1]), (form.grad_x_f(x, y), problem.grad_f(x, y)[0]),
             (form.g(x, y), [problem.g(x, y)])]
    for mine, theirs in pairs:
        np.testing.assert_allclose(mine, theirs, rtol=1e-13, atol=1e-15)
    g = lambda x_, y_: float(form.g(x_, y_)[0])  # noqa: E731
    np.testing.assert_allclose(form.grad_y_g(x, y), fd_gradient(lambda z: g(x, z), y), rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(form.grad_x_g(x, y), fd_gradient(lambda z: g(z, y), x), rtol=1e-6, atol=1e-8)
    u = rng.standard_normal(problem.dim_x)
    np.testing.assert_allclose(form.cross_xy_g(x, y, v) @ u,
                               fd_directional(lambda z: np.array([form.grad_y_g(z, y) @ v]), x, u)[0], rtol=1e-6)
    for mine, theirs in zip(form.initial_point(np.zeros), problem.initial_point()):
        np.testing.assert_array_equal(mine, theirs)
