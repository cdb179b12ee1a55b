"""Bad input: one line naming the field or option, exit code 2, nothing written, before any work."""
import contextlib
import io
import os
import socket
import string
import subprocess
import sys
import time

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from problems.validation import ParameterError
from sweep import cli, kinds, options, spec
from sweep.errors import SpecError
from sweep.lock import StudyLock

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


@pytest.mark.parametrize("study, extra, message", [
    ({**GOOD, "budget": {"seconds": float("inf")}}, [], "budget.seconds: must be at most 604800"),
    ({**GOOD, "budget": {"iterations": 10**18}}, [], "budget.iterations: must be at most 1e+09"),
    ({**GOOD, "resources": {"cpu": 64}}, ["--num-cpus", "1"], "resources.cpu: a trial asks for 64 CPUs but the local Ray has 1"),
    ({**GOOD, "divergence": {"factor": 0.5}}, [], "divergence.factor: must be a number greater than 1"),
    (GOOD, ["--num-cpus", "0"], "num-cpus: must be a positive integer"),
    (GOOD, ["--num-cpus", "-1"], "num-cpus: must be a positive integer"),
    (GOOD, ["--address", "127.0.0.1:1"], "address: no Ray head answers at 127.0.0.1:1"),
    (GOOD, ["--address", "not a host"], "address: must be host:port of a Ray head"),
    (GOOD, ["--tracking-uri", "garbage"], "tracking-uri: must be sqlite:///<absolute path>.db, http(s)://host:port"),
    (GOOD, ["--tracking-uri", "sqlite:///afile"], "tracking-uri: afile is not an SQLite database"),
    (GOOD, ["--tracking-uri", "postgresql://u:pw@127.0.0.1:1/db"],  # MLflow would retry for minutes
     "tracking-uri: no database server answers at 127.0.0.1:1 (Connection refused)"),
    (GOOD, ["--tracking-uri", "mysql://u:pw@127.0.0.1:x/db"],
     "tracking-uri: Port could not be cast to integer value as 'x' in 'mysql://u:***@127.0.0.1:x/db'"),
    (GOOD, ["--results-dir", "afile"], "results-dir:"),
    (GOOD, ["--storage", "afile"], "storage: "),  # then "<tmp>/afile is a file, not a directory"
    (GOOD, ["--storage", "foo://bucket/x"], "storage: cannot use foo://bucket/x (Unrecognized filesystem type in URI"),
    (GOOD, ["--max-runs", "0"], "max-runs: must be a positive integer"),
])
def test_each_bad_option_or_field_is_one_line_exit_2_nothing_written(tmp_path, study, extra, message):
    (tmp_path / "afile").write_text("not a directory")
    path = write(tmp_path, "s.yaml", study)
    before = listing(tmp_path)
    code, err, seconds = bisweep(["run", path, *extra], tmp_path)
    assert code == 2 and len(err) == 1, err
    assert err[0].startswith("bisweep: error: " + message), err
    assert listing(tmp_path) == before  # no results directory, no lock, nothing


@pytest.mark.parametrize("ray_address, extra, message", [
    ("127.0.0.1:1", [], "RAY_ADDRESS: no Ray head answers at 127.0.0.1:1 (Connection refused); start the cluster "
                        "(`ray start --head`) or check the address; unset it to start a local Ray"),
    ("http://127.0.0.1:8265", [], "RAY_ADDRESS: must be host:port of a Ray head (e.g. 127.0.0.1:6379) or 'auto', "
                                  "got 'http://127.0.0.1:8265'; unset it to start a local Ray"),  # the dashboard's URL
    ("http://127.0.0.1:8265", ["--address", "127.0.0.1:1"], "address: no Ray head answers"),  # the option wins
])
def test_a_bad_ray_address_is_one_line_naming_it_exit_2_nothing_written(tmp_path, monkeypatch, ray_address, extra,
                                                                         message):
    monkeypatch.setenv("RAY_ADDRESS", ray_address)
    path = write(tmp_path, "s.yaml", GOOD)
    before = listing(tmp_path)
    code, err, _ = bisweep(["run", path, *extra], tmp_path)
    assert code == 2 and len(err) == 1, err
    assert err[0].startswith("bisweep: error: " + message), err
    assert listing(tmp_path) == before


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


def test_a_huge_grid_is_refused_before_it_is_built(tmp_path):
    values = [round(0.01 * (i + 1), 2) for i in range(32)]
    study = {**GOOD, "problems": [{"name": "quadratic", "params": {"dim_x": list(range(1, 33))}}],
             "algorithms": [{"name": "soba", "params": {"rho": values, "gamma": values, "rho_decay": values}}]}
    code, err, _ = bisweep(["run", write(tmp_path, "huge.yaml", study), "--validate-only"], tmp_path)
    assert code == 2 and err == ["bisweep: error: study: expands to about 1,048,576 runs (1 seeds each), more than "
                                 "the limit 100,000; shrink the grids or raise the limit with --max-runs"]


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


def test_duplicate_yaml_keys_are_refused_naming_the_line(tmp_path):
    path = write(tmp_path, "dup.yaml", "name: d\nproblems: [quadratic]\nalgorithms: [soba]\nseeds: 2\n"
                                       "budget: {iterations: 5}\nseeds: 3\n")
    code, err, _ = bisweep(["run", path, "--validate-only"], tmp_path)
    assert code == 2 and err == [f"bisweep: error: study: {path} is not valid YAML line 6: "
                                 "duplicate key 'seeds' (first on line 4)"]


@pytest.mark.parametrize("command", ["report", "ui"])
def test_report_and_ui_refuse_a_study_name_that_is_a_path(tmp_path, command):
    path = write(tmp_path, "evil.yaml", {**GOOD, "name": "../../x"})
    code, err, _ = bisweep([command, path], tmp_path)
    assert code == 2 and err == ["bisweep: error: study: the name must be letters, digits, '_', '.', '-' "
                                 "(no path), got '../../x'"]
    assert listing(tmp_path) == ["evil.yaml"]


def test_ui_on_a_port_in_use_is_one_line_before_any_server_starts(tmp_path):
    store = f"sqlite:///{tmp_path / 'mlflow.db'}"
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        code, err, _ = bisweep(["ui", "--tracking-uri", store, "--port", str(port)], tmp_path)
    assert code == 2 and err == [f"bisweep: error: port: cannot listen on 127.0.0.1:{port} (Address already in use); "
                                 "give another --port (or --host)"]
    code, err, _ = bisweep(["ui", "--tracking-uri", store, "--port", "70000"], tmp_path)
    assert code == 2 and err == ["bisweep: error: port: must be 1 to 65535, got 70000"]
    assert listing(tmp_path) == []  # no store made


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
