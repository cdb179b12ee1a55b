"""Bad input: one line naming the field or option, exit code 2, nothing written, before any work."""
import contextlib
import io
import os
import string
import subprocess
import sys
import time

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from problems.shared.errors import ParameterError
from sweep import cli, kinds
from sweep.execution import options
from sweep.execution.lock import StudyLock
from sweep.study import spec
from sweep.study.errors import SpecError

GOOD = {"name": "t", "problems": [{"name": "quadratic", "params": {"dim_x": 3, "dim_y": 3}}],
        "algorithms": ["soba"], "seeds": 1, "budget": {"iterations": 5}}


def bisweep(args, cwd, timeout=60):
    """Run the CLI in a fresh process: (exit code, stderr lines, seconds)."""
    start = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "sweep.cli", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, "PYTHONPATH": os.getcwd()})
    return proc.returncode, proc.stderr.strip().splitlines(), time.monotonic() - start


def write(tmp_path, name, data):
    path = tmp_path / name
    path.write_text(data if isinstance(data, str) else yaml.safe_dump(data))
    return str(path)


def listing(tmp_path):
    return sorted(p.name for p in tmp_path.iterdir())


# Every bad option and field refused in one line, exit 2, nothing written: tests/sweep/study/test_bad_input_corpus.py
# (in this process; a few spot checks there run `bisweep` processes).


@pytest.mark.parametrize("option, env, expected", [
    (None, None, (None, "RAY_ADDRESS")), (None, "", (None, "RAY_ADDRESS")),
    (None, "auto", ("auto", "RAY_ADDRESS")), ("10.0.0.1:6379", "auto", ("10.0.0.1:6379", "address")),
])
def test_the_ray_is_the_options_else_ray_address_else_a_local_one(monkeypatch, option, env, expected):
    if env is None:
        monkeypatch.delenv("RAY_ADDRESS", raising=False)
    else:
        monkeypatch.setenv("RAY_ADDRESS", env)
    assert options.ray_address(option) == expected


@pytest.mark.parametrize("address", ["127.0.0.1:1", "localhost:1"])  # loopback only: no traffic leaves the machine
def test_an_unreachable_address_fails_within_the_connect_timeout(address):
    start = time.monotonic()
    with pytest.raises(ParameterError, match="^address: "):
        options.check_address(address)
    assert time.monotonic() - start < options.CONNECT_TIMEOUT + 5  # never the minutes Ray's own retries take


def test_the_size_check_runs_before_any_configuration_is_built(monkeypatch):
    def never(*args, **kwargs):
        raise AssertionError("expanded a study that is over the limit")

    monkeypatch.setattr(kinds.get("comparison"), "expand", never)
    study = {**GOOD, "algorithms": [{"name": "soba", "params": {"rho": [0.1, 0.2, 0.3], "gamma": [0.1, 0.2]}}],
             "seeds": 2}
    with pytest.raises(SpecError, match=r"study: expands to about 12 runs \(2 seeds each\), more than the limit 10;"):
        spec.validate(study, max_runs=10)
    monkeypatch.undo()
    assert len(spec.validate(study, max_runs=12).run_keys) == 12  # the estimate is exact for a plain grid


def test_a_second_driver_is_refused_naming_the_holder(tmp_path):
    path = write(tmp_path, "s.yaml", GOOD)
    root = tmp_path / "results" / "t"
    root.mkdir(parents=True)
    with StudyLock(str(root)):
        code, err, _ = bisweep(["run", path], tmp_path)
    assert code == 2 and len(err) == 1
    assert f"is in use by another bisweep driver (PID {os.getpid()} since" in err[0]
    assert sorted(p.name for p in root.iterdir()) == [".lock"]


def test_an_unexpected_exception_is_one_line_with_a_debug_hint(monkeypatch, capsys):
    def boom(args):
        raise RuntimeError("something broke\nsecond line")

    monkeypatch.setattr(cli, "cmd_list", boom)
    ap = cli.parser()
    monkeypatch.setattr(cli, "parser", lambda: ap)
    for action in ap._subparsers._group_actions[0].choices.values():
        if action.prog.endswith("list"):
            action.set_defaults(func=boom)
    assert cli.main(["list", "algorithms"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["bisweep: error: RuntimeError: something broke (rerun with --debug for the traceback)"]
    with pytest.raises(RuntimeError):
        cli.main(["--debug", "list", "algorithms"])


# ---------------------------------------------------------------- fuzz: study files
FIELDS = ["name", "kind", "axis", "problems", "algorithms", "seeds", "budget", "n_evals", "resources",
          "max_concurrent", "max_failures", "checkpoint_seconds", "report_seconds", "report", "divergence",
          "instance_seed", "seeds_per_trial", "runs_per_trial", "bogus_field"]
scalars = st.one_of(st.none(), st.booleans(), st.integers(-10**20, 10**20),
                    st.floats(allow_nan=True, allow_infinity=True), st.text(string.printable, max_size=12))
values = st.recursive(scalars, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                       st.dictionaries(st.sampled_from(FIELDS + ["iterations",
                                                       "factor", "cpu", "dim_x", "rho"]), inner, max_size=4)),
                      max_leaves=12)
mutations = st.dictionaries(st.sampled_from(FIELDS), values, min_size=1, max_size=3)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(change=mutations)
def test_fuzzed_study_files_fail_with_exit_2_one_line_per_error_and_write_nothing(tmp_path_factory, change):
    tmp = tmp_path_factory.mktemp("fuzz")
    path = tmp / "f.yaml"
    path.write_text(yaml.safe_dump({**GOOD, **change}))
    cwd, err = os.getcwd(), io.StringIO()
    os.chdir(tmp)
    try:
        with contextlib.redirect_stderr(err):
            code = cli.main(["run", str(path), "--validate-only"])
    finally:
        os.chdir(cwd)
    lines = err.getvalue().strip().splitlines()
    assert code in (0, 2), lines
    if code == 2:  # at most 20 error lines and one "... more" line
        assert 1 <= len(lines) <= 21 and all(line.startswith("bisweep: error: ") for line in lines)
        assert not any("Traceback" in line for line in lines)
    assert sorted(p.name for p in tmp.iterdir()) == ["f.yaml"]
