"""fastgp's benchmarks: scripts that each answer one question, pytest-benchmark
suites for the hot paths, and the comparison command against the LAPACK floor
and the peers (scikit-learn, GPy, GPyTorch, JAX).

- ``python -m bench.compare [--quick]``: the comparison; writes
  docs/comparison.md, docs/comparison.json and docs/img/comparison_*.png.
- ``python -m bench.bench_<question>``: one question each (see the docstring
  of each script); results go to bench/results/ (not committed).
- ``python -m pytest bench/suites --benchmark-only``: the pytest-benchmark
  suites (``bench/suites/test_bench_*.py``); the test command
  (``python -m pytest``, which collects tests/ only) does not run them.

Run from the repository root. Every figure is measured on the machine that
runs the command; ratios measured in one run carry the claims.
"""
