"""pytest-benchmark suites of bench/
(``python -m pytest bench/suites --benchmark-only``).

The sizes N come from the environment variable FASTGP_BENCH_SIZES
(comma-separated, default "500,1000,2000"), so that the same suites run small
on a laptop and large on a quiet benchmark machine:

    FASTGP_BENCH_SIZES=1000,5000,10000 python -m pytest bench/suites --benchmark-only

The test command (``python -m pytest``) collects only tests/ (pyproject's
testpaths), so these never slow the test suite.
"""

import os

import numpy as np
import pytest

from bench._problems import ALPHA, make_problem


def bench_sizes():
    text = os.environ.get("FASTGP_BENCH_SIZES", "500,1000,2000")
    return [int(float(v)) for v in text.split(",") if v.strip()]


def pytest_generate_tests(metafunc):
    if "n" in metafunc.fixturenames:
        metafunc.parametrize("n", bench_sizes(), ids=lambda n: f"N={n}")


@pytest.fixture(params=["1d", "ard10"])
def regression(request, n):
    """(problem, FastCovariance, NegLogMarginalLikelihood) at theta0, the
    Numba routines already compiled (a small call first)."""
    from fastgp._backend.covariance import make_covariance
    from fastgp._solvers.workspace import Workspace
    from fastgp._solvers.cholesky.objective import NegLogMarginalLikelihood

    def build(size):
        problem = make_problem(request.param, size)
        covariance = make_covariance(problem.kernel, problem.X)
        objective = NegLogMarginalLikelihood(covariance, problem.Y, ALPHA, Workspace(size))
        return problem, covariance, objective

    small_problem, _, small = build(64)
    small(small_problem.theta0)  # compile or load from Numba's cache
    problem, covariance, objective = build(n)
    assert np.isfinite(objective(problem.theta0)[0])
    return problem, covariance, objective
