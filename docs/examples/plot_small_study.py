"""
A small study on Ray, from Python
=================================

The whole platform in one script: a `stepsize_sensitivity` study written as a mapping, validated by
`load_study`, run by `run_study` on a local Ray with MLflow in the results directory's SQLite file (as
`bisweep run` does), and read back with `load_results` as pandas DataFrames. Each panel draws the
median ‖∇F‖² over the seeds at each evaluation point, one line per factor on the initial step sizes;
how far apart an algorithm's three lines end is what the study's sensitivity table summarises.
"""
import io
import tempfile
from pathlib import Path

import matplotlib.pyplot as plt

from sweep import load_results, load_study, run_study

study = load_study({
    "name": "gallery_sensitivity",
    "kind": "stepsize_sensitivity",
    "axis": {"factors": [0.25, 1, 4]},
    "problems": [{"name": "quadratic", "params": {"dim_x": 5, "dim_y": 5, "mu": 0.5, "outer_curvature": 1.0}}],
    "algorithms": ["dtfbo", "soba"],
    "seeds": 2,
    "budget": {"iterations": 500},
    "n_evals": 6,
    "report": {"metric": "grad_F_sq"},
})
root = Path(tempfile.mkdtemp()) / study.name
log = io.StringIO()  # the progress lines `bisweep run` prints
outcome = run_study(study, root, report=False, out=log)
print(log.getvalue().splitlines()[-1])

results = load_results(root)
print(results.runs.groupby(["algorithm", "step_size_factor"])["grad_F_sq"].median().to_string())

curves = results.records.groupby(["algorithm", "step_size_factor", "iteration"])["grad_F_sq"].median()
fig, axes = plt.subplots(1, 2, figsize=(8, 3.2), sharey=True)
for ax, algorithm in zip(axes, ("dtfbo", "soba")):
    for factor, curve in curves[algorithm].groupby(level=0):
        ax.semilogy(curve.index.get_level_values("iteration"), curve.to_numpy(), marker="o", label=f"×{factor:g}")
    ax.set_title(algorithm)
    ax.set_xlabel("iteration")
axes[0].set_ylabel("median ‖∇F(x)‖² over seeds")
axes[1].legend(title="initial step sizes")
fig.tight_layout()
