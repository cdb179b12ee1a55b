"""Fixed-seed runs reproduce their records bit for bit: a speed change must not change a result.

Every offline unconstrained algorithm runs 12 iterations (minibatch 8 where it has a minibatch form,
D-TFBO in fixed-loop mode) on a small `quadratic` finite sum, `simulated` and `regularization_selection`
(breast_cancer); the records, timings removed (time, cpu_time, eval_time), are hashed with every float written
exactly (float.hex). OGD's references were recorded when it was added, after the speed-ups.

The simulated and regularization_selection references equal the digests of the code before the oracle
and run-loop speed-ups (each run on a fresh instance, all 22 algorithms compared). The quadratic ones were recorded after its minibatch oracles moved from einsum
to BLAS products, which sum in another order: in 16 of its 19 runs some last bits moved. Against a
long-double evaluation the BLAS oracles are the more accurate of the two (max error / max |value| at
d = 1000: 7.0e-16 vs 1.3e-15 for ∇y g; benchmarks/bench_algorithms.py --accuracy prints the table), and
QUADRATIC_BEFORE keeps each run's final F from before the change to bound the move: at most 1.6e-15
relative, except AID-CG's 1.3e-13 (conjugate gradients on an 8-sample Hessian amplify rounding).

Exact bits depend on the BLAS kernels, so the references are kept per BLAS (library, kernels, version of
each BLAS loaded): the ones above were recorded with OpenBLAS's SkylakeX kernels. With its Haswell kernels
(an AMD EPYC) the pre-speed-up code (commit 9df35f6) and today's give the same digests on simulated and
regularization_selection (40 of 40 runs; FSLA, MRBO, VRBO and OGD were not there yet, and are recorded from
today's code), and on quadratic they move the final F by at most 2.3e-16 relative, AID-CG's by 2.0e-12;
QUADRATIC_BEFORE keeps that kernel's pre-change values too. BVFSM's final F differs by 3.5% between the two
kernel families: its log barrier divides by a gap that reaches 1e-3, and phase-I steps switch on its sign, so
rounding in the full-batch products (not touched by the change: its digest is the same before and after on
each) grows. Under a BLAS with no references the tests that need them are skipped, saying why.
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
SKYLAKEX = (("openblas", "SkylakeX", "0.3.30"), ("openblas", "SkylakeX", "0.3.31.188.0"))
HASWELL = (("openblas", "Haswell", "0.3.30"), ("openblas", "Haswell", "0.3.31.188.0"))

SKYLAKEX_DIGESTS = {
    "quadratic/aid_cg": "738164ea5af94d22", "quadratic/aid_fp": "3af05d760ba223de",
    "quadratic/amigo": "3af05d760ba223de", "quadratic/bome": "99b13f91038787e7",
    "quadratic/bsa": "16c73246dac7426a", "quadratic/bsg1": "71aefa076d365f79",
    "quadratic/bvfsm": "adca1377619dbb32", "quadratic/dtfbo": "8a4f604fed42b906",
    "quadratic/f2ba": "8f22050de2437532", "quadratic/f2sa": "dcb80f55f1e55856",
    "quadratic/fsla": "8c0e1cf8a41cbf8d", "quadratic/itd": "d1ff5fea889327b4",
    "quadratic/mrbo": "50c7bd984f16fe8b", "quadratic/ogd": "4ae4cb0db5903d02",
    "quadratic/penalty": "aac35cefdb7a5359",
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
    "simulated/mrbo": "527349a43567c8d0", "simulated/ogd": "6f1d87e2f625a9de",
    "simulated/penalty": "6eeb99c3bb3a7b09",
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
    "regularization_selection/mrbo": "adf007c37a0ce7b5", "regularization_selection/ogd": "c38e01a2407cecb2",
    "regularization_selection/penalty": "d1a0257d7f23b341",
    "regularization_selection/saba": "4fef28eecbd218ce", "regularization_selection/soba": "2877b122b6a8a7d4",
    "regularization_selection/srba": "2ce3ca0057ae4458", "regularization_selection/stfbo": "7ba715f4792368ef",
    "regularization_selection/stocbio": "b83781f566c28184", "regularization_selection/sustain": "1acf4960ea97b486",
    "regularization_selection/ttsa": "b2a4f62c6f55fd04", "regularization_selection/vrbo": "064ac40cb59cfa9a",
}

HASWELL_DIGESTS = {
    "quadratic/aid_cg": "4c51e5527d0051b1", "quadratic/aid_fp": "1e3b5c42b521eb4d",
    "quadratic/amigo": "1e3b5c42b521eb4d", "quadratic/bome": "edfe80ad52044375",
    "quadratic/bsa": "c4efd533be21e244", "quadratic/bsg1": "bc2691471a201ac6",
    "quadratic/bvfsm": "b440031243e2eff3", "quadratic/dtfbo": "18315e81be505a34",
    "quadratic/f2ba": "949a035974e3eda5", "quadratic/f2sa": "37c6c38a28f0c2c1",
    "quadratic/fsla": "04eac9ad42314090", "quadratic/itd": "8c5f2243d131cbf2",
    "quadratic/mrbo": "175fa9c8b831e744", "quadratic/ogd": "84e2e3c3fe036ef1",
    "quadratic/penalty": "0ee4c9ab8ecf3a13", "quadratic/saba": "307561feffaee81b",
    "quadratic/soba": "a8fd7f24370ce7a5", "quadratic/srba": "e7e2cb250f9de980",
    "quadratic/stfbo": "05fec4e1b19536b0", "quadratic/stocbio": "d99ad4a0ecad7970",
    "quadratic/sustain": "3f5507147cae7b1e", "quadratic/ttsa": "c7ae176d4af075cc",
    "quadratic/vrbo": "945a4bb7139079ed", "regularization_selection/aid_cg": "74aaa5114e6bfea0",
    "regularization_selection/aid_fp": "54b4ade490c97aed", "regularization_selection/amigo": "54b4ade490c97aed",
    "regularization_selection/bome": "7ae5039e28869da8", "regularization_selection/bsa": "0982c92f02dcc929",
    "regularization_selection/bsg1": "55884cf4793d86f0", "regularization_selection/bvfsm": "8c0b6e9591d490f6",
    "regularization_selection/dtfbo": "b1aa71218c7303a7", "regularization_selection/f2ba": "2503e97605ff6af3",
    "regularization_selection/f2sa": "f50a66b59490de0b", "regularization_selection/fsla": "b9c30f97c8a5e92f",
    "regularization_selection/itd": "3024f61e86b9730d", "regularization_selection/mrbo": "9ccd09110e0d09bd",
    "regularization_selection/ogd": "9e21adb4ee127356", "regularization_selection/penalty": "96124c2cbe8e5492",
    "regularization_selection/saba": "ea4a348cad41c214", "regularization_selection/soba": "c888d7a1cc3b77c6",
    "regularization_selection/srba": "673681fc4f00c432", "regularization_selection/stfbo": "56db9bbdf35efa61",
    "regularization_selection/stocbio": "24a18294e72c7e83", "regularization_selection/sustain": "c56c47a35ef3b94d",
    "regularization_selection/ttsa": "3da090e27c5cf115", "regularization_selection/vrbo": "2d320e45a2c130a9",
    "simulated/aid_cg": "78d11eb1f19d79d8", "simulated/aid_fp": "703b9cdd8330834c",
    "simulated/amigo": "703b9cdd8330834c", "simulated/bome": "e51e59f28bc239a7",
    "simulated/bsa": "231f6a9cc6aa0c53", "simulated/bsg1": "9a736ce68b700709",
    "simulated/bvfsm": "3e8f5d904d9bedcb", "simulated/dtfbo": "fd581ca6100375f2",
    "simulated/f2ba": "b7bd27c9ab7c7d3c", "simulated/f2sa": "03867652d1d9fc1b",
    "simulated/fsla": "722b05d356752761", "simulated/itd": "949b6a3fc0bf2f81",
    "simulated/mrbo": "dbcdd0dc9ba51702", "simulated/ogd": "378ff5484ce8af78",
    "simulated/penalty": "f5d3ed2b9a125c05", "simulated/saba": "28a8d8cafbee2a7d",
    "simulated/soba": "af3edbcf6664515c", "simulated/srba": "5a6be9f213feef7c",
    "simulated/stfbo": "17a10a3fd953b2f0", "simulated/stocbio": "bfaf937949bd27ce",
    "simulated/sustain": "6c58d2dea01ff4db", "simulated/ttsa": "2e347a76ffdb0bad",
    "simulated/vrbo": "849425e528f4df1a",
}

ALGORITHMS = sorted({key.split("/")[1] for key in SKYLAKEX_DIGESTS})

#: Final F of each quadratic run recorded before the einsum → BLAS change (float.hex), SkylakeX kernels.
SKYLAKEX_QUADRATIC_BEFORE = {
    "aid_cg": "0x1.012af137b5b6ep+3", "aid_fp": "0x1.3ec548f5cb9d4p+3", "amigo": "0x1.3ec548f5cb9d4p+3",
    "bome": "0x1.fbccd77f37ec2p+3", "bsa": "0x1.6f38ee27ba015p+3", "bsg1": "0x1.0d697fa066acfp+4",
    "bvfsm": "0x1.8296492ce52d2p+3", "dtfbo": "0x1.d371a39fdd222p+2", "f2ba": "0x1.1a6e65eaa9ab3p+6",
    "f2sa": "0x1.e7bb2bc401ac7p+2", "itd": "0x1.f254345bb3c7ap+2", "penalty": "0x1.fe182978aa949p+3",
    "saba": "0x1.b6514fc1fa1a3p+3", "soba": "0x1.fae7b3956916ep+3", "srba": "0x1.b284c22cd26a3p+3",
    "stfbo": "0x1.07fa84b4ef66fp+4", "stocbio": "0x1.cfbaabfa5600dp+2", "sustain": "0x1.8bfde46b3cf93p+3",
    "ttsa": "0x1.bbe1bee156960p+3",
}

#: The same, Haswell kernels (commit 9df35f6 run on them).
HASWELL_QUADRATIC_BEFORE = {
    "aid_cg": "0x1.012af137b6561p+3", "aid_fp": "0x1.3ec548f5cb9d0p+3", "amigo": "0x1.3ec548f5cb9d0p+3",
    "bome": "0x1.fbccd77f37ec4p+3", "bsa": "0x1.6f38ee27ba017p+3", "bsg1": "0x1.0d697fa066ad0p+4",
    "bvfsm": "0x1.752c1fae5abd0p+3", "dtfbo": "0x1.d371a39fdd226p+2", "f2ba": "0x1.1a6e65eaa9aa9p+6",
    "f2sa": "0x1.e7bb2bc401acep+2", "itd": "0x1.f254345bb3c7ap+2", "penalty": "0x1.fe182978aa94dp+3",
    "saba": "0x1.b6514fc1fa1a7p+3", "soba": "0x1.fae7b39569170p+3", "srba": "0x1.b284c22cd26a8p+3",
    "stfbo": "0x1.07fa84b4ef672p+4", "stocbio": "0x1.cfbaabfa5600dp+2", "sustain": "0x1.8bfde46b3cf97p+3",
    "ttsa": "0x1.bbe1bee156962p+3",
}

#: (digests, quadratic final F before the einsum → BLAS change) by BLAS fingerprint.
REFERENCES = {SKYLAKEX: (SKYLAKEX_DIGESTS, SKYLAKEX_QUADRATIC_BEFORE),
              HASWELL: (HASWELL_DIGESTS, HASWELL_QUADRATIC_BEFORE)}


def digest(records):
    """sha256 (16 hex digits) of the records without their timings, floats written exactly."""
    h = hashlib.sha256()
    for rec in records:
        for k in sorted(rec):
            if k in ("time", "cpu_time", "eval_time"):
                continue
            v = rec[k]
            h.update(f"{k}={v.hex() if isinstance(v, float) else v!r};".encode())
        h.update(b"\n")
    return h.hexdigest()[:16]


def blas_fingerprint():
    threadpoolctl = pytest.importorskip("threadpoolctl")
    return tuple(sorted(tuple(i.get(k) for k in ("internal_api", "architecture", "version"))
                        for i in threadpoolctl.threadpool_info() if i["user_api"] == "blas"))


def references():
    """(digests, quadratic F before) recorded with this BLAS, or skip saying which BLAS have references."""
    fingerprint = blas_fingerprint()
    if fingerprint not in REFERENCES:
        pytest.skip(f"references recorded with BLAS {sorted(REFERENCES)}, this is {fingerprint}")
    return REFERENCES[fingerprint]


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
    package = {n for n, d in algorithms.available().items() if not d["online"] and not d["constrained"] and not d["coreset"]
               and algorithms.get(n).__module__.startswith("algorithms.")}  # other tests register toys
    assert set(ALGORITHMS) == package
    assert set(runs) == set(SKYLAKEX_DIGESTS) == set(HASWELL_DIGESTS)
    assert set(SKYLAKEX_QUADRATIC_BEFORE) == set(HASWELL_QUADRATIC_BEFORE)


def test_records_are_bit_identical_to_the_references(runs):
    digests, _ = references()
    changed = {k: digest(r) for k, r in runs.items() if digest(r) != digests[k]}
    assert changed == {}


def test_a_run_reproduces_itself_and_the_digest_sees_one_bit(runs):
    p = problems.make("simulated", **CASES["simulated"])
    again = list(algorithms.run("soba", p, {"batch_size": 8}, seed=1, budget={"iterations": 12}, n_evals=4))
    assert digest(again) == digest(runs["simulated/soba"])
    flipped = [dict(r) for r in again]
    flipped[-1]["F"] = float(np.nextafter(flipped[-1]["F"], np.inf))
    assert digest(flipped) != digest(again)


@pytest.mark.parametrize("name", sorted(SKYLAKEX_QUADRATIC_BEFORE))
def test_quadratic_runs_moved_by_rounding_only(runs, name):
    _, quadratic_before = references()
    before = float.fromhex(quadratic_before[name])
    rel = 5e-12 if name == "aid_cg" else 1e-14  # AID-CG: 1.3e-13 (SkylakeX), 2.0e-12 (Haswell)
    assert runs[f"quadratic/{name}"][-1]["F"] == pytest.approx(before, rel=rel, abs=0)


@pytest.mark.parametrize("threads", [1, 2])
def test_the_references_hold_at_one_and_two_blas_threads(threads):
    digests, _ = references()
    from algorithms.threads import blas_threads

    with blas_threads(threads):
        runs = run_all({"simulated", "regularization_selection"})
    assert {k: digest(r) for k, r in runs.items() if digest(r) != digests[k]} == {}
