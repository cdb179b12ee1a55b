"""The `benchmark` study kind: its study (kind), its numbers (tuning, choices, profile frames) and its report.
The statistics it uses are in sweep.compare."""
from sweep.kinds.benchmark.kind import Benchmark

__all__ = ["Benchmark"]
