"""
============================================================
Uncertainty: return_std, sample_y, and what normalize_y does
============================================================

A Gaussian process predicts a distribution, not a number. On a 1-D problem
this example draws the three things
:class:`fastgp.GaussianProcessRegressor` gives: the predictive mean and
standard deviation (``predict(X, return_std=True)``), functions drawn from the
posterior (``sample_y``), and how ``normalize_y`` changes both far from the
data.
"""

# %%
# Data: a wave around 20, measured with noise at 40 points in two clumps,
# with a gap between them.
import matplotlib.pyplot as plt
import numpy as np
from sklearn.gaussian_process.kernels import RBF, WhiteKernel
from sklearn.gaussian_process.kernels import ConstantKernel as C

from fastgp import GaussianProcessRegressor


def truth(x):
    return 20 + 3 * np.sin(x) + 0.5 * x


rng = np.random.default_rng(1)
x_train = np.concatenate([rng.uniform(0, 4, 20), rng.uniform(7, 10, 20)])
X_train = x_train.reshape(-1, 1)
y_train = truth(x_train) + 0.3 * rng.standard_normal(x_train.size)
X_plot = np.linspace(-4, 16, 400).reshape(-1, 1)

# %%
# Mean, band and draws
# --------------------
# ``return_std=True`` gives the predictive standard deviation at each point;
# mean +- 1.96 std is the 95 % band. Because the kernel includes a
# WhiteKernel, the band is that of a new noisy measurement. ``sample_y`` draws
# whole functions from the same distribution, jointly over the query points
# (it needs their covariance, an n_query x n_query matrix).
kernel = C(1.0) * RBF(1.0) + WhiteKernel(0.1)
gpr = GaussianProcessRegressor(kernel, normalize_y=True).fit(X_train, y_train)
mean, std = gpr.predict(X_plot, return_std=True)
draws = gpr.sample_y(X_plot, n_samples=4, random_state=0)
print(f"fitted kernel: {gpr.kernel_}")
print(f"std near the data {std[np.abs(X_plot[:, 0] - 2).argmin()]:.2f}, "
      f"in the gap {std[np.abs(X_plot[:, 0] - 5.5).argmin()]:.2f}, "
      f"far away {std[-1]:.2f}")

fig, ax = plt.subplots(figsize=(9, 4.5), layout="constrained")
ax.fill_between(X_plot[:, 0], mean - 1.96 * std, mean + 1.96 * std, alpha=0.2,
                label="95 % band")
ax.plot(X_plot[:, 0], draws, linewidth=0.8, alpha=0.8)
ax.plot(X_plot[:, 0], mean, "k", linewidth=1.5, label="predictive mean")
ax.plot(X_plot[:, 0], truth(X_plot[:, 0]), "k:", linewidth=1, label="truth")
ax.plot(x_train, y_train, "o", color="C3", markersize=4, label="data")
ax.set(xlabel="x", ylabel="y", title="predict(return_std=True) and four sample_y draws")
ax.legend(loc="upper left", ncols=2)
plt.show()

# %%
# normalize_y
# -----------
# The GP's prior has mean zero. With ``normalize_y=False`` the targets are
# modelled as they are, so away from the data the prediction falls back to 0,
# far below every measurement, and the band to the fitted amplitude, which
# had to be large to reach 20 from 0. With ``normalize_y=True`` the targets
# are centred and scaled to unit variance before the fit (and predictions are
# mapped back), so the prediction falls back to the data's mean and the band
# to the data's spread. Near the data the two agree: the prior shows only
# where the data are silent.
#
# The amplitude's start here is 100 with bounds up to 1e5: from
# ``ConstantKernel(1.0)``, scikit-learn's default, the un-normalised fit stops
# in a poor local optimum (a constant plus large noise), another reason to
# normalise targets far from zero.
wide = C(100.0, (1e-2, 1e5)) * RBF(1.0) + WhiteKernel(0.1)
fig, axes = plt.subplots(1, 2, figsize=(12, 4.2), layout="constrained", sharey=True)
for ax, normalize in zip(axes, [False, True]):
    model = GaussianProcessRegressor(wide, normalize_y=normalize).fit(X_train, y_train)
    m, s = model.predict(X_plot, return_std=True)
    ax.fill_between(X_plot[:, 0], m - 1.96 * s, m + 1.96 * s, alpha=0.2,
                    label="95 % band")
    ax.plot(X_plot[:, 0], m, "k", linewidth=1.5, label="predictive mean")
    ax.plot(x_train, y_train, "o", color="C3", markersize=4, label="data")
    ax.axhline(y_train.mean() if normalize else 0, color="0.5", linestyle="--",
               linewidth=0.8, label="the prior's mean")
    ax.set(xlabel="x", title=f"normalize_y={normalize}")
    print(f"normalize_y={normalize}: {model.kernel_}; at x=16 mean {m[-1]:.1f}, "
          f"std {s[-1]:.1f}")
axes[0].set_ylabel("y")
axes[0].set_ylim(-40, 50)
axes[0].legend(loc="lower left", ncols=2)
plt.show()
