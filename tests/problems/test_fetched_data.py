"""Covtype and MNIST from scikit-learn's fetcher cache (files written here in the fetchers' format) or from the
UCI file; without either, one line saying what to fetch and where, exit 2 before anything runs. The network
is blocked in every test: nothing downloads."""
import gzip
import hashlib
import json
import urllib.request

import joblib
import numpy as np
import pytest
from sklearn.datasets import dump_svmlight_file

from problems.datasets import DATA_ENV, MNIST_OPENML_ID, DataParams, data_home, load
from problems.shared.errors import ParameterError

RNG = np.random.default_rng(0)
COV_X = RNG.integers(0, 300, size=(12, 54)).astype(float)
COV_Y = np.arange(12) % 7 + 1  # classes 1..7, as fetch_covtype returns them
MNIST_X = RNG.integers(0, 256, size=(10, 4)).astype(float)  # 10 "images" of 4 pixels
MNIST_Y = np.arange(10) % 3


@pytest.fixture(autouse=True)
def offline(monkeypatch):
    """Any attempt to reach the network fails the test."""
    def refuse(*args, **kwargs):
        raise AssertionError("a loader tried to download")
    monkeypatch.setattr(urllib.request, "urlopen", refuse)
    monkeypatch.setattr("sklearn.datasets._openml.urlopen", refuse)
    monkeypatch.delenv(DATA_ENV, raising=False)
    monkeypatch.delenv("SCIKIT_LEARN_DATA", raising=False)


def write_covtype_cache(home):
    """What fetch_covtype leaves: joblib dumps covertype/samples_py3 and covertype/targets_py3."""
    (home / "covertype").mkdir(parents=True)
    joblib.dump(COV_X, home / "covertype" / "samples_py3", compress=9)
    joblib.dump(COV_Y, home / "covertype" / "targets_py3", compress=9)


def _gz_json(path, content):
    path.parent.mkdir(parents=True, exist_ok=True)
    with gzip.open(path, "wt") as fh:
        json.dump(content, fh)


def write_mnist_cache(home):
    """What fetch_openml(data_id=554) leaves: the description, features and qualities JSON and the ARFF data,
    each gzip-compressed under openml/openml.org/<url path>.gz."""
    root = home / "openml" / "openml.org"
    names = [f"pixel{i + 1}" for i in range(MNIST_X.shape[1])]
    arff = "@RELATION mnist_784\n" + "".join(f"@ATTRIBUTE {n} NUMERIC\n" for n in names)
    arff += "@ATTRIBUTE class {0,1,2,3,4,5,6,7,8,9}\n@DATA\n"
    arff += "".join(",".join(f"{v:g}" for v in row) + f",{c}\n" for row, c in zip(MNIST_X, MNIST_Y))
    url = "https://api.openml.org/data/v1/download/52667/mnist_784.arff"
    data = root / "data/v1/download/52667/mnist_784.arff.gz"
    data.parent.mkdir(parents=True)
    with gzip.open(data, "wt") as fh:
        fh.write(arff)
    _gz_json(root / f"api/v1/json/data/{MNIST_OPENML_ID}.gz", {"data_set_description": {
        "id": str(MNIST_OPENML_ID), "name": "mnist_784", "version": "1", "status": "active", "format": "ARFF",
        "url": url, "md5_checksum": hashlib.md5(arff.encode()).hexdigest(), "description": "MNIST"}})
    feature = lambda i, n, kind, target: {  # noqa: E731
        "index": str(i), "name": n, "data_type": kind, "is_target": target, "is_ignore": "false",
        "is_row_identifier": "false", "number_of_missing_values": "0"}
    features = [feature(i, n, "numeric", "false") for i, n in enumerate(names)]
    features.append({**feature(len(names), "class", "nominal", "true"), "nominal_value": [str(k) for k in range(10)]})
    _gz_json(root / f"api/v1/json/data/features/{MNIST_OPENML_ID}.gz", {"data_features": {"feature": features}})
    _gz_json(root / f"api/v1/json/data/qualities/{MNIST_OPENML_ID}.gz", {"data_qualities": {"quality": [
        {"name": "NumberOfInstances", "value": f"{len(MNIST_Y)}.0"}]}})
    return data


def rng():
    return np.random.default_rng(0)


def test_covtype_from_the_fetch_covtype_cache_named_by_data_home_or_the_environment(tmp_path, monkeypatch):
    write_covtype_cache(tmp_path / "home")
    X, y = load(DataParams.from_dict({"dataset": "covtype", "data_home": str(tmp_path / "home")}), rng())
    np.testing.assert_array_equal(X, COV_X)
    np.testing.assert_array_equal(y, COV_Y)
    monkeypatch.setenv(DATA_ENV, str(tmp_path / "home"))
    assert data_home() == str(tmp_path / "home")
    X, _ = load(DataParams.from_dict({"dataset": "covtype"}), rng())
    np.testing.assert_array_equal(X, COV_X)
    # data_home wins over the environment.
    with pytest.raises(ParameterError, match="no cache in"):
        DataParams.from_dict({"dataset": "covtype", "data_home": str(tmp_path / "elsewhere")})


def test_mnist_from_the_fetch_openml_cache(tmp_path):
    write_mnist_cache(tmp_path)
    X, y = load(DataParams.from_dict({"dataset": "mnist", "data_home": str(tmp_path)}), rng())
    np.testing.assert_array_equal(X, MNIST_X)
    np.testing.assert_array_equal(y, MNIST_Y)
    assert y.dtype.kind == "i"


def test_mnist_with_its_data_file_missing_is_not_cached(tmp_path):
    write_mnist_cache(tmp_path).unlink()
    with pytest.raises(ParameterError, match=r"fetch_openml\(data_id=554, data_home="):
        DataParams.from_dict({"dataset": "mnist", "data_home": str(tmp_path)})


@pytest.mark.parametrize("dataset, fetch", [("covtype", "fetch_covtype"), ("mnist", "fetch_openml")])
def test_uncached_is_one_line_saying_what_to_fetch_and_where(tmp_path, dataset, fetch):
    home = tmp_path / "empty"
    with pytest.raises(ParameterError) as err:
        DataParams.from_dict({"dataset": dataset, "data_home": str(home)})
    message = str(err.value)
    assert "\n" not in message
    assert message.startswith("parameters: 'dataset' must be cached (nothing is downloaded here): run "
                              f"sklearn.datasets.{fetch}(")
    assert f"data_home='{home}'" in message and f"copy {home} here" in message and "data_path" in message
    assert not home.exists()  # nothing created


def test_covtype_from_the_uci_file_and_from_libsvm(tmp_path):
    table = np.column_stack([COV_X, COV_Y]).astype(int)
    with gzip.open(tmp_path / "covtype.data.gz", "wt") as fh:
        fh.write("".join(",".join(map(str, row)) + "\n" for row in table))
    X, y = load(DataParams.from_dict({"dataset": "covtype", "data_path": str(tmp_path / "covtype.data.gz")}), rng())
    np.testing.assert_array_equal(X, COV_X)
    np.testing.assert_array_equal(y, COV_Y)
    dump_svmlight_file(COV_X[:, :5], COV_Y, str(tmp_path / "covtype.libsvm"))
    X, y = load(DataParams.from_dict({"dataset": "covtype", "data_path": str(tmp_path / "covtype.libsvm")}), rng())
    np.testing.assert_array_equal(X, COV_X[:, :5])
    np.testing.assert_array_equal(y, COV_Y)
    (tmp_path / "short.data").write_text("1,2,3\n")
    with pytest.raises(ParameterError, match=r"'data_path' .* is not the UCI covtype.data .*: 3 columns, the UCI "
                                             r"file has 55"):
        load(DataParams.from_dict({"dataset": "covtype", "data_path": str(tmp_path / "short.data")}), rng())


def test_a_study_on_uncached_covtype_fails_validation_with_exit_2(tmp_path, capsys):
    from sweep.cli import main

    study = tmp_path / "covtype.yaml"
    study.write_text(f"problems: [{{name: regularization_selection, params: {{dataset: covtype, "
                     f"data_home: {tmp_path / 'none'}}}}}]\nalgorithms: [soba]\nbudget: {{iterations: 5}}\n")
    assert main(["run", str(study), "--validate-only"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "fetch_covtype" in err[0] and "nothing is downloaded here" in err[0]
