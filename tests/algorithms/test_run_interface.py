"""Engines drive a `Run` through its public interface only: no module of algorithms/ but run.py reads or
writes a private attribute of a Run (a grep over the code's tokens, comments and docstrings aside); and that
interface gives the run loop's own records."""
import io
import tokenize
from pathlib import Path

import numpy as np

import problems
from algorithms.run import Run

ROOT = Path(__file__).resolve().parents[2]


def run_private_names() -> set[str]:
    """Every private attribute a Run has: its methods and properties, and an instance's fields."""
    r = Run("soba", problems.make("quadratic", seed=0, dim_x=3, dim_y=3), {}, 0, {"iterations": 3}, 2)
    names = set(vars(Run)) | set(vars(r))
    return {n for n in names if n.startswith("_") and not n.startswith("__")}


def private_uses(source: str, private: set[str]) -> list[str]:
    """`<name>.<private>` in code (not on `self`, which is the module's own object), with line numbers."""
    tokens = [t for t in tokenize.generate_tokens(io.StringIO(source).readline)
              if t.type not in (tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT)]
    found = []
    for a, dot, b in zip(tokens, tokens[1:], tokens[2:]):
        if dot.string == "." and b.type == tokenize.NAME and b.string in private and a.string != "self" \
                and a.type in (tokenize.NAME, tokenize.OP) and a.string not in ("(", ","):
            found.append(f"{b.start[0]}: {a.string}.{b.string}")
    return found


def test_no_module_outside_run_touches_runs_private_fields():
    private = run_private_names()
    assert {"_failed_step", "_f_opt", "_norm_limits"} <= private  # the check sees the fields it guards
    offenders = {}
    for path in sorted((ROOT / "algorithms").rglob("*.py")):
        if path.name == "run.py" and path.parent.name == "algorithms":
            continue
        uses = private_uses(path.read_text(), private)
        if uses:
            offenders[str(path.relative_to(ROOT))] = uses
    assert not offenders, offenders


def test_the_check_finds_a_private_access():
    assert private_uses("rec = run._evaluate()\nrun._failed_step = 3\nself._f_opt = 1\n# r._f_opt\n",
                        {"_evaluate", "_failed_step", "_f_opt"}) == ["1: run._evaluate", "2: run._failed_step"]


def test_the_public_interface_gives_the_run_loops_records():
    p = problems.make("quadratic", seed=2, dim_x=4, dim_y=3)
    budget, config = {"iterations": 20}, {"rho": 0.1, "gamma": 0.1}
    whole = list(Run("soba", p, config, 0, budget, 5).records())
    r = Run("soba", p, config, 0, budget, 5)
    driven = [r.start()]
    assert r.start() is None  # made once
    while r.budget_left():
        rec = r.after_steps(r.step())
        if rec is not None:
            driven.append(rec)
    if not r.done:
        driven.append(r.finish())
    assert [d["iteration"] for d in driven] == [w["iteration"] for w in whole] and driven[-1]["status"] == "finished"
    for d, w in zip(driven, whole):
        assert abs(d["grad_F_sq"] - w["grad_F_sq"]) <= 1e-12 * max(1.0, w["grad_F_sq"])
    r2 = Run("soba", p, {"rho": 0.1, "gamma": 1e200}, 0, budget, 5)
    r2.start()
    r2.fail(7)
    assert r2.after_steps(False)["diverged_at"] == 7
    r2.set_f_opt(np.pi)
    assert r2.f_opt() == np.pi
