"""The recorded study: study.json read back typed and written back the same, its points shared and not copied,
older files loading with their defaults, a field of the wrong type a one-line error naming it."""
import dataclasses
import json

import pytest

from problems.shared.errors import ParameterError
from sweep.report import report_cache
from sweep.results.store import ResultStore
from sweep.study.model import ReportOptions
from sweep.study.record import StudyRecord


def test_study_json_reads_back_typed_and_writes_back_the_same(tmp_path, toy_study):
    st = toy_study(kind="stepsize_sensitivity", axis={"factors": [0.5, 1, 2]})
    store = ResultStore(tmp_path)
    store.write_study(st)
    on_disk = json.loads((tmp_path / "study.json").read_text())
    meta = store.read_study()
    assert (meta.name, meta.kind, meta.axis_name, meta.seeds, meta.spec_hash) == (
        st.name, "stepsize_sensitivity", st.axis_name, st.seeds, st.spec_hash)
    assert meta.report == st.report and meta.environment == on_disk["environment"]
    # the same keys in the same order, the points whole (study.json writes what they share once: study_file.py)
    whole = {**{k: v for k, v in on_disk.items() if k not in ("point_fields", "point_common")},
             "points": [p.to_dict() for p in st.points]}
    assert meta.to_dict() == whole and list(meta.to_dict()) == list(whole)
    built = StudyRecord.from_study(st)
    assert built.to_dict() == {k: v for k, v in whole.items() if k != "environment"}
    assert [type(p) for p in meta.points] == [dict] * len(st.points)


def test_the_points_are_shared_not_copied_and_a_changed_report_shares_them(toy_study):
    data = StudyRecord.from_study(toy_study()).to_dict()
    meta = StudyRecord.from_dict(data)
    assert meta.points is data["points"] and meta.seeds is data["seeds"]
    other = meta.with_report(metric="F", goal="max")
    assert (other.report.metric, other.report.goal, other.report.best_by) == ("F", "max", meta.report.best_by)
    assert meta.report.goal == "min" and other.points is meta.points
    with pytest.raises(dataclasses.FrozenInstanceError):
        meta.kind = "noise"  # type: ignore[misc]


def test_the_report_cache_fingerprints_the_options_as_study_json_records_them(tmp_path, toy_study):
    """A report built before the record existed hashed study.json's report mapping: the same bytes now."""
    store = ResultStore(tmp_path)
    store.write_study(toy_study())
    raw = json.loads((tmp_path / "study.json").read_text())["report"]
    meta = store.read_study()
    assert json.dumps(dataclasses.asdict(meta.report), sort_keys=True) == json.dumps(raw, sort_keys=True)
    assert report_cache.fingerprint(store, meta, meta.report) == report_cache.fingerprint(store, meta, meta.report)


def test_an_older_study_json_takes_the_defaults_of_what_it_lacks(toy_study):
    data = StudyRecord.from_study(toy_study()).to_dict()
    report = {k: v for k, v in data["report"].items() if k != "best_by"}  # before report option best_by
    head = {k: data[k] for k in ("name", "kind", "seeds", "points")}
    meta = StudyRecord.from_dict({**head, "report": report})
    assert meta.report == ReportOptions(**report) and meta.report.best_by == "robust"
    assert (meta.axis, meta.axis_name, meta.online, meta.claim, meta.scale, meta.source, meta.environment) == (
        {}, None, False, None, "default", {}, None)


@pytest.mark.parametrize("change, message", [
    ({"seeds": [0, "../1"]}, "study.json: seeds[1] must be an integer, got '../1'"),
    ({"seeds": None}, "study.json: holds no study (points and seeds)"),
    ({"kind": 3}, "study.json: kind has the wrong type, got '3'"),
    ({"online": "yes"}, "study.json: online has the wrong type, got 'yes'"),
    ({"axis": [1, 2]}, "study.json: axis has the wrong type, got '[1, 2]'"),
    ({"report": {"goal": "min"}}, "study.json: report: must be a mapping with a metric name"),
    ({"report": {"metric": "F", "colour": "red"}}, "study.json: report: unknown field 'colour'"),
])
def test_a_field_of_the_wrong_type_is_one_line_naming_it(toy_study, change, message):
    data = {**StudyRecord.from_study(toy_study()).to_dict(), **change}
    with pytest.raises(ParameterError) as err:
        StudyRecord.from_dict(data)
    assert str(err.value).startswith(message) and "\n" not in str(err.value)


def test_a_missing_name_is_one_line_naming_it(toy_study):
    data = {k: v for k, v in StudyRecord.from_study(toy_study()).to_dict().items() if k != "name"}
    with pytest.raises(ParameterError, match="^study.json: missing field 'name'$"):
        StudyRecord.from_dict(data)
