"""pytest-benchmark: one loss+gradient of fastgp's objective (regression and
GPLVM) at several N;
``python -m pytest bench/suites/test_bench_loss_grad.py --benchmark-only``."""

import numpy as np
import pytest

from bench._problems import ALPHA, make_problem


def test_bench_regression_loss_grad(benchmark, regression):
    """How long does one regression loss+gradient take (fill, dpotrf, dpotrs,
    dpotri, fused gradient pass; the workspace reused as in a fit)?"""
    problem, _, objective = regression
    value, grad = benchmark(objective, problem.theta0)
    assert np.isfinite(value) and np.all(np.isfinite(grad))


def test_bench_regression_loss(benchmark, regression):
    """How long does the loss alone take (fill, dpotrf, dpotrs), the cost of
    a line-search step that needs no gradient?"""
    problem, _, objective = regression
    assert np.isfinite(benchmark(objective.value, problem.theta0))


def test_bench_gplvm_loss_grad(benchmark, n):
    """How long does one GPLVM loss+gradient take (Y (N, 12), Q = 2: the
    latent and hyperparameter gradients in one fused pass)?"""
    latent = pytest.importorskip("fastgp._solvers.cholesky.latent")
    from fastgp._solvers.workspace import Workspace

    def build(size):
        problem = make_problem("gplvm", size)
        objective = latent.LatentNegLogMarginalLikelihood(
            problem.kernel, problem.Y, problem.X.shape[1], ALPHA, Workspace(size))
        return objective, objective.pack(problem.X, problem.theta0)

    small, z_small = build(64)
    small(z_small)  # compile or load from the cache
    objective, z = build(n)
    value, grad = benchmark(objective, z)
    assert np.isfinite(value) and np.all(np.isfinite(grad))
