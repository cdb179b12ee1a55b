"""The verdict rule: a direction from the measured 95 % interval against the paper's threshold, the same whichever way
it goes; the setting (paper's or deviating) beside it, never in place of it; the scorecard and verdicts.csv."""
import math
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sweep import claims
from sweep.claims import base
from sweep.study import sources, spec
from sweep.claims.base import (CSV_COLUMNS, FIELDS, Criterion, Estimate, Measured, Verdict, chosen, claim, compare,
                               estimate, place, quoted, setting)
from sweep.study.model import ReportOptions
from sweep.study.record import StudyRecord

#: Every discovered claim that names its study (built-in, installed as a plugin, or named by the claim's own file)
#: -> that study: the generic tests below pick each up, with nothing to keep by hand.
STUDIES = {n: spec.claim_study(n) for n in claims.CLAIMS if claims.CLAIMS[n].study is not None}


def _v(status, depends=None):
    return Verdict("statement", "paper", "measured", status, depends)


def test_a_deviation_is_named_beside_agreements_and_disagreements_alike():
    settings_ = [setting("problem and data", "§5: CIFAR", "digits", "another data set"),
                 setting("step sizes", "§5: 5", "5"),
                 chosen("seeds", "3 seeds")]
    verdicts = [_v("disagrees"), _v("partly"), _v("agrees"), _v("reference"), _v("not measured")]
    place(verdicts, settings_)
    assert [v.status for v in verdicts] == ["disagrees", "partly", "agrees", "reference", "not measured"]
    assert [v.setting for v in verdicts] == ["deviating setup"] * 3 + ["-", "-"]
    assert {v.deviation for v in verdicts[:3]} == {"problem and data: another data set"}
    assert verdicts[3].deviation == verdicts[4].deviation == ""


def test_a_verdict_is_placed_only_by_the_fields_it_depends_on_and_not_by_shown_or_chosen_rows():
    settings_ = [setting("constraints", "(9): box", "linear rows", "not the box"),
                 setting("noise", "§6: dense", "diagonal", "diagonal only", shown="ran both ways: same verdicts"),
                 chosen("what is timed", "CPU seconds")]
    free = _v("disagrees", depends=("noise", "what is timed"))
    bound = _v("agrees", depends=("constraints",))
    place([free, bound], settings_)
    assert (free.status, free.setting, free.deviation) == ("disagrees", "paper setting", "")
    assert (bound.status, bound.setting, bound.deviation) == ("agrees", "deviating setup", "constraints: not the box")
    assert [s.status for s in settings_] == ["deviation", "deviation (shown not to matter)", "chosen: CPU seconds"]


def test_a_row_about_one_problem_places_only_the_statements_about_that_problem():
    """The minimax box is a deviation of the minimax statements, not of the coreset toy's."""
    box = setting("constraints", "(10): none", "box", "minimax box")
    box.problems = ("minimax_toy",)
    coreset, minimax, every = _v("agrees"), _v("disagrees"), _v("agrees")
    coreset.problems, minimax.problems = ("coreset_toy(points=paper)",), ("minimax_toy(bound=5)", "coreset_toy")
    place([coreset, minimax, every], [box])
    assert (coreset.setting, coreset.deviation) == ("paper setting", "")
    assert (minimax.setting, minimax.deviation) == ("deviating setup", "constraints: minimax box")
    assert every.setting == "deviating setup"


@pytest.mark.parametrize("side, low, high, want", [
    ("max", 0.1, 0.3, "agrees"), ("max", 0.5, 0.9, "disagrees"), ("max", 0.3, 0.5, "partly"),
    ("min", 0.5, 0.9, "agrees"), ("min", 0.1, 0.3, "disagrees"), ("min", 0.3, 0.5, "partly"),
    ("range", 0.45, 0.9, "partly"), ("range", 0.5, 0.9, "agrees"), ("range", 1.1, 1.5, "disagrees")])
def test_the_interval_against_the_threshold(side, low, high, want):
    c = Criterion("c", "§1: q", 0.4 if side != "range" else 0.5, side, upper=1.0)
    assert c.judge([Estimate((low + high) / 2, low, high)]) == want
    assert c.judge([]) == "not measured" and c.judge([Estimate.point(math.nan)]) == "not measured"


def _record(**fields) -> StudyRecord:
    """A study's record with no configurations and the given fields."""
    return StudyRecord(name="s", kind="comparison", seeds=[0], report=ReportOptions(metric="F"), points=[], **fields)


@pytest.mark.parametrize("scale, want", [("ci", "reduced scale"), ("reduced", "reduced scale"),
                                         ("default", "deviating setup"), ("full", "deviating setup")])
def test_a_reduced_scale_says_so_on_every_measured_verdict(tmp_path, scale, want):
    crit = Criterion("c", "§6: at most 1", 1.0, "max")

    def evaluate_(meta, runs, directory):
        return Measured("notes", {}, [crit.verdict("low", [Estimate.point(0.5)], "0.5"),
                                      crit.verdict("high", [Estimate.point(2.0)], "2"), _v("reference")])

    claim("test_claim_scale", kind="comparison", title="t", statement="s",
          setup=lambda meta: [setting("dimensions", "Fig. 2: d = 4000", "2000", "smaller d")])(evaluate_)
    try:
        rep = claims.evaluate(_record(claim="test_claim_scale", scale=scale), [], tmp_path)
        assert [v.status for v in rep.verdicts] == ["agrees", "disagrees", "reference"]  # the label stays
        assert [v.setting for v in rep.verdicts] == [want, want, "-"]
        if want == "reduced scale":
            assert rep.verdicts[0].deviation == f"scale {scale}: below the paper's sizes; dimensions: smaller d"
            assert "are not evidence" in rep.setup and "[AGREES | reduced scale: scale" in rep.text()
    finally:
        del base.CLAIMS["test_claim_scale"]


def test_estimate_is_a_student_t_interval_over_seeds():
    e = estimate([1.0, 2.0, 3.0])
    assert e.value == 2.0 and e.high - 2.0 == pytest.approx(4.302653 * 1.0 / math.sqrt(3), rel=1e-6)
    assert estimate([5.0]) == Estimate(5.0, 5.0, 5.0) and estimate([2.0, 2.0]) == Estimate.point(2.0)
    assert estimate([1.0, math.inf]).value == math.inf


def test_the_same_test_on_the_baselines_says_whether_an_agreement_discriminates():
    c = Criterion("c", "Table 2: 0.4%", 0.45, "max", comparative=True)
    assert c.verdict("s", [Estimate.point(0.2)], "m", [Estimate.point(0.3)]).discriminating == "no"
    assert c.verdict("s", [Estimate.point(0.2)], "m", [Estimate.point(5.8)]).discriminating == "yes"
    v = c.verdict("s", [Estimate.point(0.2)], "m", [Estimate.point(0.3), Estimate.point(5.8)])
    assert v.discriminating == "partly" and v.label == "agrees"
    assert c.verdict("s", [Estimate.point(0.2)], "m", [Estimate.point(0.3)]).label == "agrees (not discriminating)"


def test_a_looser_threshold_is_named_in_the_paper_column():
    c = Criterion("c", "§6.4: 3× speedup", 2.0, "min", looser="the paper's 2.9×; 2× counts")
    assert c.verdict("s", [Estimate.point(2.1)], "m").paper == ("§6.4: 3× speedup — threshold ≥ 2 (looser than the "
                                                                "paper: the paper's 2.9×; 2× counts)")


def _cases(c: Criterion):
    """(passing, failing) estimates on each side of the criterion's threshold."""
    if c.side == "max":
        return st.floats(0.0, 1e3).map(lambda m: (c.threshold - m - 1e-9, c.threshold + m + 1e-9))
    if c.side == "min":
        return st.floats(0.0, 1e3).map(lambda m: (c.threshold + m + 1e-9, c.threshold - m - 1e-9))
    mid = (c.threshold + c.upper) / 2
    return st.floats(0.0, 1.0).map(lambda f: (mid + f * (c.upper - mid) * 0.99, c.upper + 1e-9 + f * 1e3))


@pytest.mark.parametrize("name", sorted(STUDIES))
def test_every_claim_can_disagree_with_the_same_setting(name):
    """For every discovered claim and each of its thresholds, measurements on either side flip the verdict
    between agrees and disagrees while the setting and its deviations stay: no claim can only agree."""
    c = claims.CLAIMS[name]
    assert c.criteria, f"{name} has no thresholds: it cannot disagree"
    rows = c.settings(StudyRecord.from_study(spec.load(STUDIES[name])))

    @settings(max_examples=25, deadline=None)
    @given(data=st.data(), spread=st.floats(0.0, 1e-3))
    def check(data, spread):
        for crit in c.criteria:
            good, bad = data.draw(_cases(crit))
            edges = [crit.threshold] + ([crit.upper] if crit.side == "range" else [])
            width = spread * min(abs(v - e) for v in (good, bad) for e in edges)
            judged = []
            for v in (good, bad):
                verdict = crit.verdict("s", [Estimate(v, v - width, v + width)], "m")
                place([verdict], rows)
                judged.append(verdict)
            assert [v.status for v in judged] == ["agrees", "disagrees"], crit.name
            assert judged[0].setting == judged[1].setting and judged[0].deviation == judged[1].deviation
            assert judged[0].setting in base.SETTINGS

    check()


@pytest.mark.parametrize("name", sorted(STUDIES))
@pytest.mark.parametrize("scale", ["default", "full", "paper", "ci"])
def test_every_same_row_cites_the_paper(name, scale):
    """A setup row is `same` only with the paper's section cited; a value the paper leaves open is `chosen: ...`."""
    try:
        st_ = spec.load(STUDIES[name], scale=scale)
    except Exception:  # a study without that scale
        pytest.skip(f"{STUDIES[name]} has no {scale} scale")
    rows = claims.CLAIMS[name].settings(StudyRecord.from_study(st_))
    assert rows
    for s in rows:
        assert s.status in ("same", "deviation", "deviation (shown not to matter)", "no paper claim") \
            or s.status.startswith("chosen: "), (s.field, s.status)
        if s.status == "same":
            assert s.cited, f"{name}: a bare 'same' on {s.field!r}: {s.paper!r}"
            # The paper column quotes the passage that states the value, and the passage contains it.
            assert s.states and s.value in s.quote and f"'{s.quote}'" in s.paper, (name, s.field, s.paper)


def test_a_quote_must_state_the_value():
    row = quoted(setting("batch sizes", "App. B.3", "64"), "The batch size is 64", "64")
    assert row.states and row.status == "same" and row.paper == "App. B.3: 'The batch size is 64'"
    with pytest.raises(ValueError, match="does not state the value '128'"):
        quoted(setting("batch sizes", "App. B.3", "128"), "The batch size is 64", "128")
    assert not setting("constraints", "App. B.2: none", "none").states  # a citation is not a quote


def test_a_bare_same_is_caught():
    assert not setting("noise", "deterministic", "deterministic").cited
    assert setting("noise", "§5: deterministic", "deterministic").cited
    assert setting("batch sizes", "64 (App. B.3)", "64").cited


def test_compare_and_setting_rows():
    assert compare("dimensions", (100, 4000), (100, 4000), "p", "s", "dev").deviation is None
    assert compare("dimensions", (100, 4000), (100, 2000), "p", "s", "dev").deviation == "dev"
    with pytest.raises(KeyError, match="not one of"):
        setting("colour", "p", "s")
    with pytest.raises(ValueError, match="verdict status: must be one of"):
        _v("not comparable")
    assert set(FIELDS) >= {"problem and data", "dimensions", "constraints", "noise", "metric", "what is timed",
                           "iteration counts", "batch sizes", "inner-loop policy", "step sizes", "seeds"}


def test_a_claim_report_prints_the_setting_and_the_scorecard_and_writes_the_csv_columns(tmp_path):
    def setup(meta):
        d = meta.axis["d"]
        return [setting("dimensions", "Fig. 2: d = 4000", d, None if d == "4000" else "smaller d"),
                setting("inner-loop policy", "Remark 4.1: 35 steps", "35 steps")]

    crit = Criterion("c", "§6: at most 1", 1.0, "max")

    def evaluate(meta, runs, directory):
        # The evaluator replaces a row with what only the runs show (here: a measured loop accuracy).
        return Measured("notes", {"measured": [{"a": 1}]},
                        [crit.verdict("low", [Estimate(0.5, 0.4, 0.6)], "0.5"),
                         crit.verdict("high", [Estimate(2.0, 1.5, 2.5)], "2")],
                        settings=[setting("inner-loop policy", "Remark 4.1: 35 steps", "35 steps; error 5%",
                                          "error above 1%")])

    c = claim("test_claim_place", kind="comparison", title="t", statement="s", setup=setup)(evaluate)
    try:
        rep = c(_record(axis={"d": "4000"}), [], tmp_path)
        assert [s.study for s in rep.settings] == ["4000", "35 steps; error 5%"]
        assert [(v.status, v.setting, v.deviation) for v in rep.verdicts] == [
            ("agrees", "deviating setup", "inner-loop policy: error above 1%"),
            ("disagrees", "deviating setup", "inner-loop policy: error above 1%")]
        text = rep.text()
        assert "[AGREES | deviating setup: inner-loop policy: error above 1%] low" in text
        assert "[DISAGREES | deviating setup: inner-loop policy: error above 1%] high" in text
        assert "scorecard (test_claim_place):" in text and "0.5 [0.4, 0.6]" in text and "2 [1.5, 2.5]" in text
        assert "counts: agrees in deviating setup: 1, disagrees in deviating setup: 1" in text
        rows = rep.rows()
        assert [tuple(r) for r in rows] == [CSV_COLUMNS] * 2
        assert (rows[1]["claim"], rows[1]["verdict"], rows[1]["low"], rows[1]["high"]) == ("test_claim_place",
                                                                                           "disagrees", 1.5, 2.5)
    finally:
        del base.CLAIMS["test_claim_place"]


def test_every_built_in_claim_is_discovered_and_names_its_study():
    """A claim module registers itself (the package imports each of its modules) and names its study."""
    built_in = {n for n in claims.CLAIMS if claims.CLAIMS[n].evaluate.__module__.startswith("sweep.claims.")}
    assert built_in <= set(STUDIES) and len(built_in) >= 8
    assert all(claims.CLAIMS[n].criteria for n in STUDIES)


@pytest.mark.parametrize("name", sorted(STUDIES))
def test_every_claims_study_names_the_claim_back(name):
    """The study a claim names (a file of sweep/studies, or its own) is built in, of the claim's kind, and names
    the claim: the claim and its study are one pair (the studies validate in tests/sweep/study/test_spec.py)."""
    source = spec.studies()[STUDIES[name]]
    data = sources.read(source) if isinstance(source, Path) else source
    assert (data.get("claim"), data.get("kind")) == (name, claims.CLAIMS[name].kind)
