"""A dense symmetric Gaussian matrix revealed lazily through its products, for noisy quadratic oracles.

S has independent entries S_ij ~ N(0, τ²) above the diagonal and S_ii ~ N(0, 2τ²) (the Gaussian
orthogonal ensemble): for E with i.i.d. N(0, σ²) entries, (E + Eᵀ)/2 is such a matrix with τ² = σ²/2, the
noise ½yᵀEy adds to the gradient of a quadratic term. Drawing all d² entries costs far more than the
product it perturbs (about 20× a matrix–vector product at d = 4000), so `matvec` draws only what the
product needs: the distribution is orthogonally invariant, so in an orthonormal basis whose first k
vectors q_1..q_k span the vectors seen so far, S q_j is known for j ≤ k, and for a new direction q the
product S q is determined along q_1..q_k by symmetry (q_jᵀ S q = (S q_j)ᵀ q), is N(0, 2τ²) along q and has
fresh i.i.d. N(0, τ²) coordinates orthogonal to all of them. Every product is thus exactly distributed as
with the whole matrix drawn up front, and products with one matrix are consistent (linear, symmetric).
`dense()` draws the rest of the matrix once, conditioned on the products so far. Cost: O(d k) per new
direction, O(d²) for `dense()`.
"""
from __future__ import annotations

import numpy as np

from problems.base import Array


class LazySymmetricGaussian:
    """S ~ GOE(τ²), d × d, drawn from `rng` as far as the products asked of it need."""

    def __init__(self, d: int, tau: float, rng: np.random.Generator) -> None:
        self.d, self.tau, self.rng = d, float(tau), rng
        self.basis = np.empty((d, 0))  # orthonormal q_1..q_k
        self.images = np.empty((d, 0))  # S q_1..S q_k
        self.full: Array | None = None

    def matvec(self, v: Array) -> Array:
        """S v."""
        v = np.asarray(v, dtype=float)
        if self.full is not None:
            return self.full @ v
        if self.tau == 0.0:
            return np.zeros(self.d)
        coef, rest = self._split(v)
        out = self.images @ coef
        size = float(np.linalg.norm(rest))
        if size > 1e-12 * max(float(np.linalg.norm(v)), 1e-300) and self.basis.shape[1] < self.d:
            out = out + size * self._extend(rest / size)
        return out

    def dense(self) -> Array:
        """The whole matrix, drawn once and consistent with every product returned before."""
        if self.full is None:
            G = self.rng.standard_normal((self.d, self.d))
            Z = np.add(G, G.T)
            Z *= self.tau / np.sqrt(2.0)  # GOE(τ²): off-diagonal N(0, τ²), diagonal N(0, 2τ²)
            Q, SQ = self.basis, self.images
            if Q.shape[1]:
                # P⊥ Z P⊥ (the block orthogonal to the directions seen, left free) plus the products already
                # returned, SQ Qᵀ + Q SQᵀ − Q (QᵀSQ) Qᵀ, make the symmetric rank-2k update Z + M Qᵀ + Q Mᵀ.
                U = Z @ Q
                M = SQ - U + 0.5 * Q @ (Q.T @ U - Q.T @ SQ)
                Z += np.hstack([M, Q]) @ np.hstack([Q, M]).T
            self.full = Z
        return self.full

    def _split(self, v: Array) -> tuple[Array, Array]:
        """Coefficients of v on the basis and the remainder orthogonal to it (Gram–Schmidt twice)."""
        Q = self.basis
        c1 = Q.T @ v
        r = v - Q @ c1
        c2 = Q.T @ r
        return c1 + c2, r - Q @ c2

    def _extend(self, q: Array) -> Array:
        """S q for a unit q orthogonal to the basis; q and S q join the basis."""
        _, q = self._split(q)  # once more against rounding, then renormalise
        q = q / np.linalg.norm(q)
        known = self.basis @ (self.images.T @ q)  # q_jᵀ S q = (S q_j)ᵀ q
        z = self.rng.normal(0.0, self.tau, self.d)
        _, z = self._split(z)
        z = z - q * (q @ z)
        image = known + self.rng.normal(0.0, np.sqrt(2.0) * self.tau) * q + z
        self.basis = np.column_stack([self.basis, q])
        self.images = np.column_stack([self.images, image])
        return image
