"""One registry mechanism: a package finds every module dropped into it (a new algorithm or problem is one
file), in sorted order; an unknown name is one error with the nearest name; a study's imports fail one line each."""
import os
import pkgutil
import sys

import numpy as np
import pytest

import algorithms
import problems
from problems.shared.errors import ParameterError
from problems.shared.registries import Registry, discover, import_modules

INIT = "from problems.shared.registries import discover\nseen = []\ndiscover(__name__, __path__)\n"
PROBLEM = '''
import dataclasses
import numpy as np
from mybench import seen
from problems.base import BilevelProblem
from problems.registry import register
from problems.validation import Params, param

seen.append(__name__)


@dataclasses.dataclass(frozen=True)
class ShiftParams(Params):
    a: float = param(2.0, "positive", "curvature of g")


class Shift(BilevelProblem):
    """g = ½a(y − x − 1)², f = ½y² + ½x²: y*(x) = x + 1, ∇F(x) = 2x + 1."""
    dim_x = dim_y = 1

    def __init__(self, a):
        self.a = a

    def f(self, x, y, batch=None):
        return float(0.5 * y[0] ** 2 + 0.5 * x[0] ** 2)

    def g(self, x, y, batch=None):
        return float(0.5 * self.a * (y[0] - x[0] - 1.0) ** 2)

    def grad_f(self, x, y, batch=None):
        return x.copy(), y.copy()

    def grad_g(self, x, y, batch=None):
        r = self.a * (y - x - 1.0)
        return -r, r

    def hvp_yy_g(self, x, y, v, batch=None):
        return self.a * v

    def cross_xy_g(self, x, y, v, batch=None):
        return -self.a * v

    def initial_point(self):
        return np.ones(1), np.zeros(1)

    def y_star(self, x):
        return x + 1.0

    def grad_F(self, x):
        return 2.0 * x + 1.0


@register("dropped_shift", ShiftParams)
def build(p, seed):
    """A scalar problem dropped into a package."""
    return Shift(p.a)
'''
ALGORITHM = '''
import dataclasses
from mybench import seen
from algorithms.base import Algorithm, AlgorithmConfig, register
from problems.validation import param

seen.append(__name__)


@dataclasses.dataclass(frozen=True)
class Config(AlgorithmConfig):
    lr: float = param(0.1, "positive", "step size of x and y")


@register
class Alternate(Algorithm):
    """y on g, then x along ∇x f."""
    name = "dropped_alternate"
    Config = Config
    step_sizes = ("lr",)

    def step(self):
        p, lr = self.problem, self.config.lr
        self.y = self.y - lr * p.grad_y_g(self.x, self.y)
        self.x = self.x - lr * p.grad_f(self.x, self.y)[0]
'''


@pytest.fixture
def mybench(tmp_path, monkeypatch, registries_restored):
    """A package `mybench` on sys.path: modules c_empty, a_problem and b_algorithm beside a discovering __init__."""
    pkg = tmp_path / "mybench"
    pkg.mkdir()
    (pkg / "__init__.py").write_text(INIT)
    (pkg / "c_empty.py").write_text("from mybench import seen\nseen.append(__name__)\n")
    (pkg / "a_problem.py").write_text(PROBLEM)
    (pkg / "b_algorithm.py").write_text(ALGORITHM)
    monkeypatch.syspath_prepend(str(tmp_path))
    yield pkg
    for name in [m for m in sys.modules if m == "mybench" or m.startswith("mybench.")]:
        del sys.modules[name]


def test_a_module_dropped_into_a_package_registers_its_algorithm_and_its_problem(mybench):
    import mybench as package

    assert package.seen == ["mybench.a_problem", "mybench.b_algorithm", "mybench.c_empty"]  # sorted
    assert algorithms.get("dropped_alternate").__module__ == "mybench.b_algorithm"
    assert problems.available()["dropped_shift"]["params"]["a"]["default"] == 2.0
    last = list(algorithms.run("dropped_alternate", problems.make("dropped_shift", a=3.0), {"lr": 0.5},
                               budget={"iterations": 2}, n_evals=2))[-1]
    x, y = 1.0, 0.0  # the same two steps by hand: y = 3, x = 0.5, then y = 0.75, x = 0.25
    for _ in range(2):
        y -= 0.5 * 3.0 * (y - x - 1.0)
        x -= 0.5 * x
    assert (x, y) == (0.25, 0.75)
    assert (last["iteration"], last["calls/grad_g"], last["calls/grad_f"]) == (2, 2, 2)
    assert last["F"] == pytest.approx(0.5 * (x + 1.0) ** 2 + 0.5 * x ** 2, rel=1e-12)
    assert last["y_err_sq"] == pytest.approx((y - x - 1.0) ** 2, rel=1e-12)


def test_the_built_in_packages_import_every_module_they_hold():
    for package, skipped in ((algorithms, set()), (problems, {"functional", "examples"})):
        held = {m.name for m in pkgutil.iter_modules(package.__path__)} - skipped
        assert held and all(f"{package.__name__}.{m}" in sys.modules for m in held), package.__name__


def test_discover_skips_what_it_is_told_to(mybench):
    package = sys.modules["mybench"] = type(sys)("mybench")  # a bare package: nothing discovered yet
    package.seen, package.__path__ = [], [str(mybench)]
    discover("mybench", package.__path__, skip=("a_problem", "b_algorithm"))
    assert sys.modules["mybench"].seen == ["mybench.c_empty"]


def test_an_unknown_name_is_one_error_with_the_nearest_and_every_known_name():
    reg = Registry("gadget")
    reg.add("spanner", 1)
    reg.add("hammer", 2)
    assert (reg["hammer"], reg.names(), reg.items(), "spanner" in reg, ["x"] in reg) == (
        2, ["spanner", "hammer"], [("hammer", 2), ("spanner", 1)], True, False)
    with pytest.raises(ParameterError) as info:
        reg["hamer"]
    assert str(info.value) == "gadget: unknown name 'hamer'; did you mean 'hammer'? allowed: hammer, spanner"
    with pytest.raises(ParameterError, match=r"^gadget: unknown name 3; allowed: hammer, spanner$"):
        reg[3]
    with pytest.raises(ParameterError, match=r"^gadget: 'hammer' is registered twice$"):
        reg.add("hammer", 3)
    assert (reg.get("hammer"), reg.get("hamer"), reg.get(["x"], 0)) == (2, None, 0)
    assert reg["hammer"] == 2 and reg.pop("hammer") == 2 and reg.names() == ["spanner"]
    del reg["spanner"]
    assert len(reg) == 0


def test_the_modules_a_user_names_fail_one_line_each(tmp_path, monkeypatch):
    (tmp_path / "plug_ok.py").write_text("VALUE = 7\n")
    (tmp_path / "plug_bad.py").write_text("raise RuntimeError('broken\\nsecond line')\n")
    monkeypatch.chdir(tmp_path)  # found from the current directory, as `python -m` finds it
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", os.getcwd())])
    with pytest.raises(ParameterError) as info:
        import_modules(["plug_ok", "no_such_plug", "plug_bad"], "--import")
    assert str(info.value).splitlines() == [
        "--import[1]: cannot import module 'no_such_plug': ModuleNotFoundError: No module named 'no_such_plug'",
        "--import[2]: cannot import module 'plug_bad': RuntimeError: broken"]
    assert sys.modules["plug_ok"].VALUE == 7
    del sys.modules["plug_ok"]


def test_a_registry_imports_its_built_in_package_on_the_first_read_and_a_broken_one_on_every_read(tmp_path,
                                                                                                   monkeypatch):
    reg = Registry("gadget", builtin="gadgets_builtin")
    (tmp_path / "gadgets_builtin.py").write_text(
        "import builtins\nreg = builtins.GADGET_REG\nreg.add('lever', 1)\n"
        "assert reg.names() == ['wedge', 'lever']  # a read while the package is imported: what is registered so far\n")
    (tmp_path / "gadgets_broken.py").write_text("raise RuntimeError('broken built-in')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr("builtins.GADGET_REG", reg, raising=False)
    reg.add("wedge", 2)  # registering reads nothing: the package is not imported yet
    assert "gadgets_builtin" not in sys.modules
    assert reg.names() == ["wedge", "lever"] and reg["lever"] == 1 and "gadgets_builtin" in sys.modules
    del sys.modules["gadgets_builtin"]
    assert reg.names() == ["wedge", "lever"] and "gadgets_builtin" not in sys.modules  # imported once only
    broken = Registry("gadget", builtin="gadgets_broken")
    for _ in range(2):
        with pytest.raises(RuntimeError, match="broken built-in"):
            "x" in broken
