"""The matrix-free solver's products on joblib's workers
(fastgp._solvers.iterative.distributed): the in-process products' bits from any
blocking, the training inputs sent once per fit, the products kept in
process without a cluster backend, and a dask.distributed cluster started
here that runs fastgp's tasks and gives the local run's likelihood, gradient
and predictions."""

import os

import joblib
import numpy as np
import pytest
from sklearn.gaussian_process.kernels import RBF, WhiteKernel
from sklearn.gaussian_process.kernels import ConstantKernel as C

from fastgp import GaussianProcessRegressor
from fastgp._solvers import workers
from fastgp._solvers.iterative import distributed as dp
from fastgp._backend.covariance import make_covariance
from fastgp._solvers.iterative.objective import IterativeNegLogMarginalLikelihood
from fastgp._solvers.iterative.system import SolverOptions


def _problem(n=300, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.uniform(0, 5, (n, 2))
    y = np.sin(X[:, 0]) * np.cos(X[:, 1]) + 0.1 * rng.standard_normal(n)
    # WhiteKernel: the diagonal of every row block must be found
    return X, y, C(1.3) * RBF([1.0, 0.7]) + WhiteKernel(0.05)


@pytest.fixture(scope="module")
def backend():
    X, _, kernel = _problem()
    return make_covariance(kernel, X)


def _operands(n, seed=1):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal((n, 5)), rng.standard_normal((n, 4)),
            rng.standard_normal((n, 4)), rng.uniform(0, 5, (70, 2)))


def test_row_blocks_and_column_block_groups_give_the_whole_products_bits(backend):
    theta = backend.kernel.theta
    n = backend.X.shape[0]
    V, P, Q, _ = _operands(n)
    whole = backend.matmat(theta, V)
    d_whole = backend.dmatmat(theta, V)
    bounds = dp.row_blocks(n, 37)  # a ragged last block
    assert bounds[0] == 0 and bounds[-1] == n and np.all(np.diff(bounds) > 0)
    # K V: each group of the symmetric product's row blocks, computed alone,
    # gives those rows' bits (their share of every round replayed in order)
    pair_bounds, rounds = backend.pair_schedule()
    assert pair_bounds.size - 1 >= 2 and rounds.shape == (pair_bounds.size - 2,
                                                           (pair_bounds.size - 1) // 2, 2)
    for groups in (1, 3, pair_bounds.size - 1):
        rows = [backend.symmetric_rows_product(theta, a, b, V)
                for a, b in dp._group_column_blocks(pair_bounds, groups)]
        np.testing.assert_array_equal(np.concatenate(rows), whole)
    # the row pass (dmatmat's, and k(X*, X) V's) agrees to rounding
    rows = [backend.rows_product(theta, a, b, 0, V)[0] for a, b in zip(bounds[:-1], bounds[1:])]
    np.testing.assert_allclose(np.concatenate(rows), whole, rtol=1e-13, atol=1e-13)
    d_rows = [backend.rows_product(theta, a, b, backend.n_theta, V)
              for a, b in zip(bounds[:-1], bounds[1:])]
    np.testing.assert_array_equal(np.concatenate(d_rows, axis=1), d_whole)
    groups = dp._group_column_blocks(backend.bounds, 7)
    assert groups[0][0] == 0 and groups[-1][1] == backend.bounds.size - 1
    assert all(a == b for (_, a), (b, _) in zip(groups[:-1], groups[1:]))
    S = np.asfortranarray(P[:, :2])
    parts = [backend.bilinear_partials(theta, P, Q, a, b, S, -2.0) for a, b in groups]
    np.testing.assert_array_equal(np.concatenate(parts).sum(axis=0),
                                  backend.grad_bilinear(theta, P, Q, S, -2.0))


def test_worker_products_give_the_in_process_bits_and_send_the_inputs_once(backend):
    theta = backend.kernel.theta
    n = backend.X.shape[0]
    V, P, Q, Xq = _operands(n)
    alpha = np.full(n, 1e-3)
    products = dp.WorkerProducts(backend, block_rows=64, always=True)
    sent = workers.calls_sent()
    with joblib.parallel_config(backend="threading", n_jobs=2):
        got = products.matmat(theta, V, diag_add=alpha)
        # K V's tasks: groups of the symmetric product's row blocks (two at
        # n = 300), at most one per row block of block_rows
        kv_tasks = len(products._pair_block_groups)
        assert kv_tasks == min(5, backend.pair_schedule()[0].size - 1) == 2
        assert products.traffic.inputs_sent == products.traffic.tasks == kv_tasks
        np.testing.assert_array_equal(got, backend.matmat(theta, V, diag_add=alpha))
        np.testing.assert_array_equal(products.matmat(theta, V[:, 0]),
                                      backend.matmat(theta, V[:, 0]))
        np.testing.assert_array_equal(products.dmatmat(theta, V), backend.dmatmat(theta, V))
        np.testing.assert_array_equal(products.dmatmat(theta, V[:, 1]),
                                      backend.dmatmat(theta, V[:, 1]))
        np.testing.assert_array_equal(products.grad_bilinear(theta, P, Q, P[:, :2], 3.0),
                                      backend.grad_bilinear(theta, P, Q, P[:, :2], 3.0))
        np.testing.assert_array_equal(products.cross_matmat(theta, Xq, V),
                                      backend.cross_matmat(theta, Xq, V))
        traffic = products.traffic
        assert traffic.inputs_sent == kv_tasks and traffic.resent == 0  # the first product's
        assert traffic.calls == 6 and traffic.tasks == 2 * kv_tasks + 3 * 5 + 2
        # what a fit's clock reads to leave the workers' start out
        assert workers.calls_sent() == sent + traffic.calls
        # per row product: V to every task, K V's rows back
        assert traffic.bytes_back >= 4 * V.nbytes
        # a worker process that lost the inputs (restarted) gets them again
        with workers._FITS_LOCK:
            workers._FITS.pop(products.token)
        np.testing.assert_array_equal(products.matmat(theta, V), backend.matmat(theta, V))
        assert products.traffic.resent == kv_tasks
        assert products.traffic.inputs_sent == 2 * kv_tasks


def test_worker_processes_keep_the_inputs_of_a_few_fits_only(backend):
    theta = backend.kernel.theta
    V = np.ones((backend.X.shape[0], 1))
    with joblib.parallel_config(backend="threading", n_jobs=1):
        fits = [dp.WorkerProducts(backend, always=True) for _ in range(dp.CACHED_FITS + 2)]
        for products in fits:
            products.matmat(theta, V)
    held = set(workers._FITS)
    assert {p.token for p in fits[-dp.CACHED_FITS:]} <= held
    assert not {p.token for p in fits[:2]} & held


def test_products_stay_in_process_unless_a_cluster_backend_is_active(backend, monkeypatch):
    assert not dp.products_in_workers()
    for name in ("loky", "threading", "sequential", "multiprocessing"):
        with joblib.parallel_config(backend=name):
            assert not dp.products_in_workers(), name

    class ClusterBackend(joblib.parallel.ParallelBackendBase):
        """Stands for dask's or ray's backend (tasks on other machines)."""

        def effective_n_jobs(self, n_jobs):
            return 2

    joblib.register_parallel_backend("fastgp-test-cluster", ClusterBackend)
    with joblib.parallel_config(backend="fastgp-test-cluster"):
        assert dp.products_in_workers()

    products = dp.for_fit(backend)
    assert isinstance(products, dp.WorkerProducts) and dp.for_fit(products) is products
    dispatched = []
    monkeypatch.setattr(dp.WorkerProducts, "_dispatch",
                        lambda *args: dispatched.append(args) or [])
    products.matmat(backend.kernel.theta, np.ones(backend.X.shape[0]))
    assert dispatched == []  # no backend configured: Numba threads here


def _objective(covariance, y):
    return IterativeNegLogMarginalLikelihood(covariance, y, np.full(len(y), 1e-10),
                                             SolverOptions(preconditioner_rank=20), seed=5)


@pytest.mark.slow
def test_a_dask_cluster_runs_the_products_and_gives_the_local_run(ledger):
    distributed = pytest.importorskip("distributed")  # in the test extra
    X, y, kernel = _problem(n=240)
    theta = kernel.theta + 0.1
    local_value, local_grad = _objective(make_covariance(kernel, X), y)(theta)
    gpr = dict(kernel=kernel, solver="iterative", optimizer=None, random_state=0,
               preconditioner_rank=20)
    local = GaussianProcessRegressor(**gpr).fit(X, y)
    X_query = X[:50] + 0.05
    local_mean, local_std = local.predict(X_query, return_std=True)
    local_lml = local.log_marginal_likelihood(theta, eval_gradient=True)

    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=None) as cluster, \
            distributed.Client(cluster) as client:
        with distributed.get_task_stream(client) as stream, \
                joblib.parallel_config(backend="dask"):
            objective = _objective(make_covariance(kernel, X), y)
            value, grad = objective(theta)
            remote = GaussianProcessRegressor(**gpr).fit(X, y)
            mean, std = remote.predict(X_query, return_std=True)
            lml = remote.log_marginal_likelihood(theta, eval_gradient=True)
        counts = client.run(dp.worker_counts)
        worker_pids = client.run(os.getpid)

    # the local run's bits: the same blocks, summed in the same order (below
    # 256 samples this process's BLAS runs on one thread, so CG's own
    # arithmetic is the same bits too)
    assert value == local_value
    np.testing.assert_array_equal(grad, local_grad)
    np.testing.assert_array_equal(mean, local_mean)
    np.testing.assert_array_equal(std, local_std)
    assert lml[0] == local_lml[0]
    np.testing.assert_array_equal(lml[1], local_lml[1])

    # the cluster's two worker processes ran fastgp's tasks
    tasks = [task for task in stream.data if "_run_task" in task["key"]]
    assert {task["worker"] for task in tasks} == set(worker_pids)
    assert len(worker_pids) == 2 and os.getpid() not in worker_pids.values()
    traffic = objective.covariance.traffic
    # K V: one task per row block of the symmetric product (two at n = 240);
    # the gradient pass: 8 groups of column blocks
    kv_tasks = len(objective.covariance._pair_block_groups)
    assert kv_tasks == 2 and traffic.tasks >= traffic.calls * kv_tasks > 0
    # the objective's inputs went with its first product only; each worker
    # took them once per fit (objective, fit, prediction's system,
    # log_marginal_likelihood's objective: at most four)
    assert traffic.inputs_sent == kv_tasks + traffic.resent
    for count in counts.values():
        assert count["tasks"] > 0
        assert 1 <= count["inputs_received"] <= 4


@pytest.mark.slow
def test_distributed_benchmark_runs_at_a_tiny_n(tmp_path, capsys):
    import json
    import sys
    from pathlib import Path

    pytest.importorskip("distributed")
    sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
    from bench import bench_distributed

    out = tmp_path / "distributed.json"
    assert bench_distributed.main(["--n", "200", "--repeats", "1", "--rank", "10",
                                   "--out", str(out)]) == 0
    doc = json.loads(out.read_text())
    assert doc["same_bits"] and doc["relative_gap"] == 0.0
    moved = doc["per_cg_iteration"]
    # V out to the tasks and K V back, at least once each on dask's connections
    assert moved["workers_wrote"] + moved["caller_wrote"] >= 2 * doc["V_bytes"]
    # 2 row blocks at N = 200; a task that lands on a worker without the
    # fit's inputs answers None and is sent again with them, so a loaded
    # machine may run more tasks (and the measured product may be the first
    # to reach a worker), but each worker keeps the inputs once per fit,
    # whatever the number of products
    assert moved["tasks"] >= 2
    assert moved["inputs_sent"] == moved["resent"]
    workers = moved["worker_counts"].values()
    assert sum(count["inputs_received"] for count in workers) <= doc["workers"]
    assert "same bits as in process: yes" in capsys.readouterr().out
