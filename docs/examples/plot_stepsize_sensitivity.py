"""
Sensitivity to the initial step size
====================================

The question a `stepsize_sensitivity` study asks, on one problem in this process: scale every initial
step size of an algorithm by a factor and look at the final ‖∇F‖². D-TFBO adapts its step sizes, so its
final value moves little; SOBA's fixed step sizes diverge when scaled up too far (a diverged run is drawn
at the top of the axis).
"""
import math

import matplotlib.pyplot as plt

import algorithms
import problems

problem = problems.make("quadratic", seed=1, dim_x=10, dim_y=10)
factors = [0.25, 0.5, 1, 2, 4]
fig, ax = plt.subplots(figsize=(6, 3.5))
for name in ("dtfbo", "soba"):
    defaults = algorithms.make_config(name, {})
    finals = []
    for f in factors:
        config = {s: getattr(defaults, s) * f for s in algorithms.get(name).step_sizes}
        last = list(algorithms.run(name, problem, config, budget={"iterations": 1000}, n_evals=2))[-1]
        value = last["grad_F_sq"]
        finals.append(value if math.isfinite(value) and value < 1e10 else 1e10)
        print(f"{name} ×{f:g}: final ‖∇F‖² = {value:.3g}")
    ax.loglog(factors, finals, marker="o", label=name)
ax.set_xlabel("factor on the initial step sizes")
ax.set_ylabel("final ‖∇F(x)‖²")
ax.legend()
fig.tight_layout()
