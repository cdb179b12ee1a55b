"""What is made from a study's results: its report (tables, figures, convergence curves, the analysis they
share, whether it is up to date) and the DataFrames of `sweep.load_results` (frames: the report's columns)."""
