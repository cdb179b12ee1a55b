"""Running a study: the driver (runner, session, rounds), the Tune experiment with its trials and callbacks,
the local Ray cluster, the study lock and the process guard, and the trial body (trainable)."""
