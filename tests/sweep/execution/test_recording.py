"""The driver's recording callbacks on Tune's results, without Ray: what Tune keeps of a report once it is stored."""
from types import SimpleNamespace

from sweep.execution.recording import Slim
from sweep.execution.trainable import META


def report(n):
    """A report of n runs' records, as a trial sends it."""
    runs = [{"run_key": f"k{i}.s0", "seed": 0, "index": i, "done": i % 2 == 0, "points": "[]",
             "records": [{"iteration": it, "status": "running", "F": 1.0} for it in range(3)]} for i in range(n)]
    return {"F": 1.0, META: {"trial_key": "t", "runs": runs, "node": "", "host": "h"}}


def test_tune_keeps_only_the_run_keys_of_a_report_and_of_the_copy_that_came_with_its_checkpoint():
    result, saved = report(4), report(4)  # Tune's save call brings the checkpointed report again, another object
    trial = SimpleNamespace(latest_checkpoint_result=SimpleNamespace(metrics=saved))
    kept = [result[META], saved[META]]
    Slim().on_trial_result(0, [], trial, result)
    Slim().on_trial_save(0, [], trial)
    want = [{"run_key": f"k{i}.s0", "done": i % 2 == 0} for i in range(4)]
    assert kept[0]["runs"] == want == kept[1]["runs"]  # in place: other references to the result see it slim
    Slim().on_trial_save(0, [], trial)  # again (or a trial that never saved): nothing changes, nothing raises
    Slim().on_trial_save(0, [], SimpleNamespace(latest_checkpoint_result=None))
    assert kept[1]["runs"] == want and result["F"] == 1.0
