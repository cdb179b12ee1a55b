"""The setup table and the verdict gate: a deviation that could explain a difference makes it 'not comparable'."""
import pytest

from sweep.claims import base
from sweep.claims.base import FIELDS, Measured, Verdict, claim, compare, gate, setting, unstated


def _v(status, depends=None):
    return Verdict("statement", "paper", "measured", status, depends)


def test_an_open_deviation_turns_differences_into_not_comparable():
    settings = [setting("problem and data", "CIFAR", "digits", "another data set"),
                setting("step sizes", "5", "5"),
                unstated("seeds", "3 seeds")]
    verdicts = [_v("disagrees"), _v("partly"), _v("agrees"), _v("reference"), _v("not measured")]
    gate(verdicts, settings)
    assert [v.status for v in verdicts] == ["not comparable", "not comparable", "agrees", "reference", "not measured"]
    assert verdicts[0].deviation == "problem and data: another data set"
    assert verdicts[0].label == "not comparable: problem and data: another data set"
    assert verdicts[2].deviation == "" and verdicts[2].label == "agrees"


def test_a_verdict_is_gated_only_by_the_fields_it_depends_on_and_not_by_shown_or_unstated_rows():
    settings = [setting("constraints", "box", "linear rows", "not the box"),
                setting("noise", "dense", "diagonal", "diagonal only", shown="ran both ways: same verdicts"),
                unstated("what is timed", "CPU seconds")]
    free = _v("disagrees", depends=("noise", "what is timed"))
    bound = _v("disagrees", depends=("constraints",))
    every = _v("partly")
    gate([free, bound, every], settings)
    assert free.status == "disagrees"  # its only deviation was shown not to matter; 'not stated' is no deviation
    assert bound.status == "not comparable" and bound.deviation == "constraints: not the box"
    assert every.status == "not comparable" and every.deviation == "constraints: not the box"
    assert [s.status for s in settings] == ["deviation", "deviation (shown not to matter)", "not stated"]
    assert settings[1].row()["deviation"] == "diagonal only (shown not to matter: ran both ways: same verdicts)"


def test_compare_and_setting_rows():
    assert compare("dimensions", (100, 4000), (100, 4000), "p", "s", "dev").deviation is None
    assert compare("dimensions", (100, 4000), (100, 2000), "p", "s", "dev").deviation == "dev"
    with pytest.raises(KeyError, match="not one of"):
        setting("colour", "p", "s")
    assert set(FIELDS) >= {"problem and data", "dimensions", "constraints", "noise", "metric", "what is timed",
                           "iteration counts", "batch sizes", "inner-loop policy", "step sizes", "seeds"}


def test_a_claim_report_prints_the_setup_table_and_gates_with_the_measured_settings(tmp_path):
    def setup(meta):
        return [setting("dimensions", "d = 4000", meta["d"], None if meta["d"] == "4000" else "smaller d"),
                setting("inner-loop policy", "35 steps", "35 steps")]

    def evaluate(meta, runs, directory):
        # The evaluator replaces a row with what only the runs show (here: a measured loop accuracy).
        return Measured("notes", {"measured": [{"a": 1}]}, [_v("disagrees"), _v("agrees")],
                        settings=[setting("inner-loop policy", "35 steps", "35 steps; error 5%", "error above 1%")])

    c = claim("test_claim_gate", kind="comparison", title="t", statement="s", setup=setup)(evaluate)
    try:
        rep = c({"d": "4000"}, [], tmp_path)
        assert [s.study for s in rep.settings] == ["4000", "35 steps; error 5%"]
        assert rep.verdicts[0].status == "not comparable"
        assert rep.verdicts[0].deviation == "inner-loop policy: error above 1%"
        assert rep.tables["setup"][1]["status"] == "deviation"
        text = rep.text()
        assert "setup (the paper's setting and this study's):" in text and "d = 4000" in text
        assert "[NOT COMPARABLE: inner-loop policy: error above 1%] statement" in text
        assert "[AGREES] statement" in text
        assert text.count("d = 4000") == 1  # the setup table is printed once, not again among the tables
        assert c.settings({"d": "2000"})[0].deviation == "smaller d"
    finally:
        del base.CLAIMS["test_claim_gate"]
