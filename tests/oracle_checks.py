"""Shared numerical checks for problems: oracles against central finite differences."""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from problems.base import BilevelProblem

FD_RTOL = 1e-6


def fd_gradient(fun: Callable[[np.ndarray], float], z: np.ndarray, h: float = 1e-5) -> np.ndarray:
    """Central finite-difference gradient of a scalar function, coordinate by coordinate."""
    out = np.empty_like(z)
    for i in range(z.size):
        e = np.zeros_like(z)
        e[i] = h
        out[i] = (fun(z + e) - fun(z - e)) / (2 * h)
    return out


def fd_directional(fun: Callable[[np.ndarray], np.ndarray], z: np.ndarray, v: np.ndarray, h: float = 1e-5) -> np.ndarray:
    """Central finite difference of a vector function along v."""
    return (fun(z + h * v) - fun(z - h * v)) / (2 * h)


def rel_err(a: np.ndarray, b: np.ndarray) -> float:
    """‖a − b‖ / max(‖a‖, ‖b‖, 1e-8)."""
    a, b = np.atleast_1d(a), np.atleast_1d(b)
    return float(np.linalg.norm(a - b) / max(np.linalg.norm(a), np.linalg.norm(b), 1e-8))


def check_oracles(p: BilevelProblem, x: np.ndarray, y: np.ndarray, rng: np.random.Generator,
                  batch=None, rtol: float = FD_RTOL, h: float = 1e-5) -> dict[str, float]:
    """Relative errors of every oracle against finite differences at (x, y); asserts each ≤ rtol."""
    gxf, gyf = p.grad_f(x, y, batch)
    gxg, gyg = p.grad_g(x, y, batch)
    v = rng.standard_normal(p.dim_y)
    errs = {
        "grad_x_f": rel_err(gxf, fd_gradient(lambda z: p.f(z, y, batch), x, h)),
        "grad_y_f": rel_err(gyf, fd_gradient(lambda z: p.f(x, z, batch), y, h)),
        "grad_x_g": rel_err(gxg, fd_gradient(lambda z: p.g(z, y, batch), x, h)),
        "grad_y_g": rel_err(gyg, fd_gradient(lambda z: p.g(x, z, batch), y, h)),
        "grad_y_g_alone": rel_err(p.grad_y_g(x, y, batch), gyg),
        "grad_y_f_alone": rel_err(p.grad_y_f(x, y, batch), gyf),
        "hvp_yy_g": rel_err(p.hvp_yy_g(x, y, v, batch),
                            fd_directional(lambda z: p.grad_g(x, z, batch)[1], y, v, h)),
        "cross_xy_g": rel_err(p.cross_xy_g(x, y, v, batch),
                              fd_directional(lambda z: p.grad_g(x, z, batch)[0], y, v, h)),
    }
    bad = {k: e for k, e in errs.items() if not e <= rtol}
    assert not bad, f"{p.name}: oracles disagree with finite differences: {bad}"
    return errs


def check_minibatch_mean(p: BilevelProblem, x: np.ndarray, y: np.ndarray, rng: np.random.Generator,
                         rtol: float = 1e-10, full_pass=None,
                         single: Callable[[int], object] | None = None) -> None:
    """The mean of single-sample oracles over a full pass equals the full-batch oracle.

    `full_pass` (default: all indices) and `single(i)` (default: index i alone) build the batches for
    problems whose batches are not plain index arrays.
    """
    n = p.n_samples
    assert n is not None
    idx = np.arange(n) if full_pass is None else full_pass
    single = single if single is not None else (lambda i: np.array([i]))
    v = rng.standard_normal(p.dim_y)
    pairs = {
        "f": (p.f(x, y, idx), p.f(x, y)),
        "g": (p.g(x, y, idx), p.g(x, y)),
        "grad_f": (np.concatenate(p.grad_f(x, y, idx)), np.concatenate(p.grad_f(x, y))),
        "grad_g": (np.concatenate(p.grad_g(x, y, idx)), np.concatenate(p.grad_g(x, y))),
        "hvp": (p.hvp_yy_g(x, y, v, idx), p.hvp_yy_g(x, y, v)),
        "cross": (p.cross_xy_g(x, y, v, idx), p.cross_xy_g(x, y, v)),
    }
    # Also as the average of per-sample oracles: batches of one, summed.
    per = np.mean([p.grad_y_g(x, y, single(i)) for i in range(n)], axis=0)
    pairs["grad_y_g per-sample mean"] = (per, p.grad_y_g(x, y))
    bad = {k: rel_err(a, b) for k, (a, b) in pairs.items() if rel_err(a, b) > rtol}
    assert not bad, f"{p.name}: minibatch mean differs from full batch: {bad}"


def check_ground_truth_stationarity(p: BilevelProblem, x: np.ndarray, atol: float = 1e-9) -> None:
    """‖∇y g(x, y*(x))‖ ≤ atol for an unconstrained lower level."""
    gy = p.grad_y_g(x, p.y_star(x))
    assert np.linalg.norm(gy) <= atol, f"{p.name}: ‖∇y g(x, y*)‖ = {np.linalg.norm(gy):.3e}"


def check_grad_F_fd(p: BilevelProblem, x: np.ndarray, rtol: float = 1e-5, h: float = 1e-5) -> float:
    """∇F against central finite differences of F."""
    err = rel_err(p.grad_F(x), fd_gradient(p.F, x, h))
    assert err <= rtol, f"{p.name}: ∇F vs finite differences of F: rel. error {err:.3e}"
    return err


def check_per_sample_oracles(form: Any, p: BilevelProblem, x: np.ndarray, y: np.ndarray, v: np.ndarray,
                             idx_g: np.ndarray, idx_f: np.ndarray, atol: float) -> None:
    """A pure form's per-sample oracles (SABA's memory) equal the problem's own on samples idx_g of g and idx_f of f
    (to 1e-12 relative), and their rows over every sample average to the problem's full-batch oracles."""
    pairs = [(form.grad_y_g_samples(x, y, idx_g), p.grad_y_g_samples(x, y, idx_g)),
             (form.hvp_yy_g_samples(x, y, v, idx_g), p.hvp_yy_g_samples(x, y, v, idx_g)),
             (form.cross_xy_g_samples(x, y, v, idx_g), p.cross_xy_g_samples(x, y, v, idx_g)),
             *zip(form.grad_f_samples(x, y, idx_f), p.grad_f_samples(x, y, idx_f))]
    for mine, theirs in pairs:
        np.testing.assert_allclose(np.broadcast_to(mine, np.shape(theirs)), theirs, rtol=1e-12, atol=atol)
    assert form.sample_counts() == p.sample_counts()
    means = [(form.grad_y_g_samples(x, y), p.grad_y_g(x, y)), (form.hvp_yy_g_samples(x, y, v), p.hvp_yy_g(x, y, v)),
             (form.cross_xy_g_samples(x, y, v), p.cross_xy_g(x, y, v)),
             *zip(form.grad_f_samples(x, y), p.grad_f(x, y))]
    for rows, full in means:
        np.testing.assert_allclose(np.asarray(rows).mean(0), full, rtol=1e-12, atol=1e-15)


def check_form_derivatives(form: Any, idx: Any, x: np.ndarray, y: np.ndarray, v: np.ndarray,
                           rng: np.random.Generator, coordinates: int = 12) -> None:
    """A pure form's ∇y g (at `coordinates` random coordinates of y), ∇x g, ∇²yy g · v and ∇²xy g · v on minibatch
    `idx` (None: the full batch) against central differences of its own g and ∇y g there."""
    g = lambda x_, y_: float(form.on_batch("g", idx, x_, y_)[0])  # noqa: E731
    grad_y = lambda x_, y_: form.on_batch("grad_y_g", idx, x_, y_)  # noqa: E731
    u = rng.standard_normal(x.shape[-1])
    some = rng.choice(y.shape[-1], coordinates, replace=False)
    fd = fd_gradient(lambda z: g(x, np.where(np.isin(np.arange(y.shape[-1]), some), z, y)), y)[some]
    np.testing.assert_allclose(grad_y(x, y)[some], fd, rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(form.on_batch("grad_x_g", idx, x, y) @ u,
                               fd_directional(lambda z: np.array([g(z, y)]), x, u)[0], rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(form.on_batch("hvp_yy_g", idx, x, y, v), fd_directional(lambda z: grad_y(x, z), y, v),
                               rtol=1e-6, atol=1e-8)
    # ∇²xy g · v is J v (dim_x), the x-derivative of ⟨∇y g, v⟩
    np.testing.assert_allclose(form.on_batch("cross_xy_g", idx, x, y, v) @ u,
                               fd_directional(lambda z: np.array([grad_y(z, y) @ v]), x, u)[0], rtol=1e-6, atol=1e-9)
