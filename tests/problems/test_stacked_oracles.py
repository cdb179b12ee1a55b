"""Stacked oracles (row k: one run's point and minibatch) equal the single oracles row by row (rtol 1e-12), for the
families with stacked products (quadratic, simulated, regularization_selection) and the loop fallback."""
import numpy as np
import pytest

import problems

CASES = {
    "quadratic": dict(seed=2, dim_x=6, dim_y=5),
    "quadratic_sum": dict(seed=2, dim_x=6, dim_y=5, n_samples=30, rank=2),
    "simulated": dict(seed=2, dim_x=6, dim_y=5, n_samples_inner=40, n_samples_outer=30),
    "regularization_selection": dict(seed=0, dataset="breast_cancer"),
    "minimax_toy": dict(seed=0),
}
K = 4


def make(name):
    return problems.make("quadratic" if name == "quadratic_sum" else name, **CASES[name])


def points(p, seed=0):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal((K, p.dim_x)) * 0.5, rng.standard_normal((K, p.dim_y)) * 0.5,
            rng.standard_normal((K, p.dim_y)))


def batches(p, minibatch):
    if not minibatch:
        return None
    rng = np.random.default_rng(5)
    return tuple(p.sample_batch(rng, 7) for _ in range(K))


def close(a, b):
    np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("minibatch", [False, True])
@pytest.mark.parametrize("name", list(CASES))
def test_stacked_oracles_equal_the_single_ones_row_by_row(name, minibatch):
    p = make(name)
    if minibatch and not p.stochastic:
        minibatch = False  # a deterministic problem has only the full batch
    X, Y, V = points(p)
    B = batches(p, minibatch)
    rows = B if B is not None else (None,) * K
    close(p.grad_y_g_rows(X, Y, B), [p.grad_y_g(x, y, b) for x, y, b in zip(X, Y, rows)])
    close(p.grad_y_f_rows(X, Y, B), [p.grad_y_f(x, y, b) for x, y, b in zip(X, Y, rows)])
    close(p.hvp_yy_g_rows(X, Y, V, B), [p.hvp_yy_g(x, y, v, b) for x, y, v, b in zip(X, Y, V, rows)])
    close(p.cross_xy_g_rows(X, Y, V, B), [p.cross_xy_g(x, y, v, b) for x, y, v, b in zip(X, Y, V, rows)])
    for stacked, single in ((p.grad_f_rows, p.grad_f), (p.grad_g_rows, p.grad_g)):
        gx, gy = stacked(X, Y, B)
        want = [single(x, y, b) for x, y, b in zip(X, Y, rows)]
        close(gx, [w[0] for w in want])
        close(gy, [w[1] for w in want])
    close(p.f_rows(X, Y, B), [p.f(x, y, b) for x, y, b in zip(X, Y, rows)])


@pytest.mark.parametrize("name", ["quadratic", "simulated", "regularization_selection"])
def test_stacked_ground_truth_equals_the_single_one(name):
    p = make(name)
    X, Y, _ = points(p, seed=1)
    close(p.y_star_rows(X), [p.y_star(x) for x in X])
    close(p.grad_F_rows(X), [p.grad_F(x) for x in X])
    got = p.metrics_rows(X, Y)
    assert got == [p.metrics(x, y) for x, y in zip(X, Y)]


def test_per_sample_oracles_stack_with_a_shared_or_a_per_row_index():
    p = make("quadratic_sum")
    X, Y, V = points(p)
    idx = np.random.default_rng(3).integers(0, 30, size=(K, 6))
    gx, gy = p.grad_f_samples_rows(X, Y, idx)
    close(gy[2], p.grad_f_samples(X[2], Y[2], idx[2])[1])
    close(p.hvp_yy_g_samples_rows(X, Y, V, idx[0])[3], p.hvp_yy_g_samples(X[3], Y[3], V[3], idx[0]))
    close(p.cross_xy_g_samples_rows(X, Y, V, idx)[1], p.cross_xy_g_samples(X[1], Y[1], V[1], idx[1]))
    assert p.grad_y_g_samples_rows(X, Y, idx).shape == (K, 6, p.dim_y)


@pytest.mark.parametrize("name", ["simulated", "regularization_selection"])
def test_stacked_minibatch_oracles_are_batched_products_not_the_loop(name, monkeypatch):
    """The families' stacked minibatch and per-sample oracles never call the single ones (the fallback loop)."""
    p = make(name)
    X, Y, V = points(p)
    B = batches(p, True)
    idx = np.random.default_rng(4).integers(0, min(p.sample_counts()), size=(K, 6))
    want = {"g": p.g_rows(X, Y, B), "hvp": p.hvp_yy_g_rows(X, Y, V, B),
            "samples": p.grad_y_g_samples_rows(X, Y, idx)}
    for single in ("f", "g", "grad_f", "grad_g", "grad_y_f", "grad_y_g", "hvp_yy_g", "cross_xy_g", "grad_f_samples",
                   "grad_y_g_samples", "hvp_yy_g_samples", "cross_xy_g_samples"):
        monkeypatch.setattr(p, single, None)  # a call would raise
    for stacked in (p.grad_f_rows, p.grad_g_rows, p.grad_y_f_rows, p.grad_y_g_rows):
        stacked(X, Y, B)
    p.cross_xy_g_rows(X, Y, V, B)
    p.f_rows(X, Y, B)
    close(p.g_rows(X, Y, B), want["g"])
    close(p.hvp_yy_g_rows(X, Y, V, B), want["hvp"])
    close(p.grad_y_g_samples_rows(X, Y, idx), want["samples"])
    p.grad_f_samples_rows(X, Y, idx[0])
    p.hvp_yy_g_samples_rows(X, Y, V, idx)
    p.cross_xy_g_samples_rows(X, Y, V, idx)


@pytest.mark.parametrize("shared", [False, True])
@pytest.mark.parametrize("name", ["quadratic_sum", "simulated", "regularization_selection"])
def test_stacked_per_sample_oracles_equal_the_single_ones(name, shared):
    p = make(name)
    X, Y, V = points(p)
    idx = np.random.default_rng(3).integers(0, min(p.sample_counts()), size=(K, 6))
    idx = idx[0] if shared else idx
    rows = [idx] * K if shared else idx
    gx, gy = p.grad_f_samples_rows(X, Y, idx)
    want = [p.grad_f_samples(x, y, i) for x, y, i in zip(X, Y, rows)]
    close(gx, [w[0] for w in want])
    close(gy, [w[1] for w in want])
    close(p.grad_y_g_samples_rows(X, Y, idx), [p.grad_y_g_samples(x, y, i) for x, y, i in zip(X, Y, rows)])
    close(p.hvp_yy_g_samples_rows(X, Y, V, idx), [p.hvp_yy_g_samples(x, y, v, i) for x, y, v, i in zip(X, Y, V, rows)])
    close(p.cross_xy_g_samples_rows(X, Y, V, idx),
          [p.cross_xy_g_samples(x, y, v, i) for x, y, v, i in zip(X, Y, V, rows)])


def test_the_float32_simulated_instance_stacks_in_float64():
    p = problems.make("simulated", **CASES["simulated"], sample_dtype="float32")
    X, Y, V = points(p)
    B = batches(p, True)
    got = p.grad_y_g_rows(X, Y, B)
    assert got.dtype == np.float64
    close(got, [p.grad_y_g(x, y, b) for x, y, b in zip(X, Y, B)])
    close(p.f_rows(X, Y, B), [p.f(x, y, b) for x, y, b in zip(X, Y, B)])


def test_a_tile_repeats_its_vector_per_row_and_is_kept_for_its_row_count():
    from problems.rowwise import tiled
    cache, v = {}, np.array([1.5, -2.0, 0.25])
    t = tiled(cache, v, 4)
    np.testing.assert_array_equal(t, np.broadcast_to(v, (4, 3)))
    assert not t.flags.writeable and tiled(cache, v, 4) is t  # kept: built once per row count
    t2 = tiled(cache, v, 2)
    assert t2.shape == (2, 3) and t2 is not t
    np.testing.assert_array_equal(t2, np.broadcast_to(v, (2, 3)))


@pytest.mark.parametrize("rows", [1, 3, 7])
def test_quadratic_stacked_oracles_with_tiles_equal_broadcast_sums_exactly(rows):
    p = problems.make("quadratic", seed=3, dim_x=4, dim_y=3)
    rng = np.random.default_rng(rows)
    X, Y = rng.standard_normal((rows, 4)), rng.standard_normal((rows, 3))
    np.testing.assert_array_equal(p.grad_y_g_rows(X, Y), Y @ p.A.T - X @ p.C.T + p.a)
    np.testing.assert_array_equal(p.grad_y_f_rows(X, Y), (Y - p.e) @ p.P.T)
    np.testing.assert_array_equal(p.grad_f_rows(X, Y)[0], p.m * X + p.c)
