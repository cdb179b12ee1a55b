"""A study's results on disk: the store (study.json, run summaries, records), the runs as reports read them,
and the record of the machine they came from."""
from sweep.results.runs import config_label, group  # noqa: E402,F401  the names plugins of 0.1.0 imported from here
