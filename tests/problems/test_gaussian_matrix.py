"""The lazily drawn symmetric Gaussian matrix: exact distribution of its products, consistency, dense()."""
import numpy as np
import pytest

from problems.gaussian_matrix import LazySymmetricGaussian


def _goe(rng, d, tau):
    G = rng.normal(0.0, tau, (d, d))
    return (G + G.T) / np.sqrt(2.0)


def test_products_have_the_covariance_of_an_explicit_goe_matrix():
    # Cov((S u)_i, (S v)_j) = τ² (δ_ij ⟨u, v⟩ + u_j v_i) for S ~ GOE(τ²) (off-diagonal variance τ², diagonal 2τ²).
    rng = np.random.default_rng(0)
    d, tau, n = 4, 0.5, 40_000
    V = rng.standard_normal((d, 2))
    draws = np.empty((n, 2 * d))
    for k in range(n):
        S = LazySymmetricGaussian(d, tau, rng)
        draws[k] = np.concatenate([S.matvec(V[:, 0]), S.matvec(V[:, 1])])
    cov = np.cov(draws.T)
    exact = np.empty((2 * d, 2 * d))
    for a in range(2):
        for b in range(2):
            u, v = V[:, a], V[:, b]
            exact[a * d:(a + 1) * d, b * d:(b + 1) * d] = tau ** 2 * (np.eye(d) * (u @ v) + np.outer(v, u))
    # The sampling error of a covariance entry is about |Σ| √(2/n) ≈ 0.008 |Σ|max here: allow 5 of them.
    assert np.max(np.abs(cov - exact)) < 5 * np.max(np.abs(exact)) * np.sqrt(2.0 / n)
    assert np.max(np.abs(draws.mean(axis=0))) < 5 * np.sqrt(np.max(np.diag(exact)) / n)
    # The same check on explicitly drawn matrices passes too (the formula, not the sampler, is being tested).
    ref = np.array([np.concatenate([(S := _goe(rng, d, tau)) @ V[:, 0], S @ V[:, 1]]) for _ in range(n)])
    assert np.max(np.abs(np.cov(ref.T) - exact)) < 5 * np.max(np.abs(exact)) * np.sqrt(2.0 / n)


def test_products_are_linear_and_symmetric_and_dense_agrees_with_them():
    rng = np.random.default_rng(1)
    d = 30
    S = LazySymmetricGaussian(d, 0.2, rng)
    U = rng.standard_normal((d, 5))
    images = [S.matvec(u) for u in U.T]
    combo = U @ np.array([1.0, -2.0, 0.5, 3.0, 0.0])
    np.testing.assert_allclose(S.matvec(combo), np.column_stack(images) @ [1.0, -2.0, 0.5, 3.0, 0.0], atol=1e-13)
    for i in range(5):
        for j in range(5):
            assert U[:, i] @ images[j] == pytest.approx(U[:, j] @ images[i], abs=1e-13)  # uᵀ S v = vᵀ S u
    assert S.basis.shape[1] == 5  # the combination drew nothing new
    M = S.dense()
    assert np.max(np.abs(M - M.T)) < 1e-14
    for u, img in zip(U.T, images):
        np.testing.assert_allclose(M @ u, img, atol=1e-12)
    w = rng.standard_normal(d)
    np.testing.assert_array_equal(S.matvec(w), M @ w)  # after dense() every product uses the matrix


def test_dense_after_products_keeps_the_free_block_goe():
    # Conditioned on S q = image for a unit q, the block orthogonal to q is a fresh GOE: its entries'
    # variances are τ² (off-diagonal) and 2τ² (diagonal), measured over many draws in a rotated basis.
    rng = np.random.default_rng(2)
    d, tau, n = 5, 1.0, 20_000
    q = np.eye(d)[0]
    off, diag, known = [], [], []
    for _ in range(n):
        S = LazySymmetricGaussian(d, tau, rng)
        img = S.matvec(q)
        M = S.dense()
        off.append(M[1, 2])
        diag.append(M[3, 3])
        known.append(M[:, 0] - img)
    assert np.var(off) == pytest.approx(tau ** 2, rel=0.05)
    assert np.var(diag) == pytest.approx(2 * tau ** 2, rel=0.05)
    assert np.max(np.abs(known)) < 1e-13
