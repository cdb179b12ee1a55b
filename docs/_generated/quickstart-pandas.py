import sweep
res = sweep.load_results("quickstart")
print(res.runs[["algorithm", "step_size_factor", "seed", "status", "grad_F_sq", "iteration"]].head(6).to_string())
print(res.runs.groupby(["algorithm", "step_size_factor"])["grad_F_sq"].median())
