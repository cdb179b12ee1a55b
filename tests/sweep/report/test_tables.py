"""Printed tables fit a terminal's 100 columns without losing a cell (the CSV files keep them whole)."""
from sweep.report.tables import fit_lines, format_table


def test_a_wide_table_prints_in_blocks_within_100_columns_and_loses_no_cell():
    rows = [{"problem": "quadratic", "algorithm": a, **{f"step_size_factor={f}": 1e-4 * (i + 1) * f for f in (0.5, 1, 2)},
             "sensitivity": 0.2387, "sensitivity_measure": "log10_spread", "relative_average_change": 1467.0,
             "converged_fraction": 0.8889, "diverged_runs": 0, "grid_runs": 9} for i, a in enumerate(("dtfbo", "soba"))]
    lines = format_table(rows, "== sensitivity ==").splitlines()
    assert max(map(len, lines)) <= 100
    headers = [ln.split() for ln in lines if ln.startswith("problem")]
    assert len(headers) >= 2 and all(h[:2] == ["problem", "algorithm"] for h in headers)  # identity repeated
    shown = [c for h in headers for c in h[2:]]
    assert sorted(shown) == sorted(list(rows[0])[2:])  # every other column exactly once
    soba = [ln.split() for ln in lines if ln.startswith("quadratic  soba")]
    assert [v for ln in soba for v in ln[2:]] == ["0.0001", "0.0002", "0.0004", "0.2387", "log10_spread", "1467",
                                                  "0.8889", "0", "9"]


def test_long_prose_wraps_in_its_row_and_a_sentence_every_row_repeats_is_said_once():
    paper = "Sec. 5.1: a logistic regression on the 20 newsgroups data set with 130,107 features and 2 hyperparameters"
    rule = "best median over seeds among stable configurations"
    rows = [{"field": "problem and data", "paper": paper, "study": "regularization_selection", "status": "deviation",
             "criterion": rule},
            {"field": "seeds", "paper": "10 seeds", "study": "3 seeds", "status": "deviation", "criterion": rule}]
    lines = format_table(rows, "setup:").splitlines()
    assert max(map(len, lines)) <= 100 and not any("(continued)" in ln for ln in lines)
    assert lines[:2] == ["setup:", f"  criterion: {rule}"] and lines[2].split() == ["field", "paper", "study", "status"]
    col, end = lines[2].index("paper"), lines[2].index("study")
    assert end - col - 2 < len(paper)  # the column is narrower than the text
    cell = [ln[col:end].strip() for ln in lines[4:] if not ln.startswith("seeds")]
    assert " ".join(c for c in cell if c) == paper  # the cell wrapped onto its own lines, in order
    assert lines[-1].split() == ["seeds", "10", "seeds", "3", "seeds", "deviation"]


def test_prose_lines_wrap_under_their_own_indent():
    text = "  [AGREES | paper setting] " + "word " * 40
    lines = fit_lines(text.rstrip()).splitlines()
    assert max(map(len, lines)) <= 100 and lines[1].startswith("      word") and len(lines) == 3
    assert " ".join(ln.strip() for ln in lines) == text.strip()


def test_the_runs_table_written_by_columns_is_the_csv_its_rows_make(tmp_path):
    from sweep.report.runs_table import ColumnRows, write_table
    from sweep.report.tables import write_csv

    columns = {"run_key": ["a", "b", "c"], "F": [0.5, float("nan"), None], "calls/total": [8, None, 3],
               "converged": [True, False, None], "g": [float("inf"), -float("inf"), 1e-5], "error": ["", "x, y", ""]}
    rows = ColumnRows(columns)
    assert len(rows) == 3 and rows[1] == {"run_key": "b", "F": rows[1]["F"], "calls/total": None,
                                          "converged": False, "g": -float("inf"), "error": "x, y"}
    write_table(tmp_path / "cols.csv", rows)
    write_csv(tmp_path / "rows.csv", list(rows))
    assert (tmp_path / "cols.csv").read_bytes() == (tmp_path / "rows.csv").read_bytes()
    assert (tmp_path / "cols.csv").read_text().splitlines()[2] == "b,nan,,False,-inf,\"x, y\""


def test_columns_written_at_once_are_the_bytes_the_csv_module_writes(tmp_path):
    from sweep.report.runs_table import ColumnRows, write_table
    from sweep.report.tables import write_csv

    columns = {"text": ["plain", "a, b", 'say "hi"', "two\nlines", " lead", "", None, "é"],
               "x": [1.5, 1e-300, -0.0, float("nan"), 2, 10**20, None, 1 / 3],
               "flag": [True, False, None, True, 1, 0.5, "t", None],
               "grid": [[1, 2], (3,), {"a": 1}, None, "[1]", 1, 2.0, False],
               "a,b": ["x"] * 8,
               "bools": [True, False, None, 1, 0, 2.5, None, float("inf")], "none": [None] * 8}
    write_table(tmp_path / "cols.csv", ColumnRows(columns))
    write_csv(tmp_path / "rows.csv", list(ColumnRows(columns)))
    assert (tmp_path / "cols.csv").read_bytes() == (tmp_path / "rows.csv").read_bytes()
    assert (tmp_path / "cols.csv").read_bytes().splitlines()[0] == b'text,x,flag,grid,"a,b",bools,none'
