"""Data sources, seeded splits and train-only standardisation; clear errors for bad files."""
import gzip
import os

import numpy as np
import pytest
from sklearn.datasets import dump_svmlight_file

from problems import bundled_data
from problems.datasets import DataParams, encode_labels, load, prepare, read_idx, split, standardize
from problems.shared.errors import ParameterError


def data(**kw) -> DataParams:
    return DataParams.from_dict(kw)


@pytest.mark.parametrize("name, n, d, k", [("breast_cancer", 569, 30, 2), ("digits", 1797, 64, 10),
                                           ("iris", 150, 4, 3), ("wine", 178, 13, 3)])
def test_bundled_datasets_split_and_standardise(name, n, d, k):
    s = prepare(data(dataset=name), np.random.default_rng(0))
    sizes = (len(s.y_train), len(s.y_val), len(s.y_test))
    assert sum(sizes) == n and sizes[1] == round(0.2 * n) and sizes[2] == round(0.2 * n)
    assert s.n_features == d and s.n_classes == k
    assert set(np.unique(np.concatenate([s.y_train, s.y_val, s.y_test]))) == set(range(k))
    np.testing.assert_allclose(s.X_train.mean(axis=0), 0, atol=1e-12)
    std = s.X_train.std(axis=0)
    assert np.all((np.abs(std - 1) < 1e-12) | (std == 0))


def test_split_is_a_seeded_partition_and_standardisation_uses_train_only():
    rng = np.random.default_rng(0)
    n = 50
    X = np.column_stack([np.arange(n, dtype=float), rng.standard_normal((n, 3)) * [1, 5, 0.1] + [2, -1, 7]])
    X[:, 3] = 4.0  # a constant feature
    labels = np.arange(n) % 3
    raw = split(X, labels, 3, np.random.default_rng(1), 0.2, 0.3)
    ids = np.concatenate([raw.X_train[:, 0], raw.X_val[:, 0], raw.X_test[:, 0]])
    assert sorted(ids) == list(range(n))  # every sample exactly once
    assert (len(raw.y_train), len(raw.y_val), len(raw.y_test)) == (25, 10, 15)
    np.testing.assert_array_equal(raw.y_val, raw.X_val[:, 0].astype(int) % 3)  # labels follow their rows
    s = standardize(raw)
    mean, std = raw.X_train.mean(axis=0), raw.X_train.std(axis=0)
    # Independent: validation/test scaled with the training statistics, not their own.
    np.testing.assert_allclose(s.X_val[:, :3], (raw.X_val[:, :3] - mean[:3]) / std[:3], rtol=1e-13)
    np.testing.assert_allclose(s.X_test[:, :3], (raw.X_test[:, :3] - mean[:3]) / std[:3], rtol=1e-13)
    assert abs(s.X_val[:, :3].mean(axis=0)).max() > 1e-3  # not re-centred on validation
    assert np.all(s.X_train[:, 3] == 0) and np.all(s.X_test[:, 3] == 0)
    again = split(X, labels, 3, np.random.default_rng(1), 0.2, 0.3)
    other = split(X, labels, 3, np.random.default_rng(2), 0.2, 0.3)
    assert np.array_equal(raw.X_val, again.X_val) and not np.array_equal(raw.X_val, other.X_val)


def test_prepare_is_seeded_and_subsamples():
    a = prepare(data(dataset="digits", max_samples=300), np.random.default_rng(4))
    b = prepare(data(dataset="digits", max_samples=300), np.random.default_rng(4))
    c = prepare(data(dataset="digits", max_samples=300), np.random.default_rng(5))
    assert len(a.y_train) + len(a.y_val) + len(a.y_test) == 300
    assert np.array_equal(a.X_train, b.X_train) and np.array_equal(a.y_test, b.y_test)
    assert not np.array_equal(a.X_train, c.X_train)


def test_synthetic_data_is_seeded_with_requested_shape():
    p = data(dataset="synthetic", n_samples=400, n_features=12, n_classes=4)
    a, b = prepare(p, np.random.default_rng(3)), prepare(p, np.random.default_rng(3))
    assert a.n_features == 12 and a.n_classes == 4 and len(a.y_train) == 240
    assert np.array_equal(a.X_train, b.X_train)
    assert not np.array_equal(a.X_train, prepare(p, np.random.default_rng(9)).X_train)
    assert np.bincount(np.concatenate([a.y_train, a.y_val, a.y_test])).min() >= 90  # balanced classes


def test_encode_labels_maps_sorted_values():
    codes, k = encode_labels(np.array([-1.0, 1.0, 1.0, -1.0, 1.0]))
    assert k == 2 and codes.tolist() == [0, 1, 1, 0, 1]


def test_svmlight_file_loads_exactly(tmp_path):
    rng = np.random.default_rng(0)
    X = np.round(rng.standard_normal((40, 5)), 6)
    X[X < -0.5] = 0.0  # sparse entries
    y = np.where(rng.random(40) < 0.5, -1.0, 1.0)
    path = tmp_path / "toy.svm"
    dump_svmlight_file(X, y, str(path))
    p = data(dataset="svmlight", data_path=str(path))
    X2, y2 = load(p, rng)
    np.testing.assert_allclose(X2, X, rtol=1e-12)
    np.testing.assert_array_equal(y2, y)
    s = prepare(p, np.random.default_rng(0))
    assert s.n_classes == 2 and (len(s.y_train), len(s.y_val), len(s.y_test)) == (24, 8, 8)


def _write_idx(path, array, compress=False):
    codes = {np.dtype(np.uint8): 0x08}
    header = bytes([0, 0, codes[array.dtype], array.ndim]) + np.array(array.shape, ">u4").tobytes()
    raw = header + array.tobytes()
    (gzip.open if compress else open)(path, "wb").write(raw)


def test_mnist_npz_and_idx_give_the_same_rows(tmp_path):
    rng = np.random.default_rng(1)
    xtr, xte = rng.integers(0, 256, (30, 4, 4), dtype=np.uint8), rng.integers(0, 256, (10, 4, 4), dtype=np.uint8)
    ytr, yte = rng.integers(0, 10, 30).astype(np.uint8), rng.integers(0, 10, 10).astype(np.uint8)
    np.savez(tmp_path / "mnist.npz", x_train=xtr, y_train=ytr, x_test=xte, y_test=yte)
    folder = tmp_path / "idx"
    folder.mkdir()
    _write_idx(folder / "train-images-idx3-ubyte.gz", xtr, compress=True)
    _write_idx(folder / "train-labels-idx1-ubyte", ytr)
    _write_idx(folder / "t10k-images-idx3-ubyte", xte)
    _write_idx(folder / "t10k-labels-idx1-ubyte.gz", yte, compress=True)
    np.testing.assert_array_equal(read_idx(folder / "train-images-idx3-ubyte.gz"), xtr)
    Xa, ya = load(data(dataset="mnist", data_path=str(tmp_path / "mnist.npz")), rng)
    Xb, yb = load(data(dataset="mnist", data_path=str(folder)), rng)
    assert Xa.shape == (40, 16) and Xa.dtype == np.float64
    np.testing.assert_array_equal(Xa, np.concatenate([xtr, xte]).reshape(40, 16))
    np.testing.assert_array_equal(Xa, Xb)
    np.testing.assert_array_equal(ya, yb)


def _one_line_error(match, **kw):
    with pytest.raises(ParameterError, match=match) as err:
        prepare(data(**kw), np.random.default_rng(0))
    assert "\n" not in str(err.value)
    return str(err.value)


def test_missing_files_say_where_to_put_them(tmp_path):
    msg = _one_line_error("'data_path' must be an existing path; put an MNIST .npz",
                          dataset="mnist", data_path=str(tmp_path / "nope.npz"))
    assert "nope.npz" in msg
    _one_line_error("'data_path' must be set for dataset 'svmlight'.*LIBSVM", dataset="svmlight")
    _one_line_error("no train-images-idx3-ubyte", dataset="mnist", data_path=str(tmp_path))


def test_malformed_files_give_one_line_errors(tmp_path):
    bad_svm = tmp_path / "bad.svm"
    bad_svm.write_text("1 3:abc\n-1 1:2 oops\n")
    _one_line_error("'data_path' .*bad.svm.* is not a LIBSVM", dataset="svmlight", data_path=str(bad_svm))
    empty = tmp_path / "empty.svm"
    empty.write_text("")
    _one_line_error("is not a LIBSVM", dataset="svmlight", data_path=str(empty))
    np.savez(tmp_path / "keys.npz", images=np.zeros((3, 4)))
    _one_line_error("keys found: images", dataset="mnist", data_path=str(tmp_path / "keys.npz"))
    np.savez(tmp_path / "sizes.npz", x_train=np.zeros((3, 4)), y_train=np.zeros(2))
    _one_line_error("3 images but 2 labels", dataset="mnist", data_path=str(tmp_path / "sizes.npz"))
    (tmp_path / "junk.npz").write_bytes(b"this is not a zip archive")
    _one_line_error("is not an MNIST", dataset="mnist", data_path=str(tmp_path / "junk.npz"))
    folder = tmp_path / "idx"
    folder.mkdir()
    (folder / "train-images-idx3-ubyte").write_bytes(b"\x00\x00\x08\x03" + np.array([2, 2, 2], ">u4").tobytes() + b"\x01")
    _write_idx(folder / "train-labels-idx1-ubyte", np.zeros(2, np.uint8))
    _one_line_error("train-images-idx3-ubyte: 17 bytes, header \\(2, 2, 2\\) needs 24", dataset="mnist", data_path=str(folder))
    (folder / "train-images-idx3-ubyte").write_bytes(b"PK\x03\x04garbage")
    _one_line_error("bad magic number", dataset="mnist", data_path=str(folder))


@pytest.mark.parametrize("kw, match", [
    ({"dataset": "cifar10"}, "'dataset' must be one of 'breast_cancer', 'digits'"),
    ({"val_fraction": 0.0}, "'val_fraction' must be in \\(0, 1\\)"),
    ({"val_fraction": 1.5}, "'val_fraction' must be a probability"),
    ({"val_fraction": 0.5, "test_fraction": 0.5}, "'test_fraction' must be below 1 − val_fraction = 0.5"),
    ({"dataset": "synthetic", "n_classes": 1}, "'n_classes' must be at least 2"),
    ({"dataset": "synthetic", "n_features": 2, "n_classes": 5}, "'n_classes' must be at most 2\\^n_features = 4"),
    ({"dataset": "iris", "max_samples": 2}, "'max_samples' must leave every split non-empty"),
    ({"data_path": 3}, "'data_path' must be a file path"),
])
def test_bad_data_parameters(kw, match):
    _one_line_error(match, **kw)


def test_file_cache_sees_rewritten_files(tmp_path):
    p = data(dataset="mnist", data_path=str(tmp_path))
    _write_idx(tmp_path / "train-images-idx3-ubyte", np.zeros((3, 2, 2), np.uint8))
    _write_idx(tmp_path / "train-labels-idx1-ubyte", np.array([0, 1, 2], np.uint8))
    assert load(p, None)[0].sum() == 0
    _write_idx(tmp_path / "train-images-idx3-ubyte", np.full((3, 2, 2), 7, np.uint8))
    os.utime(tmp_path / "train-images-idx3-ubyte", ns=(10**18, 10**18))  # same size: the mtime must differ
    assert load(p, None)[0].sum() == 7 * 12


@pytest.mark.parametrize("name", bundled_data.BUNDLED)
def test_a_bundled_dataset_read_from_its_file_is_scikit_learns_own(name):
    from sklearn import datasets as sk

    X, y = getattr(sk, f"load_{name}")(return_X_y=True)
    got_X, got_y = bundled_data._read_bundled_file(name)
    assert got_X.dtype == np.float64 and got_y.dtype == y.dtype
    np.testing.assert_array_equal(got_X, X)
    np.testing.assert_array_equal(got_y, y)
    cached = bundled_data.load_bundled(name)
    assert cached is bundled_data.load_bundled(name) and not cached[0].flags.writeable  # once per process, shared


def test_a_bundled_dataset_is_read_through_scikit_learn_when_its_file_is_not_there(monkeypatch):
    def missing(name):
        raise FileNotFoundError(name)

    monkeypatch.setattr(bundled_data, "_read_bundled_file", missing)
    bundled_data.load_bundled.cache_clear()
    try:
        X, y = bundled_data.load_bundled("iris")
    finally:
        bundled_data.load_bundled.cache_clear()
    assert X.shape == (150, 4) and sorted(np.unique(y)) == [0, 1, 2]
