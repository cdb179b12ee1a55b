"""Study specs: complete validation with one-line errors naming the YAML path, and trial expansion."""
import copy
import dataclasses
import itertools

import pytest
import yaml

import algorithms
from problems.shared.errors import ParameterError
from sweep.study import spec
from sweep.study.model import TrialConfig
from tests.sweep import toy_algorithms  # noqa: F401  registers toy_aid, toy_ogd, toy_drift

BASE = {
    "name": "t",
    "imports": ["tests.sweep.toy_algorithms"],
    "kind": "stepsize_sensitivity",
    "axis": {"factors": [0.5, 1, 2]},
    "problems": [{"name": "quadratic", "params": {"dim_x": 4, "dim_y": 5}}],
    "algorithms": [{"name": "toy_aid"}],
    "seeds": 3,
    "budget": {"iterations": 20},
}


def mutated(mutate) -> dict:
    """BASE with `mutate` applied."""
    data = copy.deepcopy(BASE)
    mutate(data)
    return data


def test_valid_study_expands_into_configurations_trials_and_runs():
    st = spec.validate(BASE)
    assert [p.coords["axis"] for p in st.points] == [0.5, 1, 2]
    assert [p.algorithm_params["lr"] for p in st.points] == [0.25, 0.5, 1.0]
    assert [p.algorithm_params["inner_lr"] for p in st.points] == [0.25, 0.5, 1.0]
    assert [p.coords["reference"] for p in st.points] == [False, True, False]
    assert st.seeds == [0, 1, 2] and st.seeds_per_trial == 3
    assert len(st.trials) == 3 and len(st.run_keys) == 9 and len(set(st.run_keys)) == 9
    # Every default is filled in, so the configuration is complete and its key is deterministic.
    assert st.points[0].problem_params["mu"] == 0.2
    again = spec.validate(copy.deepcopy(BASE))
    assert [t.key for t in again.trials] == [t.key for t in st.trials] and again.spec_hash == st.spec_hash
    changed = spec.validate({**copy.deepcopy(BASE), "budget": {"iterations": 21}})
    assert changed.spec_hash != st.spec_hash


def test_grids_are_cartesian_and_seeds_split_into_trials():
    data = copy.deepcopy(BASE)
    data.update(kind="comparison", axis=None, seeds=[4, 5, 6, 7, 8], seeds_per_trial=2)
    data["problems"][0]["params"]["dim_x"] = [3, 6]
    data["algorithms"] = [{"name": "toy_aid", "params": {"lr": [0.1, 0.2, 0.3], "inner_steps": [1, 2]}},
                          {"name": "toy_aid", "label": "toy_b"}]
    st = spec.validate(data)
    got = {(p.label, p.problem_params["dim_x"], p.algorithm_params["lr"], p.algorithm_params["inner_steps"])
           for p in st.points}
    want = {("toy_aid", d, lr, k) for d, lr, k in itertools.product([3, 6], [0.1, 0.2, 0.3], [1, 2])}
    want |= {("toy_b", d, 0.5, 3) for d in [3, 6]}
    assert got == want and len(st.points) == 14
    assert [t.seeds for t in st.trials[:3]] == [(4, 5), (6, 7), (8,)]
    assert len(st.trials) == 14 * 3


def test_yaml_file_with_scientific_floats_and_builtin_names(tmp_path):
    path = tmp_path / "mine.yaml"
    data = copy.deepcopy(BASE)
    del data["name"]
    text = yaml.safe_dump(data).replace("lr: 0.5", "") + "report: {converged_below: 1e-6}\n"
    path.write_text(text)
    st = spec.load(str(path))
    assert st.name == "mine" and st.report.converged_below == 1e-6
    assert "quickstart" in spec.builtin_studies()


#: Bad fields of BASE: (mutation, the YAML path its error names, words the line holds).
BAD_FIELDS = [
    (lambda d: d["algorithms"].append({"name": "nope"}), "algorithms[1].name", ["'nope'", "allowed:", "toy_aid"]),
    (lambda d: d["problems"].__setitem__(0, {"name": "nope"}), "problems[0].name", ["'nope'", "quadratic"]),
    (lambda d: d["algorithms"][0].update(params={"zzz": 1}), "algorithms[0].params.zzz", ["unknown", "inner_lr"]),
    (lambda d: d["problems"][0]["params"].update(zzz=1), "problems[0].params.zzz", ["unknown", "dim_x"]),
    (lambda d: d["algorithms"][0].update(params={"inner_steps": "3"}), "algorithms[0].params.inner_steps",
     ["positive integer", "'3'"]),
    (lambda d: d["algorithms"][0].update(params={"inner_steps": [2, 0]}), "algorithms[0].params.inner_steps[1]",
     ["positive integer", "got 0"]),
    (lambda d: d["algorithms"][0].update(params={"inner_steps": []}), "algorithms[0].params.inner_steps", ["empty grid"]),
    (lambda d: d["problems"][0]["params"].update(dim_x=-3), "problems[0].params.dim_x", ["positive integer", "-3"]),
    (lambda d: d["problems"][0]["params"].update(dim_y=[]), "problems[0].params.dim_y", ["empty grid"]),
    (lambda d: d.update(budget={"iterations": "10"}), "budget.iterations", ["positive integer"]),
    (lambda d: d.update(budget={"iterationz": 10}), "budget.iterationz", ["unknown", "oracle_calls"]),
    (lambda d: d.update(budget={}), "budget.iterations", ["budget"]),
    (lambda d: d.pop("budget"), "budget", ["required"]),
    (lambda d: d.update(seeds="x"), "seeds", ["seeds"]),
    (lambda d: d.update(seeds=[0, -1]), "seeds[1]", ["non-negative integer"]),
    (lambda d: d.update(seeds=[]), "seeds", ["non-empty"]),
    (lambda d: d.update(n_evals=1.5), "n_evals", ["from 2 to 10,000"]),
    (lambda d: d.update(kind="sweepy"), "kind", ["comparison", "stepsize_sensitivity"]),
    (lambda d: d.update(colour="red"), "colour", ["unknown", "algorithms"]),
    (lambda d: d.update(algorithms={"name": "toy_aid"}), "algorithms", ["list"]),
    (lambda d: d.update(algorithms=[]), "algorithms", ["non-empty"]),
    (lambda d: d["algorithms"][0].update(params=[1]), "algorithms[0].params", ["mapping"]),
    (lambda d: d["algorithms"].append({"name": "toy_aid"}), "algorithms[1].label", ["used twice"]),
    (lambda d: d["problems"].append(copy.deepcopy(d["problems"][0])), "problems", ["same configuration"]),
    (lambda d: d.update(axis={"factors": []}), "axis.factors", ["non-empty"]),
    (lambda d: d.update(axis={"factors": [1, -2]}), "axis.factors[1]", ["positive number"]),
    (lambda d: d.update(axis={"factors": [1], "values": [1]}), "axis", ["exactly one"]),
    (lambda d: d.update(axis=None), "axis", ["axis mapping"]),
    (lambda d: d["algorithms"][0].update(params={"lr": [0.1, 0.2]}), "algorithms[0].params.lr", ["swept by the axis"]),
    (lambda d: d.update(kind="comparison"), "axis", ["no axis"]),
    (lambda d: d.update(kind="dimension_scaling", axis={"param": "dim_x", "values": [4, -8]}), "axis.values[1]",
     ["positive"]),
    (lambda d: d.update(kind="dimension_scaling", axis={"param": "dim_x", "values": [4.5, 8]}), "axis.values[0]",
     ["dim_x", "positive integer"]),
    (lambda d: d.update(kind="dimension_scaling", axis={"param": "dim_z", "values": [4, 8]}), "axis.param",
     ["dim_z", "quadratic"]),
    (lambda d: d.update(kind="dimension_scaling", axis={"param": "dim_x", "values": [4]}), "axis.values",
     ["at least 2"]),
    (lambda d: d.update(kind="noise", axis={"param": "nothing", "values": [1]}), "axis.param", ["every problem or every algorithm"]),
    (lambda d: d.update(kind="drift", axis={"param": "dim_x", "values": [1]}), "problems[0].name", ["online"]),
    (lambda d: d["algorithms"].append({"name": "toy_ogd"}), "algorithms[1].name", ["online", "offline"]),
    (lambda d: d.update(problems=[{"name": "toy_drift"}], kind="comparison", axis=None), "algorithms[0].name",
     ["offline", "online"]),
    (lambda d: d.update(resources={"tpu": 1}), "resources.tpu", ["cpu", "gpu"]),
    (lambda d: d.update(resources={"gpu": -1}), "resources.gpu", ["non-negative"]),
    (lambda d: d.update(resources={"cpu": 0}), "resources.cpu", ["positive"]),
    (lambda d: d.update(imports=["no_such_module_xyz"]), "imports[0]", ["no_such_module_xyz"]),
    (lambda d: d.update(report={"goal": "up"}), "report.goal", ["min, max"]),
    (lambda d: d.update(report={"metrc": "F"}), "report.metrc", ["unknown", "metric"]),
    (lambda d: d.update(name="bad name!"), "name", ["letters"]),
]


@pytest.mark.parametrize("mutate, path, words", BAD_FIELDS)
def test_bad_fields_get_one_line_naming_the_path(mutate, path, words, spec_error):
    spec_error(mutated(mutate), path, *words)


def test_axis_values_that_break_a_config_name_the_axis_entry(spec_error):
    # toy_aid bounds lr by 100: the factor that crosses it is named, with the algorithm and the field.
    spec_error(mutated(lambda d: d.update(axis={"factors": [1.0, 1000.0]})), "axis.factors[1]",
               "algorithms[0] 'toy_aid'", "'lr'", "at most 100")
    # A quadratic with 2 samples of rank 1 needs dim_y <= 2: the dimension axis entry that breaks it is named.
    spec_error(mutated(lambda d: d.update(kind="dimension_scaling", axis={"param": "dim_y", "values": [2, 4]},
                                          problems=[{"name": "quadratic", "params": {"n_samples": 2}}])),
               "axis.values[1]", "problems[0] 'quadratic'", "'rank'")


def test_constrained_algorithms_need_constrained_problems(spec_error):
    constrained = [n for n, d in algorithms.available().items() if d["constrained"] and not d["online"]]
    assert constrained, "f2csa, ssigd and dsblo are constrained algorithms"
    spec_error(mutated(lambda d: d.update(kind="comparison", axis=None, algorithms=[{"name": constrained[0]}])),
               "algorithms[0].name", "constraints")


def test_builtin_studies_validate():
    for name in spec.studies():  # the files of sweep/studies and the studies claims define in their own file
        st = spec.load(name)
        assert st.points and st.run_keys


def test_trial_config_is_plain_data_naming_every_run():
    st = spec.validate(BASE)
    typed = st.trials[1].config(5.0, st.imports, "registry")
    cfg = typed.to_dict()
    assert TrialConfig.from_dict(cfg) == typed  # what the worker reads back is what the driver built
    assert [r["seed"] for r in cfg["runs"]] == [0, 1, 2]
    assert [r["run_key"] for r in cfg["runs"]] == [st.points[1].run_key(s) for s in (0, 1, 2)]
    assert cfg["runs"][0]["algorithm_params"]["lr"] == 0.5 and cfg["imports"] == ["tests.sweep.toy_algorithms"]
    assert str(typed) == typed.key and copy.deepcopy(typed) is typed  # what keeps Tune's tags and copies O(1)
    yaml.safe_dump(cfg)  # plain data only: it travels to Ray workers and into Tune's experiment state


def test_a_trial_config_pickles_whole_and_compressed():
    import pickle

    import cloudpickle

    st = spec.validate({**BASE, "seeds": 40})
    typed = dataclasses.replace(st.trials[1].config(5.0, st.imports, "registry"), resume={"k": "file:///c"})
    run = typed.runs[0]
    runs = tuple(dataclasses.replace(run, run_key=f"{run.run_key}.{i}", seed=i,
                                     algorithm_params={**run.algorithm_params, "lr": 0.5 + i / 7}) for i in range(1000))
    typed = dataclasses.replace(typed, runs=runs)
    packed = cloudpickle.dumps(typed)
    assert pickle.loads(packed) == typed and pickle.loads(packed).resume == {"k": "file:///c"}
    plain = cloudpickle.dumps([dataclasses.asdict(r) for r in typed.runs])
    # Tune keeps a trial's config as hex text of its pickle for the whole experiment: compressed, a fifth at most
    assert len(packed) < len(plain) / 5, (len(packed), len(plain))


def test_a_trial_config_unpickles_to_the_live_config_of_its_bytes():
    import pickle

    from sweep.study import model

    st = spec.validate({**BASE, "seeds": 3})
    typed = st.trials[1].config(5.0, st.imports, "registry")
    packed = pickle.dumps({"trial": typed})  # as a trial's result carries it back to the driver
    assert pickle.loads(packed)["trial"] is typed  # not its runs unpickled again at every report
    model._PACKED.clear()  # another process (a worker): read once, then the same object for the same bytes
    fresh = pickle.loads(packed)["trial"]
    assert fresh is not typed and fresh == typed and fresh.runs == typed.runs
    assert pickle.loads(packed)["trial"] is fresh and pickle.loads(pickle.dumps(fresh)) is fresh
    changed = dataclasses.replace(fresh, resume={"k": "file:///c"})  # a new config packs its own bytes
    assert pickle.loads(pickle.dumps(changed)) is changed and pickle.dumps(changed) != pickle.dumps(fresh)


def test_a_completed_trials_config_drops_its_runs_and_its_bytes_still_read_back_whole():
    import pickle

    st = spec.validate({**BASE, "seeds": 3})
    typed = st.trials[1].config(5.0, st.imports, "registry")
    runs, packed = typed.runs, pickle.dumps({"trial": typed})
    kept = {"trial": typed}  # Tune's other references see the same object
    typed.drop_runs()
    assert kept["trial"].runs == () == typed.run_keys and typed.key == st.trials[1].key
    fresh = pickle.loads(packed)["trial"]  # bytes packed before: a config with its runs, not the emptied one
    assert fresh is not typed and fresh.runs == runs and len(runs) > 1
    again = pickle.loads(pickle.dumps(typed))
    assert again.runs == () and again.key == typed.key


def test_the_readme_study_example_validates():
    from tests import documents

    data = yaml.safe_load(documents.marked_block("readme: study"))
    st = spec.validate(data)
    # 2 problem configurations × (2 + 1 + 1) algorithm configurations × 3 step-size factors.
    assert len(st.points) == 2 * 4 * 3 and st.seeds == [0, 1, 2, 3, 4]


# ---------------------------------------------------------------- every error at once
def test_every_schema_error_of_a_file_is_reported_one_line_each(spec_error):
    data = {**copy.deepcopy(BASE), "seeds": [0, -1], "n_evals": 1, "report": {"goal": "up"}, "colour": "red"}
    lines = spec_error(data, "seeds[1]", "non-negative integer", count=4)
    assert {ln.split(": ", 1)[0] for ln in lines} == {"seeds[1]", "n_evals", "report.goal", "colour"}
    assert "report.goal: must be one of min, max, got 'up'" in lines


def test_every_bad_parameter_is_reported_with_its_path(spec_error):
    data = {**copy.deepcopy(BASE), "kind": "comparison", "axis": None}
    data["algorithms"][0]["params"] = {"lr": -1, "inner_steps": 0}
    data["problems"][0]["params"]["dim_x"] = -3
    lines = spec_error(data, "problems[0].params.dim_x", "positive integer", count=3)
    assert lines[1:] == ["algorithms[0].params.lr: must be a positive number, got -1",
                         "algorithms[0].params.inner_steps: must be a positive integer, got 0"]


def test_more_than_twenty_errors_are_cut_with_a_count():
    data = {**copy.deepcopy(BASE), "kind": "comparison", "axis": None,
            "algorithms": [{"name": "toy_aid", "label": f"a{i}", "params": {"lr": -i - 1}} for i in range(25)]}
    with pytest.raises(spec.SpecError) as info:
        spec.validate(data)
    assert len(info.value.errors) == 25
    lines = str(info.value).split("\n")
    assert len(lines) == 21 and lines[-1] == "(5 more errors not shown)"
    assert lines[19] == "algorithms[19].params.lr: must be a positive number, got -20"


def test_the_cli_prints_each_error_on_its_own_line(tmp_path, capsys):
    from sweep.cli import main

    path = tmp_path / "two.yaml"
    path.write_text("imports: [tests.sweep.toy_algorithms]\nproblems: [quadratic]\n"
                    "algorithms: [{name: toy_aid, params: {lr: -1, inner_lr: 0}}]\nbudget: {iterations: 5}\n")
    assert main(["run", str(path), "--validate-only"]) == 2
    assert capsys.readouterr().err == ("bisweep: error: algorithms[0].params.lr: must be a positive number, got -1\n"
                                       "bisweep: error: algorithms[0].params.inner_lr: must be a positive number, got 0\n")


def test_unknown_kind_lists_the_registered_kinds(spec_error):
    from sweep import kinds

    lines = spec_error({**copy.deepcopy(BASE), "kind": "sweepy"}, "kind", "got 'sweepy'")
    assert lines[0] == f"kind: must be one of {', '.join(kinds.names())}, got 'sweepy'"
    assert {"comparison", "stepsize_sensitivity", "dimension_scaling", "noise", "drift"} <= set(kinds.names())


def test_a_trial_config_with_a_missing_or_unknown_field_is_refused():
    cfg = spec.validate(BASE).trials[0].config(1.0, []).to_dict()
    with pytest.raises(ParameterError, match="trial config: unknown field 'colour'"):
        TrialConfig.from_dict({**cfg, "colour": 1})
    del cfg["runs"][0]["seed"]
    with pytest.raises(ParameterError, match=r"trial config: runs\[\]: missing field 'seed'"):
        TrialConfig.from_dict(cfg)
    del cfg["runs"]
    with pytest.raises(ParameterError, match="trial config: missing field 'runs'"):
        TrialConfig.from_dict(cfg)


def test_runs_per_trial_with_seeds_per_trial_as_its_older_name(spec_error):
    assert spec.validate(BASE).runs_per_trial is None  # sized by the runs' durations
    assert spec.validate({**copy.deepcopy(BASE), "seeds_per_trial": 2}).runs_per_trial == 2
    assert spec.validate({**copy.deepcopy(BASE), "seeds_per_trial": 2, "runs_per_trial": 50}).runs_per_trial == 50
    spec_error({**copy.deepcopy(BASE), "runs_per_trial": 0}, "runs_per_trial", "got 0")


def test_a_field_added_later_stays_out_of_run_keys_at_its_default():
    """simulated's sample_dtype came after studies were recorded: at its default the runs keep their keys."""
    study = {"name": "sim", "kind": "comparison", "algorithms": ["soba"], "seeds": 1, "budget": {"iterations": 5},
             "problems": [{"name": "simulated", "params": {"dim_x": 4, "dim_y": 4, "n_samples_inner": 8}}]}
    plain = spec.validate(copy.deepcopy(study))
    explicit = copy.deepcopy(study)
    explicit["problems"][0]["params"]["sample_dtype"] = "float64"
    narrow = copy.deepcopy(study)
    narrow["problems"][0]["params"]["sample_dtype"] = "float32"
    (p,), (e,), (n,) = (spec.validate(s).points for s in (study, explicit, narrow))
    assert "sample_dtype" not in p.problem_params and p.problem_params["convexity"] == "exact"
    assert e.key == p.key and spec.validate(explicit).spec_hash == plain.spec_hash
    # The key recorded before the field existed (every other field at its default), unchanged.
    assert p.key == "soba.simulated.d254e3a973"
    assert n.problem_params["sample_dtype"] == "float32" and n.key != p.key


def test_a_point_holds_no_instance_dict_and_its_key_follows_a_replaced_field():
    """A study keeps one Point per configuration for the whole session: slotted, its key made once, and a point
    with another rule (dataclasses.replace) has its own key; study.json's plain data reads back to the same point."""
    import pickle

    from sweep.study.model import Point

    (p,) = spec.validate(copy.deepcopy(BASE)).points[:1]
    assert not hasattr(p, "__dict__") and p.key == p.key and p._key is not None
    other = dataclasses.replace(p, divergence={"factor": 10.0})
    assert other.key != p.key and other.key.startswith(f"{p.label}.{p.problem}.")
    assert Point.from_dict({**p.to_dict(), "_key": "not read"}) == p and pickle.loads(pickle.dumps(p)).key == p.key


def test_a_file_with_five_mistakes_gets_every_one_at_once_with_the_nearest_names(tmp_path):
    from sweep.cli import main

    path = tmp_path / "five.yaml"
    path.write_text("kind: comparisn\naxes: {factors: [1]}\nproblems:\n  - {name: quadratic, params: {dimx: 5}}\n"
                    "  - quadratc\nalgorithms: [sobaa]\nseeds: 2\nbudget: {iteration: 10}\n")
    with pytest.raises(spec.SpecError) as info:
        spec.load(str(path))
    lines = info.value.errors
    assert [ln.split(": ", 1)[0] for ln in lines] == [
        "kind", "problems[1].name", "algorithms[0].name", "axes", "budget.iteration", "problems[0].params.dimx"]
    assert lines[0].endswith("got 'comparisn'; did you mean 'comparison'?")
    assert lines[1].startswith("problems[1].name: unknown problem 'quadratc'; did you mean 'quadratic'? allowed: ")
    assert lines[2].startswith("algorithms[0].name: unknown algorithm 'sobaa'; did you mean 'soba'? allowed: ")
    assert lines[3].startswith("axes: unknown study field; did you mean 'axis'? allowed: name, description, kind, axis")
    assert lines[4] == "budget.iteration: unknown parameter; did you mean 'iterations'? allowed: iterations, oracle_calls, seconds"
    assert lines[5].startswith("problems[0].params.dimx: unknown parameter; did you mean 'dim_x'? allowed: dim_x, ")
    assert main(["run", str(path), "--validate-only"]) == 2  # and nothing else is needed to see them all


def test_a_bad_seeds_field_does_not_hide_the_parameter_errors(spec_error):
    data = {**copy.deepcopy(BASE), "kind": "comparison", "axis": None, "seeds": -1}
    data["algorithms"][0]["params"] = {"lr": -1, "inner_steps": 0}
    data["problems"][0]["params"].update(dim_x=-3, mu=0)
    lines = spec_error(data, "seeds", "positive number of seeds", count=5)
    assert lines[1:] == ["problems[0].params.dim_x: must be a positive integer, got -3",
                         "problems[0].params.mu: must be a positive number, got 0",
                         "algorithms[0].params.lr: must be a positive number, got -1",
                         "algorithms[0].params.inner_steps: must be a positive integer, got 0"]


def test_seeds_are_counted_against_the_run_limit_before_the_list_is_made(spec_error):
    import tracemalloc

    tracemalloc.start()
    try:
        spec_error({**copy.deepcopy(BASE), "seeds": 10**7}, "seeds", "10,000,000 seeds make more than the limit "
                                                                      "of 100,000 runs")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 20e6  # the list of 10⁷ seeds alone would be 80 MB of pointers (and 945 MB once validated)


@pytest.mark.parametrize("name, params", [
    ("quadratic", {"dim_x": 30, "dim_y": 20}),
    ("quadratic", {"dim_x": 30, "dim_y": 20, "n_samples": 16, "rank": 2}),
    ("simulated", {"dim_x": 20, "dim_y": 30, "n_samples_inner": 64, "n_samples_outer": 48}),
    ("constrained_quadratic", {"d": 25, "p": 7}),
    ("hyper_cleaning", {"dataset": "synthetic", "n_samples": 2000, "n_features": 30, "n_classes": 3}),
])
def test_the_memory_estimate_bounds_the_arrays_an_instance_holds(name, params):
    """array_bytes counts from the sizes alone what the built instance holds, within a factor of 3 above it."""
    import problems
    from problems.registry import entry

    held = _array_bytes(problems.make(name, seed=0, **params), set())
    estimate = entry(name).params.from_dict(params).array_bytes()
    assert held > 0 and held <= estimate <= 3 * held, (held, estimate)


def _array_bytes(obj, seen, depth=0):
    """Bytes of the NumPy arrays `obj` holds in its attributes, three levels down."""
    import numpy as np

    if id(obj) in seen or depth > 3:
        return 0
    seen.add(id(obj))
    if isinstance(obj, np.ndarray):
        return obj.nbytes
    return sum(_array_bytes(v, seen, depth + 1) for v in getattr(obj, "__dict__", {}).values())


def test_an_instance_too_large_for_memory_is_refused_saying_the_estimate(monkeypatch, spec_error):
    from sweep.study import limits

    monkeypatch.setattr(limits, "node_memory", lambda: 2.0 ** 20)  # 1 MiB
    data = {**copy.deepcopy(BASE), "kind": "comparison", "axis": None}
    data["problems"][0]["params"] = {"dim_x": [10, 2000], "dim_y": 100}  # 8 B × (4·100² + 100·dim_x)
    spec.validate(copy.deepcopy({**data, "problems": [{"name": "quadratic", "params": {"dim_x": 10, "dim_y": 100}}]}))
    lines = spec_error(data, "problems[0].params", count=1)
    assert lines == ["problems[0].params: an instance needs about 1.8 MiB of arrays (dim_x = 2,000, dim_y = 100, "
                     "rank = 1), more than the 1.0 MiB of memory of this machine; give smaller sizes"]


def test_validate_only_counts_a_million_run_grid_without_building_it(tmp_path, capsys):
    """10⁶ configurations (a 10⁴ algorithm grid on 10² problems) are counted from their 1,100 records."""
    import time

    from sweep.cli import main

    values = [round(0.01 * (i + 1), 2) for i in range(10)]
    study = {"name": "m", "problems": [{"name": "quadratic", "params": {"dim_x": list(range(2, 12)),
                                                                       "dim_y": list(range(3, 13))}}],
             "algorithms": [{"name": "soba", "params": {k: values for k in ("rho", "gamma", "rho_decay", "gamma_decay")}}],
             "seeds": 1, "budget": {"iterations": 5}}
    path = tmp_path / "m.yaml"
    path.write_text(yaml.safe_dump(study))
    start = time.process_time()
    assert main(["run", str(path), "--validate-only", "--max-runs", "1000000"]) == 0
    assert time.process_time() - start < 5  # building the 10⁶ points took minutes and gigabytes
    assert capsys.readouterr().out.startswith("study 'm' (scale default) is valid: 1000000 configurations x 1 seeds "
                                              "= 1000000 runs")


@pytest.mark.parametrize("change", [
    lambda d: None,
    lambda d: d["problems"].append({"name": "quadratic", "params": {"dim_x": 5, "n_samples": [4, 8], "rank": 5}}),
    lambda d: d["algorithms"][0].update(problems=["quadratic"]),
    lambda d: d.update(kind="stepsize_sensitivity", axis={"factors": [0.5, 1, 2]},
                       algorithms=[{"name": "toy_aid"}, {"name": "toy_aid", "label": "b", "params": {"inner_steps": [1, 2]}}]),
    lambda d: d.update(kind="dimension_scaling", axis={"param": "dim_y", "values": [4, 8]}),
])
def test_counting_gives_the_configurations_the_expansion_builds(change):
    data = copy.deepcopy(BASE)
    data.update(kind="comparison", axis=None)
    data["problems"][0]["params"]["dim_x"] = [3, 6]
    data["algorithms"] = [{"name": "toy_aid", "params": {"lr": [0.1, 0.2, 0.3]}}, {"name": "toy_aid", "label": "toy_b"}]
    change(data)
    built, counted = spec.validate(copy.deepcopy(data)), spec.validate(copy.deepcopy(data), count_only=True)
    assert counted.counted == built.configurations == len(built.points) > 1
    assert {(p.algorithm, p.label, p.problem) for p in counted.points} <= {(p.algorithm, p.label, p.problem)
                                                                            for p in built.points}


def test_counting_finds_a_configuration_two_entries_give(spec_error):
    data = {**copy.deepcopy(BASE), "kind": "comparison", "axis": None}
    data["problems"].append(copy.deepcopy(data["problems"][0]))
    spec_error(data, "problems", "same configuration")
    with pytest.raises(spec.SpecError, match="^problems: two entries give the same configuration"):
        spec.validate(copy.deepcopy(data), count_only=True)


def test_an_algorithm_that_needs_a_finite_sum_is_checked_against_each_problem(spec_error):
    study = {"name": "fs", "algorithms": ["saba"], "seeds": 1, "budget": {"iterations": 5},
             "problems": [{"name": "quadratic", "params": {"dim_x": 3, "dim_y": 3}}]}
    lines = spec_error(study, "algorithms[0].name")
    assert lines == ["algorithms[0].name: 'saba' needs a finite-sum problem (per-sample oracles, n_samples) but "
                     "problems[0] 'quadratic' is not one; set its n_samples"]
    study["problems"][0]["params"]["n_samples"] = 4
    assert len(spec.validate(study).points) == 1


def test_report_metrics_are_checked_against_what_the_runs_record(spec_error):
    study = {"name": "m", "algorithms": ["soba"], "seeds": 1, "budget": {"iterations": 5},
             "problems": [{"name": "quadratic", "params": {"dim_x": 3, "dim_y": 3}}]}
    lines = spec_error({**study, "report": {"metric": "grad_F_sqq"}}, "report.metric")
    assert lines[0].startswith("report.metric: 'grad_F_sqq' is not recorded by this study's runs; did you mean "
                               "'grad_F_sq'? they record: F, F_gap, calls/cross, ")
    spec_error({**study, "report": {"converged_metric": "nonexistent"}}, "report.converged_metric", "they record: F,")
    ok = spec.validate({**study, "report": {"metric": "F_gap", "converged_metric": "calls/grad_f"}})
    assert (ok.report.metric, ok.report.converged_metric) == ("F_gap", "calls/grad_f")


def test_strings_and_nesting_of_a_mapping_are_bounded_before_the_schema_reads_it():
    from sweep.study import limits

    deep: list = []
    inner = deep
    for _ in range(10_000):  # a list nested 10,000 deep: walked without recursion
        inner.append([])
        inner = inner[0]
    data = {**copy.deepcopy(BASE), "description": "x" * 1001, "budget": {"iterations": 5, "k" * 2000: 1},
            "axis": {"factors": deep}}
    with pytest.raises(spec.SpecError) as info:
        spec.validate(data)
    assert info.value.errors == [  # in the order of the mapping
        "axis.factors" + "[0]" * (limits.MAX_DEPTH - 2) + f": nests lists and mappings more than {limits.MAX_DEPTH} deep",
        "budget: has a key of 2,000 characters; at most 1,000",
        "description: must be at most 1,000 characters, got 1,001"]


def test_a_run_spec_of_a_point_is_the_one_its_constructor_makes():
    from sweep.study.model import RunSpec

    st = spec.validate({**BASE, "divergence": {"factor": 1e4}, "blas_threads": 1})
    point = st.points[1]
    made = RunSpec.of(point, 2)
    built = RunSpec(point.run_key(2), 2, point.algorithm, point.algorithm_params, point.problem, point.problem_params,
                    point.instance_seed, point.budget, point.n_evals, point.divergence, point.blas_threads)
    assert made == built and list(vars(made).items()) == list(vars(built).items())
    assert made.divergence is not None and made.blas_threads == 1
    with pytest.raises(dataclasses.FrozenInstanceError):
        made.seed = 3
