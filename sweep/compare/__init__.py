"""Fair comparisons of algorithms: equal tuning budgets (tuning), performance and data profiles
(profiles), runtime ECDFs and ERT (runtime), and time-to-target with hierarchical bootstrap intervals and
exact Holm-corrected paired tests on instances (statistics).

Pure functions on pandas DataFrames; the `benchmark` study kind (sweep/kinds/benchmark/) runs the trials and
calls them.
"""
