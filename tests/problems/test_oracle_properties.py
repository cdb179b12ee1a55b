"""Property tests: every problem's oracles agree with central finite differences at random points,
for random seeds and dimensions (hypothesis draws them; failures shrink to the smallest case)."""
import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import problems
from tests.oracle_checks import check_grad_F_fd, check_oracles

SETTINGS = settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
seeds = st.integers(0, 2**31 - 1)
dims = st.integers(1, 7)


def random_point(p, rng, scale=1.0):
    x, y = p.initial_point()
    return x + scale * rng.standard_normal(x.shape), y + scale * rng.standard_normal(y.shape)


def check(p, seed, batch_size=None):
    rng = np.random.default_rng(seed)
    x, y = random_point(p, rng)
    check_oracles(p, x, y, rng)
    if p.n_samples is not None and batch_size is not None:
        check_oracles(p, x, y, rng, batch=p.sample_batch(rng, batch_size))


@SETTINGS
@given(seed=seeds, dim_x=dims, dim_y=dims, n=st.sampled_from([None, 5, 17]), rank=st.integers(1, 3))
def test_quadratic(seed, dim_x, dim_y, n, rank):
    if n is not None:
        rank = max(rank, -(-dim_y // n))  # the samples' inner terms must be able to sum to a full-rank A
    p = problems.make("quadratic", seed=seed, dim_x=dim_x, dim_y=dim_y, n_samples=n, rank=rank)
    check(p, seed, batch_size=3)
    check_grad_F_fd(p, random_point(p, np.random.default_rng(seed))[0])


@SETTINGS
@given(seed=seeds, dim_x=dims, dim_y=dims, convexity=st.sampled_from(["exact", "benchmark", "none"]))
def test_simulated(seed, dim_x, dim_y, convexity):
    p = problems.make("simulated", seed=seed, dim_x=dim_x, dim_y=dim_y, n_samples_inner=16, n_samples_outer=12,
                      convexity=convexity)
    check(p, seed, batch_size=4)


@SETTINGS
@given(seed=seeds, d=st.integers(3, 9), box=st.booleans(), noise=st.sampled_from([0.0, 0.1]),
       model=st.sampled_from(["diagonal", "dense"]))
def test_constrained_quadratic(seed, d, box, noise, model):
    params = {"constraints": "box"} if box else {"constraints": "linear", "p": min(2, d)}
    p = problems.make("constrained_quadratic", seed=seed, d=d, noise=noise, noise_model=model, **params)
    rng = np.random.default_rng(seed)
    x, y = random_point(p, rng)
    batch = p.sample_batch(rng, 2) if noise else None
    check_oracles(p, x, y, rng, batch=batch)


@SETTINGS
@given(seed=seeds, name=st.sampled_from(["regularization_selection", "hyper_cleaning"]),
       n_classes=st.integers(2, 3), n_features=st.integers(2, 6))
def test_logistic_families_on_synthetic_data(seed, name, n_classes, n_features):
    p = problems.make(name, seed=seed, dataset="synthetic", n_samples=60, n_features=n_features, n_classes=n_classes)
    rng = np.random.default_rng(seed)
    x, y = random_point(p, rng, scale=0.3)  # keep exp(x) regularisation weights moderate
    check_oracles(p, x, y, rng, rtol=1e-5)
    check_oracles(p, x, y, rng, batch=p.sample_batch(rng, 7), rtol=1e-5)


@SETTINGS
@given(seed=seeds, name=st.sampled_from(["minimax_toy", "nonunique_toy", "coreset_toy"]))
def test_toys(seed, name):
    check(problems.make(name, seed=seed), seed)


@SETTINGS
@given(seed=seeds, t=st.integers(1, 30), name=st.sampled_from(
    ["oscillating_toy", "drifting_quadratic", "streaming_regularization", "streaming_hyper_cleaning"]))
def test_online_instances(seed, t, name):
    p = problems.make(name, seed=seed, T=30)
    inst = p.at(t)
    rng = np.random.default_rng(seed)
    x, y = random_point(inst, rng, scale=0.3)
    check_oracles(inst, x, y, rng, rtol=1e-5)
