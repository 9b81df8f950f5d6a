"""OpenBLAS's spinning workers are released between LAPACK and the Numba
pass (fastgp._linalg.blas_pool): the workers really go, they come back for the next
call with the same results, nothing is released while another Python
thread could be inside the library, and the objectives release them after
their inverse, right before their gradient pass
(fastgp._linalg.lapack.release_blas_before_pass)."""

import os
import subprocess
import sys
import textwrap
import threading

import numpy as np
import pytest
from sklearn.gaussian_process.kernels import RBF, WhiteKernel

from fastgp._linalg import blas_pool
from fastgp._linalg.blas_pool import RELEASE_ENV, release_blas_workers
from fastgp._backend.covariance import make_covariance
from fastgp._solvers.cholesky import laplace
from fastgp._solvers.cholesky import objective as cholesky_objective
from fastgp._solvers.workspace import Workspace
from fastgp._solvers.cholesky.objective import NegLogMarginalLikelihood

# a pthreads OpenBLAS's thread count, a task counter and an SPD matrix
_CHILD_START = textwrap.dedent("""
    import os, sys
    import numpy as np
    from scipy.linalg import lapack
    from threadpoolctl import threadpool_info
    from fastgp._linalg.blas_pool import release_blas_workers

    def tasks():
        return len(os.listdir("/proc/self/task"))

    pools = [i["num_threads"] for i in threadpool_info()
             if i["internal_api"] == "openblas" and i["threading_layer"] == "pthreads"]
    rng = np.random.default_rng(0)
    G = rng.standard_normal((600, 600))
    K = G @ G.T + 600 * np.eye(600)
""")

_CHILD = _CHILD_START + textwrap.dedent("""
    first = lapack.dpotrf(K, lower=1)[0]
    before = tasks()
    released = release_blas_workers()
    after = tasks()
    again = lapack.dpotrf(K, lower=1)[0]
    print(max(pools, default=0), released, before, after, tasks(),
          bool(np.array_equal(first, again)))
""")


@pytest.mark.skipif(not os.path.isdir("/proc/self/task"), reason="needs Linux's /proc")
def test_release_joins_the_workers_and_the_next_call_restarts_them():
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "2"}
    env.pop(RELEASE_ENV, None)
    out = subprocess.run([sys.executable, "-c", _CHILD], env=env, check=True,
                         capture_output=True, text=True).stdout.split()
    pool, released, before, after, restarted, same = out
    if int(pool) < 2:
        pytest.skip("no pthreads OpenBLAS with two threads here: nothing to release")
    assert released == "True"
    assert int(after) < int(before)  # the workers are gone
    assert int(restarted) > int(after)  # and back for the next threaded call
    assert same == "True"


_CHILD_FIT_START = _CHILD_START + textwrap.dedent("""
    from fastgp._engine.threads import SERIAL_BELOW, threads_for
    from fastgp._linalg.tiles import run_tiles, set_width
    previous = set_width(2)  # start the tile pool's threads, as a fit does
    run_tiles([lambda: None] * 4)
    set_width(previous)
    lapack.dpotrf(K, lower=1)  # the caller's threaded call: workers spinning
    before = tasks()
    with threads_for(SERIAL_BELOW):
        inside = tasks()
    lapack.dpotrf(K, lower=1)
    released_beside_idle_tiles = release_blas_workers()
    print(max(pools, default=0), before, inside, released_beside_idle_tiles)
""")


@pytest.mark.skipif(not os.path.isdir("/proc/self/task"), reason="needs Linux's /proc")
def test_a_fit_starts_with_the_workers_released_beside_the_idle_tile_threads():
    """Workers left spinning by the caller's own threaded call are gone when
    a fit starts, although the tile pool's (idle) threads are alive."""
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "2"}
    env.pop(RELEASE_ENV, None)
    out = subprocess.run([sys.executable, "-c", _CHILD_FIT_START], env=env, check=True,
                         capture_output=True, text=True).stdout.split()
    pool, before, inside, released = out
    if int(pool) < 2:
        pytest.skip("no pthreads OpenBLAS with two threads here: nothing to release")
    assert int(inside) < int(before)
    assert released == "True"


def test_nothing_is_released_while_a_second_fit_is_in_progress(monkeypatch):
    """With two fits entered (another thread's among them), nothing is
    released even where no other Python thread is visible."""
    from fastgp._linalg import blas_threads

    monkeypatch.setattr(blas_threads, "_users", 2)
    assert release_blas_workers() is False


def test_nothing_is_released_while_another_python_thread_lives():
    stop = threading.Event()
    other = threading.Thread(target=stop.wait)
    other.start()
    try:
        assert release_blas_workers() is False
    finally:
        stop.set()
        other.join()


def test_the_environment_switch_turns_it_off(monkeypatch):
    monkeypatch.setenv(RELEASE_ENV, "0")
    assert release_blas_workers() is False


def test_the_objective_gives_the_same_bits_with_and_without_the_release(monkeypatch, rng):
    n = 400
    X = rng.uniform(-2, 2, size=(n, 1))
    y = np.sin(3 * X[:, 0]) + 0.1 * rng.standard_normal(n)
    kernel = RBF(0.7) + WhiteKernel(0.05)
    objective = NegLogMarginalLikelihood(make_covariance(kernel, X), y[:, None],
                                         np.full(n, 1e-10), Workspace(n))
    results = []
    for setting in ("1", "0", "1"):
        monkeypatch.setenv(RELEASE_ENV, setting)
        value, grad = objective(kernel.theta)
        results.append((value, grad.copy()))
    for value, grad in results[1:]:
        assert value == results[0][0]
        np.testing.assert_array_equal(grad, results[0][1])


def _laplace_objective(rng, n):
    X = rng.uniform(-2, 2, size=(n, 1))
    y = (np.sin(3 * X[:, 0]) + 0.3 * rng.standard_normal(n) > 0).astype(float)
    return laplace.LaplaceObjective(make_covariance(RBF(0.7), X), y, Workspace(n))


def _regression_objective(rng, n):
    X = rng.uniform(-2, 2, size=(n, 1))
    y = np.sin(3 * X[:, 0]) + 0.1 * rng.standard_normal(n)
    return NegLogMarginalLikelihood(make_covariance(RBF(0.7) + WhiteKernel(0.05), X),
                                    y[:, None], np.full(n, 1e-10), Workspace(n))


@pytest.mark.parametrize("module, make", [(laplace, _laplace_objective),
                                          (cholesky_objective, _regression_objective)],
                         ids=["laplace", "regression"])
def test_objectives_release_the_workers_after_the_inverse_before_the_pass(
        monkeypatch, rng, module, make):
    """Between the objective's dpotri and its gradient pass, OpenBLAS's
    workers are released, after every BLAS call in between (the Laplace
    objective's dsymv), so that they do not spin through the pass."""
    events = []

    def recorded(name, call):
        def wrapper(*args, **kwargs):
            events.append(name)
            return call(*args, **kwargs)
        return wrapper

    monkeypatch.setattr(blas_pool, "release_blas_workers",
                        recorded("release", blas_pool.release_blas_workers))
    monkeypatch.setattr(module, "cho_inverse_in_place",
                        recorded("inverse", module.cho_inverse_in_place))
    if hasattr(module, "symmetric_matvec"):
        monkeypatch.setattr(module, "symmetric_matvec",
                            recorded("blas", module.symmetric_matvec))
    instance = make(rng, 60)
    covariance = instance.covariance
    monkeypatch.setattr(covariance, "grad_trace", recorded("pass", covariance.grad_trace))
    value, grad = instance(covariance.kernel.theta)
    assert np.isfinite(value) and np.all(np.isfinite(grad))
    assert events.count("inverse") == events.count("pass") == 1
    inverse, gradient_pass = events.index("inverse"), events.index("pass")
    assert inverse < gradient_pass
    # the last call before the pass is the release, after the inverse
    assert events[gradient_pass - 1] == "release", events


def test_a_library_that_cannot_be_opened_does_not_hide_the_next(monkeypatch, tmp_path):
    """Each loaded pthreads OpenBLAS is looked at in turn: one whose file
    cannot be opened is passed over, and the next still gives its routine."""
    import threadpoolctl

    from fastgp._linalg import blas_pool

    real = [info for info in threadpoolctl.threadpool_info()
            if info.get("internal_api") == "openblas"
            and info.get("threading_layer") == "pthreads"]
    if not real:
        pytest.skip("no pthreads OpenBLAS loaded here")
    missing = dict(real[0], filepath=str(tmp_path / "libopenblas_missing.so"))
    monkeypatch.setattr(threadpoolctl, "threadpool_info", lambda: [missing, *real])
    found = blas_pool._find_shutdown_routines()
    assert len(found) == len(real) >= 1
