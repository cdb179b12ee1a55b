"""Fixtures shared by the test files: paths, ports, CSV reading, study errors, evaluation points, and
toy studies run through the trial body and the driver's store callback without Ray."""
from __future__ import annotations

import copy
import csv
import socket
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from problems.shared.errors import ParameterError

REPO = Path(__file__).resolve().parents[1]
#: The longest test files, longest first (one whole run on 2 cores): `pytest -n 2 --dist loadfile
#: --no-loadscope-reorder` hands them out first, so the two workers start on them and the short files fill in at the
#: end instead of one long file running alone there. A new file that takes minutes belongs in this list at its place.
LONG_FILES = ("test_cluster.py", "test_studies.py", "test_integration.py", "test_benchmark_integration.py",
              "test_tfbo.py", "test_resume.py", "test_scale.py", "test_batched_resume.py", "test_postgres.py",
              "test_deadlines.py", "test_functional_study.py", "test_first_order_baselines.py", "test_readme.py",
              "test_engines_problems.py", "test_functional.py", "test_engines.py", "test_functional_readme.py")


def pytest_configure(config: pytest.Config) -> None:
    """One BLAS thread per test process. `pytest -n 2` runs two processes on two cores, and OpenBLAS's default of a
    thread per core made each spin against the other: a coreset run took 18.7 s instead of 4.8 s at load ~10.
    Processes the tests start (studies, Ray trials) choose their own threads, as users' do."""
    import scipy.linalg  # noqa: F401  loads SciPy's OpenBLAS beside NumPy's, so the limit reaches both
    from threadpoolctl import threadpool_limits

    config.stash[BLAS_LIMIT] = threadpool_limits(limits=1, user_api="blas")


BLAS_LIMIT = pytest.StashKey[object]()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The long files first (LONG_FILES' order), the rest as collected. Under `--dist loadfile` each file runs on
    one worker (its module fixtures are built once), so at most two files that run studies run at once, one per
    core; `--no-loadscope-reorder` keeps this order (xdist otherwise hands out the files with the most tests first,
    which left long files of few tests, the study runs, for the end). (`--dist loadgroup` grouped nothing under pytest 9.2: xdist 3.8 marks a group by rewriting
    `item._nodeid`, which pytest 9.2's `nodeid` no longer reads, so one file's tests ran on both workers.)"""
    rank = {name: i for i, name in enumerate(LONG_FILES)}
    items.sort(key=lambda item: rank.get(Path(item.path).name, len(rank)))  # stable: order kept within a file


@pytest.fixture
def registries_restored(monkeypatch: pytest.MonkeyPatch) -> Any:
    """The four registries put back as they were after the test, and the installed plugins (entry points)
    loaded afresh on the test's first read, from the sys.path it sets."""
    import algorithms.base
    import problems.registry
    from problems.shared import registries
    from sweep import claims, kinds

    held = [algorithms.base._REGISTRY, problems.registry._REGISTRY, kinds.KINDS, claims.CLAIMS]
    saved = [dict(r._items) for r in held]
    monkeypatch.setattr(registries, "INSTALLED", registries._Installed())
    yield
    for registry, items in zip(held, saved):
        registry._items.clear()
        registry._items.update(items)


@pytest.fixture(scope="session")
def repo() -> Path:
    """The repository root (trials import tests.sweep.* from here)."""
    return REPO


@pytest.fixture(scope="session")
def venv_bin() -> Path:
    """The directory of this environment's console scripts (bisweep, mlflow, ray)."""
    return Path(sys.executable).parent


@pytest.fixture(scope="session")
def free_port() -> Callable[..., int]:
    """free_port(host="127.0.0.1"): a port nothing listens on at the moment."""
    def pick(host: str = "127.0.0.1") -> int:
        with socket.socket() as s:
            s.bind((host, 0))
            return s.getsockname()[1]

    return pick


@pytest.fixture(scope="session")
def read_csv() -> Callable[[Path], list[dict[str, str]]]:
    """read_csv(path): the rows of a report CSV."""
    def read(path: Path) -> list[dict[str, str]]:
        with open(path) as fh:
            return list(csv.DictReader(fh))

    return read


@pytest.fixture(scope="session")
def eval_points() -> Callable[[int, int], list[int]]:
    """eval_points(iterations, n_evals): the run loop's log-spaced evaluation points, computed independently."""
    def points(iterations: int, n_evals: int) -> list[int]:
        return sorted({0, iterations} | {int(round(v)) for v in np.geomspace(1, iterations, n_evals)})

    return points


@pytest.fixture(scope="session")
def spec_error() -> Callable[..., list[str]]:
    """spec_error(data, path, *words, count=1): the study fails with `count` lines, the first starting with
    `path:` and naming `words`; returns the lines."""
    from sweep.study import spec

    def check(data: Any, path: str, *words: str, count: int = 1) -> list[str]:
        with pytest.raises(ParameterError) as info:
            spec.validate(copy.deepcopy(data))
        lines = str(info.value).split("\n")
        assert len(lines) == count, lines
        assert lines[0].startswith(f"{path}: "), lines[0]
        for w in words:
            assert w in lines[0], lines[0]
        return lines

    return check


TOY_STUDY = {"name": "r", "imports": ["tests.sweep.toy_algorithms"],
             "problems": [{"name": "quadratic", "params": {"dim_x": 4, "dim_y": 5}}],
             "algorithms": [{"name": "toy_aid"}], "seeds": 3, "budget": {"iterations": 30}, "n_evals": 6}


@pytest.fixture(scope="session")
def toy_study() -> Callable[..., Any]:
    """toy_study(**fields): a validated study of toy_aid on a 4×5 quadratic (3 seeds, 30 iterations), fields overridden."""
    from sweep.study import spec
    from tests.sweep import toy_algorithms  # noqa: F401  registers toy_aid, toy_ogd, toy_drift

    def make(**fields: Any) -> Any:
        return spec.validate({**copy.deepcopy(TOY_STUDY), **fields})

    return make


@pytest.fixture(scope="session")
def run_through_platform() -> Callable[..., Any]:
    """run_through_platform(study, root): every trial body fed to the driver's store callback, as under Tune."""
    from sweep.execution.recording import StoreCallback
    from sweep.execution.trainable import execute_trial
    from sweep.results.store import ResultStore

    def run(st: Any, root: Path) -> ResultStore:
        store = ResultStore(root)
        store.write_study(st)
        cb = StoreCallback(store, {p.run_key(s): (p, s) for p in st.points for s in st.seeds})
        for t in st.trials:
            execute_trial(t.config(0.0, st.imports), lambda res, ck: cb.on_trial_result(0, [], None, res))
        return store

    return run


@pytest.fixture(scope="session")
def write_synthetic() -> Callable[..., Any]:
    """write_synthetic(study, root, final_of, records_of=None): summaries (and records) with chosen values;
    final_of(point, seed) -> (status, final record), records_of(point, seed) -> records."""
    from sweep.results.store import ResultStore

    def write(st: Any, root: Path, final_of: Callable, records_of: Callable | None = None) -> ResultStore:
        store = ResultStore(root)
        store.write_study(st)
        for p in st.points:
            for s in st.seeds:
                status, rec = final_of(p, s)
                key = p.run_key(s)
                for r in (records_of(p, s) if records_of else [rec]):
                    store.append(key, r)
                store.finish(key, {"run_key": key, "trial_key": "t", "seed": s, "status": status, "final": rec,
                                   "where": {}, "point": p.to_dict()})
        return store

    return write


@pytest.fixture(scope="session")
def run_data() -> Callable[..., Any]:
    """run_data(problem, final, status=..., label=..., algorithm=..., axis=..., records=..., **coords): one RunData
    as claims read it (coords: grid, reference, in_grid, problem_params)."""
    from sweep.results.runs import RunData

    def make(problem: str, final: dict[str, Any], status: str = "finished", label: str | None = None,
             algorithm: str | None = None, axis: Any = None, records: list[dict[str, Any]] | None = None,
             **coords: Any) -> RunData:
        point = {"problem": problem, "label": label or algorithm or "a", "algorithm": algorithm or label or "a",
                 "problem_params": dict(coords.pop("problem_params", {})), "budget": {"iterations": 1},
                 "coords": {"grid": coords.pop("grid", {}), "axis": axis, **coords}}
        return RunData("k", point, 0, status, final, records or [final], {}, None)

    return make
