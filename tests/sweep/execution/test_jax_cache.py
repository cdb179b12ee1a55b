"""JAX's persistent compilation cache in a trial process of `backend: jax`: the user's cache directory unless JAX's own
setting names one. Each case is a fresh process: JAX decides at a process's first compile whether it uses the cache."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.algorithms.test_engines import needs_jax

REPO = Path(__file__).resolve().parents[3]
TRIAL = """
from sweep.execution.trial import execute_trial
from sweep.study import spec
from sweep.study.model import RunSpec, TrialConfig
study = spec.validate({"name": "c", "kind": "comparison", "instance_seed": 0, "backend": "jax",
                       "problems": [{"name": "quadratic", "params": {"dim_x": 3, "dim_y": 3}}],
                       "algorithms": [{"name": "soba", "params": {"rho": [0.05, 0.1]}}], "budget": {"iterations": 4}})
runs = tuple(RunSpec.of(p, s) for p in study.points for s in study.seeds)
sent = []
execute_trial(TrialConfig("t", runs, 0.0, batched=True, backend="jax"), lambda result, _: sent.append(result))
import jax
print(jax.config.jax_compilation_cache_dir, sum(len(r["bisweep"]["runs"]) for r in sent))
"""


def trial_process(tmp_path, **env):
    """A trial of 2 × 3 SOBA runs on the JAX engine in a fresh process; what it printed (the cache directory)."""
    full = {k: v for k, v in os.environ.items() if k != "JAX_COMPILATION_CACHE_DIR"}
    full.update(XDG_CACHE_HOME=str(tmp_path / "cache"), PYTHONPATH=str(REPO), **env)
    done = subprocess.run([sys.executable, "-c", TRIAL], env=full, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout.split()


@needs_jax
@pytest.mark.parametrize("own", [False, True], ids=["the-users-cache", "jaxs-own-setting"])
def test_a_jax_trial_keeps_its_compiled_programs_in_the_users_cache(tmp_path, own):
    ours, theirs = tmp_path / "cache" / "bisweep" / "jax", tmp_path / "jax-own"
    env = {"JAX_COMPILATION_CACHE_DIR": str(theirs)} if own else {}
    where, runs = trial_process(tmp_path, **env)
    assert int(runs) >= 6 and Path(where) == (theirs if own else ours)
    if not own:  # (JAX's own settings keep only programs that took a second to compile: these take less)
        assert any(ours.iterdir())  # the programs kept
    else:
        assert not ours.exists()
