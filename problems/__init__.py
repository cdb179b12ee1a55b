"""Seeded bilevel problem generators with exact ground truth.

    import problems
    p = problems.make("quadratic", seed=0, dim_x=20, dim_y=20)
    p = problems.make("quadratic", A=[[2, 0], [0, 1]], C=[[1], [0]])   # your own matrices (validated)
    gt = problems.ground_truth(p, x)                                   # exact y*(x), F(x), ∇F(x), λ*(x)
    q = problems.from_functions(f, g, x0, y0, data)   # your own problem from two JAX functions ([jax] extra)
"""
from problems.base import BilevelProblem, LinearConstraints, OnlineProblem, gradient_mapping
from problems.counting import CountingProblem, OracleCounter, counted
from problems.ground_truth import GroundTruth, ground_truth
from problems.registry import available, make
from problems.shared.errors import ParameterError
from problems.shared.registries import discover

# Every module of the package, each registering its problems; the [jax] extra's modules (an optional
# install) are imported on first use, so `import problems` stays NumPy/SciPy.
discover(__name__, __path__, skip=("examples", "functional"))

__all__ = [
    "BilevelProblem", "OnlineProblem", "LinearConstraints", "gradient_mapping",
    "CountingProblem", "OracleCounter", "counted", "available", "make", "ParameterError",
    "GroundTruth", "ground_truth",
]


def __getattr__(name: str):
    # from_functions needs JAX (an optional extra): imported on first use, so `import problems` stays NumPy/SciPy.
    if name == "from_functions":
        from problems.functional import from_functions

        return from_functions
    raise AttributeError(f"module 'problems' has no attribute {name!r}")
