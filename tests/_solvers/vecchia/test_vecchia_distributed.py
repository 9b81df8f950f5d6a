"""Vecchia's passes on joblib's workers (fastgp._solvers.vecchia.distributed):
the groups of blocks give the in-process pass's bits, the rows travel to
each worker once per layout, and a dask.distributed cluster started here
fits the in-process model bit for bit."""

import os

import joblib
import numpy as np
import pytest
from sklearn.gaussian_process.kernels import Matern, WhiteKernel
from sklearn.gaussian_process.kernels import ConstantKernel as C

from fastgp import GaussianProcessRegressor
from fastgp._solvers import workers
from fastgp._solvers.vecchia import distributed as vd

KERNEL = C(1.0) * Matern(0.3, nu=1.5) + WhiteKernel(0.01)


def _data(n, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.uniform(0.0, 1.0, size=(n, 2))
    y = np.sin(6 * X[:, 0]) * np.cos(4 * X[:, 1]) + 0.1 * rng.standard_normal(n)
    return X, y


def _objective(X, y, n_neighbors=8):
    from fastgp._backend.covariance import make_covariance
    from fastgp._solvers.choice import make_solver

    params = GaussianProcessRegressor(KERNEL, solver="vecchia",
                                      n_neighbors=n_neighbors).get_params()
    solver = make_solver("vecchia", params)
    covariance = make_covariance(KERNEL, X)
    return solver.objective(covariance, y[:, None], np.full(len(y), 1e-10),
                            solver.draw(np.random.RandomState(0)))


def test_groups_of_blocks_on_workers_give_the_in_process_bits(monkeypatch):
    X, y = _data(3000)
    objective = _objective(X, y)
    sums = objective._sums
    theta = KERNEL.theta + 0.2
    here_value, here_grad = objective(theta)
    here_dual = sums.dual(theta)[0]
    assert len(sums.groups) == vd.TASKS and sums.n_blocks > vd.TASKS

    monkeypatch.setattr(vd, "tasks_on_workers", lambda: True)
    with joblib.parallel_config(backend="threading", n_jobs=2):
        value, grad = objective(theta)
        dual = sums.dual(theta)[0]
        traffic = sums.dispatcher.traffic
        # the rows went with the first call's tasks only
        assert traffic.calls == 2 and traffic.tasks == 2 * vd.TASKS
        assert traffic.inputs_sent == vd.TASKS and traffic.resent == 0
        # a worker that lost them (restarted) gets them again
        with workers._FITS_LOCK:
            workers._FITS.pop(sums.dispatcher.token)
        again = objective(theta)
        assert sums.dispatcher.traffic.resent == vd.TASKS
    assert value == here_value
    np.testing.assert_array_equal(grad, here_grad)
    np.testing.assert_array_equal(dual, here_dual)
    assert again[0] == here_value


def test_a_pass_stays_in_process_without_a_cluster_backend(monkeypatch):
    X, y = _data(400)
    objective = _objective(X, y)
    monkeypatch.setattr(objective._sums.dispatcher, "map",
                        lambda *args: pytest.fail("sent to workers"))
    with joblib.parallel_config(backend="loky"):
        value, _ = objective(KERNEL.theta)
    assert np.isfinite(value)


@pytest.mark.slow
def test_a_dask_cluster_fits_the_in_process_model(ledger):
    distributed = pytest.importorskip("distributed")  # in the test extra
    X, y = _data(2000)
    X_query = X[:40] + 0.01
    params = dict(kernel=KERNEL, solver="vecchia", n_neighbors=10, random_state=0)
    local = GaussianProcessRegressor(**params).fit(X, y)
    local_mean, local_std = local.predict(X_query, return_std=True)

    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=None) as cluster, \
            distributed.Client(cluster) as client:
        with distributed.get_task_stream(client) as stream, \
                joblib.parallel_config(backend="dask"):
            remote = GaussianProcessRegressor(**params).fit(X, y)
        counts = client.run(workers.worker_counts)
        worker_pids = client.run(os.getpid)
    mean, std = remote.predict(X_query, return_std=True)

    np.testing.assert_array_equal(remote.kernel_.theta, local.kernel_.theta)
    assert remote.log_marginal_likelihood_value_ == local.log_marginal_likelihood_value_
    np.testing.assert_array_equal(remote.alpha_, local.alpha_)
    np.testing.assert_array_equal(mean, local_mean)
    np.testing.assert_array_equal(std, local_std)
    tasks = [task for task in stream.data if "_run_task" in task["key"]]
    assert {task["worker"] for task in tasks} == set(worker_pids)
    for count in counts.values():
        assert count["tasks"] > 0 and count["inputs_received"] >= 1
