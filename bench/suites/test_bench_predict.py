"""pytest-benchmark: prediction from a fitted fastgp model;
``python -m pytest bench/suites/test_bench_predict.py --benchmark-only``."""

import numpy as np

from bench._problems import ALPHA, make_problem


def test_bench_predict_mean_std(benchmark, n):
    """How long does predicting mean and standard deviation at N new points
    take from a model fitted on N points (cross-covariance in chunks, one
    triangular solve per chunk)?"""
    from fastgp import GaussianProcessRegressor

    problem = make_problem("1d", n)
    gpr = GaussianProcessRegressor(problem.kernel, alpha=ALPHA, optimizer=None)
    gpr.fit(problem.X, problem.Y)
    X_new = make_problem("1d", n, seed=1).X
    gpr.predict(X_new[:10], return_std=True)  # compile or load from the cache
    mean, std = benchmark(gpr.predict, X_new, return_std=True)
    assert mean.shape == (n,) and np.all(std >= 0)
