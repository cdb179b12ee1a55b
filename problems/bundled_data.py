"""The datasets that ship inside scikit-learn (`breast_cancer`, `digits`, `iris`, `wine`), read without importing it."""
from __future__ import annotations

import functools
import importlib.util
from pathlib import Path

import numpy as np

from problems.base import Array

BUNDLED = ("breast_cancer", "digits", "iris", "wine")

#: The file scikit-learn ships each bundled dataset in (under sklearn/datasets/data: a row per sample, the features
#: then the label) and whether its first row is a header (n_samples, n_features, the class names).
BUNDLED_FILES = {"breast_cancer": ("breast_cancer.csv", True), "digits": ("digits.csv.gz", False),
                 "iris": ("iris.csv", True), "wine": ("wine_data.csv", True)}


@functools.lru_cache(maxsize=len(BUNDLED))
def load_bundled(name: str) -> tuple[Array, Array]:
    """A dataset that ships inside scikit-learn (read-only arrays, cached per process).

    Read from scikit-learn's own file without importing scikit-learn, whose import costs 1.5-2.7 s in every
    process that builds such a problem (each trial's, each report's); through its loader when the file is not
    where it keeps it (a test holds the two equal)."""
    try:
        X, y = _read_bundled_file(name)
    except (OSError, ValueError, IndexError, TypeError):
        from sklearn import datasets

        X, y = getattr(datasets, f"load_{name}")(return_X_y=True)
    X, y = np.asarray(X, dtype=np.float64), np.asarray(y)
    X.setflags(write=False)
    y.setflags(write=False)
    return X, y


def _read_bundled_file(name: str) -> tuple[Array, Array]:
    """The features and integer labels of a bundled dataset, read from scikit-learn's data file."""
    spec = importlib.util.find_spec("sklearn")  # its location, without running its (heavy) __init__
    if spec is None or not spec.submodule_search_locations:
        raise OSError("scikit-learn is not installed")
    file, header = BUNDLED_FILES[name]
    path = Path(spec.submodule_search_locations[0]) / "datasets" / "data" / file
    data = np.loadtxt(path, delimiter=",", skiprows=int(header), ndmin=2)
    if header:
        with open(path) as fh:
            n, d = (int(v) for v in fh.readline().split(",")[:2])
        if data.shape != (n, d + 1):
            raise ValueError(f"{file}: {data.shape} against its header's {n} x {d + 1}")
    return data[:, :-1], data[:, -1].astype(int)
