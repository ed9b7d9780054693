"""The benchmark: the batched engine against the sequential per-client loop, on identical work.

    python -m cfl_core bench [--quick] [--device auto|cpu|cuda] [--out FILE.md] [--json FILE]

Library use: `run_benchmark(BenchOptions(...))` returns a `BenchReport`; the
`report` module turns it into the Markdown table and the JSON rows.
"""
from .runner import BenchMismatch, BenchOptions, BenchReport, Measurement, run_benchmark

__all__ = ["BenchMismatch", "BenchOptions", "BenchReport", "Measurement", "run_benchmark"]
