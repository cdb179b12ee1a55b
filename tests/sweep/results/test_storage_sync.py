"""A results directory mirrored to storage (a local directory standing in for a bucket): what changed is copied,
a SQLite store as a consistent snapshot, links and names leading out are refused, and it comes back elsewhere."""
import os
import sqlite3

import pytest

from problems.shared.errors import ParameterError
from sweep.results.storage_sync import Mirror, pull


def tree(root):
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def results(root):
    (root / "runs").mkdir(parents=True)
    (root / "records").mkdir()
    (root / "runs" / "a.json").write_text('{"status": "finished"}')
    (root / "records" / "a.jsonl").write_text('{"iteration": 0}\n')
    (root / "ended.txt").write_text("finished a\n")
    (root / ".lock").write_text("PID 1")  # this machine's: stays
    (root / "mlflow.db-journal").write_text("")  # the store's journal: its backup holds what counts
    (root / "ray").mkdir()
    (root / "ray" / "checkpoint").write_text("x")  # Tune's local storage: stays
    with sqlite3.connect(root / "mlflow.db") as db:
        db.execute("create table runs (id text)")
        db.execute("insert into runs values ('r1')")
    return root


def test_a_push_copies_what_changed_and_keeps_local_files_local(tmp_path):
    root = results(tmp_path / "out")
    mirror = Mirror(root, str(tmp_path / "bucket"))
    assert mirror.push() == 4
    copied = tmp_path / "bucket" / "results" / "out"
    assert sorted(tree(copied)) == ["ended.txt", "mlflow.db", "records/a.jsonl", "runs/a.json"]
    assert mirror.push() == 0  # nothing changed
    with open(root / "records" / "a.jsonl", "a") as fh:
        fh.write('{"iteration": 5}\n')
    assert mirror.push() == 1
    assert (copied / "records" / "a.jsonl").read_text() == '{"iteration": 0}\n{"iteration": 5}\n'
    with sqlite3.connect(copied / "mlflow.db") as db:  # a snapshot SQLite opens
        assert db.execute("select id from runs").fetchall() == [("r1",)]


def test_a_study_mirrored_while_it_runs_ends_with_every_file_copied(tmp_path):
    root = results(tmp_path / "out")
    said = []
    with Mirror(root, str(tmp_path / "bucket"), period=0.05, say=said.append):
        (root / "report").mkdir()
        (root / "report" / "summary.md").write_text("# report")
    assert tree(tmp_path / "bucket" / "results" / "out")["report/summary.md"] == b"# report"
    assert said == [f"bisweep: results copied to {tmp_path / 'bucket'}"]


def test_storage_that_cannot_be_written_is_one_warning_and_the_results_stay(tmp_path):
    root = results(tmp_path / "out")
    (tmp_path / "bucket").write_text("a file, not a directory")
    said = []
    with Mirror(root, str(tmp_path / "bucket"), period=60, say=said.append):
        pass
    assert len(said) == 1 and said[0].startswith(f"bisweep: warning: results not all copied to {tmp_path / 'bucket'} (")
    assert said[0].endswith(f"; they are in {root}")


def test_results_come_back_on_another_machine_without_overwriting_newer_ones(tmp_path):
    Mirror(results(tmp_path / "head" / "out"), str(tmp_path / "bucket")).push()
    elsewhere = tmp_path / "laptop" / "out"
    assert pull(elsewhere, str(tmp_path / "bucket")) == 4
    assert {k: v for k, v in tree(elsewhere).items() if k != "mlflow.db"} == {
        k: v for k, v in tree(tmp_path / "head" / "out").items() if not k.startswith(("ray/", ".lock", "mlflow.db"))}
    with sqlite3.connect(elsewhere / "mlflow.db") as db:  # a snapshot: the same rows, not the same bytes
        assert db.execute("select id from runs").fetchall() == [("r1",)]
    (elsewhere / "ended.txt").write_text("finished a\nfinished b\n")  # longer here: newer
    assert pull(elsewhere, str(tmp_path / "bucket")) == 0
    assert (elsewhere / "ended.txt").read_text() == "finished a\nfinished b\n"
    assert pull(tmp_path / "nothing", str(tmp_path / "empty")) == 0 and not (tmp_path / "nothing").exists()


def test_a_link_in_the_results_directory_is_neither_followed_nor_written_through(tmp_path):
    root = results(tmp_path / "out")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret").write_text("s")
    os.symlink(outside / "secret", root / "runs" / "b.json")
    Mirror(root, str(tmp_path / "bucket")).push()
    assert "runs/b.json" not in tree(tmp_path / "bucket" / "results" / "out")
    elsewhere = tmp_path / "laptop" / "out"
    elsewhere.mkdir(parents=True)
    os.symlink(outside, elsewhere / "runs")
    with pytest.raises(ParameterError, match=r"^storage: .*runs is a link"):
        pull(elsewhere, str(tmp_path / "bucket"))
    assert (outside / "secret").read_text() == "s" and sorted(p.name for p in outside.iterdir()) == ["secret"]


def test_a_changing_sqlite_store_is_copied_at_most_every_db_period_while_the_study_runs(tmp_path, monkeypatch):
    from sweep.results import storage_sync

    root = results(tmp_path / "out")
    mirror = Mirror(root, str(tmp_path / "bucket"))
    assert mirror.push(final=False) == 4
    with sqlite3.connect(root / "mlflow.db") as db:
        db.execute("insert into runs values ('r2')")
    (root / "ended.txt").write_text("finished a\nfinished b\n")
    assert mirror.push(final=False) == 1  # ended.txt; the store waits for DB_PERIOD
    monkeypatch.setattr(storage_sync, "DB_PERIOD", 0.0)
    assert mirror.push(final=False) == 1
    with sqlite3.connect(tmp_path / "bucket" / "results" / "out" / "mlflow.db") as db:
        assert db.execute("select id from runs order by id").fetchall() == [("r1",), ("r2",)]


def test_storage_inside_the_results_directory_is_not_copied_into_itself(tmp_path):
    root = results(tmp_path / "out")
    mirror = Mirror(root, str(root / "keep"))
    assert mirror.push() == 4 and mirror.push() == 0
    assert sorted(tree(root / "keep" / "results" / "out")) == ["ended.txt", "mlflow.db", "records/a.jsonl", "runs/a.json"]
