"""A record's MLflow metric points: what `mlflow_metrics` gives equals its definition, record by record."""
from hypothesis import given
from hypothesis import strategies as st

from sweep.tracking import metric_points as mp

KEYS = ["iteration", "status", "time", "cpu_time", "eval_time", "F", "grad_F_sq", "calls/total", "calls/grad_f",
        "samples/total", "gt/converged", "gt/not_strongly_convex", "cache_hits", "diag/norm", "x_norm"]
VALUES = st.one_of(st.none(), st.booleans(), st.integers(-3, 3), st.floats(allow_nan=True), st.text(max_size=3))


def defined(record):
    """The points by the rule, key by key: numbers (not flags); curves always, final values at the last record
    only; zeros of counters and flags left out."""
    last = record.get("status", "running") != "running"
    out = []
    for k, v in record.items():
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            how = mp.logged_as(k)
            sparse = mp.SPARSE.search(k) is not None
            if (how == mp.CURVE or (how == mp.LAST and last)) and not (sparse and v == 0):
                out.append((mp.mlflow_name(k), float(v)))
    return out


@given(st.lists(st.sampled_from(KEYS), unique=True, max_size=len(KEYS)).flatmap(
    lambda keys: st.fixed_dictionaries({k: (st.sampled_from(["running", "finished", "diverged"]) if k == "status"
                                            else VALUES) for k in keys})))
def test_a_records_points_are_its_numbers_by_the_rule(record):
    got, want = mp.mlflow_metrics(record), defined(record)
    assert [n for n, _ in got] == [n for n, _ in want]
    assert all(a == b or (a != a and b != b) for (_, a), (_, b) in zip(got, want))


def test_records_of_one_shape_with_other_values_give_their_own_points():
    running = {"iteration": 0, "status": "running", "time": 0.5, "F": 2.0, "calls/total": 0}
    ended = {**running, "iteration": 4, "status": "finished", "F": None, "calls/total": 7}
    assert mp.mlflow_metrics(running) == [("Metrics/F", 2.0)]
    assert mp.mlflow_metrics(ended) == [("time", 0.5), ("calls/total", 7.0)]  # F not a number here: no point
