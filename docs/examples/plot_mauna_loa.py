"""
=============================================
Mauna Loa CO2: fit and forecast with its band
=============================================

Rasmussen & Williams (2006, section 5.4.3) model the weekly CO2 concentration
measured at Mauna Loa with a kernel of four parts: a smooth long-term trend, a
yearly seasonal cycle whose shape may drift, medium-term irregularities and
noise, 11 hyperparameters in all (:func:`fastgp.cli.mauna_loa_kernel`). fastgp
maximises the log marginal likelihood over all 11 with its exact gradient,
then forecasts past the end of the data, to 2025, with the 95 % band of the
predictive distribution.

To keep this page's build short, the fit below uses every fourth week (about
550 points). The full series, 2,200 weeks, is the command line's default::

    python -m fastgp --plot co2.png

which prints the optimiser's progress and draws this figure from the full fit.
"""

# %%
# The data
# --------
# Time in decimal years, CO2 in ppm, 1958 to 2001, shipped with fastgp.
import time

import matplotlib.pyplot as plt

from fastgp import GaussianProcessRegressor
from fastgp.cli import mauna_loa_kernel
from fastgp.datasets import load_mauna_loa_co2
from fastgp.plotting import plot_forecast

X_all, y_all = load_mauna_loa_co2()
X, y = X_all[::4], y_all[::4]  # every fourth week, for a short build
print(f"{len(y_all)} weeks, {X_all[0, 0]:.1f} to {X_all[-1, 0]:.1f}; fitting {len(y)}")

# %%
# The fit
# -------
# The targets are centred (the kernel models deviations from the mean). The
# kernel's start values are scikit-learn's for the same example.
y_mean = y.mean()
gpr = GaussianProcessRegressor(mauna_loa_kernel())
start = time.perf_counter()
gpr.fit(X, y - y_mean)
print(f"fit in {time.perf_counter() - start:.1f} s, {gpr.n_iter_} iterations")
print(f"fitted kernel: {gpr.kernel_}")
print(f"log marginal likelihood: {gpr.log_marginal_likelihood_value_:.1f}")

# %%
# The forecast
# ------------
# :func:`fastgp.plotting.plot_forecast` (what ``--plot`` draws) predicts the
# mean and standard deviation on a grid from 1958 to 2025 and shades
# mean +- 1.96 std. The fitted kernel holds a WhiteKernel, so the band is that
# of a new weekly measurement, noise included. It widens past 2001, where
# only the trend and the seasonal cycle carry the prediction.
fig, ax = plt.subplots(figsize=(9, 4.5), layout="constrained")
plot_forecast(gpr, X, y, y_offset=y_mean, until=2025.0, ax=ax)
plt.show()

# %%
# The last decade of the data and the forecast, closer: the seasonal cycle is
# carried forward with the fitted period's shape.
fig, ax = plt.subplots(figsize=(9, 4.5), layout="constrained")
plot_forecast(gpr, X, y, y_offset=y_mean, until=2025.0, ax=ax,
              title="1990 to 2025")
ax.set_xlim(1990, 2025)
ax.set_ylim(345, 430)
plt.show()
