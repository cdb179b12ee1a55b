"""study.json: the points read back are the points written (fields, values, order), their shared values written
once and read as one object; an older file without point_common reads as it is; a crafted layout is refused."""
import json

import pytest

from problems.shared.errors import ParameterError
from sweep.results.store import ResultStore


def grid_study(toy_study):
    return toy_study(algorithms=[{"name": "toy_aid", "params": {"lr": [0.1, 0.2, 0.3]}}],
                     problems=[{"name": "quadratic", "params": {"dim_x": 4, "dim_y": [5, 6]}}])


def test_points_read_back_whole_in_order_their_shared_values_written_once(tmp_path, toy_study):
    st = grid_study(toy_study)
    store = ResultStore(tmp_path)
    store.write_study(st)
    raw = json.loads((tmp_path / "study.json").read_text())
    varying = {"key", "algorithm_params", "problem_params", "coords"}  # lr and dim_y are gridded
    assert set(raw["point_common"]) == set(raw["point_fields"]) - varying
    assert all(set(p) == varying for p in raw["points"])
    points = store.read_study().points
    written = [p.to_dict() for p in st.points]
    assert points == written and [list(p) for p in points] == [list(p) for p in written]
    assert len({id(p["budget"]) for p in points}) == 1  # one object, not one per point
    assert not {"point_common", "point_fields"} & set(store.read_study().to_dict())


def test_a_single_point_has_every_field_but_its_key_in_common(tmp_path, toy_study):
    store = ResultStore(tmp_path)
    st = toy_study()
    store.write_study(st)
    raw = json.loads((tmp_path / "study.json").read_text())
    assert raw["points"] == [{"key": st.points[0].key}]
    assert store.read_study().points == [st.points[0].to_dict()]


def test_an_older_study_json_with_whole_points_reads_as_it_is(tmp_path, toy_study):
    st = grid_study(toy_study)
    ResultStore(tmp_path).write_study(st)
    raw = json.loads((tmp_path / "study.json").read_text())
    del raw["point_common"], raw["point_fields"]
    raw["points"] = [p.to_dict() for p in st.points]
    (tmp_path / "study.json").write_text(json.dumps(raw))
    assert ResultStore(tmp_path).read_study().points == [p.to_dict() for p in st.points]


@pytest.mark.parametrize("change, message", [
    (lambda raw: raw["point_common"].update(key="x"), "point_common must be a mapping"),
    (lambda raw: raw.update(point_common=[1]), "point_common must be a mapping"),
    (lambda raw: raw.update(point_fields="key"), "point_fields must list"),
    (lambda raw: raw["point_fields"].append("extra"), "a point lacks its field 'extra'"),
])
def test_a_crafted_layout_is_refused_in_one_line(tmp_path, toy_study, change, message):
    ResultStore(tmp_path).write_study(grid_study(toy_study))
    raw = json.loads((tmp_path / "study.json").read_text())
    change(raw)
    (tmp_path / "study.json").write_text(json.dumps(raw))
    with pytest.raises(ParameterError, match=f"study.json: {message}"):
        ResultStore(tmp_path).read_study()


@pytest.mark.parametrize("changed", [0, 1, 2])
def test_points_of_which_some_set_an_optional_field_are_written_and_read_back_whole(tmp_path, toy_study, changed):
    import dataclasses

    from sweep.results import study_file

    points = list(grid_study(toy_study).points)
    points[changed] = dataclasses.replace(points[changed], divergence={"factor": 1e4}, blas_threads=1)
    study_file.write(tmp_path / "study.json", {"name": "s"}, points)
    raw = json.loads((tmp_path / "study.json").read_text())
    assert "point_common" not in raw and raw["points"] == [p.to_dict() for p in points]  # each point whole
    assert study_file.read(tmp_path / "study.json")["points"] == [p.to_dict() for p in points]
