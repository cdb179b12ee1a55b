"""A study from its YAML to a validated `Study`: the model, the schema, the checks and their errors, the
files it is read from, the expansion into runs, the checks across entries and the input's limits.

Imports neither Ray nor MLflow: `bisweep list` and `--validate-only` stay fast.
"""
