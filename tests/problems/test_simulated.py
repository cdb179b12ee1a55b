"""Simulated (benchmark_bilevel quadratic): oracles, minibatch means, generator, exact ground truth."""
import numpy as np
import pytest

import problems
from problems.sampling import TwoSetBatch
from problems.shared.errors import ParameterError
from tests.oracle_checks import check_grad_F_fd, check_minibatch_mean, check_oracles

SMALL = {"dim_x": 6, "dim_y": 9, "n_samples_inner": 24, "n_samples_outer": 17}


@pytest.mark.parametrize("params", [SMALL, {}])
def test_oracles_match_finite_differences(params):
    p = problems.make("simulated", seed=3, **params)
    rng = np.random.default_rng(0)
    for _ in range(2):
        x, y = rng.standard_normal(p.dim_x), rng.standard_normal(p.dim_y)
        check_oracles(p, x, y, rng)
        check_oracles(p, x, y, rng, batch=p.sample_batch(rng, 5))


def test_minibatch_mean_over_a_full_pass_equals_full_batch():
    p = problems.make("simulated", seed=1, **SMALL)
    rng = np.random.default_rng(1)
    x, y = rng.standard_normal(6), rng.standard_normal(9)
    check_minibatch_mean(p, x, y, rng, full_pass=p.full_pass(), single=p.single)
    # Dense blocks of a single sample are rank one (the benchmark's per-sample structure).
    one = p.single(4)
    assert np.linalg.matrix_rank(p.hessian_yy_g(x, y, one), tol=1e-12) == 1
    assert np.linalg.matrix_rank(p.jacobian_xy_g(x, y, one), tol=1e-12) == 1
    np.testing.assert_allclose(p.hessian_yy_g(x, y, p.full_pass()), p.hessian_yy_g(x, y), atol=1e-12)
    np.testing.assert_allclose(p.jacobian_xy_g(x, y, p.full_pass()), p.jacobian_xy_g(x, y), atol=1e-12)


def test_ground_truth_matches_independent_dense_solve():
    p = problems.make("simulated", seed=5, **SMALL)
    g, f = p.inner, p.outer
    rng = np.random.default_rng(5)
    x = rng.standard_normal(6)
    # Independent: rebuild every mean block from the per-sample vectors with explicit outer products.
    Hg = np.einsum("ni,nj->ij", g.a, g.a) / 24
    Cg = np.einsum("ni,nj->ij", g.c, g.e) / 24
    Hf_yy, Hf_xx = np.einsum("ni,nj->ij", f.a, f.a) / 17, np.einsum("ni,nj->ij", f.b, f.b) / 17
    Cf = np.einsum("ni,nj->ij", f.c, f.e) / 17
    lg, lf, mf = g.l.sum(0) / 24, f.l.sum(0) / 17, f.m.sum(0) / 17
    ys = np.linalg.inv(Hg) @ (-Cg.T @ x - lg)
    jac = -np.linalg.inv(Hg) @ Cg.T  # dy*/dx
    gy_f = Hf_yy @ ys + Cf.T @ x + lf
    grad = Hf_xx @ x + Cf @ ys + mf + jac.T @ gy_f
    F = 0.5 * ys @ Hf_yy @ ys + 0.5 * x @ Hf_xx @ x + x @ Cf @ ys + lf @ ys + mf @ x
    np.testing.assert_allclose(p.y_star(x), ys, rtol=0, atol=1e-10 * max(1, np.abs(ys).max()))
    np.testing.assert_allclose(p.grad_F(x), grad, rtol=0, atol=1e-10 * max(1, np.abs(grad).max()))
    assert p.F(x) == pytest.approx(F, rel=1e-10)
    hess = Hf_xx + Cf @ jac + jac.T @ Cf.T + jac.T @ Hf_yy @ jac
    np.testing.assert_allclose(p.hessian_F(), hess, atol=1e-10)
    check_grad_F_fd(p, x)
    xo = p.x_opt()
    assert np.linalg.norm(p.grad_F(xo)) < 1e-10
    assert np.linalg.eigvalsh(hess)[0] > 0  # the generator only keeps convex value functions


def test_default_instance_is_the_benchmark_configuration():
    p = problems.make("simulated", seed=0)
    assert (p.dim_x, p.dim_y, p.n_inner, p.n_outer) == (100, 100, 1024, 1024)
    x0, y0 = p.initial_point()
    assert np.all(x0 == -2.0) and np.all(y0 == 0.0)
    assert np.linalg.eigvalsh(p.hessian_F())[0] >= 1e-12
    # ∇²F is constant: differences of ∇F along unit vectors reproduce it.
    base = p.grad_F(np.zeros(100))
    cols = np.column_stack([p.grad_F(e) - base for e in np.eye(100)[:5]])
    np.testing.assert_allclose(cols, p.hessian_F()[:, :5], atol=1e-11)


def test_generator_spectra_follow_the_benchmark():
    # With many samples the empirical means approach the population blocks of the generator.
    p = problems.make("simulated", seed=2, dim_x=6, dim_y=8, n_samples_inner=200_000, n_samples_outer=8,
                      mu=0.1, L_g_yy=1.0, L_g_xx=2.0, cross_g=0.5)
    eig = np.linalg.eigvalsh(p.inner.H_yy)
    np.testing.assert_allclose(eig, np.geomspace(0.1, 1.0, 8), rtol=0.03)
    eig_x = np.linalg.eigvalsh(p.inner.H_xx)
    assert abs(eig_x[0]) < 1e-12  # one exact zero eigenvalue in the outer block
    np.testing.assert_allclose(eig_x[1:], np.geomspace(0.1, 2.0, 5), rtol=0.03)
    sv = np.linalg.svd(p.inner.C, compute_uv=False)
    np.testing.assert_allclose(np.sort(sv), np.geomspace(0.1, 0.5, 6), rtol=0.05, atol=0.005)
    assert abs(p.inner.l_mean).max() < 0.02 and abs(p.inner.m_mean).max() < 0.02


def test_counts_samples_per_level():
    p = problems.make("simulated", seed=0, **SMALL)
    view = problems.counted(p)
    x, y = p.initial_point()
    b = view.sample_batch(np.random.default_rng(0), 4)
    assert isinstance(b, TwoSetBatch) and b.inner.max() < 24 and b.outer.max() < 17
    view.grad_f(x, y)
    view.grad_g(x, y)
    view.f(x, y, b)
    view.hvp_yy_g(x, y, y, b)
    assert view.counter.samples["grad_f"] == 17 and view.counter.samples["grad_g"] == 24
    assert view.counter.samples["f"] == 4 and view.counter.samples["hvp"] == 4
    with pytest.raises(TypeError, match="sample_batch"):
        p.grad_g(x, y, np.arange(3))


def test_seeded_instances_are_bit_identical_and_seed_dependent():
    a, b, c = (problems.make("simulated", seed=s, **SMALL) for s in (7, 7, 8))
    for level in ("inner", "outer"):
        for name in ("a", "b", "c", "e", "l", "m", "H_yy", "C"):
            assert np.array_equal(getattr(getattr(a, level), name), getattr(getattr(b, level), name))
    assert not np.array_equal(a.inner.a, c.inner.a)
    assert not np.array_equal(a.inner.a[:, :5], a.outer.a[:, :5])  # the levels draw independently


@pytest.mark.parametrize("params, message", [
    ({"dim_x": -3}, "'dim_x' must be a positive integer"),
    ({"n_samples_outer": 0}, "'n_samples_outer' must be a positive integer"),
    ({"mu": 0.0}, "'mu' must be a positive number"),
    ({"dim_y": 50, "n_samples_inner": 20}, "'n_samples_inner' must be at least dim_y = 50"),
    ({"noise": 1}, "unknown parameter 'noise'"),
])
def test_bad_parameters_give_one_clear_error(params, message):
    with pytest.raises(ParameterError, match=message) as err:
        problems.make("simulated", **params)
    assert "\n" not in str(err.value)


def test_convexity_acceptance_modes():
    kw = {"dim_x": 40, "dim_y": 40, "n_samples_inner": 64, "n_samples_outer": 64, "seed": 0}
    first = problems.make("simulated", convexity="none", **kw)
    bench = problems.make("simulated", convexity="benchmark", **kw)
    # The first draw fails the exact test but passes the benchmark's halved-cross-term test.
    assert np.linalg.eigvalsh(first.hessian_F())[0] < -0.01
    assert np.linalg.eigvalsh(first.hessian_F(cross_weight=0.5))[0] > 0.01
    assert np.array_equal(first.inner.a, bench.inner.a)
    assert first.x_opt() is None
    with pytest.raises(ParameterError, match="no instance with a strongly convex value function in 20 draws") as err:
        problems.make("simulated", convexity="exact", **{**kw, "n_samples_inner": 44, "n_samples_outer": 44})
    assert "\n" not in str(err.value)


@pytest.mark.parametrize("chunk", [5, 4096])
def test_float32_samples_are_the_float64_draw_rounded_with_exact_float64_means(monkeypatch, chunk):
    import problems.simulated_draw as sim

    monkeypatch.setattr(sim, "CHUNK_ROWS", chunk)  # 5: several blocks of rows, a partial last one
    wide, narrow = (problems.make("simulated", seed=3, **SMALL, sample_dtype=t) for t in ("float64", "float32"))
    for w, q in ((wide.inner, narrow.inner), (wide.outer, narrow.outer)):
        for name in "abcelm":
            got, ref = getattr(q, name), getattr(w, name)
            assert got.dtype == np.float32 and got.nbytes * 2 == ref.nbytes
            np.testing.assert_array_equal(got, ref.astype(np.float32))
        # The dense means are those of the stored (rounded) samples, accumulated in float64.
        s = {name: getattr(q, name).astype(np.float64) for name in "abcelm"}
        np.testing.assert_allclose(q.H_yy, s["a"].T @ s["a"] / len(s["a"]), rtol=0, atol=1e-14)
        np.testing.assert_allclose(q.H_xx, s["b"].T @ s["b"] / len(s["b"]), rtol=0, atol=1e-14)
        np.testing.assert_allclose(q.C, s["c"].T @ s["e"] / len(s["c"]), rtol=0, atol=1e-14)
        np.testing.assert_allclose(q.l_mean, s["l"].mean(0), rtol=0, atol=1e-15)
        np.testing.assert_allclose(q.m_mean, s["m"].mean(0), rtol=0, atol=1e-15)
        assert all(getattr(q, k).dtype == np.float64 for k in ("H_yy", "H_xx", "C", "l_mean", "m_mean"))
    # Rounding moves the instance by float32's resolution, not more.
    np.testing.assert_allclose(narrow.x_opt(), wide.x_opt(), rtol=1e-5)


def test_float32_samples_oracles_compute_in_float64():
    p = problems.make("simulated", seed=4, **SMALL, sample_dtype="float32")
    rng = np.random.default_rng(2)
    x, y = rng.standard_normal(6), rng.standard_normal(9)
    check_oracles(p, x, y, rng)
    check_oracles(p, x, y, rng, batch=p.sample_batch(rng, 5))
    check_minibatch_mean(p, x, y, rng, full_pass=p.full_pass(), single=p.single)
    check_grad_F_fd(p, x)
    assert np.linalg.norm(p.grad_F(p.x_opt())) < 1e-10
    batch = p.sample_batch(rng, 7)
    outs = (p.grad_y_g(x, y, batch), p.hvp_yy_g(x, y, y, batch), p.cross_xy_g(x, y, y, batch),
            p.hessian_yy_g(x, y, batch), p.jacobian_xy_g(x, y, batch), *p.grad_f(x, y, batch))
    assert all(o.dtype == np.float64 for o in outs)
    # Against the same minibatch computed by hand from the samples cast to float64.
    idx = batch.inner
    a, c, e, l = (getattr(p.inner, k)[idx].astype(np.float64) for k in "acel")
    np.testing.assert_allclose(p.grad_y_g(x, y, batch), ((a @ y) @ a + (c @ x) @ e + l.sum(0)) / len(idx),
                               rtol=1e-13, atol=1e-14)
    np.testing.assert_allclose(p.hessian_yy_g(x, y, batch), a.T @ a / len(idx), rtol=1e-13, atol=1e-15)
