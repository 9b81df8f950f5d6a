"""
============================================
The same fit on a GPU, or on the CPU without
============================================

``device="cuda"`` runs the exact fit with its one N x N buffer in an NVIDIA
GPU's memory (docs/gpu.md): the same hyperparameters, predictions and
likelihood as on the CPU, to rounding. This example asks for the GPU and, where
there is none (or the GPU extra, ``pip install "fastgp[cuda]"``, is not
installed), shows the error that says so and fits on the CPU instead, so it
runs anywhere.
"""

# %%
# Data: a noisy wave at 1,000 points.
import matplotlib.pyplot as plt
import numpy as np
from sklearn.gaussian_process.kernels import RBF, WhiteKernel
from sklearn.gaussian_process.kernels import ConstantKernel as C

from fastgp import GaussianProcessRegressor
from fastgp.exceptions import DeviceUnavailableError

rng = np.random.default_rng(0)
X = rng.uniform(0, 10, size=(1000, 1))
y = np.sin(X[:, 0]) + 0.5 * np.cos(3 * X[:, 0]) + 0.1 * rng.standard_normal(1000)
kernel = C(1.0) * RBF(1.0) + WhiteKernel(0.1)

# %%
# Ask for the GPU
# ---------------
# Without a GPU the fit refuses at once, with the reason and the remedy, and
# leaves the estimator as it was.
try:
    gpr = GaussianProcessRegressor(kernel, device="cuda").fit(X, y)
    where = "cuda"
except DeviceUnavailableError as error:
    print(f"No GPU fit here: {error}")
    gpr = GaussianProcessRegressor(kernel, device="cpu").fit(X, y)
    where = "cpu"
print(f"fitted on {where}: {gpr.kernel_}, log marginal likelihood "
      f"{gpr.log_marginal_likelihood_value_:.3f}")

# %%
# The forecast, from wherever the model lives
# -------------------------------------------
# On a GPU, ``L_`` stays in the GPU's memory and predictions run there; the
# means and standard deviations come back as NumPy arrays either way.
X_plot = np.linspace(-1, 11, 300).reshape(-1, 1)
mean, std = gpr.predict(X_plot, return_std=True)
fig, ax = plt.subplots(figsize=(7, 3.5))
ax.plot(X[:, 0], y, ".", ms=2, color="0.6", label="data")
ax.plot(X_plot[:, 0], mean, label=f"mean (device={where!r})")
ax.fill_between(X_plot[:, 0], mean - 1.96 * std, mean + 1.96 * std, alpha=0.3,
                label="95 % band")
ax.legend(loc="upper right")
ax.set_xlabel("x")
fig.tight_layout()
plt.show()
