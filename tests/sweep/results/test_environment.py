"""The record of where a study ran, against what the machine reports directly, and its place in study.json."""
import json
import os
import platform
import subprocess

import numpy as np
import scipy
from threadpoolctl import threadpool_info

from sweep.results import environment
from sweep.results.store import ResultStore
from sweep.study import spec


def test_the_record_is_what_the_machine_reports():
    env = environment.describe()
    assert (env["python"], env["numpy"], env["scipy"]) == (platform.python_version(), np.__version__,
                                                           scipy.__version__)
    assert env["cores"] == os.cpu_count() and env["project"] == "0.1.0"
    blas = [p for p in threadpool_info() if p["user_api"] == "blas"][0]
    assert env["blas_threads"] == blas["num_threads"] and env["blas"].startswith(blas["internal_api"])
    head = subprocess.run(["git", "-C", str(environment.ROOT), "rev-parse", "HEAD"], capture_output=True, text=True)
    if head.returncode == 0:
        assert env["git_commit"].split("+")[0] == head.stdout.strip()
    assert environment.flat({"cores": 2, "blas": None}) == {"env.cores": "2", "env.blas": "None"}


def test_study_json_records_it(tmp_path):
    study = spec.validate({"name": "env", "algorithms": ["soba"], "problems": [{"name": "quadratic"}],
                           "seeds": 1, "budget": {"iterations": 2}})
    ResultStore(tmp_path).write_study(study)
    meta = json.loads((tmp_path / "study.json").read_text())
    assert meta["environment"]["cores"] == os.cpu_count() and meta["environment"]["python"] == platform.python_version()
    assert meta["name"] == "env" and len(meta["points"]) == 1
