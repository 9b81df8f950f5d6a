"""
==========================================
Optimiser restarts on several cores
==========================================

The log marginal likelihood of a GP can have several optima: a long length
scale with much noise (the data are "all noise") and a short one that follows
the signal, say. ``n_restarts_optimizer`` runs the optimiser again from
random starts within the kernel's bounds and keeps the best run; with
``n_jobs`` those runs execute at once, as joblib tasks.

The result is the sequential fit's, whatever ``n_jobs`` and wherever the runs
execute (loky worker processes by default, threads, or a dask cluster's
workers with ``joblib.parallel_config(backend="dask")``, see :doc:`/cluster`):
every starting point is drawn in the calling process from ``random_state``
before anything is dispatched, and the best run is chosen the same way.

Every run holds its own N x N buffer, and each reserves it in the machine's
memory budget before allocating (:doc:`/reliability`): where two buffers do not
fit at once, the second run waits for the first instead of both being killed.
``FASTGP_MEMORY_LIMIT=12GiB`` caps what all fastgp processes on the machine
may use together.
"""

# %%
import time

import joblib
import matplotlib.pyplot as plt
import numpy as np
from sklearn.gaussian_process.kernels import RBF, WhiteKernel
from sklearn.gaussian_process.kernels import ConstantKernel as C

from fastgp import GaussianProcessRegressor

rng = np.random.default_rng(0)
X = np.sort(rng.uniform(0, 10, 300))[:, None]
y = np.sin(2 * X[:, 0]) + 0.3 * rng.standard_normal(300)
kernel = C(1.0) * RBF(50.0, length_scale_bounds=(1e-2, 1e3)) + WhiteKernel(1.0)

# Threads suit fastgp: its passes and LAPACK release the GIL, and starting
# them costs nothing. Without ``parallel_config`` joblib's default, loky worker
# processes, runs them (which first start and import fastgp: seconds).
fits, seconds = {}, {}
for n_jobs in (1, 2):
    start = time.perf_counter()
    with joblib.parallel_config(backend="threading"):
        fits[n_jobs] = GaussianProcessRegressor(kernel, n_restarts_optimizer=3,
                                                random_state=0, n_jobs=n_jobs).fit(X, y)
    seconds[n_jobs] = time.perf_counter() - start

for n_jobs, gpr in fits.items():
    print(f"n_jobs={n_jobs}: {seconds[n_jobs]:.2f} s, {gpr.kernel_}, "
          f"log marginal likelihood {gpr.log_marginal_likelihood_value_:.6f}")
print("same hyperparameters, bit for bit:",
      np.array_equal(fits[1].kernel_.theta, fits[2].kernel_.theta))

# %%
# On a problem this small the four runs take a second and the parallel fit
# gains little; at N = 2,000 the runs dominate (``python -m
# bench.bench_restarts``). The fitted model does not depend on ``n_jobs``:

X_plot = np.linspace(0, 10, 400)[:, None]
fig, ax = plt.subplots(figsize=(8, 3.5))
ax.scatter(X[:, 0], y, s=6, color="0.6", label="data")
for n_jobs, style in ((1, "-"), (2, "--")):
    mean, std = fits[n_jobs].predict(X_plot, return_std=True)
    ax.plot(X_plot[:, 0], mean, style, lw=2, label=f"mean, n_jobs={n_jobs}")
ax.fill_between(X_plot[:, 0], mean - 2 * std, mean + 2 * std, alpha=0.2,
                label="95 % band")
ax.set_xlabel("x")
ax.set_ylabel("y")
ax.legend(loc="upper right", fontsize=8)
fig.tight_layout()

# %%
# ``n_jobs=None`` takes the number of a ``joblib.parallel_config``, as
# scikit-learn's estimators do, so a pipeline's configuration reaches the fit:

with joblib.parallel_config(backend="threading", n_jobs=2):
    configured = GaussianProcessRegressor(kernel, n_restarts_optimizer=3,
                                          random_state=0).fit(X, y)
print("the configured fit is the same:",
      np.array_equal(configured.kernel_.theta, fits[1].kernel_.theta))
