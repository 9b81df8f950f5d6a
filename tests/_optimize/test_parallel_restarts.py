"""Optimiser restarts through joblib (fastgp._optimize.workers): the sequential fit's
result whatever n_jobs and backend (loky, threading, a dask.distributed
cluster started here), one reservation per run that executes at once, and a
refusal before dispatch of what could never fit."""

import os
import threading

import joblib
import numpy as np
import pytest
from sklearn.gaussian_process.kernels import RBF, WhiteKernel
from sklearn.gaussian_process.kernels import ConstantKernel as C

from fastgp import GaussianProcessRegressor
from fastgp._optimize import workers as restarts
from fastgp.memory import ledger as mb
from fastgp.memory import fit_bytes
from fastgp.exceptions import InsufficientMemoryError

FITTED = ("L_", "alpha_", "log_marginal_likelihood_value_", "n_iter_", "n_evaluations_",
          "jitter_")


def _problem(n=120):
    # below the serial threshold (256): every run is on one BLAS thread
    # wherever it runs, so the results must be the same bits
    rng = np.random.default_rng(3)
    X = rng.uniform(0, 5, (n, 2))
    y = np.sin(X[:, 0]) * np.cos(X[:, 1]) + 0.1 * rng.standard_normal(n)
    return X, y, C() * RBF([1.0, 1.0]) + WhiteKernel()


def _fit(n_jobs, **params):
    X, y, kernel = _problem()
    return GaussianProcessRegressor(kernel, n_restarts_optimizer=3, random_state=7,
                                    n_jobs=n_jobs, **params).fit(X, y)


def _assert_same_fit(got, expected):
    np.testing.assert_array_equal(got.kernel_.theta, expected.kernel_.theta)
    for name in FITTED:
        np.testing.assert_array_equal(getattr(got, name), getattr(expected, name),
                                      err_msg=name)
    # the estimator's random state after the fit too (the starts were drawn
    # in this process, in the sequential fit's order)
    assert got._rng.get_state()[2] == expected._rng.get_state()[2]
    np.testing.assert_array_equal(got._rng.get_state()[1], expected._rng.get_state()[1])


@pytest.fixture(scope="module")
def sequential():
    return _fit(None)


@pytest.mark.parametrize("backend", ["threading",
                                     pytest.param("loky", marks=pytest.mark.slow)])
def test_parallel_restarts_give_the_sequential_fit(ledger, sequential, backend, monkeypatch):
    calls = []
    real = restarts._run_from

    def counted(*args, **kwargs):
        calls.append(1)
        return real(*args, **kwargs)

    if backend == "threading":  # loky's workers import their own copy
        monkeypatch.setattr(restarts, "_run_from", counted)
    with joblib.parallel_config(backend=backend):
        parallel = _fit(2)
    _assert_same_fit(parallel, sequential)
    assert backend == "loky" or len(calls) == 4  # the four runs went to joblib
    with joblib.parallel_config(backend=backend, n_jobs=2):
        configured = _fit(None)  # n_jobs=None takes parallel_config's
    _assert_same_fit(configured, sequential)


def test_parallel_restarts_reserve_each_running_buffer_and_wait_when_the_budget_is_spent(
        ledger, sequential, monkeypatch):
    # room for one run's buffer and a half: the two threads' runs must take
    # turns, and the result is still the sequential fit's
    X, y, _ = _problem()
    one_run = fit_bytes(len(X), 2, 1, 4)
    monkeypatch.setenv(mb.LIMIT_ENV, str(int(1.5 * one_run)))
    live, most, lock = [], [0], threading.Lock()
    real = mb.Reservation.__init__

    class Counted(mb.Reservation):
        def __init__(self, *args, **kwargs):
            real(self, *args, **kwargs)
            with lock:
                live.append(self)
                most[0] = max(most[0], sum(not r.released for r in live))

    monkeypatch.setattr(mb, "Reservation", Counted)
    with joblib.parallel_config(backend="threading"):
        with pytest.warns(mb.MemoryWaitWarning, match=f"pid {os.getpid()}"):
            parallel = _fit(2)
    _assert_same_fit(parallel, sequential)
    assert most[0] == 1  # never two buffers' reservations at once
    assert len(live) == 5  # four runs, then the final factor (kept as L_)


def test_parallel_restarts_refuse_what_could_never_fit_before_dispatching(
        ledger, monkeypatch):
    X, _, _ = _problem()
    monkeypatch.setenv(mb.LIMIT_ENV, str(fit_bytes(len(X), 2, 1, 4) // 2))
    monkeypatch.setattr(restarts, "_run_from", None)  # must not be reached
    with joblib.parallel_config(backend="threading"):
        with pytest.raises(InsufficientMemoryError, match="could not fit even"):
            _fit(2)


@pytest.mark.slow
def test_parallel_restarts_on_a_dask_cluster_give_the_local_fit(ledger, sequential):
    import distributed  # in the test extra
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=None) as cluster, \
            distributed.Client(cluster) as client:
        with distributed.get_task_stream(client) as stream, \
                joblib.parallel_config(backend="dask"):
            remote = _fit(2)
        worker_pids = client.run(os.getpid)
    _assert_same_fit(remote, sequential)
    # the cluster's worker processes ran fastgp's four runs
    tasks = [task for task in stream.data if "_run_from" in task["key"]]
    runs = sum(int(task["key"].split("_calls")[0].rsplit("_", 1)[1]) for task in tasks)
    assert runs == 4
    assert {task["worker"] for task in tasks} <= set(worker_pids)
    assert len(worker_pids) == 2 and os.getpid() not in worker_pids.values()


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_parallel_restarts_benchmark_runs_at_a_tiny_n(ledger, tmp_path, capsys):
    import json
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    from bench import bench_restarts

    out = tmp_path / "restarts.json"
    assert bench_restarts.main(["--n", "60", "--backend", "threading",
                                "--out", str(out)]) == 0
    doc = json.loads(out.read_text())
    assert set(doc["cases"]) == {"1", "2"} and doc["same_optimum"]
    assert "same optimum" in capsys.readouterr().out


def test_parallel_restarts_cap_each_runs_threads_at_its_share_of_the_cores(
        ledger, monkeypatch):
    import numba

    seen = []
    real = restarts.minimize_theta

    def spy(*args, **kwargs):  # the thread count a run's evaluations start with
        seen.append(numba.get_num_threads())
        return real(*args, **kwargs)

    def one_evaluation(obj_func, theta0, bounds):
        return theta0, obj_func(theta0, eval_gradient=False)

    monkeypatch.setattr(restarts, "minimize_theta", spy)
    rng = np.random.default_rng(0)
    X = rng.uniform(0, 5, (300, 1))  # above the serial threshold
    y = np.sin(X[:, 0])
    before = numba.get_num_threads()
    with joblib.parallel_config(backend="threading"):
        GaussianProcessRegressor(RBF() + WhiteKernel(), optimizer=one_evaluation,
                                 n_restarts_optimizer=1, n_jobs=2, random_state=0).fit(X, y)
    share = max(1, len(os.sched_getaffinity(0)) // 2)
    assert seen == [min(numba.config.NUMBA_NUM_THREADS, share)] * 2
    assert numba.get_num_threads() == before


def test_parallel_restarts_go_to_workers_only_with_restarts_and_jobs():
    """joblib only where there is more than one run and more than one job:
    a single run, or a single job, stays in this process."""
    assert restarts.runs_in_workers(n_jobs=2, n_restarts=3)
    assert not restarts.runs_in_workers(n_jobs=2, n_restarts=0)
    assert not restarts.runs_in_workers(n_jobs=1, n_restarts=3)
    with joblib.parallel_config(n_jobs=2):
        assert restarts.runs_in_workers(n_jobs=None, n_restarts=1)
