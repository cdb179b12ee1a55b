"""Ray Tune trainables, study specifications, MLflow tracking, reports and the `bisweep` CLI."""
