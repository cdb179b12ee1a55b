"""The modules of 0.1.0's flat sweep/ import at their old paths as the very modules at their new ones, so
plugins written against the documented imports of 0.1.0 keep working."""
import importlib
import subprocess
import sys

import pytest

import sweep

OLD_DOCUMENTED = ("from sweep import figures, tables", "from sweep import analysis as an",
                  "from sweep.checks import Block, NonNegativeInt, after, before, no_repeats, nonempty_list",
                  "from sweep.results import config_label, group")


@pytest.mark.parametrize("old, new", sorted(sweep._MOVED.items()))
def test_an_old_path_is_the_moved_module(old: str, new: str):
    assert importlib.import_module(old) is importlib.import_module(new)


def test_the_documented_imports_of_0_1_0_run_in_a_fresh_process():
    code = "; ".join(OLD_DOCUMENTED) + "; import sweep.report.figures as f; assert figures is f"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr


def test_an_unknown_module_is_still_an_import_error():
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module("sweep.no_such_module")
