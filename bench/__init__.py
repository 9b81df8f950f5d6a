"""fastgp's benchmarks: scripts that each answer one question, pytest-benchmark
suites for the hot paths, and the comparison command against the LAPACK floor
and the peers (scikit-learn, GPy, GPyTorch, JAX).

- ``python -m bench.compare [--quick]``: the comparison; writes
  docs/comparison.md, docs/comparison.json and docs/img/comparison_*.png.
- ``python bench/bench_<question>.py``: one question each (see the docstring
  of each script); results go to bench/results/ (not committed).
- ``pytest bench/ --benchmark-only``: the pytest-benchmark suites
  (``bench/test_bench_*.py``); the default ``pytest`` run does not collect them.

Run from the repository root. Every figure is measured on the machine that
runs the command; ratios measured in one run carry the claims.
"""
