"""pytest-benchmark: fastgp's two parallel passes over the N x N triangle, the
covariance fill and the fused gradient pass, apart from LAPACK;
``python -m pytest bench/suites/test_bench_covariance.py --benchmark-only``."""

import numpy as np
from scipy.linalg import lapack

from bench._problems import ALPHA


def test_bench_fill_cov_lower(benchmark, regression, n):
    """How long does filling K's lower triangle take (N (N + 1) / 2 kernel
    evaluations, parallel over equal-area column blocks)?"""
    problem, covariance, _ = regression
    B = np.empty((n, n), order="F")
    diag = np.full(n, ALPHA)
    benchmark(covariance.fill_lower, problem.theta0, diag, B)
    assert np.isfinite(B[n - 1, 0]) and B[0, 0] > 0


def test_bench_grad_trace_lower(benchmark, regression, n):
    """How long does the fused gradient pass take (W = K^-1 - A A^T formed
    entry by entry and reduced against dK/dtheta recomputed on the fly)?"""
    problem, covariance, _ = regression
    B = np.empty((n, n), order="F")
    covariance.fill_lower(problem.theta0, np.full(n, ALPHA), B)
    lapack.dpotrf(B, lower=1, overwrite_a=1)
    A = lapack.dpotrs(B, problem.Y.reshape(n, 1), lower=1)[0]
    lapack.dpotri(B, lower=1, overwrite_c=1)
    grad = benchmark(covariance.grad_trace, problem.theta0, B, A)
    assert np.all(np.isfinite(grad))
