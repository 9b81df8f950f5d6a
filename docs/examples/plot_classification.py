"""
=====================================================
Classification: probabilities and the latent function
=====================================================

:class:`fastgp.GaussianProcessClassifier` is scikit-learn's Laplace
classifier (Rasmussen & Williams 2006, Algorithms 3.1, 3.2 and 5.1) with its
Newton iterations and gradient in one N x N buffer. This example fits it to
two interleaved half moons, draws the probability of the positive class and
the latent function's uncertainty, checks it against scikit-learn's
classifier at the same hyperparameters, and classifies the three iris species
one-vs-rest.
"""

# %%
# Two classes
# -----------
# 200 points of two noisy half moons. The kernel has one length scale per
# feature and an amplitude, optimised by L-BFGS-B from scikit-learn's usual
# start.
import time

import matplotlib.pyplot as plt
import numpy as np
from sklearn.datasets import load_iris, make_moons
from sklearn.gaussian_process import GaussianProcessClassifier as SklearnGPC
from sklearn.gaussian_process.kernels import RBF
from sklearn.gaussian_process.kernels import ConstantKernel as C

from fastgp import GaussianProcessClassifier

X, y = make_moons(n_samples=200, noise=0.25, random_state=0)
kernel = C(1.0) * RBF([1.0, 1.0])
start = time.perf_counter()
gpc = GaussianProcessClassifier(kernel, random_state=0).fit(X, y)
print(f"fitted in {time.perf_counter() - start:.2f} s: {gpc.kernel_}")
print(f"log marginal likelihood {gpc.log_marginal_likelihood_value_:.3f}, "
      f"training accuracy {gpc.score(X, y):.3f}")

# %%
# The same numbers as scikit-learn's
# ----------------------------------
# At the fitted hyperparameters both classifiers run the same Newton
# iterations, so the approximate log marginal likelihood, its gradient and
# the probabilities agree to rounding; fastgp's evaluation needs no
# (N, N, n_hyperparameters) gradient tensor.
theta = gpc.kernel_.theta
reference = SklearnGPC(gpc.kernel_, optimizer=None).fit(X, y)
ours = gpc.log_marginal_likelihood(theta, eval_gradient=True)
theirs = reference.log_marginal_likelihood(theta, eval_gradient=True)
print(f"log q: fastgp {ours[0]:.10f}, scikit-learn {theirs[0]:.10f}")
print(f"largest gradient difference {np.max(np.abs(ours[1] - theirs[1])):.1e}")
grid = np.stack(np.meshgrid(np.linspace(-2, 3, 100), np.linspace(-1.5, 2, 70)), -1)
points = grid.reshape(-1, 2)
proba = gpc.predict_proba(points)[:, 1]
print("largest probability difference "
      f"{np.max(np.abs(proba - reference.predict_proba(points)[:, 1])):.1e}")

# %%
# Probability and latent uncertainty
# ----------------------------------
# Left: the probability of the positive class, ``predict_proba``, with the
# 0.5 contour (the decision boundary of ``predict``). Right: the standard
# deviation of the latent function, ``latent_mean_and_variance``: small near
# the data, back to the prior's amplitude away from it, where the
# probabilities fall back towards 0.5.
mean, var = gpc.latent_mean_and_variance(points)
fig, axes = plt.subplots(1, 2, figsize=(11, 4.2), layout="constrained", sharey=True)
shape = grid.shape[:2]
image = axes[0].contourf(grid[..., 0], grid[..., 1], proba.reshape(shape),
                         levels=np.linspace(0, 1, 11), cmap="RdBu_r")
axes[0].contour(grid[..., 0], grid[..., 1], proba.reshape(shape), levels=[0.5],
                colors="k", linewidths=1)
fig.colorbar(image, ax=axes[0], label="P(class 1)")
spread = axes[1].contourf(grid[..., 0], grid[..., 1], np.sqrt(var).reshape(shape),
                          levels=10, cmap="viridis")
fig.colorbar(spread, ax=axes[1], label="latent standard deviation")
for ax in axes:
    ax.scatter(X[:, 0], X[:, 1], c=y, cmap="RdBu_r", edgecolors="k", s=14)
    ax.set(xlabel="x1")
axes[0].set(ylabel="x2", title="predict_proba")
axes[1].set(title="latent_mean_and_variance")
plt.show()

# %%
# Three classes
# -------------
# The iris species from the petal measurements: one binary model per species
# against the rest (``multi_class="one_vs_rest"``, the default), each with its
# own hyperparameters, fitted one after another in one buffer each. Their
# probabilities are normalised to sum to one. The RGB colour of each point of
# the plane mixes the three probabilities.
X3, y3 = load_iris(return_X_y=True)
X3 = X3[:, 2:]
multi = GaussianProcessClassifier(C(1.0) * RBF([1.0, 1.0]), random_state=0).fit(X3, y3)
print(f"iris: accuracy {multi.score(X3, y3):.3f}")
for species, model in zip(load_iris().target_names, multi.base_estimator_.estimators_):
    print(f"  {species} against the rest: {model.kernel_}")
g1, g2 = np.meshgrid(np.linspace(0.5, 7.5, 80), np.linspace(-0.2, 2.8, 50))
colours = multi.predict_proba(np.column_stack([g1.ravel(), g2.ravel()]))
fig, ax = plt.subplots(figsize=(6.5, 4.2), layout="constrained")
ax.imshow(colours.reshape(*g1.shape, 3), origin="lower", aspect="auto",
          extent=(g1.min(), g1.max(), g2.min(), g2.max()), alpha=0.6)
ax.scatter(X3[:, 0], X3[:, 1], c=np.eye(3)[y3], edgecolors="k", s=16)
ax.set(xlabel="petal length (cm)", ylabel="petal width (cm)",
       title="one-vs-rest probabilities (RGB)")
plt.show()
