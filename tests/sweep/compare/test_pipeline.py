"""Real runs through the comparison pipeline: records → histories → hitting costs → profiles and tests,
checked against `sweep.report.analysis.first_reach` on the raw records (an independent scan)."""
import math

import pytest

import algorithms
import problems
from sweep.compare import profiles as pr, statistics as sx
from sweep.report import analysis

NAMES = ("soba", "aid_cg", "f2ba")


@pytest.fixture(scope="module")
def runs():
    out = []
    for inst in (0, 1):
        p = problems.make("quadratic", seed=inst, dim_x=5, dim_y=5, n_samples=64)
        for name in NAMES:
            for seed in (0, 1):
                recs = list(algorithms.run(name, p, {"batch_size": 16}, seed=seed, budget={"oracle_calls": 3000},
                                           n_evals=25))
                out.append({"algorithm": name, "problem": "quadratic", "instance": inst, "seed": seed,
                            "status": recs[-1]["status"], "records": recs})
    return out


def test_hitting_costs_agree_with_a_direct_scan_of_the_records(runs):
    costs = pr.hitting_costs(pr.history_frame(runs), taus=(0.5, 0.1))
    assert costs["lower_exact"].all()  # the quadratic knows its optimum: F_L = F(x*)
    by_key = costs.set_index(["instance", "seed", "algorithm", "tau"])
    reached = 0
    for r in runs:
        f0, f_opt = r["records"][0]["F"], r["records"][0]["F"] - r["records"][0]["F_gap"]
        for tau in (0.5, 0.1):
            # Weights 1 make gradient-equivalents the platform's calls/total.
            direct = analysis.first_reach(r["records"], "F_gap", tau * (f0 - f_opt), "calls/total")
            got = by_key.loc[(r["instance"], r["seed"], r["algorithm"], tau), "calls"]
            assert got == (direct if math.isfinite(direct) and r["status"] == "finished" else math.inf)
            reached += math.isfinite(got)
    assert 0 < reached < 24  # the check covers runs that reach the targets and runs that do not


def test_profiles_end_at_the_fraction_reached_and_statistics_cover_every_pair(runs):
    costs = pr.hitting_costs(pr.history_frame(runs), taus=(0.5, 0.1))
    data = pr.data_profile(costs)
    perf = pr.performance_profile(costs)
    for (tau, name), g in costs.groupby(["tau", "algorithm"]):
        frac = g["reached"].mean()
        assert data[(data["tau"] == tau) & (data["algorithm"] == name)]["fraction"].iloc[-1] == frac
        assert perf[(perf["tau"] == tau) & (perf["algorithm"] == name)]["fraction"].iloc[-1] == frac
    ttt = sx.time_to_target(costs, n_resamples=499)
    assert len(ttt) == 2 * len(NAMES) and (ttt["n"] == 4).all()
    tests = sx.pairwise_tests(costs)
    assert len(tests) == 2 * 3 and tests["p_holm"].between(0, 1).all()
    # 4 units at most: no difference can be significant, and no algorithm gets a rank above another.
    assert (tests["verdict"] == sx.SAME).all() and (sx.ranking(tests)["rank"] == 1).all()
