"""The documented "Your own problem" code runs as written (the example, the registered module in a study),
and the dispatch benchmark runs."""
import subprocess
import sys
from pathlib import Path

from tests import documents

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent


def readme_block(marker: str) -> str:
    """The fenced code block right after `marker` (an HTML comment) in the documents."""
    return documents.marked_block(marker.removeprefix("<!-- ").removesuffix(" -->"))


def test_the_example_runs_as_written_and_F_decreases(tmp_path):
    code = readme_block("<!-- byop-example -->")
    assert len([ln for ln in code.splitlines() if ln.strip()]) <= 17  # "the whole example in ~15 lines"
    (tmp_path / "example.py").write_text(code)
    out = subprocess.run([sys.executable, "example.py"], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    rows = [list(map(float, ln.split())) for ln in out.stdout.splitlines()]
    assert [int(r[0]) for r in rows] == [0, 1, 4, 17, 72, 300]
    F = [r[1] for r in rows]
    assert F[-1] < 0.85 * F[0]  # measured: 0.711 -> 0.559
    assert all(r[3] == 0.0 for r in rows)  # ridge regression is strongly convex: ground truth everywhere


def test_the_registered_module_works_in_a_study_and_in_python(tmp_path):
    (tmp_path / "my_problems.py").write_text(readme_block("<!-- byop-register -->"))
    (tmp_path / "study.yaml").write_text(
        "imports: [my_problems]\nproblems: [{name: ridge_strengths, params: {n: [100, 500]}}]\n"
        "algorithms: [soba, f2sa]\nseeds: 2\nbudget: {iterations: 20}\n")
    out = subprocess.run([str(BIN / "bisweep"), "run", "study.yaml", "--validate-only"], cwd=tmp_path,
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "4 configurations x 2 seeds = 8 runs" in out.stdout
    (tmp_path / "study.yaml").write_text("imports: [my_problems]\nproblems: [{name: ridge_strengths, params: {n: 0}}]\n"
                                         "algorithms: [soba]\nbudget: {iterations: 20}\n")
    bad = subprocess.run([str(BIN / "bisweep"), "run", "study.yaml", "--validate-only"], cwd=tmp_path,
                         capture_output=True, text=True, timeout=300)
    assert bad.returncode == 2
    assert bad.stderr == "bisweep: error: problems[0].params.n: must be a positive integer, got 0\n"
    code = ("import my_problems, problems, algorithms\n"
            "p = problems.make('ridge_strengths', seed=1, n=100)\n"
            "r = list(algorithms.run('f2sa', p, {'gamma': 1.0}, seed=1, budget={'iterations': 20}, n_evals=3))\n"
            "print(p.dim_x, p.n_inner, p.n_outer, r[0]['F'], r[-1]['F'], r[-1]['status'])\n")
    run = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    dim, n_in, n_out, F0, F1, status = run.stdout.split()
    assert (dim, n_in, n_out, status) == ("5", "80", "20", "finished") and float(F1) < float(F0)


def test_the_dispatch_benchmark_runs_and_times_equal_oracles():
    out = subprocess.run([sys.executable, str(REPO / "benchmarks" / "bench_functional.py"), "--dims", "10",
                          "--repeats", "2", "--min-time", "0.005"], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]  # it refuses to time oracles that differ by > 1e-10
    rows = [ln.split() for ln in out.stdout.splitlines()[2:]]
    oracles = [r[3] if r[1] == "batch" else r[2] for r in rows]
    assert oracles == ["f", "grad_g", "grad_y_g", "hvp", "cross"] * 2 and {r[0] for r in rows} == {"10"}
    assert all(float(v) > 0 for r in rows for v in r[-7:-3] + r[-1:])  # µs per call and compile seconds
