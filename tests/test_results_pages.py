"""docs/results_pages.py turns a results directory into a results page's generated part and counts the verdicts
of every generated scorecard for the results index."""
import csv
import importlib.util
import json
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
FIELDS = ("claim", "statement", "paper", "measured", "low", "high", "verdict", "setting", "deviations",
          "discriminating", "note")


@pytest.fixture
def pages(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    spec = importlib.util.spec_from_file_location("results_pages", REPO / "docs" / "results_pages.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    monkeypatch.setattr(module, "OUT", tmp_path / "generated")
    monkeypatch.setattr(module, "PAGES", tmp_path / "pages")  # no hand-written pages: the generated part alone
    (tmp_path / "pages").mkdir()
    return module


def results_dir(root: Path, name: str, scale: str, verdicts: list[tuple[str, str, str]]) -> Path:
    (root / "report").mkdir(parents=True)
    (root / "study.json").write_text(json.dumps({"name": name, "scale": scale,
                                                 "environment": {"python": "3.11.2", "cores": 2}}))
    (root / "report" / "claims.txt").write_text("claim text\n")
    (root / "report" / "claim.png").write_bytes(b"\x89PNG")
    with (root / "report" / "verdicts.csv").open("w", newline="") as fh:
        writer = csv.DictWriter(fh, FIELDS)
        writer.writeheader()
        for verdict, setting, discriminating in verdicts:
            writer.writerow({f: "" for f in FIELDS} | {"statement": "s | t", "verdict": verdict, "setting": setting,
                                                      "discriminating": discriminating})
    return root


def test_a_page_holds_the_command_environment_scorecard_claims_and_figures(pages, tmp_path: Path):
    root = results_dir(tmp_path / "r1", "toy_study", "ci", [("agrees", "paper setting", "yes")])
    pages.OUT.mkdir()
    stem, text = pages.page(root)
    assert stem == "toy_study-ci"
    assert "`bisweep run toy_study --scale ci`" in text and "python 3.11.2; cores 2" in text
    assert "| s \\| t | agrees | paper setting | yes |" in text  # a pipe in a cell is escaped
    assert "```text\nclaim text\n```" in text and "![claim](toy_study-ci/claim.png)" in text
    assert (pages.OUT / stem / "claim.png").is_file() and (pages.OUT / stem / "verdicts.csv").is_file()


def test_the_counts_table_counts_each_studys_verdicts(pages, tmp_path: Path):
    a = results_dir(tmp_path / "a", "alpha", "default", [("agrees", "paper setting", "yes"),
                                                        ("disagrees", "deviating setup", "no"),
                                                        ("not measured (no method moved)", "-", "-")])
    b = results_dir(tmp_path / "b", "beta", "full", [("partly", "deviating setup", "partly"), ("reference", "-", "-")])
    pages.main([str(a), str(b)])
    lines = (pages.OUT / "counts.md").read_text().splitlines()
    assert lines[0] == ("| study | scale | agrees | disagrees | partly | not measured | reference "
                        "| in the paper's setting | at a reduced scale | not discriminating | of which partly |")
    assert lines[2] == "| `alpha` | default | 1 | 1 | 0 | 1 | 0 | 1 | 0 | 1 | 0 |"
    # a partly discriminating verdict supports the comparison no more than one that is not: counted with them
    assert lines[3] == "| `beta` | full | 0 | 0 | 1 | 0 | 1 | 0 | 0 | 1 | 1 |"


def test_a_page_names_the_code_that_made_it_and_its_verdict_sentences_come_from_the_csv(pages, tmp_path: Path):
    root = results_dir(tmp_path / "r", "gamma", "default", [("agrees", "deviating setup", "no"),
                                                           ("not measured", "-", "-")])
    pages.main([str(root)])
    text = (pages.OUT / "gamma.md").read_text()
    assert "**Page made with**: bilevel-sweep " in text and ", commit " in text
    # --all stamps each page with the code its study ran with, taken before the runs, not the checkout at the end
    assert "**Page made with**: bilevel-sweep 9.9, commit " + "a" * 40 + "." in pages.page(
        root, "bilevel-sweep 9.9, commit " + "a" * 40)[1]
    assert "- s \\| t: **agrees (not discriminating)**, deviating setup." in text
    assert pages.check("gamma") == []
    # A page whose verdict text no longer matches its verdicts.csv is caught, and the command fails.
    (pages.OUT / "gamma.md").write_text(text.replace("**agrees (not discriminating)**", "**disagrees**")
                                        .replace("| s \\| t | agrees |", "| s \\| t | partly |"))
    assert len(pages.check("gamma")) == 2
    with pytest.raises(SystemExit, match="disagree with their verdicts.csv"):
        pages.main([])
    # A stale sentence left over, a page without its sentences or without the commit that made it: each caught.
    (pages.OUT / "gamma.md").write_text(text.replace("**Verdicts**\n\n", "**Verdicts**\n\n- old: **agrees**.\n"))
    assert pages.check("gamma") == ["gamma: 3 verdict sentences for 2 verdicts"]
    (pages.OUT / "gamma.md").write_text(text.replace("**Verdicts**", "**Findings**"))
    assert pages.check("gamma") == ["gamma: the page has no generated verdict sentences"]
    (pages.OUT / "gamma.md").write_text(re.sub(r"commit [0-9a-f]{40}", "commit unknown", text))
    assert pages.check("gamma") == ["gamma: the page does not name the version and commit it was made with"]


def test_a_hand_written_page_states_no_verdict_in_its_own_words(pages, tmp_path: Path):
    """The commentary beside the generated sentences cannot contradict them: it holds no verdict word (code blocks,
    comments and the included part aside)."""
    page = tmp_path / "page.md"
    page.write_text("# p\n\nThe crossover moves with c.\n\n```text\n[AGREES] s\n```\n<!-- agrees -->\n")
    assert pages.prose(page) == []
    page.write_text("# p\n\n**AF2OBO agrees, but does not discriminate.** The\nstatic methods are not measured.\n")
    assert pages.prose(page) == ["page.md: hand-written verdict word 'agrees': **AF2OBO agrees, but does not "
                                 "discriminate.** The", "page.md: hand-written verdict word 'not measured': static "
                                 "methods are not measured."]


def test_the_regeneration_covers_every_included_page_and_refuses_an_unknown_one(pages):
    pages.PAGES = REPO / "docs" / "results"
    assert {"online_drift", "f2csa_scaling-fig1", "tfbo_coreset"} <= set(pages.included())
    assert "counts" not in pages.included()
    with pytest.raises(SystemExit, match="--only: nope is not a generated page; pages: "):
        pages.regenerate(["nope"], Path("results"), None)


def test_every_generated_results_page_agrees_with_its_verdicts_csv(pages):
    """The pages in docs/results/generated against the verdicts.csv beside each: made by named code, one generated
    sentence per verdict saying its label, the scorecard's labels."""
    pages.OUT = REPO / "docs" / "results" / "generated"
    stems = [md.stem for md in sorted(pages.OUT.glob("*.md")) if md.stem != "counts"]
    assert len(stems) == 11 and [b for stem in stems for b in pages.check(stem)] == []


def test_the_hand_written_results_pages_hold_no_verdict_words(pages):
    """A study page's commentary says no verdict: its verdicts are the generated sentences."""
    studies = [md for md in sorted((REPO / "docs" / "results").glob("*.md")) if md.stem != "index"]
    assert len(studies) >= 8 and [b for md in studies for b in pages.prose(md)] == []
