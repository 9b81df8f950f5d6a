"""Compile fastgp's Numba routines once and cache them, so that no later
process compiles:

    python -m fastgp.precompile

Run it once after ``pip install`` on a shared install (a virtual environment
or image that users cannot write): it fills the in-tree cache, the
``__pycache__`` folders beside the installed ``fastgp/_engine`` sources, which
every user's process then reads. Run it as the account that installed fastgp,
without ``NUMBA_CACHE_DIR`` (Numba writes to ``NUMBA_CACHE_DIR`` first when it
is set), on the kind of CPU the users run on (Numba's cache entries are keyed
by the host CPU).

It runs small fits and predictions of :class:`~fastgp.GaussianProcessRegressor`
and :class:`~fastgp.GPLVM` that reach every jitted routine in every array
layout the estimators pass, compiles every leaf kernel's code (a fit compiles
only the leaves of its kernel), checks that each routine of ``fastgp._engine`` was
compiled or loaded, and prints where the machine code went and how long it
took. Exit status 0 when every routine was compiled or found in a cache and
the cache could be written, 1 otherwise.
"""

import argparse
import importlib
import pkgutil
import sys
import time
import warnings

import numpy as np
from sklearn.exceptions import ConvergenceWarning
from sklearn.gaussian_process.kernels import RBF, DotProduct, WhiteKernel
from sklearn.gaussian_process.kernels import ConstantKernel as C

from . import _engine
from ._engine import config
from ._engine.interpreter import engine_table
from ._backend.covariance import make_covariance
from .gplvm import GPLVM
from .regressor import GaussianProcessRegressor
from ._solvers.vecchia.ordering import maxmin_order


def engine_routines():
    """Every jitted routine of ``fastgp._engine``, as {"module.name": dispatcher}."""
    routines = {}
    for info in pkgutil.iter_modules(_engine.__path__, _engine.__name__ + "."):
        module = importlib.import_module(info.name)
        for name, obj in vars(module).items():
            if config.is_routine(obj) and obj.__module__ == module.__name__:
                routines[f"{module.__name__}.{name}"] = obj
    return routines


def _exercise_regressor(rng):
    """Fit with each solver, predict (mean, std, covariance), sample and
    evaluate the likelihood with its gradient, on several queries and on one point: a
    one-row array is both C- and F-contiguous, which Numba types as another
    layout."""
    X = rng.uniform(-2.0, 2.0, size=(24, 2))
    y = np.sin(X[:, 0]) * np.cos(X[:, 1])
    Y = np.column_stack([y, np.cos(X[:, 0])])
    kernel = C(1.0) * RBF([1.0, 1.0]) + WhiteKernel(0.1)
    # every solver: the matrix-free one reaches the product passes, Vecchia's
    # its own passes (packed tiles: a stationary kernel)
    for solver, target in [(solver, target) for solver in ("cholesky", "iterative", "vecchia")
                           for target in (y, Y)]:
        gpr = GaussianProcessRegressor(kernel, random_state=0, solver=solver).fit(X, target)
        for Xq in (X[:5] + 0.1, X[:1] + 0.1):
            gpr.predict(Xq, return_std=True)
            gpr.predict(Xq, return_cov=True)
            gpr.sample_y(Xq, 2, random_state=0)
        gpr.log_marginal_likelihood(gpr.kernel_.theta, eval_gradient=True)
    # the unfitted prior, and a one-point training set
    GaussianProcessRegressor(kernel).predict(X[:1], return_cov=True)
    GaussianProcessRegressor(kernel, optimizer=None).fit(X[:1], y[:1]).predict(
        X[:2], return_std=True)


def _exercise_gplvm(rng):
    """Fit, transform and inverse_transform, on several new rows and on one
    (a training row is placed without any computation)."""
    Y = rng.standard_normal((20, 5))
    gplvm = GPLVM(n_components=2, max_iter=3, random_state=0).fit(Y)
    new = Y[:4] + 0.1 * rng.standard_normal((4, 5))
    for rows in (new, new[:1]):
        latent = gplvm.transform(rows)
        gplvm.inverse_transform(latent, return_std=True)


def _exercise_vecchia(rng):
    """Vecchia's passes in column tiles (a kernel with a dot product), and
    the approximate maxmin ordering's heap phase (more points than its exact
    limit)."""
    X = rng.uniform(-2.0, 2.0, size=(24, 2))
    y = np.sin(X[:, 0]) * np.cos(X[:, 1])
    kernel = C(1.0) * DotProduct(0.5) + RBF(1.0) + WhiteKernel(0.1)
    gpr = GaussianProcessRegressor(kernel, solver="vecchia", n_neighbors=5,
                                   random_state=0).fit(X, y)
    gpr.predict(X[:3] + 0.1, return_std=True)
    maxmin_order(rng.uniform(size=(300, 2)), random_state=0, exact_below=100, base_size=50)


def _exercise_products(rng):
    """The product passes (K V, a cluster worker's rows of it, dK V, the
    bilinear gradient forms, k(X*, X) V) of the matrix-free solver and the
    classifier, through the backend, which
    hands every pass the same array layouts whichever estimator calls it."""
    X = rng.uniform(-2.0, 2.0, size=(24, 2))
    backend = make_covariance(C(1.0) * RBF([1.0, 1.0]) + WhiteKernel(0.1), X)
    theta = backend.kernel.theta
    block = rng.standard_normal((24, 3))
    backend.matmat(theta, block)
    backend.symmetric_rows_product(theta, 0, 1, block)  # a cluster worker's K V
    backend.dmatmat(theta, block[:, 0])
    backend.grad_bilinear(theta, block, block)
    backend.cross_matmat(theta, X[:3] + 0.1, block)


def precompile():
    """Run the workloads; return {"module.name": dispatcher} of every routine."""
    rng = np.random.default_rng(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        _exercise_regressor(rng)
        _exercise_gplvm(rng)
        _exercise_vecchia(rng)
        _exercise_products(rng)
    engine_table()  # every leaf's entry: a fit compiles only its kernel's leaves
    return engine_routines()


def main(argv=None):
    parser = argparse.ArgumentParser(
        prog="python -m fastgp.precompile",
        description="Compile fastgp's Numba routines once and cache them on disk.")
    parser.parse_args(argv)
    start = time.perf_counter()
    routines = precompile()
    elapsed = time.perf_counter() - start
    compiled = sum(sum(d.stats.cache_misses.values()) for d in routines.values())
    loaded = sum(sum(d.stats.cache_hits.values()) for d in routines.values())
    print(f"fastgp.precompile: {len(routines)} routines; {compiled} specialisations "
          f"compiled, {loaded} loaded from the cache, in {elapsed:.1f} s")
    directories = {config.cache_directory(d) for d in routines.values()}
    print("cache: " + ", ".join(sorted(str(d) for d in directories if d is not None)))
    status = 0
    missing = sorted(name for name, d in routines.items()
                     if not d.signatures and not config.cached_signatures(d))
    if missing:
        print("not reached by the workloads (they compile on first use): "
              + ", ".join(missing), file=sys.stderr)
        status = 1
    if None in directories:
        print("no writable cache location for some routines, so they were compiled "
              "in memory only: see the NumbaCacheWarning above", file=sys.stderr)
        status = 1
    return status


if __name__ == "__main__":
    sys.exit(main())
