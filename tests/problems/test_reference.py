"""The reference solve: against the closed-form optimum of the quadratic (its x_opt hidden), its local gap bound
holding there, and the projected path against scipy's bounded L-BFGS-B."""
import numpy as np
import pytest
from scipy import optimize

import problems
from problems.reference import reference_solve


def hidden(monkeypatch, p):
    monkeypatch.setattr(p, "x_opt", lambda: None)
    return p


def test_the_solver_finds_the_quadratics_optimum_within_its_gap_bound(monkeypatch):
    p = problems.make("quadratic", seed=4, dim_x=6, dim_y=5)
    f_opt = p.F(p.x_opt())
    ref = reference_solve(hidden(monkeypatch, p))
    assert ref.converged and ref.source.startswith("reference solve: L-BFGS-B") and "converged in" in ref.source
    assert ref.value == pytest.approx(f_opt, rel=1e-10, abs=1e-12)
    assert 0 <= ref.value - f_opt <= ref.gap + 1e-12  # F is strongly convex: the bound holds globally


def test_a_constrained_x_takes_projected_gradient_and_matches_scipy(monkeypatch):
    p = problems.make("quadratic", seed=4, dim_x=6, dim_y=5)
    lo, hi = -0.05, 0.05
    monkeypatch.setattr(p, "project_x", lambda x: np.clip(x, lo, hi))
    ref = reference_solve(hidden(monkeypatch, p))
    x0 = p.initial_point()[0]
    want = optimize.minimize(p.F, np.clip(x0, lo, hi), jac=p.grad_F, method="L-BFGS-B",
                             bounds=[(lo, hi)] * x0.size, options={"gtol": 1e-12, "ftol": 1e-15})
    assert ref.source.startswith("reference solve: projected gradient (Armijo)") and ref.converged
    assert ref.value == pytest.approx(want.fun, rel=1e-8)
    assert np.all(ref.x >= lo) and np.all(ref.x <= hi)


def test_a_problems_own_reference_is_used(monkeypatch):
    p = hidden(monkeypatch, problems.make("quadratic", seed=4, dim_x=3, dim_y=3))
    monkeypatch.setattr(p, "reference_value", lambda: (1.5, 0.0, "known from the paper"), raising=False)
    ref = reference_solve(p)
    assert (ref.value, ref.gap, ref.source) == (1.5, 0.0, "known from the paper")
