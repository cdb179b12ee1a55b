"""Oracle counts are exact: per-iteration calls counted by hand from each algorithm's definition,
compared with the counter's calls/* and samples/* record fields."""
import numpy as np
import pytest

import algorithms
import problems

KINDS = ("f", "g", "grad_f", "grad_g", "hvp", "cross", "hessian")
N = 48
SUM = problems.make("quadratic", seed=1, dim_x=5, dim_y=6, mu=0.5, L=1.0, outer_curvature=1.0,
                    n_samples=N, rank=1)


def per_iteration(name, cfg, iterations=4, p=SUM):
    """Records at every iteration (n_evals ≥ iterations) and the per-iteration call differences."""
    recs = list(algorithms.run(name, p, cfg, seed=0, budget={"iterations": iterations}, n_evals=100))
    assert [r["iteration"] for r in recs] == list(range(iterations + 1))
    diffs = [{k: b[f"calls/{k}"] - a[f"calls/{k}"] for k in KINDS} for a, b in zip(recs, recs[1:])]
    return recs, diffs


def by_hand(grad_f=0, grad_g=0, hvp=0, cross=0):
    return {"f": 0, "g": 0, "grad_f": grad_f, "grad_g": grad_g, "hvp": hvp, "cross": cross, "hessian": 0}


@pytest.mark.parametrize("batch", [None, 5])
def test_soba_one_gradient_of_each_level_one_hvp_one_cross(batch):
    recs, diffs = per_iteration("soba", {"batch_size": batch})
    assert diffs == [by_hand(grad_f=1, grad_g=1, hvp=1, cross=1)] * 4
    per_call = N if batch is None else batch
    last = recs[-1]
    for k in ("grad_f", "grad_g", "hvp", "cross"):
        assert last[f"samples/{k}"] == last[f"calls/{k}"] * per_call
    assert last["samples/total"] == 16 * per_call


def test_amigo_T_inner_gradients_and_v_steps_hvps():
    # T = 7 SGD steps on y (7 ∇y g), one ∇f, 3 SGD steps on v (3 HVPs), one cross product.
    _, diffs = per_iteration("amigo", {"inner_steps": 7, "v_steps": 3, "batch_size": 4})
    assert diffs == [by_hand(grad_f=1, grad_g=7, hvp=3, cross=1)] * 4


def test_dtfbo_fixed_loops():
    _, diffs = per_iteration("dtfbo", {"sub_loops": "fixed", "y_steps": 10, "v_steps": 10})
    assert diffs == [by_hand(grad_f=1, grad_g=10, hvp=10, cross=1)] * 4


def test_dtfbo_tolerance_loops_read_from_diagnostics():
    # Each loop evaluates its gradient once per step plus once to see the tolerance met: P_t + 1 gradients
    # of g and Q_t + 1 HVPs; then one ∇f and one cross product.
    recs, diffs = per_iteration("dtfbo", {"horizon": 200}, iterations=6)
    loops = [(r["diag/y_loop"], r["diag/v_loop"]) for r in recs[1:]]
    assert loops[0][0] > 5 and loops[0][1] > 5  # the first outer step does real work
    for (P, Q), d in zip(loops, diffs):
        assert d == by_hand(grad_f=1, grad_g=int(P) + 1, hvp=int(Q) + 1, cross=1)


def test_dtfbo_capped_loops_skip_the_final_check():
    recs, diffs = per_iteration("dtfbo", {"max_sub_steps": 4, "c_y": 1e-30, "c_v": 1e-30}, iterations=3)
    assert diffs == [by_hand(grad_f=1, grad_g=4, hvp=4, cross=1)] * 3
    assert recs[-1]["diag/y_cap_hits"] == 3 and recs[-1]["diag/v_cap_hits"] == 3


def test_dtfbo_minibatch_samples():
    recs, _ = per_iteration("dtfbo", {"sub_loops": "fixed", "y_steps": 3, "v_steps": 2, "batch_size": 7})
    last = recs[-1]
    assert (last["calls/grad_g"], last["calls/hvp"], last["calls/grad_f"], last["calls/cross"]) == (12, 8, 4, 4)
    assert last["samples/total"] == 7 * last["calls/total"]


@pytest.mark.parametrize("name, cfg, expected", [
    ("stfbo", {}, by_hand(grad_f=1, grad_g=1, hvp=1, cross=1)),
    # CG from a warm start pays one HVP for the initial residual (on the first step v = 0 is passed too).
    ("aid_cg", {"inner_steps": 4, "cg_steps": 3}, by_hand(grad_f=1, grad_g=4, hvp=4, cross=1)),
    ("aid_cg", {"inner_steps": 4, "cg_steps": 3, "warm_start": False}, by_hand(grad_f=1, grad_g=4, hvp=3, cross=1)),
    ("aid_fp", {"inner_steps": 2, "fp_steps": 5}, by_hand(grad_f=1, grad_g=2, hvp=5, cross=1)),
    ("itd", {"inner_steps": 6}, by_hand(grad_f=1, grad_g=6, hvp=6, cross=6)),
    ("itd", {"inner_steps": 6, "truncate": 2}, by_hand(grad_f=1, grad_g=6, hvp=2, cross=2)),
    ("stocbio", {"inner_steps": 3, "neumann_terms": 8}, by_hand(grad_f=1, grad_g=3, hvp=8, cross=1)),
    # K steps: ∇y f(y), ∇y g(y), ∇y g(z) each; then ∇x f(y), ∇x g(y), ∇x g(z). No second order at all.
    ("f2sa", {"inner_steps": 5}, by_hand(grad_f=6, grad_g=12)),
])
def test_other_algorithms_by_hand(name, cfg, expected):
    _, diffs = per_iteration(name, cfg)
    assert diffs == [expected] * 4


def test_f2sa_is_first_order_in_minibatch_form_too():
    assert algorithms.available()["f2sa"]["first_order"]
    recs, _ = per_iteration("f2sa", {"batch_size": 3})
    assert recs[-1]["calls/hvp"] == recs[-1]["calls/cross"] == recs[-1]["calls/hessian"] == 0
    assert recs[-1]["samples/total"] == 3 * recs[-1]["calls/total"]


def test_ground_truth_evaluation_is_never_counted():
    recs, _ = per_iteration("soba", {}, iterations=3)
    assert recs[0]["calls/total"] == 0 and recs[-1]["calls/total"] == 12
    assert np.isfinite(recs[-1]["F"]) and np.isfinite(recs[-1]["grad_F_sq"])
