"""The infrastructure every package shares, in `problems` because it is the bottom package (sweep → algorithms →
problems): the error type of bad input (`errors`) and the registries of algorithms, problems, study kinds and
claims with the plugin discovery that fills them (`registries`)."""
