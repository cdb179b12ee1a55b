"""The text a configuration's key and a run's batch key are hashed from: `json.dumps(parts, sort_keys=True,
default=repr)` exactly (a point's key names its runs' results, so one character more would orphan them)."""
import json

from hypothesis import given
from hypothesis import strategies as st

from sweep.study.encoding import encoded_list, json_encoder

scalars = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=True), st.text())
values = st.recursive(scalars, lambda inner: st.one_of(st.lists(inner, max_size=3),
                                                       st.dictionaries(st.text(max_size=5), inner, max_size=3)),
                      max_leaves=8)


@given(st.lists(values, max_size=8))
def test_the_encoding_is_json_dumps_of_the_list(parts):
    assert encoded_list(parts) == json.dumps(parts, sort_keys=True, default=repr)


def test_a_mapping_shared_by_points_encodes_as_its_copy_and_scalars_as_json_does():
    shared = {"b": 1, "a": "é"}
    assert encoded_list(["soba", shared, 3, None, True]) == '["soba", {"a": "\\u00e9", "b": 1}, 3, null, true]'
    assert encoded_list([shared]) == encoded_list([dict(shared)])
    fresh = {"b": 2}
    assert encoded_list([fresh, 1.5, "x\\n"]) == json.dumps([fresh, 1.5, "x\\n"], sort_keys=True)


@given(st.dictionaries(st.text(max_size=6), scalars, max_size=6))
def test_a_mapping_of_names_to_scalars_encodes_as_json_dumps(config):
    # a configuration's own mapping (not shared, so not cached) takes the fast path for flat mappings
    assert encoded_list([config]) == json.dumps([config], sort_keys=True)


@given(values)
def test_the_encoder_made_once_is_json_dumps_either_way_of_ordering_keys(value):
    for sort_keys in (True, False):
        assert json_encoder(sort_keys)(value) == json.dumps(value, sort_keys=sort_keys, default=repr)
