"""Classification data for the ML problems: loading, seeded splits and standardisation.

Sources: the datasets bundled with scikit-learn (no download), seeded synthetic data
(make_classification) for scaling studies, and files the user already has: LIBSVM/svmlight text files
(covtype, ijcnn1, ...) and MNIST as an .npz archive or a directory of IDX files. Nothing is downloaded;
a missing or malformed file is a one-line ParameterError naming `data_path`.

Covtype and MNIST (the real data of the TFBO paper's §5.1–5.2) also come from scikit-learn's on-disk cache,
as its fetchers leave it: `fetch_covtype` (data_home/covertype/) and `fetch_openml(data_id=554)` for
mnist_784 (data_home/openml/openml.org/…). The data home is `data_home`, else $BISWEEP_DATA, else
scikit-learn's default (~/scikit_learn_data). Without `data_path` and without that cache the parameters
fail validation in one line saying what to fetch and where to put it (so a study stops before Ray starts).
With `data_path`, covtype reads the UCI file (covtype.data, optionally .gz: 54 features and the class per
comma-separated line) or a LIBSVM file (covtype.libsvm.binary).
"""
from __future__ import annotations

import functools
import gzip
import json
import math
import os
import zipfile
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlparse

import numpy as np

from problems.base import Array
from problems.bundled_data import BUNDLED, load_bundled
from problems.shared.errors import ParameterError
from problems.validation import Params, param

FILE_SOURCES = ("svmlight", "mnist")
#: Real datasets read from scikit-learn's fetcher cache (or from `data_path` in their usual format).
FETCHED = ("covtype", "mnist")
SOURCES = (*BUNDLED, "synthetic", "svmlight", *FETCHED)
#: The environment variable naming the data home when `data_home` is not set.
DATA_ENV = "BISWEEP_DATA"
#: mnist_784's OpenML dataset id (what fetch_openml("mnist_784", version=1) resolves to).
MNIST_OPENML_ID = 554

MNIST_HINT = ("an MNIST .npz with keys x_train, y_train (optionally x_test, y_test), or a directory with "
              "train-images-idx3-ubyte and train-labels-idx1-ubyte (optionally t10k-*, .gz allowed)")
SVMLIGHT_HINT = "a LIBSVM/svmlight text file (e.g. covtype.libsvm.binary, ijcnn1)"
COVTYPE_HINT = "the UCI covtype.data (or covtype.data.gz) or a LIBSVM covtype file"
FETCH_HINT = {
    "covtype": "sklearn.datasets.fetch_covtype(data_home={home!r})",
    "mnist": f"sklearn.datasets.fetch_openml(data_id={MNIST_OPENML_ID}, data_home={{home!r}})",
}
IDX_FILES = (("train-images-idx3-ubyte", "train-labels-idx1-ubyte"), ("t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"))


@dataclass(frozen=True)
class DataParams(Params):
    """Where the data comes from and how it is split (shared by the ML problems)."""

    dataset: str = param("breast_cancer", "str", "data source", choices=SOURCES)
    data_path: str | None = param(None, "optional_path", "file (svmlight, covtype, mnist .npz) or IDX directory "
                                  "(mnist); null for covtype/mnist: scikit-learn's cache in the data home")
    data_home: str | None = param(None, "optional_path", f"covtype/mnist: scikit-learn data home (null: ${DATA_ENV}, "
                                  "else scikit-learn's default)")
    max_samples: int | None = param(None, "optional_positive_int", "seeded random subset kept before splitting")
    val_fraction: float = param(0.2, "probability", "share of samples in the validation set")
    test_fraction: float = param(0.2, "probability", "share of samples in the test set")
    n_samples: int = param(1000, "positive_int", "synthetic only: number of samples")
    n_features: int = param(20, "positive_int", "synthetic only: number of features")
    n_classes: int = param(2, "positive_int", "synthetic only: number of classes")

    def validate(self) -> None:
        if self.val_fraction <= 0 or self.val_fraction >= 1:
            self.fail("val_fraction", "in (0, 1)", self.val_fraction)
        if self.val_fraction + self.test_fraction >= 1:
            self.fail("test_fraction", f"below 1 − val_fraction = {1 - self.val_fraction:g}", self.test_fraction)
        if self.dataset == "synthetic":
            self._validate_synthetic()
        if self.dataset in FETCHED and self.data_path is None:
            self._validate_cache()
        elif self.dataset in (*FILE_SOURCES, *FETCHED):
            self._validate_path()

    def _validate_synthetic(self) -> None:
        if self.n_classes < 2:
            self.fail("n_classes", "at least 2", self.n_classes)
        # make_classification needs 2^n_informative ≥ n_classes (one cluster per class).
        if self.n_classes > 2 ** min(self.n_features, 62):
            self.fail("n_classes", f"at most 2^n_features = {2 ** self.n_features}", self.n_classes)

    def _validate_cache(self) -> None:
        home = data_home(self.data_home)
        if not cached(self.dataset, home):
            fetch = FETCH_HINT[self.dataset].format(home=home)
            self.fail("dataset", f"cached (nothing is downloaded here): run {fetch} where there is internet and copy "
                      f"{home} here, or set data_home or ${DATA_ENV} to such a copy, or data_path to "
                      f"{_hint(self.dataset)}", self.dataset, shown=f"'{self.dataset}' with no cache in {home}")

    def _validate_path(self) -> None:
        hint = _hint(self.dataset)
        if self.data_path is None:
            self.fail("data_path", f"set for dataset '{self.dataset}' (nothing is downloaded): {hint}", None)
        if not os.path.exists(os.path.expanduser(self.data_path)):
            self.fail("data_path", f"an existing path; put {hint} there", self.data_path)

    def array_bytes(self) -> float | None:
        """Synthetic data: the drawn samples and their standardised split (2 · n_samples · (n_features + n_classes));
        the bundled and file data sets are as large as they are."""
        if self.dataset != "synthetic":
            return None
        return 8.0 * 2 * self.n_samples * (self.n_features + self.n_classes)


@dataclass(frozen=True)
class Split:
    """Standardised train/validation/test features with integer labels 0..n_classes−1."""

    X_train: Array
    y_train: Array
    X_val: Array
    y_val: Array
    X_test: Array
    y_test: Array
    n_classes: int

    @property
    def n_features(self) -> int:
        """Columns of the feature matrices."""
        return int(self.X_train.shape[1])


def prepare(p: DataParams, rng: np.random.Generator) -> Split:
    """Load the source named by `p`, subsample, split and standardise, all seeded by `rng`."""
    X, labels = load(p, rng)
    if p.max_samples is not None and p.max_samples < len(labels):
        keep = np.sort(rng.choice(len(labels), size=p.max_samples, replace=False))
        X, labels = X[keep], labels[keep]
    labels, n_classes = encode_labels(labels)
    if n_classes < 2:
        raise ParameterError(f"{p.owner}: 'dataset' must have at least 2 classes, got one in {p.dataset!r}")
    return standardize(split(X, labels, n_classes, rng, p.val_fraction, p.test_fraction, p.owner))


def load(p: DataParams, rng: np.random.Generator) -> tuple[Array, Array]:
    """Raw features (float64, dense) and labels of the source named by `p`."""
    if p.dataset in BUNDLED:
        return load_bundled(p.dataset)
    if p.dataset == "synthetic":
        return make_synthetic(rng, p.n_samples, p.n_features, p.n_classes)
    if p.dataset in FETCHED and p.data_path is None:
        home = data_home(p.data_home)
        try:
            return _load_cached(p.dataset, home, _stamp_cache(p.dataset, home))
        except (ValueError, OSError, KeyError, EOFError) as err:
            reason = " ".join(str(err).split()) or type(err).__name__
            raise ParameterError(f"{p.owner}: 'dataset' {p.dataset!r}: the cache in {home} is unreadable "
                                 f"(fetch it again with {FETCH_HINT[p.dataset].format(home=home)}): {reason}") from None
    path = Path(os.path.expanduser(p.data_path))
    try:
        return _load_file(p.dataset, str(path.resolve()), _stamp(path))
    except (ValueError, OSError, KeyError, EOFError, zipfile.BadZipFile) as err:
        reason = " ".join(str(err).split()) or type(err).__name__
        raise ParameterError(f"{p.owner}: 'data_path' {p.data_path!r} is not {_hint(p.dataset)}: {reason}") from None


def _hint(dataset: str) -> str:
    return {"mnist": MNIST_HINT, "covtype": COVTYPE_HINT}.get(dataset, SVMLIGHT_HINT)


def _n_informative(n_features: int, n_classes: int) -> int:
    return min(n_features, max(n_features // 2, math.ceil(math.log2(n_classes)), 1))


def make_synthetic(rng: np.random.Generator, n: int, d: int, k: int) -> tuple[Array, Array]:
    """Seeded make_classification data: one Gaussian cluster per class, half the features informative."""
    from sklearn.datasets import make_classification

    X, y = make_classification(n_samples=n, n_features=d, n_informative=_n_informative(d, k), n_redundant=0,
                               n_repeated=0, n_classes=k, n_clusters_per_class=1, flip_y=0.0,
                               random_state=int(rng.integers(2**31 - 1)))
    return X.astype(np.float64), y


def _stamp(path: Path) -> tuple:
    # A directory's own mtime misses rewritten files: stamp every file in it.
    files = sorted(q for q in path.iterdir() if q.is_file()) if path.is_dir() else [path]
    return tuple((q.name, q.stat().st_mtime_ns, q.stat().st_size) for q in files)


@functools.lru_cache(maxsize=4)
def _load_file(kind: str, path: str, stamp: tuple) -> tuple[Array, Array]:
    # Cached on (path, mtime, size): streams and repeated instances reread nothing.
    readers = {"svmlight": load_svmlight, "mnist": load_mnist, "covtype": load_covtype_file}
    X, y = readers[kind](path)
    X.setflags(write=False)
    y.setflags(write=False)
    return X, y


def load_svmlight(path: str) -> tuple[Array, Array]:
    """Dense features and labels of a LIBSVM/svmlight file."""
    from sklearn.datasets import load_svmlight_file

    X, y = load_svmlight_file(path)
    if X.shape[0] == 0:
        raise ValueError("no samples")
    return np.asarray(X.todense(), dtype=np.float64), np.asarray(y)


def load_mnist(path: str) -> tuple[Array, Array]:
    """MNIST images flattened to rows (train then test samples) and their labels."""
    parts = _mnist_npz(path) if os.path.isfile(path) else _mnist_idx(Path(path))
    X = np.concatenate([x.reshape(len(x), -1) for x, _ in parts]).astype(np.float64)
    y = np.concatenate([np.asarray(lab).reshape(-1) for _, lab in parts])
    if len(X) != len(y) or len(y) == 0:
        raise ValueError(f"{len(X)} images but {len(y)} labels")
    return X, y


def _mnist_npz(path: str) -> list[tuple[Array, Array]]:
    z = np.load(path, allow_pickle=False)
    if not isinstance(z, np.lib.npyio.NpzFile):
        raise ValueError("a single array, not an .npz archive")
    with z:
        if "x_train" not in z.files or "y_train" not in z.files:
            raise KeyError(f"keys found: {', '.join(sorted(z.files)) or 'none'}")
        parts = [(z["x_train"], _label_vector(z["y_train"]))]
        if "x_test" in z.files and "y_test" in z.files:
            parts.append((z["x_test"], _label_vector(z["y_test"])))
    for x, lab in parts:
        if len(x) != len(lab):
            raise ValueError(f"{len(x)} images but {len(lab)} labels")
    return parts


def _label_vector(labels: Array) -> Array:
    # One-hot label matrices are accepted as well as label vectors.
    return labels.argmax(axis=1) if labels.ndim == 2 else labels.reshape(-1)


def _mnist_idx(folder: Path) -> list[tuple[Array, Array]]:
    parts = []
    for images, labels in IDX_FILES:
        found = [_find(folder, images), _find(folder, labels)]
        if None in found:
            continue
        x, lab = read_idx(found[0]), read_idx(found[1])
        if len(x) != len(lab):
            raise ValueError(f"{found[0].name} has {len(x)} images but {found[1].name} {len(lab)} labels")
        parts.append((x, lab))
    if not parts:
        raise FileNotFoundError(f"no {IDX_FILES[0][0]} / {IDX_FILES[0][1]} pair in the directory")
    return parts


def _find(folder: Path, stem: str) -> Path | None:
    for name in (stem, stem + ".gz"):
        if (folder / name).is_file():
            return folder / name
    return None


_IDX_TYPES = {0x08: ">u1", 0x09: ">i1", 0x0B: ">i2", 0x0C: ">i4", 0x0D: ">f4", 0x0E: ">f8"}


def read_idx(path: Path) -> Array:
    """An IDX array (the MNIST file format), optionally gzip-compressed."""
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rb") as fh:
        raw = fh.read()
    if len(raw) < 4 or raw[0] != 0 or raw[1] != 0 or raw[2] not in _IDX_TYPES or raw[3] == 0:
        raise ValueError(f"{path.name}: not an IDX file (bad magic number)")
    ndim, dtype = raw[3], np.dtype(_IDX_TYPES[raw[2]])
    if len(raw) < 4 + 4 * ndim:
        raise ValueError(f"{path.name}: truncated header")
    shape = tuple(int(s) for s in np.frombuffer(raw, ">u4", count=ndim, offset=4))
    expected = 4 + 4 * ndim + dtype.itemsize * math.prod(shape)
    if len(raw) != expected:
        raise ValueError(f"{path.name}: {len(raw)} bytes, header {shape} needs {expected}")
    return np.frombuffer(raw, dtype, offset=4 + 4 * ndim).reshape(shape)


# ---------------------------------------------------------------- scikit-learn's fetcher cache
def data_home(home: str | None = None) -> str:
    """The data home: `home`, else $BISWEEP_DATA, else scikit-learn's default ($SCIKIT_LEARN_DATA or
    ~/scikit_learn_data; computed here because sklearn's get_data_home creates the directory)."""
    home = (home or os.environ.get(DATA_ENV) or os.environ.get("SCIKIT_LEARN_DATA")
            or os.path.join("~", "scikit_learn_data"))
    return os.path.abspath(os.path.expanduser(home))


def _openml_file(home: str, path: str) -> Path:
    """Where fetch_openml caches the resource at openml.org/`path` (gzip-compressed)."""
    return Path(home, "openml", "openml.org", path + ".gz")


def _openml_json(home: str, what: str) -> Path:
    return _openml_file(home, f"api/v1/json/data/{what}{MNIST_OPENML_ID}")


def cache_files(dataset: str, home: str) -> list[Path]:
    """The files the fetcher reads from a complete cache of `dataset` in `home` (the data file last)."""
    if dataset == "covtype":
        return [Path(home, "covertype", "samples_py3"), Path(home, "covertype", "targets_py3")]
    files = [_openml_json(home, ""), _openml_json(home, "features/"), _openml_json(home, "qualities/")]
    if files[0].is_file():
        try:  # the data file is named by the URL in the cached description
            with gzip.open(files[0], "rt") as fh:
                url = json.load(fh)["data_set_description"]["url"]
            files.append(_openml_file(home, urlparse(url).path.lstrip("/")))
        except (OSError, ValueError, KeyError, TypeError):
            files.append(files[0].with_name("unreadable-description"))
    return files


def cached(dataset: str, home: str) -> bool:
    """True when every file of `dataset`'s fetcher cache is in `home`."""
    files = cache_files(dataset, home)
    return len(files) >= 2 + (dataset == "mnist") * 2 and all(f.is_file() for f in files)


def _stamp_cache(dataset: str, home: str) -> tuple:
    return tuple((str(f), f.stat().st_mtime_ns, f.stat().st_size) for f in cache_files(dataset, home))


@functools.lru_cache(maxsize=2)
def _load_cached(dataset: str, home: str, stamp: tuple) -> tuple[Array, Array]:
    # Cached on the files' (mtime, size): every instance of a study reads the cache once per process.
    from sklearn import datasets

    if dataset == "covtype":
        bunch = datasets.fetch_covtype(data_home=home, download_if_missing=False)
        X, y = bunch.data, bunch.target
    else:  # a complete cache is read without the network (checked by `cached`)
        X, y = datasets.fetch_openml(data_id=MNIST_OPENML_ID, data_home=home, as_frame=False, parser="liac-arff",
                                     return_X_y=True, n_retries=1, delay=1e-3)
    X, y = np.asarray(X, dtype=np.float64), np.asarray(y)
    if y.dtype.kind in "OUS":  # OpenML's nominal digit classes come as strings
        y = y.astype(np.int64)
    X.setflags(write=False)
    y.setflags(write=False)
    return X, y


def load_covtype_file(path: str) -> tuple[Array, Array]:
    """Covtype from the UCI file (54 features and the class per comma-separated line, .gz allowed) or LIBSVM."""
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt") as fh:
        first = fh.readline()
    if "," not in first:
        return load_svmlight(path)
    table = np.loadtxt(path, delimiter=",", ndmin=2)
    if table.shape[1] != 55:
        raise ValueError(f"{table.shape[1]} columns, the UCI file has 55 (54 features and the class)")
    return table[:, :-1].astype(np.float64), table[:, -1].astype(np.int64)


def encode_labels(labels: Array) -> tuple[Array, int]:
    """Labels mapped to 0..K−1 in sorted order of the original values, and K."""
    classes, codes = np.unique(labels, return_inverse=True)
    return codes.reshape(-1).astype(np.int64), int(len(classes))


def split(X: Array, labels: Array, n_classes: int, rng: np.random.Generator, val_fraction: float,
          test_fraction: float, owner: str = "data") -> Split:
    """A seeded random partition into train/validation/test (fractions of the samples)."""
    n = len(labels)
    n_val, n_test = int(round(val_fraction * n)), int(round(test_fraction * n))
    n_train = n - n_val - n_test
    if min(n_train, n_val) < 1 or (test_fraction > 0 and n_test < 1):
        raise ParameterError(f"{owner}: 'max_samples' must leave every split non-empty; {n} samples give "
                             f"{n_train}/{n_val}/{n_test} train/validation/test")
    perm = rng.permutation(n)
    tr, va, te = perm[:n_train], perm[n_train:n_train + n_val], perm[n_train + n_val:]
    return Split(X[tr], labels[tr], X[va], labels[va], X[te], labels[te], n_classes)


def standardize(s: Split) -> Split:
    """Centre and scale every feature with the training set's mean and standard deviation."""
    mean = s.X_train.mean(axis=0)
    std = s.X_train.std(axis=0)
    std[std == 0] = 1.0  # constant training features (e.g. blank MNIST/digits pixels) stay at zero
    scale = lambda X: (X - mean) / std  # noqa: E731
    return Split(scale(s.X_train), s.y_train, scale(s.X_val), s.y_val, scale(s.X_test), s.y_test, s.n_classes)
