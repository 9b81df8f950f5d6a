"""
====================================================
The matrix-free solver's products on a dask cluster
====================================================

With ``solver="iterative"`` a fit's time goes into products of the kernel
matrix with a few vectors, N^2 kernel entries each (see
:ref:`sphx_glr_auto_examples_plot_iterative.py`). Under a joblib backend
whose workers may be other machines, dask's or ray's, those products run on
the workers as tasks over fixed blocks of rows; the rest of the fit stays in
your process. The training inputs go to each worker once per fit; every
conjugate-gradient iteration sends the current vectors and receives the
product (:doc:`/cluster`).

The blocks are a function of N alone and every sum is taken in the order of
the in-process products, so the cluster fit is the local fit, bit for bit.
This example shows it on a ``LocalCluster`` of two workers. Here they are
threads of this process, so that the example builds anywhere; on a real
cluster they are processes on other machines (``Client("tcp://...")``), and
nothing else changes.
"""

# %%
import time

import joblib
import matplotlib.pyplot as plt
import numpy as np
from dask.distributed import Client, LocalCluster
from sklearn.gaussian_process.kernels import RBF, WhiteKernel
from sklearn.gaussian_process.kernels import ConstantKernel as C

from fastgp import GaussianProcessRegressor
from fastgp._solvers.iterative.distributed import worker_counts

rng = np.random.default_rng(0)
n = 2000
X = rng.uniform(0, 10, (n, 1))
y = np.sin(X[:, 0]) + 0.3 * np.cos(3 * X[:, 0]) + 0.1 * rng.standard_normal(n)
kernel = C(1.0) * RBF(1.0) + WhiteKernel(0.1)


def fit():
    start = time.perf_counter()
    gpr = GaussianProcessRegressor(kernel, solver="iterative", random_state=0).fit(X, y)
    return gpr, time.perf_counter() - start


# %%
# The fit in this process: the products run on Numba's threads.
local, local_s = fit()
print(f"in process: {local_s:.1f} s, {local.kernel_}")

# %%
# The same fit with the products on the cluster's workers. Everything under
# ``joblib.parallel_config(backend="dask")`` sends its products to the
# client's workers: the fit, and ``predict`` below it.
with LocalCluster(n_workers=2, threads_per_worker=1, processes=False,
                  dashboard_address=None) as cluster, Client(cluster) as client:
    before = client.run(worker_counts)
    with joblib.parallel_config(backend="dask"):
        remote, remote_s = fit()
        X_new = np.linspace(0, 10, 200).reshape(-1, 1)
        mean_remote, std_remote = remote.predict(X_new, return_std=True)
    after = client.run(worker_counts)

print(f"on the cluster: {remote_s:.1f} s, {remote.kernel_}")
# the two workers are threads of this process here, so they share one count
first = next(iter(after))
print("product tasks run on the workers:", after[first]["tasks"] - before[first]["tasks"],
      "; training inputs received:",
      after[first]["inputs_received"] - before[first]["inputs_received"])

# %%
# The same hyperparameters, likelihood and predictions, to the last bit.
mean_local, std_local = local.predict(X_new, return_std=True)
print("same theta:", np.array_equal(local.kernel_.theta, remote.kernel_.theta))
print("same log marginal likelihood:",
      local.log_marginal_likelihood_value_ == remote.log_marginal_likelihood_value_)
print("same predictions:", np.array_equal(mean_local, mean_remote)
      and np.array_equal(std_local, std_remote))

fig, ax = plt.subplots(figsize=(7, 3.5))
ax.plot(X[::10, 0], y[::10], "k.", ms=2, label="every 10th point")
ax.plot(X_new[:, 0], mean_remote, label="mean, products on the cluster")
ax.fill_between(X_new[:, 0], mean_remote - 1.96 * std_remote,
                mean_remote + 1.96 * std_remote, alpha=0.2, label="95 % band")
ax.plot(X_new[:, 0], mean_local, "--", label="mean, products in process")
ax.legend(loc="lower left", fontsize=8)
ax.set_title("one fit, two places to compute its products")
fig.tight_layout()
plt.show()

# %%
# On two threads of one machine the cluster only adds the cost of moving the
# vectors; a cluster pays off when each worker is a machine of its own and N
# is large (docs/benchmarks.md, "Which solver when", has the time per
# product against the in-process path and a scaling model up to a million
# points).
