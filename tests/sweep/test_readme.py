"""The README and the documentation pages are true: every example is run as written (here, or by the test it
names), the study example validates verbatim, the results loader prints what the records say, the Tuner example is quiet, and the
console describes every option and lists algorithm labels."""
import argparse
import ast
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml

import algorithms
import problems
from sweep import cli
from sweep.study import sources, spec
from tests import documents

REPO = Path(__file__).resolve().parents[2]
#: Markers other tests look up by name (the block follows them directly): the test that runs each.
MARKED_ELSEWHERE = {"byop-example": "tests/problems/test_functional_readme.py",
                    "byop-register": "tests/problems/test_functional_readme.py",
                    "main-command": "tests/sweep/test_integration.py", "test-command": None}
#: The blocks this file runs, by their `<!-- readme: NAME -->` marker.
RUN_HERE = {"study", "results", "python", "matrices", "tuner", "explicit"}


def blocks() -> list[tuple[str, str, list[str]]]:
    """(language, code, the HTML comments right above it) of every fenced block of README.md and the docs."""
    return [b for page in documents.pages() for b in page_blocks(page)]


def page_blocks(page: Path) -> list[tuple[str, str, list[str]]]:
    """(language, code, the HTML comments right above it) of every fenced block of one document."""
    lines = page.read_text().splitlines()
    out, i = [], 0
    while i < len(lines):
        if not lines[i].startswith("```"):
            i += 1
            continue
        lang = lines[i][3:].strip()
        end = next(k for k in range(i + 1, len(lines)) if lines[k] == "```")
        comments, j = [], i - 1
        while j >= 0 and lines[j].rstrip().endswith("-->"):
            k = j
            while not lines[k].startswith("<!--"):
                k -= 1
            comments.insert(0, " ".join(lines[k:j + 1])[4:-3].strip())
            j = k - 1
        out.append((lang, "\n".join(lines[i + 1:end]) + "\n", comments))
        i = end + 1
    return out


def block(name: str) -> str:
    (code,) = [c for _, c, notes in blocks() if f"readme: {name}" in notes]
    return code


def test_every_example_is_run_here_or_names_the_test_that_runs_it():
    seen = set()
    for lang, code, notes in blocks():
        if lang not in ("python", "yaml", "bash"):
            continue  # listings and tables
        here = [n.split(":", 1)[1].strip() for n in notes if n.startswith("readme:")]
        seen.update(here)
        elsewhere = [n for n in notes if n in MARKED_ELSEWHERE]
        run_by = [n.split("run by ", 1)[1] for n in notes if n.startswith("run by ")]
        not_run = [n for n in notes if n.startswith("not run:")]
        assert here or elsewhere or run_by or not_run, f"a documented block without a test:\n{code[:200]}"
        for m in elsewhere:
            if MARKED_ELSEWHERE[m]:
                assert f"<!-- {m} -->" in (REPO / MARKED_ELSEWHERE[m]).read_text()
        for ref in run_by + [t for n in not_run for t in re.findall(r"tests/\S+\.py::\w+", n)]:
            path, name = ref.split("::")
            assert f"def {name}(" in (REPO / path).read_text(), ref
    assert seen == RUN_HERE


def test_the_docs_copies_of_the_main_command_are_the_readmes():
    """A page showing the quickstart command marks it as run by the README's test: it must be that command."""
    main = documents.marked_block("main-command")
    copies = [code for _, code, notes in blocks()
              if any(n.endswith("::test_quickstart_from_the_readme_main_command") for n in notes)]
    assert len(copies) >= 2 and all(code == main for code in copies)


def test_the_study_example_validates_as_written():
    data = yaml.load(block("study"), Loader=sources._Loader)
    st = spec.validate(data)
    # 2 problem configurations × (2 + 1 + 1) algorithm configurations × 3 step-size factors, 5 seeds.
    assert len(st.points) == 2 * 4 * 3 and st.seeds == [0, 1, 2, 3, 4] and st.budget["iterations"] == 1000
    for field in ("problems", "algorithms", "budget"):  # the three the README calls required
        with pytest.raises(Exception, match=rf"^{field}: is required"):
            spec.validate({k: v for k, v in data.items() if k != field})


def _outcome(st) -> tuple:
    """What a study field can change: the runs (spec hash) and every setting beside them."""
    return (st.spec_hash, st.seeds, vars(st.report), st.resources, st.max_concurrent, st.max_failures,
            st.checkpoint_seconds, st.report_seconds, tuple(st.imports), st.claim, st.runs_per_trial, st.kind, st.batched,
            st.backend)


def test_every_line_of_the_study_example_marked_default_shows_the_default():
    data = yaml.load(block("study"), Loader=sources._Loader)
    written = _outcome(spec.validate(data))
    marked = {"default": [], "e.g.": []}
    for line in block("study").splitlines():
        m = re.match(r"^( *)(\w+):.*?# (default|e\.g\.)", line)
        if m and len(m.group(1)) in (0, 2):
            marked[m.group(3)].append(("report",) * (len(m.group(1)) == 2) + (m.group(2),))
    assert len(marked["default"]) == 20 and len(marked["e.g."]) == 7, marked
    for path in marked["default"]:  # left out, the study is the same
        trimmed = yaml.load(block("study"), Loader=sources._Loader)
        parent = trimmed["report"] if len(path) == 2 else trimmed
        del parent[path[-1]]
        assert _outcome(spec.validate(trimmed)) == written, path
    assert spec.validate({k: v for k, v in data.items() if k != "seeds"}).seeds == [0, 1, 2]  # "e.g. (default 3)"
    kind_default = spec.validate({**data, "report": {k: v for k, v in data["report"].items() if k != "metric"}})
    assert kind_default.report.metric == "F"  # "e.g. (default: the kind's, F for stepsize_sensitivity)"


def run_python(code: str, cwd: Path, timeout: float = 300) -> subprocess.CompletedProcess:
    (cwd / "example.py").write_text(code)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.run([sys.executable, "example.py"], cwd=cwd, capture_output=True, text=True, timeout=timeout,
                          env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc


def test_the_python_example_runs_and_prints_the_ground_truth(tmp_path):
    out = run_python(block("python"), tmp_path).stdout.splitlines()
    rows = [list(map(float, ln.split())) for ln in out[:5]]
    p = problems.make("quadratic", seed=0, dim_x=5, dim_y=5, mu=0.5, outer_curvature=1.0)
    plain = list(algorithms.run("soba", p, {}, seed=0, budget={"iterations": 2000}, n_evals=4))
    assert [int(r[0]) for r in rows] == [r["iteration"] for r in plain] == [0, 1, 13, 159, 2000]
    np.testing.assert_allclose([r[2] for r in rows], [r["grad_F_sq"] for r in plain], rtol=1e-12)
    assert rows[0][2] == pytest.approx(6.05, abs=0.005) and rows[-1][2] == pytest.approx(0.066, abs=0.0005)
    # The ground truth line against the closed form of the quadratic at x = 1 (dense solves).
    F = float(out[5].split(" [")[0])
    x = np.ones(5)
    ys = np.linalg.solve(p.A, p.C @ x - p.a)
    assert F == pytest.approx(0.5 * (ys - p.e) @ p.P @ (ys - p.e) + 0.5 * x @ x + p.c @ x, rel=1e-12)


def test_the_matrices_example_prints_the_hand_computed_values(tmp_path):
    y_star, grad = re.findall(r"\[([^\]]*)\]", run_python(block("matrices"), tmp_path).stdout)
    np.testing.assert_allclose(np.array(y_star.split(), dtype=float), [0.5, -1.0], rtol=0, atol=1e-15)
    np.testing.assert_allclose(np.array(grad.split(), dtype=float), [1.25], rtol=0, atol=1e-15)


def test_the_results_example_prints_the_median_over_seeds(tmp_path, run_through_platform):
    data = sources.read(sources.resolve("quickstart"))
    st = spec.validate({**data, "budget": {"iterations": 60}, "seeds": 2})
    store = run_through_platform(st, tmp_path / "results" / "quickstart")
    out = run_python(block("results"), tmp_path).stdout
    printed = re.findall(r"^(\w+)?\s+([\d.]+)\s+(\S+)$", out, re.M)
    # Independent: the final grad_F_sq of each run from the stored records, median over the two seeds.
    want = {}
    for pt in st.points:
        finals = [store.records(pt.run_key(s))[-1]["grad_F_sq"] for s in st.seeds]
        want[(pt.label, float(pt.coords["axis"]))] = float(np.median(finals))
    got, label = {}, None
    for name, factor, value in printed:  # pandas prints a label once, on the first of its rows
        label = name or label
        got[(label, float(factor))] = float(value)
    assert got.keys() == want.keys()
    for k, v in want.items():
        assert got[k] == pytest.approx(v, rel=1e-5, abs=5e-7), k  # pandas prints 6 decimals (or 6 digits, e-notation)


def test_the_tuner_example_keeps_the_seed_out_of_the_search_space():
    """Searching over the seed would let "best" pick the easiest instance: the example fixes it."""
    (space,) = [node for node in ast.walk(ast.parse(block("tuner")))
                if isinstance(node, ast.keyword) and node.arg == "param_space"]
    values = {k.value: v for k, v in zip(space.value.keys, space.value.values)}
    assert isinstance(values["seed"], ast.Constant) and isinstance(values["gamma"], ast.Call)


@pytest.mark.integration
def test_the_tuner_example_is_quiet_and_finds_the_best(tmp_path):
    proc = run_python(block("tuner"), tmp_path, timeout=600)
    out, err = proc.stdout.splitlines(), proc.stderr
    assert "Traceback" not in err and "SystemExit" not in err and "Checkpoint successfully" not in err + proc.stdout
    assert len(out) <= 15 and len(err.splitlines()) <= 2, (out, err)  # was 1,372 + 24 lines
    config, value = out[-1].rsplit("} ", 1)
    config = ast.literal_eval(config + "}")
    p = problems.make("quadratic", seed=config["seed"], dim_x=10, dim_y=10)
    plain = list(algorithms.run("soba", p, {"gamma": config["gamma"]}, seed=config["seed"],
                                budget={"iterations": 300}, n_evals=20))[-1]
    assert float(value) == pytest.approx(plain["grad_F_sq"], rel=1e-12)


def test_every_cli_option_has_help_and_list_studies_prints_labels(capsys):
    ap = cli.parser()
    subs = next(a for a in ap._actions if isinstance(a, argparse._SubParsersAction))
    missing = [f"{name} {a.dest}" for name, sp in subs.choices.items() for a in sp._actions
               if not isinstance(a, argparse._HelpAction) and not a.help]
    assert missing == []
    assert all(a.help for a in ap._actions if not isinstance(a, (argparse._HelpAction, argparse._SubParsersAction)))
    assert cli.main(["list", "studies"]) == 0
    out = capsys.readouterr().out
    line = next(ln for ln in out.splitlines() if ln.startswith("    kind: comparison") and "bome" in ln)
    listed = line.split("algorithms: ", 1)[1].split(" | ", 1)[0].split(", ")
    entries = sources.read(sources.resolve("bome_toys"))["algorithms"]
    want = list(dict.fromkeys(e if isinstance(e, str) else e.get("label", e["name"]) for e in entries))
    assert listed == want and len(set(listed)) == len(listed) and "bome_eta" in listed


def test_the_explicit_state_example_runs_and_prints_every_runs_records(capsys):
    exec(compile(block("explicit"), "explicit-state.md", "exec"), {})
    lines = capsys.readouterr().out.splitlines()
    runs = {line.split()[0] for line in lines}
    assert runs == {"0", "1", "2"} and all(float(line.split()[2]) >= 0 for line in lines)
    assert max(int(line.split()[1]) for line in lines) == 200
