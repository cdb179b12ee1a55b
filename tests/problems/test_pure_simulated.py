"""The simulated benchmark quadratic's pure form (problems/pure_simulated.py): its oracles equal the problem's own,
full batch (the dense means) and on a two-set minibatch (rows, a repeat included), float32 samples too, under NumPy
and JAX; its gradients are its g's by central differences; `data_form` picks each data problem's form."""
import numpy as np
import pytest

import problems
from problems.pure_data import data_form
from problems.pure_simulated import pure_simulated
from problems.sampling import TwoSetBatch
from problems.shared.errors import ParameterError
from tests.algorithms.test_engines import needs_jax
from tests.oracle_checks import check_per_sample_oracles, fd_directional, fd_gradient

RTOL = 1e-12
NAMES = ("grad_y_g", "grad_x_g", "hvp_yy_g", "cross_xy_g", "grad_f", "g")
PARAMS = {"dim_x": 6, "dim_y": 5, "n_samples_inner": 40, "n_samples_outer": 30}


@pytest.fixture(scope="module", params=["float64", "float32"])
def problem(request):
    return problems.make("simulated", seed=3, sample_dtype=request.param, **PARAMS)


def point():
    rng = np.random.default_rng(0)
    return rng.standard_normal(6), rng.standard_normal(5), rng.standard_normal(5)


def minibatch():
    inner, outer = np.array([5, 17, 5, 39]), np.array([0, 3, 3, 29])
    return TwoSetBatch(inner, outer), np.concatenate([inner, outer])


def theirs(p, name, x, y, v, batch):
    return {"grad_y_g": lambda: p.grad_y_g(x, y, batch), "grad_x_g": lambda: p.grad_g(x, y, batch)[0],
            "hvp_yy_g": lambda: p.hvp_yy_g(x, y, v, batch), "cross_xy_g": lambda: p.cross_xy_g(x, y, v, batch),
            "grad_f": lambda: np.concatenate(p.grad_f(x, y, batch)), "g": lambda: p.g(x, y, batch)}[name]()


def mine(form, name, idx, x, y, v, concatenate=np.concatenate):
    out = form.on_batch(name, idx, *((x, y, v) if name in ("hvp_yy_g", "cross_xy_g") else (x, y)))
    return concatenate(out) if name == "grad_f" else out[0] if name == "g" else out


@pytest.mark.parametrize("name", NAMES)
def test_every_oracle_is_the_problems_full_batch_and_on_a_minibatch(problem, name):
    form, (x, y, v) = pure_simulated(problem), point()
    for batch, idx in ((None, None), minibatch()):
        np.testing.assert_allclose(mine(form, name, idx, x, y, v), theirs(problem, name, x, y, v, batch), rtol=RTOL,
                                   atol=1e-14)
    for a, b in zip(form.initial_point(np.zeros), problem.initial_point()):
        np.testing.assert_array_equal(a, b)
    assert form.index_bounds() == problem.index_bounds()


def test_the_gradients_are_gs_by_central_differences(problem):
    form, (x, y, v) = pure_simulated(problem), point()
    for idx in (None, minibatch()[1]):
        g = lambda x_, y_: float(form.on_batch("g", idx, x_, y_)[0])  # noqa: E731
        grad_y = lambda x_, y_: form.on_batch("grad_y_g", idx, x_, y_)  # noqa: E731
        np.testing.assert_allclose(grad_y(x, y), fd_gradient(lambda z: g(x, z), y), rtol=1e-6, atol=1e-8)
        np.testing.assert_allclose(form.on_batch("grad_x_g", idx, x, y), fd_gradient(lambda z: g(z, y), x), rtol=1e-6,
                                   atol=1e-8)
        np.testing.assert_allclose(form.on_batch("hvp_yy_g", idx, x, y, v), fd_directional(lambda z: grad_y(x, z), y, v),
                                   rtol=1e-6, atol=1e-8)
        u = np.random.default_rng(1).standard_normal(6)  # J v against the x-derivative of ⟨∇y g, v⟩ along u
        np.testing.assert_allclose(form.on_batch("cross_xy_g", idx, x, y, v) @ u,
                                   fd_directional(lambda z: np.array([grad_y(z, y) @ v]), x, u)[0], rtol=1e-6)


@needs_jax
def test_under_jax_the_oracles_are_numpys(problem):
    import jax
    import jax.numpy as jnp

    from problems.pure import as_arrays

    form, (x, y, v), idx = pure_simulated(problem), point(), minibatch()[1]
    with jax.enable_x64(True):
        compiled = jax.jit(lambda f, i, x_, y_, v_: [mine(f, n, i, x_, y_, v_, jnp.concatenate) for n in NAMES])
        got = compiled(as_arrays(form, jnp.asarray), jnp.asarray(idx), jnp.asarray(x), jnp.asarray(y), jnp.asarray(v))
    for name, a in zip(NAMES, got):
        np.testing.assert_allclose(np.asarray(a), mine(form, name, idx, x, y, v), rtol=1e-13, atol=1e-15)


def test_data_form_picks_each_problems_form_and_names_the_ones_there_are():
    assert type(data_form(problems.make("simulated", seed=0, **PARAMS))).__name__ == "PureSimulated"
    assert type(data_form(problems.make("hyper_cleaning", seed=0))).__name__ == "PureCleaning"
    assert type(data_form(problems.make("regularization_selection", seed=0))).__name__ == "PureRegularization"
    assert type(data_form(problems.make("coreset_toy", seed=0))).__name__ == "PureCoresetToy"
    assert type(data_form(problems.make("coreset_selection", seed=0, pool_size=4, coreset_size=2))).__name__ == \
        "PureCoreset"
    assert type(data_form(problems.make("constrained_quadratic", seed=0, d=4, p=2))).__name__ == "PureConstrained"
    with pytest.raises(ParameterError, match="^problem: 'drifting_quadratic' has no pure-array form .*"
                                             "'coreset_selection', 'coreset_toy', 'constrained_quadratic'$"):
        data_form(problems.make("drifting_quadratic", seed=0, dim_x=2, dim_y=2, T=5))


def test_the_per_sample_oracles_are_the_problems_and_average_to_the_full_batch(problem):
    """SABA's memory: one row per sample (every sample of its level, or those of idx), the problem's own rows."""
    check_per_sample_oracles(pure_simulated(problem), problem, *point(), np.array([3, 0, 3, 39]), np.array([5, 5, 29]),
                             atol=1e-14)
