"""The bad-input corpus: every malformed study file and bad command line known, each refused in one line
naming the field or option, exit 2, nothing written, in under 5 s.

The cases run in this process through the CLI's `main` (a `bisweep` process costs ~2 s of imports each);
`sweep.execution.runner.quiet_logs`, the first step after every option check, is replaced by one that fails, so a
case that gets past validation ends at once instead of starting Ray (and counts as not refused). A few
cases also run as real `bisweep` processes.
"""
from __future__ import annotations

import contextlib
import copy
import dataclasses
import importlib.util
import io
import os
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

GOOD = {"name": "t", "problems": [{"name": "quadratic", "params": {"dim_x": 3, "dim_y": 3}}],
        "algorithms": ["soba"], "seeds": 1, "budget": {"iterations": 5}}
#: The seconds a refusal may take.
LIMIT_SECONDS = 5.0


@dataclasses.dataclass
class Case:
    """A bad input: the files it writes, the command line (`{study}` is the study file) and the error expected."""

    id: str
    expect: str  # the start of the one error line, after "bisweep: error: "
    study: Any = None  # a mapping (written as YAML), a str (written as is) or bytes
    argv: tuple[str, ...] = ("run", "{study}", "--validate-only")
    env: dict[str, str] = dataclasses.field(default_factory=dict)
    setup: Callable[[Path], contextlib.AbstractContextManager[dict[str, str]]] | None = None
    outside: tuple[str, ...] = ()  # paths outside the directory that must not appear either
    at_lock: bool = False  # refused by the results directory's lock, after the option checks


def with_(**fields: Any) -> dict[str, Any]:
    """GOOD with some fields replaced."""
    return {**copy.deepcopy(GOOD), **fields}


def quadratic(**params: Any) -> list[dict[str, Any]]:
    return [{"name": "quadratic", "params": {"dim_x": 3, "dim_y": 3, **params}}]


@contextlib.contextmanager
def busy_port(_: Path) -> Iterator[dict[str, str]]:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        yield {"port": str(busy.getsockname()[1])}


@contextlib.contextmanager
def locked(tmp: Path) -> Iterator[dict[str, str]]:
    from sweep.execution.lock import StudyLock

    root = tmp / "results" / "t"
    root.mkdir(parents=True)
    with StudyLock(str(root)):
        yield {}


@contextlib.contextmanager
def afile(tmp: Path) -> Iterator[dict[str, str]]:
    (tmp / "afile").write_text("not a directory")
    yield {}


@contextlib.contextmanager
def not_postgres(_: Path) -> Iterator[dict[str, str]]:
    from tests.sweep.servers import not_postgres as server

    with server() as port:
        yield {"port": str(port)}


@contextlib.contextmanager
def link_loop(tmp: Path) -> Iterator[dict[str, str]]:
    (tmp / "loop").symlink_to("loop")
    yield {}


RUN = ("run", "{study}")
NESTED = "name: t\ndescription: " + "[" * 10_000 + "]" * 10_000 + "\n"
LONG = "a" * 5000
#: Nine aliases of nine aliases ... nine deep: 9⁹ values from 1 kB of YAML.
BOMB = "".join(f"l{k}: &l{k} [{', '.join([f'*l{k - 1}' if k else 'x'] * 9)}]\n" for k in range(9))

CASES = [
    # ---- issue 34, item 1: sizes counted before anything is built; arrays that cannot fit refused
    Case("seeds-1e9", "seeds: ", with_(seeds=1_000_000_000)),
    Case("seeds-1e7", "seeds: ", with_(seeds=10_000_000)),
    Case("max-runs-1e12", "max-runs: must be a positive integer up to 10,000,000", with_(seeds=1_000_000_000),
         (*RUN, "--validate-only", "--max-runs", str(10**12))),
    Case("dim_x-1e12", "problems[0].params: an instance needs about 145.5 TiB of arrays (dim_x = 1,000,000,000,000, "
                       "dim_y = 20, rank = 1), more than the ", "name: t\nproblems: [{name: quadratic, params: {dim_x: 1e12}}]\n"
                                                    "algorithms: [soba]\nseeds: 1\nbudget: {iterations: 5}\n"),
    Case("dim_y-grid-1e9", "problems[0].params: an instance needs about", with_(problems=quadratic(dim_y=[3, 10**9]))),
    Case("n_samples-1e10", "problems[0].params: an instance needs about",
         with_(problems=[{"name": "simulated", "params": {"n_samples_inner": 10**10}}])),
    Case("dimension-axis-1e12", "axis.values[1]: ", with_(kind="dimension_scaling", problems=quadratic(),
                                                         axis={"param": "dim_x", "values": [4, 10**12]})),
    Case("n_evals-1e9", "n_evals: ", with_(n_evals=1_000_000_000)),
    Case("backend-value", "backend: must be one of numpy, jax", with_(backend="torch")),
    Case("backend-jax-algorithm", "algorithms[0].name: backend 'jax' runs the algorithms with an explicit definition (",
         with_(backend="jax", algorithms=["penalty"])),
    Case("backend-jax-noisy-minibatch", "algorithms[0].params: backend 'jax' runs constrained_quadratic full batch (its "
                                        "minibatches are noise draws of the NumPy engine's)",
         with_(backend="jax", algorithms=[{"name": "soba", "params": {"batch_size": 4}}],
               problems=[{"name": "constrained_quadratic", "params": {"d": 4, "p": 2}}])),
    Case("backend-jax-saba", "algorithms[0].name: backend 'jax' runs SABA (its per-sample memory) on the 'quadratic' "
                             "with n_samples, regularization_selection, simulated, hyper_cleaning; problem "
                             "'coreset_selection' is not",
         with_(backend="jax", algorithms=["saba"],
               problems=[{"name": "coreset_selection", "params": {"pool_size": 4, "coreset_size": 2}}])),
    Case("backend-jax-budget", "budget: backend 'jax' runs iteration budgets only",
         with_(backend="jax", budget={"iterations": 5, "oracle_calls": 100})),
    Case("backend-jax-unbatched", "backend: 'jax' steps batches of runs, and this study sets batched: off",
         with_(backend="jax", batched="off")),
    Case("backend-jax-params", "algorithms[0].params: backend 'jax': sub_loops: 'tolerance' loops stop at each run's",
         with_(backend="jax", algorithms=["dtfbo"])),  # sub_loops 'tolerance'
    Case("backend-jax-params-fsla", "algorithms[0].params: backend 'jax': momentum_decay: 1e-20 with momentum 1",
         with_(backend="jax", algorithms=[{"name": "fsla", "params": {"momentum": 1.0, "momentum_decay": 1e-20}}])),
    # ---- item 4: bounded file size and string lengths
    Case("10MB-yaml", "study: ", yaml.safe_dump(GOOD) + "instance_seed: 0\nscales: {big: {seeds: ["
         + ", ".join(map(str, range(1_500_000))) + "]}}\n"),
    Case("10MB-description", "study: ", yaml.safe_dump(with_(description="x" * 10_000_000))),
    Case("100kB-description", "description: ", with_(description="x" * 100_000)),
    Case("long-param-string", "problems[0].params.dataset: ",
         with_(problems=[{"name": "hyper_cleaning", "params": {"dataset": LONG}}])),
    # ---- item 8: bad input that slipped through
    Case("binary", "study: ", bytes(range(256)) * 4),
    Case("latin-1", "study: ", (yaml.safe_dump(GOOD) + "description: café crème\n").encode("latin-1")),
    Case("utf-16", "study: ", yaml.safe_dump(with_()).encode("utf-16")),
    Case("nested-10000", "study: ", NESTED),
    Case("alias-bomb", "study: holds more than 250,000 values", yaml.safe_dump(GOOD) + BOMB),
    Case("name-5000", "name: ", with_(name=LONG)),
    Case("label-3000", "algorithms[0].label: ", with_(algorithms=[{"name": "soba", "label": "a" * 3000}])),
    Case("num-cpus-100000", "num-cpus: ", GOOD, (*RUN, "--num-cpus", "100000")),
    Case("sqlite-parent-missing", "tracking-uri: ", GOOD, (*RUN, "--tracking-uri", "sqlite:////nonexistent_dir/x.db"),
         outside=("/nonexistent_dir", "/mlartifacts")),
    Case("saba-on-quadratic", "algorithms[0].name: ", with_(algorithms=["saba"])),
    Case("report-metric-unknown", "report.metric: ", with_(report={"metric": "nonexistent"})),
    Case("report-converged-metric-unknown", "report.converged_metric: ",
         with_(report={"converged_metric": "nonexistent"})),
    Case("unknown-algorithm-suggests", "algorithms[0].name: unknown algorithm 'sobaa'; did you mean 'soba'?",
         with_(algorithms=["sobaa"])),
    # ---- bad options and fields refused before (tests/sweep/test_cli_errors.py)
    Case("budget-seconds-inf", "budget.seconds: must be at most 604800", with_(budget={"seconds": float("inf")}), RUN),
    Case("budget-iterations-1e18", "budget.iterations: must be at most 1e+09", with_(budget={"iterations": 10**18}), RUN),
    Case("cpu-over-num-cpus", "resources.cpu: a trial asks for 64 CPUs but the local Ray has 1",
         with_(resources={"cpu": 64}), (*RUN, "--num-cpus", "1")),
    Case("divergence-factor", "divergence.factor: must be a number greater than 1",
         with_(divergence={"factor": 0.5}), RUN),
    Case("num-cpus-0", "num-cpus: must be a positive integer", GOOD, (*RUN, "--num-cpus", "0")),
    Case("num-cpus-negative", "num-cpus: must be a positive integer", GOOD, (*RUN, "--num-cpus", "-1")),
    Case("address-closed", "address: no Ray head answers at 127.0.0.1:1", GOOD, (*RUN, "--address", "127.0.0.1:1")),
    Case("address-not-host", "address: must be host:port of a Ray head", GOOD, (*RUN, "--address", "not a host")),
    Case("tracking-uri-garbage", "tracking-uri: must be sqlite:///<absolute path>.db, http(s)://host:port", GOOD,
         (*RUN, "--tracking-uri", "garbage")),
    Case("tracking-uri-not-sqlite", "tracking-uri: afile is not an SQLite database", GOOD,
         (*RUN, "--tracking-uri", "sqlite:///afile"), setup=afile),
    Case("tracking-uri-db-closed", "tracking-uri: no database server answers at 127.0.0.1:1 (Connection refused)",
         GOOD, (*RUN, "--tracking-uri", "postgresql://u:pw@127.0.0.1:1/db")),
    Case("tracking-uri-bad-port", "tracking-uri: cannot read 'mysql://u:***@127.0.0.1:x/db': the port is not a number", GOOD, (*RUN, "--tracking-uri", "mysql://u:pw@127.0.0.1:x/db")),
    Case("results-dir-file", "results-dir: ", GOOD, (*RUN, "--results-dir", "afile"), setup=afile),
    Case("storage-file", "storage: ", GOOD, (*RUN, "--storage", "afile"), setup=afile),
    Case("storage-scheme", "storage: cannot use foo://bucket/x (Unrecognized filesystem type in URI", GOOD,
         (*RUN, "--storage", "foo://bucket/x")),
    Case("max-runs-0", "max-runs: must be a positive integer", GOOD, (*RUN, "--max-runs", "0")),
    Case("ray-address-env-closed", "RAY_ADDRESS: no Ray head answers at 127.0.0.1:1 (Connection refused)", GOOD, RUN,
         env={"RAY_ADDRESS": "127.0.0.1:1"}),
    Case("ray-address-env-url", "RAY_ADDRESS: must be host:port of a Ray head", GOOD, RUN,
         env={"RAY_ADDRESS": "http://127.0.0.1:8265"}),
    Case("ray-address-option-wins", "address: no Ray head answers", GOOD, (*RUN, "--address", "127.0.0.1:1"),
         env={"RAY_ADDRESS": "http://127.0.0.1:8265"}),
    Case("huge-grid", "study: expands to about 1,048,576 runs (1 seeds each), more than the limit 100,000",
         with_(problems=quadratic(dim_x=list(range(1, 33))),
               algorithms=[{"name": "soba", "params": {k: [round(0.01 * (i + 1), 2) for i in range(32)]
                                                       for k in ("rho", "gamma", "rho_decay")}}])),
    Case("duplicate-key", "study: ", "name: d\nproblems: [quadratic]\nalgorithms: [soba]\nseeds: 2\n"
                                     "budget: {iterations: 5}\nseeds: 3\n"),
    Case("report-name-is-path", "study: the name must be letters", with_(name="../../x"), ("report", "{study}")),
    Case("ui-name-is-path", "study: the name must be letters", with_(name="../../x"), ("ui", "{study}")),
    Case("ui-port-in-use", "port: cannot listen on 127.0.0.1:", None,
         ("ui", "--tracking-uri", "sqlite:///{tmp}/mlflow.db", "--port", "{port}"), setup=busy_port),
    Case("ui-port-range", "port: must be 1 to 65535, got 70000", None,
         ("ui", "--tracking-uri", "sqlite:///{tmp}/mlflow.db", "--port", "70000")),
    Case("second-driver", "results-dir: ", GOOD, RUN, setup=locked, at_lock=True),
    # ---- issue 46: hostile paths, addresses and URIs, bad command lines
    Case("results-dir-newline", "results-dir: './a\\nb' holds a control character", GOOD,
         (*RUN, "--results-dir", "./a\nb")),
    Case("results-dir-link-loop", "results-dir: ", GOOD, (*RUN, "--results-dir", "loop"), setup=link_loop),
    Case("address-with-password", "address: must be host:port of a Ray head (e.g. 127.0.0.1:6379) or 'auto', got "
                                  "'user:***@127.0.0.1:6379'", GOOD, (*RUN, "--address", "user:SECRET@127.0.0.1:6379")),
    Case("tracking-uri-http-slash-password", "tracking-uri: cannot read the host of http://u:***@127.0.0.1:5000", GOOD,
         (*RUN, "--tracking-uri", "http://u:pa/ss@127.0.0.1:5000")),
    Case("tracking-uri-db-slash-password", "tracking-uri: no database server answers at 127.0.0.1:1", GOOD,
         (*RUN, "--tracking-uri", "postgresql://u:pa/ssW0RD@127.0.0.1:1/db")),
    Case("tracking-uri-not-postgres", "tracking-uri: not a PostgreSQL server at 127.0.0.1:", GOOD,
         (*RUN, "--tracking-uri", "postgresql://u:pw@127.0.0.1:{port}/db"), setup=not_postgres),
    Case("ui-dead-database", "tracking-uri: no database server answers at 127.0.0.1:1", None,
         ("ui", "--tracking-uri", "postgresql://u:SECRET@127.0.0.1:1/db")),
    Case("ray-start-timeout-0", "ray-start-timeout: must be a positive number of seconds, got 0", GOOD,
         (*RUN, "--ray-start-timeout", "0")),
    Case("num-cpus-abc", "argument --num-cpus: invalid int value: 'abc' (see `bisweep run --help`)", GOOD,
         (*RUN, "--num-cpus", "abc")),
    Case("unknown-option", "unrecognized arguments: --bogus", GOOD, (*RUN, "--bogus")),
    Case("list-junk", "argument what: invalid choice: 'junk'", None, ("list", "junk")),
    Case("no-command", "the following arguments are required: command", None, ()),
    Case("missing-problems", "problems: is required", {k: v for k, v in GOOD.items() if k != "problems"}),
    *([Case("address-ray-client-missing", "address: ray://127.0.0.1:10001 is a Ray Client address, which needs the "
                                          "package ray[client]", GOOD, (*RUN, "--address", "ray://127.0.0.1:10001"))]
      if importlib.util.find_spec("grpc") is None else []),
]


def _spec_cases() -> list[Case]:
    """The bad fields of tests/sweep/study/test_spec.py, each as a file."""
    from tests.sweep.study.test_spec import BAD_FIELDS, BASE

    out = []
    for k, (mutate, path, _) in enumerate(BAD_FIELDS):
        data = copy.deepcopy(BASE)
        mutate(data)
        out.append(Case(f"spec-{k}-{path}", f"{path}: ", data))
    return out


@dataclasses.dataclass
class Outcome:
    """What a case did: exit code, error lines, whether anything was written, seconds."""

    code: int
    lines: list[str]
    written: list[str]
    seconds: float

    def meets(self, case: Case) -> list[str]:
        """The conditions the outcome fails (none: it meets all four)."""
        failed = []
        if self.code != 2:
            failed.append(f"exit {self.code}")
        if len(self.lines) != 1 or not self.lines[0].startswith("bisweep: error: " + case.expect):
            failed.append(f"lines {[ln[:200] for ln in self.lines[:3]]}")
        if self.written:
            failed.append(f"wrote {self.written}")
        if self.seconds >= LIMIT_SECONDS:
            failed.append(f"{self.seconds:.1f} s")
        return failed


class _Started(Exception):
    """A case got past every check: it would have started Ray."""


def _listing(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*")}


def run_case(case: Case, tmp: Path) -> Outcome:
    """Run `case` in this process with `tmp` as the current directory."""
    from sweep import cli
    from sweep.execution import runner

    path = tmp / "study.yaml"
    if isinstance(case.study, bytes):
        path.write_bytes(case.study)
    elif isinstance(case.study, str):
        path.write_text(case.study)
    elif case.study is not None:
        path.write_text(yaml.safe_dump(case.study, width=10**9))
    cwd, env, err = os.getcwd(), dict(os.environ), io.StringIO()

    def started() -> None:
        raise _Started("the study would have started")

    quiet_logs = runner.quiet_logs
    with (case.setup or (lambda _: contextlib.nullcontext({})))(tmp) as subs:
        before = _listing(tmp)
        argv = [a.format(study=path, tmp=tmp, **subs) for a in case.argv]
        os.chdir(tmp)
        os.environ.update(case.env)
        runner.quiet_logs = quiet_logs if case.at_lock else started
        start = time.monotonic()
        try:
            with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
                code = cli.main(argv)
        except SystemExit as exc:  # argparse's own errors
            code = exc.code if isinstance(exc.code, int) else 1
        finally:
            seconds = time.monotonic() - start
            runner.quiet_logs = quiet_logs
            os.chdir(cwd)
            os.environ.clear()
            os.environ.update(env)
        written = sorted(_listing(tmp) - before) + [p for p in case.outside if os.path.exists(p)]
    return Outcome(code, err.getvalue().strip().splitlines(), written, seconds)


ALL = CASES + _spec_cases()


@pytest.mark.parametrize("case", ALL, ids=[c.id for c in ALL])
def test_each_bad_input_is_one_line_exit_2_nothing_written_within_5_s(tmp_path, case):
    outcome = run_case(case, tmp_path)
    assert not outcome.meets(case), (outcome.meets(case), outcome.lines)


def test_the_corpus_holds_every_case_of_issue_34():
    ids = {c.id for c in CASES}
    assert {"seeds-1e9", "dim_x-1e12", "n_evals-1e9", "10MB-yaml", "10MB-description", "binary", "latin-1", "utf-16",
            "nested-10000", "name-5000", "label-3000", "num-cpus-100000", "sqlite-parent-missing",
            "saba-on-quadratic", "report-metric-unknown"} <= ids
    assert len(ALL) >= 90


def test_the_corpus_holds_every_refusable_case_of_issue_46():
    ids = {c.id for c in CASES}
    assert {"results-dir-newline", "results-dir-link-loop", "address-with-password", "tracking-uri-http-slash-password",
            "tracking-uri-not-postgres", "ui-dead-database", "num-cpus-abc", "unknown-option", "list-junk",
            "missing-problems"} <= ids


@pytest.mark.parametrize("case_id", ["seeds-1e9", "utf-16", "num-cpus-100000"])
def test_a_bisweep_process_refuses_the_same_way(tmp_path, case_id):
    """Spot checks in a real process: the same one line, exit 2, nothing written (imports take ~2 s)."""
    case = next(c for c in CASES if c.id == case_id)
    path = tmp_path / "study.yaml"
    path.write_bytes(case.study if isinstance(case.study, bytes) else yaml.safe_dump(case.study).encode())
    before = _listing(tmp_path)
    proc = subprocess.run([sys.executable, "-m", "sweep.cli", *[a.format(study=path) for a in case.argv]],
                          cwd=tmp_path, capture_output=True, text=True, timeout=60,
                          env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[3])})
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1 and lines[0].startswith("bisweep: error: " + case.expect), lines
    assert _listing(tmp_path) == before
