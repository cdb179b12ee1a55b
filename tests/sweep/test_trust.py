"""What a results directory holds is data, never code or a path (issue 34, items 5-7): reports and load_results
import no module a study.json names, every key read from disk is a plain name, and a URI's password is never
shown."""
import json
import sys

import pytest

from sweep.cli import main
from sweep.report.frames import load_results
from sweep.results.store import ResultStore
from sweep.tracking.masking import mask, mask_text

PLANTED = "import pathlib\npathlib.Path(__file__).with_name('RAN').write_text('imported')\n"


def _results(tmp_path, toy_study, write_synthetic):
    """A small finished study whose study.json names modules that would leave a file RAN if imported."""
    st = toy_study(seeds=2)
    root = tmp_path / "res"
    write_synthetic(st, root, lambda p, s: ("finished", {"iteration": 30, "status": "finished",
                                                         "grad_F_sq": 0.5 + s, "F": 1.0 + s}))
    meta = json.loads((root / "study.json").read_text())
    meta["source"]["imports"] = ["planted_top", "planted_pkg.sub"]
    (root / "study.json").write_text(json.dumps(meta))
    (tmp_path / "planted_top.py").write_text(PLANTED)
    (tmp_path / "planted_pkg").mkdir()
    (tmp_path / "planted_pkg" / "__init__.py").write_text(PLANTED)  # find_spec("planted_pkg.sub") imports it
    (tmp_path / "planted_pkg" / "sub.py").write_text(PLANTED)
    return root


@pytest.fixture
def received(tmp_path, toy_study, write_synthetic, monkeypatch):
    root = _results(tmp_path, toy_study, write_synthetic)
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))  # as `python -m` from that directory would find them
    yield root
    for name in ("planted_top", "planted_pkg", "planted_pkg.sub"):
        sys.modules.pop(name, None)


def test_report_and_load_results_import_no_module_the_results_directory_names(received, tmp_path):
    assert main(["report", "r", "--results-dir", str(received), "--no-mlflow", "--force"]) == 0
    res = load_results(received)
    assert not list(tmp_path.rglob("RAN"))
    assert len(res.runs) == 2 and sorted(res.runs["grad_F_sq"]) == pytest.approx([0.5, 1.5], abs=1e-12)
    assert (received / "report" / "runs.csv").exists()


def test_report_imports_exactly_what_import_names(received, tmp_path):
    assert main(["report", "r", "--results-dir", str(received), "--no-mlflow", "--import", "planted_top"]) == 0
    assert [p.parent.name for p in tmp_path.rglob("RAN")] == [tmp_path.name]  # the top module only


def test_a_plugin_kind_not_registered_names_the_modules_and_import(received, capsys):
    meta = json.loads((received / "study.json").read_text())
    (received / "study.json").write_text(json.dumps({**meta, "kind": "planted_kind"}))
    assert main(["report", "r", "--results-dir", str(received), "--no-mlflow"]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith("bisweep: error: import: this study's kind 'planted_kind' is not registered")
    assert "'planted_top', 'planted_pkg.sub'" in line and "--import MODULE" in line


@pytest.mark.parametrize("key", ["../../outside/x", "/etc/passwd", ".hidden", "a\\b", "x" * 241])
def test_a_crafted_point_key_is_refused_before_any_file_is_read(tmp_path, toy_study, write_synthetic, capsys, key):
    root = _results(tmp_path, toy_study, write_synthetic)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "x.s0.json").write_text(json.dumps({"status": "finished", "final": {"F": 42.0}}))
    meta = json.loads((root / "study.json").read_text())
    meta["points"][0]["key"] = key
    (root / "study.json").write_text(json.dumps(meta))
    assert main(["report", "r", "--results-dir", str(root), "--no-mlflow", "--force"]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith("bisweep: error: study.json: points[0].key:") and "is not a plain name" in line
    assert not (root / "report").exists()
    with pytest.raises(Exception, match="not a plain name"):
        load_results(root)
    with pytest.raises(Exception, match="run key.*not a plain name"):
        ResultStore(root).summary("../outside/x.s0")


def test_a_non_integer_seed_in_study_json_is_refused(tmp_path, toy_study, write_synthetic, capsys):
    root = _results(tmp_path, toy_study, write_synthetic)
    meta = json.loads((root / "study.json").read_text())
    (root / "study.json").write_text(json.dumps({**meta, "seeds": [0, "../1"]}))
    assert main(["report", "r", "--results-dir", str(root), "--no-mlflow"]) == 2
    assert "study.json: seeds[1] must be an integer, got '../1'" in capsys.readouterr().err


@pytest.mark.parametrize("uri, shown", [
    ("postgresql://mlflow:S3cretPW@db.example:5432/mlflow", "postgresql://mlflow:***@db.example:5432/mlflow"),
    ("mysql+pymysql://u:p%40ss@h/db", "mysql+pymysql://u:***@h/db"),
    ("https://user:tok@mlflow.example/?token=abc&x=1", "https://user:***@mlflow.example/?token=***&x=1"),
    ("sqlite:////tmp/r/mlflow.db", "sqlite:////tmp/r/mlflow.db"),
    ("http://127.0.0.1:5000", "http://127.0.0.1:5000"),
])
def test_mask_hides_exactly_the_secret(uri, shown):
    assert mask(uri) == shown
    assert mask_text(f"could not connect to {uri} (refused)") == f"could not connect to {shown} (refused)"


def test_no_password_is_printed_by_the_tracking_checks(tmp_path, free_port, capsys):
    port = free_port()
    for uri in (f"http://alice:S3cretPW@127.0.0.1:{port}", f"postgresql://mlflow:S3cretPW@127.0.0.1:{port}/m",
                "ftp://u:S3cretPW@h/x"):
        assert main(["run", "quickstart", "--results-dir", str(tmp_path / "r"), "--tracking-uri", uri]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "S3cretPW" not in err and "tracking-uri: " in err
        assert ":***@" in err or "database server" in err  # that message names host:port only
    assert not (tmp_path / "r").exists()
