"""Fixed-seed runs reproduce their records bit for bit: a speed change must not change a result.

Every offline unconstrained algorithm runs 12 iterations (minibatch 8 where it has a minibatch form,
D-TFBO in fixed-loop mode) on a small `quadratic` finite sum, `simulated` and `regularization_selection`
(breast_cancer); the records, timings removed, are hashed with every float written exactly (float.hex).

The simulated and regularization_selection references equal the digests of the code before the oracle
and run-loop speed-ups (each run on a fresh instance, all 22 algorithms compared). The quadratic ones were recorded after its minibatch oracles moved from einsum
to BLAS products, which sum in another order: in 16 of its 19 runs some last bits moved. Against a
long-double evaluation the BLAS oracles are the more accurate of the two (max error / max |value| at
d = 1000: 7.0e-16 vs 1.3e-15 for ∇y g; benchmarks/bench_algorithms.py --accuracy prints the table), and
QUADRATIC_BEFORE keeps each run's final F from before the change to bound the move: at most 1.6e-15
relative, except AID-CG's 1.3e-13 (conjugate gradients on an 8-sample Hessian amplify rounding).

Exact bits depend on the BLAS kernels, so the references hold for the BLAS they were recorded with
(BLAS_FINGERPRINT); under another BLAS build or CPU family the digest test is skipped, saying why.
"""
import hashlib

import numpy as np
import pytest

import algorithms
import problems

CASES = {
    "quadratic": dict(seed=3, dim_x=12, dim_y=10, n_samples=40, rank=2),
    "simulated": dict(seed=3, dim_x=12, dim_y=10, n_samples_inner=64, n_samples_outer=48),
    "regularization_selection": dict(seed=3, dataset="breast_cancer"),
}
SETTINGS = {"dtfbo": {"sub_loops": "fixed"}}
#: (library, CPU kernels, version) of every BLAS loaded: NumPy's and SciPy's own OpenBLAS builds.
BLAS_FINGERPRINT = (("openblas", "SkylakeX", "0.3.30"), ("openblas", "SkylakeX", "0.3.31.188.0"))

DIGESTS = {
    "quadratic/aid_cg": "738164ea5af94d22", "quadratic/aid_fp": "3af05d760ba223de",
    "quadratic/amigo": "3af05d760ba223de", "quadratic/bome": "99b13f91038787e7",
    "quadratic/bsa": "16c73246dac7426a", "quadratic/bsg1": "71aefa076d365f79",
    "quadratic/bvfsm": "adca1377619dbb32", "quadratic/dtfbo": "8a4f604fed42b906",
    "quadratic/f2ba": "8f22050de2437532", "quadratic/f2sa": "dcb80f55f1e55856",
    "quadratic/fsla": "8c0e1cf8a41cbf8d", "quadratic/itd": "d1ff5fea889327b4",
    "quadratic/mrbo": "50c7bd984f16fe8b", "quadratic/penalty": "aac35cefdb7a5359",
    "quadratic/saba": "66839ece61c202e8", "quadratic/soba": "94549a62c1d1c005",
    "quadratic/srba": "522bd354b1e8dfea", "quadratic/stfbo": "39d93ceb14b32907",
    "quadratic/stocbio": "6f4f28f3e2be22f2", "quadratic/sustain": "61e08dfbe0a99dbd",
    "quadratic/ttsa": "4d6b56aa26b626c0", "quadratic/vrbo": "2494c123db56519e",
    "simulated/aid_cg": "7af79709fa8892af", "simulated/aid_fp": "adfdd5092d489cab",
    "simulated/amigo": "adfdd5092d489cab", "simulated/bome": "7b3ec3239a90cf82",
    "simulated/bsa": "94404ed62c613c4f", "simulated/bsg1": "b0071c33f9e3a46c",
    "simulated/bvfsm": "1c584c35e5fc64f3", "simulated/dtfbo": "6c2e305cc0dc1b23",
    "simulated/f2ba": "93eaa86954d95866", "simulated/f2sa": "329065c8ac94eef5",
    "simulated/fsla": "8717a9de76430ec4", "simulated/itd": "6b7cdf5898f641a0",
    "simulated/mrbo": "527349a43567c8d0", "simulated/penalty": "6eeb99c3bb3a7b09",
    "simulated/saba": "6d35a027fd84d764", "simulated/soba": "deeb237e66b5d89f",
    "simulated/srba": "0402a703cf638f0f", "simulated/stfbo": "465699ba1b0370d3",
    "simulated/stocbio": "544abd4acb9dc1b4", "simulated/sustain": "6ed6352511689a24",
    "simulated/ttsa": "c46f19967eb779ad", "simulated/vrbo": "a977902169fb2d95",
    "regularization_selection/aid_cg": "4cd6cf2477fba7dd", "regularization_selection/aid_fp": "75bd9188cee97491",
    "regularization_selection/amigo": "75bd9188cee97491", "regularization_selection/bome": "29cb97278f6df191",
    "regularization_selection/bsa": "dfba1295c6f25b11", "regularization_selection/bsg1": "7f659ea80f695970",
    "regularization_selection/bvfsm": "05cd9c39ba1e6184", "regularization_selection/dtfbo": "dc1fc4233d43c885",
    "regularization_selection/f2ba": "ca2982554cc8628b", "regularization_selection/f2sa": "88786c9f75ed0a79",
    "regularization_selection/fsla": "4dc3799337d7606b", "regularization_selection/itd": "1dfa51561a0a6604",
    "regularization_selection/mrbo": "adf007c37a0ce7b5", "regularization_selection/penalty": "d1a0257d7f23b341",
    "regularization_selection/saba": "4fef28eecbd218ce", "regularization_selection/soba": "2877b122b6a8a7d4",
    "regularization_selection/srba": "2ce3ca0057ae4458", "regularization_selection/stfbo": "7ba715f4792368ef",
    "regularization_selection/stocbio": "b83781f566c28184", "regularization_selection/sustain": "1acf4960ea97b486",
    "regularization_selection/ttsa": "b2a4f62c6f55fd04", "regularization_selection/vrbo": "064ac40cb59cfa9a",
}

ALGORITHMS = sorted({key.split("/")[1] for key in DIGESTS})

#: Final F of each quadratic run recorded before the einsum → BLAS change (float.hex).
QUADRATIC_BEFORE = {
    "aid_cg": "0x1.012af137b5b6ep+3", "aid_fp": "0x1.3ec548f5cb9d4p+3", "amigo": "0x1.3ec548f5cb9d4p+3",
    "bome": "0x1.fbccd77f37ec2p+3", "bsa": "0x1.6f38ee27ba015p+3", "bsg1": "0x1.0d697fa066acfp+4",
    "bvfsm": "0x1.8296492ce52d2p+3", "dtfbo": "0x1.d371a39fdd222p+2", "f2ba": "0x1.1a6e65eaa9ab3p+6",
    "f2sa": "0x1.e7bb2bc401ac7p+2", "itd": "0x1.f254345bb3c7ap+2", "penalty": "0x1.fe182978aa949p+3",
    "saba": "0x1.b6514fc1fa1a3p+3", "soba": "0x1.fae7b3956916ep+3", "srba": "0x1.b284c22cd26a3p+3",
    "stfbo": "0x1.07fa84b4ef66fp+4", "stocbio": "0x1.cfbaabfa5600dp+2", "sustain": "0x1.8bfde46b3cf93p+3",
    "ttsa": "0x1.bbe1bee156960p+3",
}


def digest(records):
    """sha256 (16 hex digits) of the records without their timings, floats written exactly."""
    h = hashlib.sha256()
    for rec in records:
        for k in sorted(rec):
            if k in ("time", "eval_time"):
                continue
            v = rec[k]
            h.update(f"{k}={v.hex() if isinstance(v, float) else v!r};".encode())
        h.update(b"\n")
    return h.hexdigest()[:16]


def blas_fingerprint():
    threadpoolctl = pytest.importorskip("threadpoolctl")
    return tuple(sorted(tuple(i.get(k) for k in ("internal_api", "architecture", "version"))
                        for i in threadpoolctl.threadpool_info() if i["user_api"] == "blas"))


def run_all(names=None):
    """Every case's records by "problem/algorithm" (all problems, or those in `names`)."""
    out = {}
    for pname, params in CASES.items():
        if names is not None and pname not in names:
            continue
        for name in ALGORITHMS:
            # A fresh instance per run: a problem's ground truth is solved warm-started from its previous
            # evaluations (to 1e-10), so a shared instance would tie each digest to the runs before it.
            p = problems.make(pname, **params)
            d = algorithms.available()[name]
            cfg = dict(SETTINGS.get(name, {}))
            if "batch_size" in d["params"]:
                cfg["batch_size"] = 8
            out[f"{pname}/{name}"] = list(algorithms.run(name, p, cfg, seed=1, budget={"iterations": 12}, n_evals=4))
    return out


@pytest.fixture(scope="module")
def runs():
    return run_all()


def test_every_offline_unconstrained_algorithm_is_covered(runs):
    package = {n for n, d in algorithms.available().items() if not d["online"] and not d["constrained"]
               and algorithms.get(n).__module__.startswith("algorithms.")}  # other tests register toys
    assert set(ALGORITHMS) == package
    assert set(runs) == set(DIGESTS)


def test_records_are_bit_identical_to_the_references(runs):
    if blas_fingerprint() != BLAS_FINGERPRINT:
        pytest.skip(f"references recorded with BLAS {BLAS_FINGERPRINT}, this is {blas_fingerprint()}")
    changed = {k: digest(r) for k, r in runs.items() if digest(r) != DIGESTS[k]}
    assert changed == {}


def test_a_run_reproduces_itself_and_the_digest_sees_one_bit(runs):
    p = problems.make("simulated", **CASES["simulated"])
    again = list(algorithms.run("soba", p, {"batch_size": 8}, seed=1, budget={"iterations": 12}, n_evals=4))
    assert digest(again) == digest(runs["simulated/soba"])
    flipped = [dict(r) for r in again]
    flipped[-1]["F"] = float(np.nextafter(flipped[-1]["F"], np.inf))
    assert digest(flipped) != digest(again)


@pytest.mark.parametrize("name", sorted(QUADRATIC_BEFORE))
def test_quadratic_runs_moved_by_rounding_only(runs, name):
    before = float.fromhex(QUADRATIC_BEFORE[name])
    rel = 5e-13 if name == "aid_cg" else 1e-14
    assert runs[f"quadratic/{name}"][-1]["F"] == pytest.approx(before, rel=rel, abs=0)


@pytest.mark.parametrize("threads", [1, 2])
def test_the_references_hold_at_one_and_two_blas_threads(threads):
    if blas_fingerprint() != BLAS_FINGERPRINT:
        pytest.skip(f"references recorded with BLAS {BLAS_FINGERPRINT}, this is {blas_fingerprint()}")
    from algorithms.threads import blas_threads

    with blas_threads(threads):
        runs = run_all({"simulated", "regularization_selection"})
    assert {k: digest(r) for k, r in runs.items() if digest(r) != DIGESTS[k]} == {}
