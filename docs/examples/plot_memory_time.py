"""
======================================================
Memory and time against N: fastgp and scikit-learn
======================================================

One evaluation of the log marginal likelihood and its gradient, the step an
optimiser repeats, for fastgp and scikit-learn at the same hyperparameters,
on a 1-D problem with the kernel ``C * RBF + White`` (3 hyperparameters).
scikit-learn builds the kernel matrix, its (N, N, 3) gradient tensor and an
explicit inverse; fastgp fills one N x N buffer, factors and inverts it in
place and reduces the gradient in one fused pass (:doc:`/design`).

This page measures small N (250 to 1,500) so that it runs in seconds while
the site is built, on whatever machine builds it; the figures are therefore
noisy, and at these sizes time is dominated by fixed costs. The full
comparison, N up to 10,000 with each case in a fresh process and GPy,
GPyTorch and JAX beside scikit-learn, is::

    python -m bench.compare

whose results are in :doc:`/comparison`.

**What is measured.** Peak memory is the peak of the memory allocated
through Python's and NumPy's allocators during one call, above what was
allocated before it, as :mod:`tracemalloc` records it: every N x N array
either library allocates is in it, workspace that LAPACK or Numba allocate
internally (small here) is not. Time is the fastest of five calls' wall
time (the one least disturbed by other work on the machine), the two
libraries interleaved, after one call to warm up (fastgp's Numba routines
load from its on-disk cache, or compile on the very first use).
"""

# %%
import time
import tracemalloc

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.ticker import NullFormatter
from sklearn.gaussian_process import GaussianProcessRegressor as SklearnGPR
from sklearn.gaussian_process.kernels import RBF, WhiteKernel
from sklearn.gaussian_process.kernels import ConstantKernel as C

from fastgp import GaussianProcessRegressor

SIZES = [250, 500, 1000, 1500]
REPEATS = 5
LIBRARIES = {"fastgp": GaussianProcessRegressor, "scikit-learn": SklearnGPR}


def peak_bytes(call):
    """Peak bytes allocated during ``call()`` above those allocated before it."""
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        before = tracemalloc.get_traced_memory()[0]
        call()
        return tracemalloc.get_traced_memory()[1] - before
    finally:
        tracemalloc.stop()


rng = np.random.default_rng(0)
peak = {name: [] for name in LIBRARIES}
seconds = {name: [] for name in LIBRARIES}
for n in SIZES:
    X = rng.standard_normal((n, 1))
    y = np.sin(X[:, 0]) + 0.01 * rng.standard_normal(n)
    kernel = C(1.0) * RBF(1.0) + WhiteKernel(1e-2)
    # optimizer=None: fit only stores the data (and factors K once).
    models = {name: cls(kernel, optimizer=None).fit(X, y) for name, cls in LIBRARIES.items()}
    theta = kernel.theta
    calls = {name: (lambda m=m: m.log_marginal_likelihood(theta, eval_gradient=True))
             for name, m in models.items()}
    values = {name: call() for name, call in calls.items()}  # warm up
    # the two agree: same likelihood, same gradient
    np.testing.assert_allclose(values["fastgp"][0], values["scikit-learn"][0], rtol=1e-8)
    np.testing.assert_allclose(values["fastgp"][1], values["scikit-learn"][1], rtol=1e-6)
    rounds = {name: [] for name in LIBRARIES}
    for _ in range(REPEATS):
        for name, call in calls.items():
            start = time.perf_counter()
            call()
            rounds[name].append(time.perf_counter() - start)
    for name, call in calls.items():
        seconds[name].append(min(rounds[name]))
        peak[name].append(peak_bytes(call))

print(f"{'N':>6} {'library':>13} {'peak MB':>9} {'x 8N^2':>7} {'seconds':>8}")
for i, n in enumerate(SIZES):
    for name in LIBRARIES:
        print(f"{n:>6} {name:>13} {peak[name][i] / 1e6:>9.1f} "
              f"{peak[name][i] / (8 * n**2):>7.2f} {seconds[name][i]:>8.3f}")

# %%
# Peak memory is the clearest difference: fastgp's is one N x N float64
# buffer (8 N\ :sup:`2` bytes, the dashed line), scikit-learn's about nine of
# them at this kernel's three hyperparameters, growing with their number.
# Time at these small N depends on the machine's load; the full benchmark
# measures it at larger N on a quiet machine.
n = np.array(SIZES, dtype=float)
fig, (ax_mem, ax_time) = plt.subplots(1, 2, figsize=(10, 4), layout="constrained")
for name, marker in zip(LIBRARIES, "os"):
    ax_mem.loglog(n, np.array(peak[name]) / 1e6, marker=marker, label=name)
    ax_time.loglog(n, seconds[name], marker=marker, label=name)
ax_mem.loglog(n, 8 * n**2 / 1e6, "k--", linewidth=0.8, label="one N x N buffer")
ax_mem.set(xlabel="N", ylabel="peak memory of one call (MB)",
           title="Memory: loss + gradient")
ax_time.set(xlabel="N", ylabel="seconds (fastest of 5)", title="Time: loss + gradient")
for ax in (ax_mem, ax_time):
    ax.yaxis.set_minor_formatter(NullFormatter())
    ax.legend()
    ax.grid(True, which="both", linewidth=0.3)
plt.show()
