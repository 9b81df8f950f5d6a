"""
===========================================
GPLVM on the digits: embedding and back
===========================================

The GP latent variable model (Lawrence 2005) finds 2-D points whose Gaussian
process, mapping latent space to the 64 pixels, best explains the 8 x 8
handwritten digits. Unlike PCA, the map is non-linear, so digits that PCA
overlaps can separate. :class:`fastgp.GPLVM` starts at PCA's points and moves
all of them, and the kernel's hyperparameters, with the exact gradient of the
log marginal likelihood, at the memory of one N x N buffer (:doc:`/gplvm`).

To keep this page's build short, it fits 400 of the 1,797 digits to a looser
tolerance than the default (``tol=1e-5``, where the default is ``1e-6``):
the optimiser converges in about a third of the iterations the default
tolerance takes. The full run (all the digits, 150 iterations, with the
nearest-neighbour errors reported in :doc:`/gplvm`) is::

    python -m bench.bench_gplvm_digits
"""

# %%
import time

import matplotlib.pyplot as plt
import numpy as np
from sklearn.datasets import load_digits
from sklearn.decomposition import PCA
from sklearn.model_selection import cross_val_score
from sklearn.neighbors import KNeighborsClassifier

from fastgp import GPLVM

digits = load_digits()
rng = np.random.default_rng(0)
rows = rng.permutation(len(digits.target))[:400]
Y, labels = digits.data[rows], digits.target[rows]

start = time.perf_counter()
gplvm = GPLVM(n_components=2, tol=1e-5, random_state=0)
Z = gplvm.fit_transform(Y)
print(f"GPLVM fit: {time.perf_counter() - start:.1f} s, {gplvm.n_iter_} iterations")
print(f"fitted kernel: {gplvm.kernel_}")
Z_pca = PCA(n_components=2).fit_transform(Y)

# %%
# The two embeddings
# ------------------
# Coloured by the digit each point is (the labels were not used to fit). A
# 1-nearest-neighbour classifier in each 2-D embedding, cross-validated, puts
# a number on how well the digits separate.
knn = KNeighborsClassifier(n_neighbors=1)
fig, axes = plt.subplots(1, 2, figsize=(11, 5), layout="constrained")
for ax, (name, points) in zip(axes, [("PCA", Z_pca), ("GPLVM", Z)]):
    error = 1 - cross_val_score(knn, points, labels, cv=5).mean()
    scatter = ax.scatter(points[:, 0], points[:, 1], c=labels, cmap="tab10", s=12,
                         vmin=-0.5, vmax=9.5)
    ax.set_title(f"{name}: 1-NN error in 2-D {error:.2f}")
    ax.set_xticks([])
    ax.set_yticks([])
    print(f"{name}: 5-fold 1-NN error in the 2-D embedding {error:.3f}")
fig.colorbar(scatter, ax=axes, ticks=range(10), label="digit")
plt.show()

# %%
# Reconstructions
# ---------------
# :meth:`~fastgp.GPLVM.inverse_transform` maps latent points back to pixels
# through the GP's predictive mean. Below, the first row is eight of the
# fitted digits, the second the GPLVM's reconstruction from their two latent
# coordinates alone, the third PCA's from its two components. The GPLVM's
# non-linear map keeps each digit's strokes (the fitted noise level says how
# closely it may follow each training digit); PCA's linear map from two
# numbers blurs them into averages.
pca = PCA(n_components=2).fit(Y)
shown = [int(np.flatnonzero(labels == d)[0]) for d in (0, 1, 2, 3, 4, 6, 7, 9)]
rows_of_images = [Y[shown], gplvm.inverse_transform(Z[shown]),
                  pca.inverse_transform(Z_pca[shown])]
fig, axes = plt.subplots(3, len(shown), figsize=(9, 3.9), layout="constrained")
for r, (title, images) in enumerate(zip(["data", "GPLVM", "PCA"], rows_of_images)):
    for c, image in enumerate(images):
        axes[r, c].imshow(image.reshape(8, 8), cmap="gray_r", vmin=0, vmax=16)
        axes[r, c].set_xticks([])
        axes[r, c].set_yticks([])
    axes[r, 0].set_ylabel(title)
plt.show()

# %%
# New digits
# ----------
# :meth:`~fastgp.GPLVM.transform` places digits the model has not seen in the
# same latent space (each by its own small optimisation); here 60 held-out
# digits, drawn over the fitted points.
held_out = rng.permutation(np.setdiff1d(np.arange(len(digits.target)), rows))[:60]
Z_new = gplvm.transform(digits.data[held_out])
fig, ax = plt.subplots(figsize=(6, 5), layout="constrained")
ax.scatter(Z[:, 0], Z[:, 1], c=labels, cmap="tab10", s=8, alpha=0.25, vmin=-0.5, vmax=9.5)
for z, digit in zip(Z_new, digits.target[held_out]):
    ax.text(z[0], z[1], str(digit), color=plt.cm.tab10(digit), fontsize=9,
            fontweight="bold", ha="center", va="center")
ax.set_title("held-out digits placed by transform")
ax.set_xticks([])
ax.set_yticks([])
plt.show()

# %%
# Mapping a held-out digit into the latent space and back,
# ``inverse_transform(transform(y))``, shows what two latent numbers keep of a
# digit the model never saw: its class's shape, not every stroke.
shown_new = held_out[:8]
back = gplvm.inverse_transform(Z_new[:8])
fig, axes = plt.subplots(2, 8, figsize=(9, 2.6), layout="constrained")
for c in range(8):
    for r, image in enumerate([digits.data[shown_new[c]], back[c]]):
        axes[r, c].imshow(image.reshape(8, 8), cmap="gray_r", vmin=0, vmax=16)
        axes[r, c].set_xticks([])
        axes[r, c].set_yticks([])
axes[0, 0].set_ylabel("held out")
axes[1, 0].set_ylabel("and back")
plt.show()
