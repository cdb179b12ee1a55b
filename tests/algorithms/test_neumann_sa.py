"""BSA, TTSA and SUSTAIN (algorithms/neumann_sa.py) and the HIA estimator they share.

On the quadratic g = ½yᵀAy − yᵀCx + aᵀy, f = ½(y−e)ᵀP(y−e) + ½m‖x‖² + cᵀx the HIA's mean is
M_N = A⁻¹(I − (I − ηA)^N), so with exact oracles the three methods stop at the zero x̂_N of
m x + c + Cᵀ M_N P (y*(x) − e), y*(x) = A⁻¹(Cx − a), not at x* (M_N = A⁻¹). Both points are written
out here from the problem's matrices with np.linalg, independently of the implementation.
"""
import copy

import numpy as np
import pytest

import algorithms
import problems
from algorithms.hypergradient import hia, hia_expected, joint_hia, joint_hia_expected

NAMES = ("bsa", "ttsa", "sustain")
KINDS = ("f", "g", "grad_f", "grad_g", "hvp", "cross", "hessian")
# Inner spectrum [0.5, 1], dim_x 6, dim_y 5; the finite-sum form has 48 rank-1 samples.
QUAD = problems.make("quadratic", seed=0, dim_x=6, dim_y=5, mu=0.5, L=1.0, outer_curvature=1.0)
SUM = problems.make("quadratic", seed=1, dim_x=5, dim_y=6, mu=0.5, L=1.0, outer_curvature=1.0,
                    n_samples=48, rank=1)
RNG = np.random.default_rng(0)


def truncated_inverse(A, eta, N):
    """M_N = A⁻¹(I − (I − ηA)^N)."""
    eye = np.eye(len(A))
    return np.linalg.solve(A, eye - np.linalg.matrix_power(eye - eta * A, N))


def stationary_x(p, M):
    """The zero of m x + c + Cᵀ M P (A⁻¹(Cx − a) − e): x̂_N for M = M_N, x* for M = A⁻¹."""
    A_inv = np.linalg.inv(p.A)
    lhs = p.m * np.eye(p.dim_x) + p.C.T @ M @ p.P @ A_inv @ p.C
    return np.linalg.solve(lhs, -p.c + p.C.T @ M @ p.P @ (A_inv @ p.a + p.e))


def neumann_hypergradient(p, x, y, eta, N):
    """∇x f − ∇²xy g · M_N ∇y f at (x, y) (∇²xy g · v = −Cᵀv)."""
    return p.m * x + p.c + p.C.T @ truncated_inverse(p.A, eta, N) @ p.P @ (y - p.e)


def spd(d, rng):
    G = rng.standard_normal((d, d))
    return G @ G.T / d + 0.5 * np.eye(d)


class FixedDraw:
    """Stands in for the generator: `integers(n)` returns a chosen p (checked to lie in [0, n))."""

    def __init__(self, p):
        self.p = p

    def integers(self, n):
        assert 0 <= self.p < n
        return self.p


def stepped(name, cfg, p=QUAD, seed=0, iterations=0):
    """An algorithm instance on the counted problem, stepped `iterations` times."""
    alg = algorithms.get(name)(problems.counted(p), algorithms.make_config(name, cfg), np.random.default_rng(seed))
    for _ in range(iterations):
        alg.step()
        alg.iteration += 1
    return alg


# ---- the HIA estimator ----

@pytest.mark.parametrize("N, eta", [(1, 0.7), (4, 0.5), (10, 0.9)])
def test_hia_is_unbiased_for_the_truncated_inverse_by_enumerating_p(N, eta):
    A, b = spd(4, RNG), RNG.standard_normal(4)
    calls = []
    total = np.zeros(4)
    for p in range(N):  # p is uniform on {0, ..., N−1}: the mean is the plain average over p
        v, drawn = hia(lambda u: calls.append(1) or A @ u, b, eta, N, FixedDraw(p))
        assert drawn == p and len(calls) == p
        calls.clear()
        total += v / N
    expected = truncated_inverse(A, eta, N) @ b
    np.testing.assert_allclose(total, expected, rtol=0, atol=1e-12 * np.abs(expected).max())
    np.testing.assert_allclose(hia_expected(lambda u: A @ u, b, eta, N), expected, rtol=0, atol=1e-12)


def test_hia_with_independent_minibatch_hessians_is_unbiased_for_the_mean_hessian():
    # Three "samples" H_1..H_3, each factor an independent uniform draw: enumerating p and every index
    # sequence (1 + 3 + 9 cases for N = 3) gives E[v] = M_N(H̄) b exactly, H̄ the mean Hessian.
    N, eta = 3, 0.4
    Hs = [spd(3, RNG) for _ in range(3)]
    b = RNG.standard_normal(3)
    mean = np.zeros(3)
    for p in range(N):
        for seq in np.ndindex(*([3] * p)):
            order = iter(seq)
            v, _ = hia(lambda u: Hs[next(order)] @ u, b, eta, N, FixedDraw(p))
            mean += v / N / 3 ** p
    expected = truncated_inverse(sum(Hs) / 3, eta, N) @ b
    np.testing.assert_allclose(mean, expected, rtol=0, atol=1e-12)


def test_hia_length_is_uniform_on_0_to_N_minus_1():
    N, draws, rng = 7, 14_000, np.random.default_rng(3)
    lengths = []
    for _ in range(draws):
        calls = []
        _, p = hia(lambda u: calls.append(1) or u, np.ones(2), 0.5, N, rng)
        assert len(calls) == p  # one HVP per factor
        lengths.append(p)
    freq = np.bincount(lengths, minlength=N) / draws
    assert len(freq) == N  # never N or more
    np.testing.assert_allclose(freq, 1 / N, atol=0.012)  # ±4.5 standard deviations of a frequency


def test_joint_hia_shares_p_and_each_minibatch_between_the_two_points():
    N, eta = 6, 0.3
    Hs, Ks = [spd(3, RNG) for _ in range(5)], [spd(3, RNG) for _ in range(5)]  # sample i at the two points
    b, b_prev = RNG.standard_normal(3), RNG.standard_normal(3)
    drawn = []

    def hvp_pair(u, u_prev):
        i = len(drawn) % 5
        drawn.append(i)
        return Hs[i] @ u, Ks[i] @ u_prev

    v, v_prev, p = joint_hia(hvp_pair, b, b_prev, eta, N, np.random.default_rng(5))
    assert p == int(np.random.default_rng(5).integers(N)) and len(drawn) == p > 0
    expected, expected_prev = b.copy(), b_prev.copy()
    for i in drawn:
        expected = expected - eta * Hs[i] @ expected
        expected_prev = expected_prev - eta * Ks[i] @ expected_prev
    np.testing.assert_allclose(v, N * eta * expected, rtol=0, atol=1e-12)
    np.testing.assert_allclose(v_prev, N * eta * expected_prev, rtol=0, atol=1e-12)
    # The same point twice gives the same estimate bit for bit; the expected mode is M_N at each point.
    same, same_prev, _ = joint_hia(lambda u, w: (Hs[0] @ u, Hs[0] @ w), b, b, eta, N, np.random.default_rng(1))
    assert np.array_equal(same, same_prev)
    e, e_prev = joint_hia_expected(lambda u, w: (Hs[0] @ u, Ks[0] @ w), b, b_prev, eta, N)
    np.testing.assert_allclose(e, truncated_inverse(Hs[0], eta, N) @ b, rtol=0, atol=1e-12)
    np.testing.assert_allclose(e_prev, truncated_inverse(Ks[0], eta, N) @ b_prev, rtol=0, atol=1e-12)


# ---- oracle accounting ----

def per_iteration(name, cfg, iterations=6):
    recs = list(algorithms.run(name, SUM, cfg, seed=0, budget={"iterations": iterations}, n_evals=100))
    assert [r["iteration"] for r in recs] == list(range(iterations + 1))
    diffs = [{k: b[f"calls/{k}"] - a[f"calls/{k}"] for k in KINDS} for a, b in zip(recs, recs[1:])]
    return recs, diffs, [int(r["diag/hia_length"]) for r in recs[1:]]


def by_hand(grad_f=0, grad_g=0, hvp=0, cross=0):
    return {"f": 0, "g": 0, "grad_f": grad_f, "grad_g": grad_g, "hvp": hvp, "cross": cross, "hessian": 0}


@pytest.mark.parametrize("batch", [None, 5])
@pytest.mark.parametrize("name", NAMES)
def test_calls_per_iteration_by_kind_with_the_drawn_hia_length(name, batch):
    # BSA: T ∇y g, one ∇f, p HVPs, one cross. TTSA: one of each and p HVPs. SUSTAIN: the plain
    # estimates at t = 0, then every oracle at the current and the previous point (2p HVPs).
    cfg = {"batch_size": batch, "inner_steps": 7} if name == "bsa" else {"batch_size": batch}
    recs, diffs, lengths = per_iteration(name, cfg)
    assert all(0 <= p < 10 for p in lengths) and len(set(lengths)) >= 3  # p really is random
    for t, (p, d) in enumerate(zip(lengths, diffs)):
        if name == "bsa":
            assert d == by_hand(grad_f=1, grad_g=7, hvp=p, cross=1)
        elif name == "ttsa" or t == 0:
            assert d == by_hand(grad_f=1, grad_g=1, hvp=p, cross=1)
        else:
            assert d == by_hand(grad_f=2, grad_g=2, hvp=2 * p, cross=2)
    per_call = SUM.n_samples if batch is None else batch
    last = recs[-1]
    for k in ("grad_f", "grad_g", "hvp", "cross"):
        assert last[f"samples/{k}"] == last[f"calls/{k}"] * per_call
    assert last["samples/total"] == last["calls/total"] * per_call


@pytest.mark.parametrize("name", NAMES)
def test_expected_mode_costs_N_minus_1_hvps_per_chain(name):
    _, diffs, lengths = per_iteration(name, {"hia_mode": "expected", "hia_terms": 4}, iterations=3)
    assert lengths == [3, 3, 3]
    assert [d["hvp"] for d in diffs] == ([3, 6, 6] if name == "sustain" else [3, 3, 3])


# ---- fixed points with exact oracles ----

# Constant steps reaching the fixed point to machine precision within 200 iterations (measured: BSA and
# TTSA by 100, SUSTAIN ≈ 2e-14 at 100).
CONSTANT = {
    "bsa": {"alpha": 1.0, "gamma": 0.5, "alpha_decay": 0.0, "gamma_decay": 0.0},
    "ttsa": {"alpha": 1.0, "gamma": 0.3, "alpha_decay": 0.0, "gamma_decay": 0.0},
    "sustain": {"alpha": 1.0, "gamma": 0.3, "alpha_decay": 0.0, "gamma_decay": 0.0},
}


@pytest.mark.parametrize("name", NAMES)
def test_expected_hia_converges_to_the_neumann_biased_point(name):
    N, eta = 4, 0.5  # (1 − ημ)^N = 0.32: a large bias
    x_hat = stationary_x(QUAD, truncated_inverse(QUAD.A, eta, N))
    x_star = stationary_x(QUAD, np.linalg.inv(QUAD.A))
    assert np.linalg.norm(x_hat - x_star) > 0.14  # the two points are far apart [0.145]
    alg = stepped(name, {**CONSTANT[name], "eta": eta, "hia_terms": N, "hia_mode": "expected"}, iterations=200)
    assert np.linalg.norm(alg.x - x_hat) < 1e-10
    assert np.linalg.norm(alg.y - np.linalg.solve(QUAD.A, QUAD.C @ x_hat - QUAD.a)) < 1e-10


@pytest.mark.parametrize("name", NAMES)
def test_expected_hia_with_long_truncation_converges_to_x_star(name):
    N, eta = 100, 0.5  # (1 − ημ)^N = 3e-13
    x_star = stationary_x(QUAD, np.linalg.inv(QUAD.A))
    np.testing.assert_allclose(x_star, QUAD.x_opt(), rtol=0, atol=1e-12)
    alg = stepped(name, {**CONSTANT[name], "eta": eta, "hia_terms": N, "hia_mode": "expected"}, iterations=200)
    assert np.linalg.norm(alg.x - x_star) < 1e-10


@pytest.mark.parametrize("name", NAMES)
def test_sampled_hia_averages_to_the_neumann_biased_point(name):
    # Exact oracles but a random p: on a quadratic the mean iterate follows the expected-mode recursion,
    # so with constant steps the running average of x sits near x̂_N, an order of magnitude closer than
    # to x*. Measured ‖x̄ − x̂_N‖ at 4000 iterations, seeds 0-2: [bsa ≤ 7.9e-3, ttsa ≤ 8.1e-3,
    # sustain ≤ 8.9e-3; seed 0 runs here], against ‖x̂_N − x*‖ = 0.145 and ‖x̄ − x*‖ ≥ 0.139.
    N, eta, K = 4, 0.5, 4000
    x_hat = stationary_x(QUAD, truncated_inverse(QUAD.A, eta, N))
    x_star = stationary_x(QUAD, np.linalg.inv(QUAD.A))
    alg = stepped(name, {**CONSTANT[name], "gamma": 0.1, "eta": eta, "hia_terms": N})
    total = np.zeros(QUAD.dim_x)
    for k in range(K):
        alg.step()
        alg.iteration += 1
        if k >= K // 10:
            total += alg.x
    x_bar = total / (K - K // 10)
    assert np.linalg.norm(x_bar - x_hat) < 0.015
    assert np.linalg.norm(x_bar - x_star) > 0.1


# name -> (config, tolerance on ‖∇F(x_T)‖² / ‖∇F(x_0)‖² after 2000 minibatch iterations, seed 0), on the
# finite-sum quadratic of test_baselines.py; tolerances sit above the worst of seeds 0, 1, 2 [in brackets].
MINIBATCH = {
    "bsa": ({"alpha": 0.5, "eta": 0.3, "gamma": 0.5, "alpha_decay": 0.0}, 4e-2),  # [1.9e-2]
    "ttsa": ({"alpha": 0.5, "eta": 0.3, "gamma": 0.3}, 2e-2),  # [6.3e-3]
    "sustain": ({"alpha": 0.5, "eta": 0.3, "gamma": 0.3}, 2e-2),  # [5.0e-3]
}
SUM_BASELINES = problems.make("quadratic", seed=0, dim_x=10, dim_y=10, mu=0.5, L=1.0, outer_curvature=1.0,
                              n_samples=64, rank=2)


@pytest.mark.parametrize("name", NAMES)
def test_minibatch_form_reaches_the_stated_tolerance(name):
    cfg, tol = MINIBATCH[name]
    recs = list(algorithms.run(name, SUM_BASELINES, {**cfg, "batch_size": 8, "hia_terms": 20}, seed=0,
                               budget={"iterations": 2000}, n_evals=4))
    assert recs[-1]["status"] == "finished"
    assert recs[-1]["samples/total"] < recs[-1]["calls/total"] * SUM_BASELINES.n_samples  # minibatches were used
    assert recs[-1]["grad_F_sq"] / recs[0]["grad_F_sq"] <= tol


# ---- identities ----

def test_bsa_in_expected_mode_is_stocbio_with_N_minus_1_neumann_terms():
    # The mean of the HIA over p is StocBiO's Neumann sum with Q = N − 1 terms; the minibatch draws are
    # in the same order, so the minibatch runs agree bit for bit.
    cfg = {"alpha": 0.3, "eta": 0.4, "gamma": 0.2, "alpha_decay": 0.5, "gamma_decay": 0.5,
           "inner_steps": 3, "batch_size": 4}
    bsa = list(algorithms.run("bsa", SUM, {**cfg, "hia_terms": 6, "hia_mode": "expected"}, seed=2,
                              budget={"iterations": 20}))
    stocbio = list(algorithms.run("stocbio", SUM, {**cfg, "neumann_terms": 5}, seed=2, budget={"iterations": 20}))
    assert [r["F"] for r in bsa] == [r["F"] for r in stocbio]
    assert bsa[-1]["calls/hvp"] == stocbio[-1]["calls/hvp"] == 5 * 20


def test_sustain_with_momentum_one_is_simultaneous_sgd_with_the_hia():
    # m_t ≡ 1: h_g = ∇y g(z_t), h_f = HIA hypergradient at z_t, both steps from z_t. Reference written
    # with the matrices, drawing p from a generator with the same seed (exact oracles draw no batches).
    N, eta, alpha, gamma, T = 5, 0.6, 0.8, 0.3, 30
    alg = stepped("sustain", {"alpha": alpha, "gamma": gamma, "alpha_decay": 0.0, "gamma_decay": 0.0,
                              "momentum": 1.0, "momentum_decay": 0.0, "eta": eta, "hia_terms": N}, seed=4)
    p, rng = QUAD, np.random.default_rng(4)
    x, y = p.initial_point()
    I_eta = np.eye(p.dim_y) - eta * p.A
    for _ in range(T):
        alg.step()
        alg.iteration += 1
        k = int(rng.integers(N))
        v = N * eta * np.linalg.matrix_power(I_eta, k) @ p.P @ (y - p.e)
        x, y = x - gamma * (p.m * x + p.c + p.C.T @ v), y - alpha * (p.A @ y - p.C @ x + p.a)
        assert alg.hia_length == k
        np.testing.assert_allclose(alg.x, x, rtol=0, atol=1e-12)
        np.testing.assert_allclose(alg.y, y, rtol=0, atol=1e-12)


def test_sustain_storm_directions_are_exact_with_exact_oracles():
    # Full batch and expected HIA: if h^{t−1} is the exact direction at z_{t−1}, the recursion makes h^t
    # exact at z_t whatever m_t is; h^0 is the plain estimate, so every direction is exact.
    N, eta = 5, 0.5
    alg = stepped("sustain", {"eta": eta, "hia_terms": N, "hia_mode": "expected", "alpha": 0.5, "gamma": 0.3})
    p = QUAD
    for _ in range(25):
        alg.step()
        alg.iteration += 1
        x, y = alg.x_prev, alg.y_prev  # the point the directions were built at
        np.testing.assert_allclose(alg.h_g, p.A @ y - p.C @ x + p.a, rtol=0, atol=1e-12)
        np.testing.assert_allclose(alg.h_f, neumann_hypergradient(p, x, y, eta, N), rtol=0, atol=1e-12)
    assert 0 < alg.diagnostics()["momentum"] < 0.5  # the momentum really decayed: 0.5/26^{2/3}


class BatchLog:
    """Forwards to a problem, recording the minibatch of every call by oracle."""

    def __init__(self, problem):
        self._problem = problem
        self.batches = {"grad_f": [], "grad_y_g": [], "hvp_yy_g": [], "cross_xy_g": []}

    def __getattr__(self, name):
        method = getattr(self._problem, name)
        if name not in self.batches:
            return method

        def logged(*args):
            self.batches[name].append(args[-1])
            return method(*args)
        return logged


def logged_run(name, cfg, steps):
    """The minibatches of every call by oracle, and the HIA length p of every step."""
    log = BatchLog(SUM)
    alg = algorithms.get(name)(problems.counted(log), algorithms.make_config(name, cfg), np.random.default_rng(1))
    lengths = []
    for _ in range(steps):
        alg.step()
        alg.iteration += 1
        lengths.append(alg.hia_length)
    return log.batches, lengths


@pytest.mark.parametrize("name", ["ttsa", "sustain"])
@pytest.mark.parametrize("reuse", [False, True])
def test_cross_term_minibatch_is_independent_unless_reuse_is_asked(name, reuse):
    # SUSTAIN evaluates ∇y g and the cross term at two points on the same minibatches (from t = 1).
    batches, _ = logged_run(name, {"batch_size": 3, "reuse_y_batch": reuse}, 5)
    assert len(batches["cross_xy_g"]) == len(batches["grad_y_g"]) == (5 if name == "ttsa" else 9)
    same = [np.array_equal(c, g) for c, g in zip(batches["cross_xy_g"], batches["grad_y_g"])]
    assert same == [reuse] * len(same)



@pytest.mark.parametrize("reuse", [False, True])
def test_ttsa_steps_are_the_update_written_out_with_each_minibatch_drawn_where_used(reuse):
    # The iteration draws its minibatches ahead (y's and f's together, then the HIA's with the cross term's):
    # the same iterates and generator state as drawing each just before its oracle, from the same seed.
    p, N, eta, size = problems.make("simulated", seed=0, dim_x=4, dim_y=3, n_samples_inner=20, n_samples_outer=12), \
        4, 0.3, 5
    cfg = {"batch_size": size, "hia_terms": N, "eta": eta, "reuse_y_batch": reuse}
    alg = algorithms.get("ttsa")(p, algorithms.make_config("ttsa", cfg), np.random.default_rng(7))
    ref = np.random.default_rng(7)
    x, y, lengths = alg.x.copy(), alg.y.copy(), set()
    for t in range(12):
        alpha, gamma = 0.1 / (t + 1) ** 0.4, 0.1 / (t + 1) ** 0.6
        batch_y, batch_f = p.sample_batch(ref, size), p.sample_batch(ref, size)
        y = y - alpha * p.grad_y_g(x, y, batch_y)
        grad_x_f, u = p.grad_f(x, y, batch_f)
        length = int(ref.integers(N))
        for _ in range(length):
            u = u - eta * p.hvp_yy_g(x, y, u, p.sample_batch(ref, size))
        cross = p.cross_xy_g(x, y, N * eta * u, batch_y if reuse else p.sample_batch(ref, size))
        x = x - gamma * (grad_x_f - cross)
        alg.step()
        alg.iteration += 1
        lengths.add(length)
        assert alg.hia_length == length
        np.testing.assert_allclose(alg.x, x, rtol=1e-13, atol=1e-15)
        np.testing.assert_allclose(alg.y, y, rtol=1e-13, atol=1e-15)
    assert alg.rng.bit_generator.state == ref.bit_generator.state
    assert {0, N - 1} <= lengths  # both an empty HIA and the longest one were taken


def test_bsa_steps_are_the_update_written_out_with_each_minibatch_drawn_where_used():
    # T inner minibatches and f's drawn together, then p, then the HIA's p and the cross term's together.
    p, N, eta, size, T = problems.make("simulated", seed=0, dim_x=4, dim_y=3, n_samples_inner=20,
                                       n_samples_outer=12), 4, 0.3, 5, 3
    cfg = {"batch_size": size, "hia_terms": N, "eta": eta, "inner_steps": T, "alpha": 0.2, "gamma": 0.1}
    alg = algorithms.get("bsa")(p, algorithms.make_config("bsa", cfg), np.random.default_rng(3))
    ref = np.random.default_rng(3)
    x, y, lengths = alg.x.copy(), alg.y.copy(), set()
    for t in range(12):
        alpha, gamma = 0.2 / (t + 1) ** 0.5, 0.1 / (t + 1) ** 0.5
        for _ in range(T):
            y = y - alpha * p.grad_y_g(x, y, p.sample_batch(ref, size))
        grad_x_f, u = p.grad_f(x, y, p.sample_batch(ref, size))
        length = int(ref.integers(N))
        for _ in range(length):
            u = u - eta * p.hvp_yy_g(x, y, u, p.sample_batch(ref, size))
        x = x - gamma * (grad_x_f - p.cross_xy_g(x, y, N * eta * u, p.sample_batch(ref, size)))
        alg.step()
        alg.iteration += 1
        lengths.add(length)
        np.testing.assert_allclose(alg.x, x, rtol=1e-13, atol=1e-15)
        np.testing.assert_allclose(alg.y, y, rtol=1e-13, atol=1e-15)
    assert alg.rng.bit_generator.state == ref.bit_generator.state
    assert {0, N - 1} <= lengths

def pairs_share_batches(calls):
    """True when calls (0, 1), (2, 3), ... used one minibatch each and consecutive pairs different ones."""
    first, second = calls[::2], calls[1::2]
    return (len(first) == len(second) and all(np.array_equal(a, b) for a, b in zip(first, second))
            and not any(np.array_equal(a, b) for a, b in zip(first, first[1:])))


def test_sustain_uses_every_minibatch_at_both_points_and_fresh_ones_each_iteration():
    # t = 0 calls each oracle once at z_0 (p_0 HVPs); from t = 1 every call comes as a pair (current
    # point, previous point) on one minibatch, a fresh one for each pair.
    batches, lengths = logged_run("sustain", {"batch_size": 3}, 6)
    for kind in ("grad_f", "cross_xy_g"):
        assert pairs_share_batches(batches[kind][1:]) and len(batches[kind]) == 11
    # ∇y g is called at the current point first and at the previous point after the hypergradients.
    grads = batches["grad_y_g"][1:]
    assert pairs_share_batches(grads) and len(grads) == 10
    hvps = batches["hvp_yy_g"][lengths[0]:]
    assert len(hvps) == 2 * sum(lengths[1:]) > 0 and pairs_share_batches(hvps)


# ---- determinism, state, flags ----

@pytest.mark.parametrize("name", NAMES)
def test_same_seed_same_iterates_other_seed_other_iterates(name):
    cfg = {"batch_size": 4}
    a, b, c = (stepped(name, cfg, p=SUM, seed=s, iterations=15) for s in (7, 7, 8))
    assert np.array_equal(a.x, b.x) and np.array_equal(a.y, b.y)
    assert not np.allclose(a.x, c.x)


def same(a, b):
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return isinstance(a, np.ndarray) and isinstance(b, np.ndarray) and np.array_equal(a, b)
    return a == b


FRAMEWORK = ("problem", "_rng", "_stream")  # the run's problem, generator and draws ahead: not the method's state


@pytest.mark.parametrize("name", NAMES)
def test_declared_state_is_exactly_what_changes_besides_x_y_and_the_rng(name):
    alg = stepped(name, {"batch_size": 4}, p=SUM, iterations=1)
    changed = set()
    for _ in range(5):  # the union over single steps (p may repeat from one step to the next)
        before = {k: copy.deepcopy(v) for k, v in vars(alg).items() if k not in FRAMEWORK}
        alg.step()
        alg.iteration += 1
        changed |= {k for k, v in vars(alg).items() if k not in FRAMEWORK and not same(before[k], v)}
    assert changed == {"x", "y", "iteration"} | set(algorithms.get(name).state)


FLAGS = {"bsa": "double", "ttsa": "single", "sustain": "single"}


@pytest.mark.parametrize("name", NAMES)
def test_flags_declared_step_sizes_and_defaults(name):
    d = algorithms.available()[name]
    flags = (d["first_order"], d["stochastic"], d["loops"], d["online"], d["finite_sum"])
    assert flags == (False, True, FLAGS[name], False, False)
    assert d["step_sizes"] == ["alpha", "eta", "gamma"] and d["paper"]
    params = {k: v["default"] for k, v in d["params"].items()}
    assert (params["alpha"], params["eta"], params["gamma"], params["hia_terms"]) == (0.1, 0.1, 0.1, 10)
    assert params["batch_size"] is None and params["hia_mode"] == "sampled"
    decays = {"bsa": (0.5, 0.5), "ttsa": (0.4, 0.6), "sustain": (1 / 3, 1 / 3)}[name]
    assert (params["alpha_decay"], params["gamma_decay"]) == decays


def test_schedules_follow_the_declared_decays():
    alg = stepped("sustain", {})
    for t in (0, 1, 9, 99):
        alg.iteration = t
        d = alg.diagnostics()
        assert d["alpha"] == pytest.approx(0.1 / (t + 1) ** (1 / 3), rel=1e-14)
        assert d["gamma"] == pytest.approx(0.1 / (t + 1) ** (1 / 3), rel=1e-14)
        assert d["momentum"] == (1.0 if t == 0 else pytest.approx(0.5 / (t + 1) ** (2 / 3), rel=1e-14))
    ttsa = stepped("ttsa", {})
    ttsa.iteration = 9
    assert ttsa.diagnostics()["alpha"] == pytest.approx(0.1 / 10 ** 0.4, rel=1e-14)
    assert ttsa.diagnostics()["gamma"] == pytest.approx(0.1 / 10 ** 0.6, rel=1e-14)


@pytest.mark.parametrize("name", NAMES)
def test_huge_steps_end_as_diverged_records(name):
    cfg = {s: 1e3 for s in algorithms.get(name).step_sizes}
    recs = list(algorithms.run(name, QUAD, cfg, budget={"iterations": 300}))
    assert recs[-1]["status"] == "diverged" and recs[-1]["iteration"] < 300


@pytest.mark.parametrize("name, params, message", [
    ("bsa", {"hia_terms": 0}, "algorithm 'bsa': 'hia_terms' must be a positive integer, got 0"),
    ("ttsa", {"hia_mode": "mean"}, "algorithm 'ttsa': 'hia_mode' must be one of 'sampled', 'expected', got 'mean'"),
    ("sustain", {"momentum": 1.5}, "algorithm 'sustain': 'momentum' must be a probability in [0, 1], got 1.5"),
    ("sustain", {"eta": -0.1}, "algorithm 'sustain': 'eta' must be a positive number, got -0.1"),
])
def test_bad_configs_name_the_field(name, params, message):
    with pytest.raises(problems.shared.errors.ParameterError) as err:
        algorithms.make_config(name, params)
    assert str(err.value) == message
