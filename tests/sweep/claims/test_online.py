"""F2OBO regret claim: fitted exponents on regrets that follow known powers of T; the static methods' linear
regret is a bound, shown as a reference row."""
import pytest

from sweep import claims
from sweep.claims import online
from sweep.results.store import study_meta
from sweep.study import spec


def test_regret_claim_exponents(tmp_path, run_data):
    Ts = (100, 400, 1600)
    runs = []
    for alg, p in (("af2obo", 0.5), ("obbo", 1.0), ("f2obo", 0.0)):
        for T in Ts:
            final = {"cumulative_regret": 3.0 * T ** p, "diag/inner_iterations_total": 2.0 * T ** 2}
            runs.append(run_data("oscillating_toy", final, algorithm=alg, axis=T))
    meta = {**study_meta(spec.load("online_drift")), "seeds": [0]}
    rep = online.f2obo_regret(meta, runs, tmp_path)
    rows = {r["algorithm"]: r for r in rep.tables["measured"]}
    for alg, p in (("af2obo", 0.5), ("obbo", 1.0), ("f2obo", 0.0)):
        assert rows[alg]["regret_exponent"] == pytest.approx(p, abs=1e-9)
    assert rows["af2obo"]["inner_per_step@Tmax"] == pytest.approx(2.0 * 1600)
    status = [(v.claim.split(" ")[0], v.status) for v in rep.verdicts]
    assert status == [("AF2OBO's", "agrees"), ("obbo", "reference"), ("f2obo", "reference"), ("AF2OBO's", "agrees")]
    assert "(sublinear); regrets 3, 3, 3" in rep.verdicts[2].measured  # F2OBO's flat regret, set beside its bound
    assert "measured exponent 1 (linear)" in rep.verdicts[1].measured


def test_the_built_in_study_runs_the_papers_example():
    rows = {s.field: s for s in claims.CLAIMS["f2obo_regret"].settings(study_meta(spec.load("online_drift")))}
    assert [f for f, s in rows.items() if s.deviation] == ["metric"]  # a measured regret against a bound
    assert rows["problem and data"].status == rows["constraints"].status == rows["step sizes"].status == "same"
