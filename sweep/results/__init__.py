"""A study's results on disk: the store (study.json, run summaries, records), the runs as reports read them,
and the record of the machine they came from."""
