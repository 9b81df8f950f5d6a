"""
==================================================
In a Pipeline, with a grid search over kernels
==================================================

fastgp's estimators are scikit-learn estimators, so they go wherever
scikit-learn's go: here :class:`fastgp.GaussianProcessRegressor` is the last
step of a :class:`~sklearn.pipeline.Pipeline` after a
:class:`~sklearn.preprocessing.StandardScaler`, and
:class:`~sklearn.model_selection.GridSearchCV` chooses its kernel by
cross-validation. Each candidate's hyperparameters are fitted by maximising the
marginal likelihood inside every fold; the grid search compares the kernels'
held-out R\\ :sup:`2`.

The data are scikit-learn's diabetes set: 442 patients, 10 standardised
features, a measure of disease progression a year later.
"""

# %%
import warnings

import matplotlib.pyplot as plt
import numpy as np
from sklearn.datasets import load_diabetes
from sklearn.exceptions import ConvergenceWarning
from sklearn.gaussian_process.kernels import (
    RBF,
    DotProduct,
    Matern,
    RationalQuadratic,
    WhiteKernel,
)
from sklearn.gaussian_process.kernels import ConstantKernel as C
from sklearn.model_selection import GridSearchCV, train_test_split
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import StandardScaler

from fastgp import GaussianProcessRegressor

X, y = load_diabetes(return_X_y=True)
X_train, X_test, y_train, y_test = train_test_split(X, y, test_size=0.25, random_state=0)

pipeline = Pipeline([
    ("scale", StandardScaler()),
    ("gpr", GaussianProcessRegressor(normalize_y=True)),
])
kernels = {
    "linear: DotProduct + White": DotProduct() + WhiteKernel(),
    "C * RBF + White": C() * RBF() + WhiteKernel(),
    "C * RBF(10 length scales) + White": C() * RBF(np.ones(X.shape[1])) + WhiteKernel(),
    "C * Matern(nu=1.5) + White": C() * Matern(nu=1.5) + WhiteKernel(),
    "C * RationalQuadratic + White": C() * RationalQuadratic() + WhiteKernel(),
    "linear + C * RBF + White": DotProduct() + C() * RBF() + WhiteKernel(),
}
search = GridSearchCV(pipeline, {"gpr__kernel": list(kernels.values())}, cv=3,
                      scoring="r2")
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always", ConvergenceWarning)
    search.fit(X_train, y_train)

names = list(kernels)
mean = search.cv_results_["mean_test_score"]
std = search.cv_results_["std_test_score"]
for name, m, s in zip(names, mean, std):
    print(f"{name:>36}: R^2 {m:.3f} +- {s:.3f}")
best = search.best_estimator_
print(f"chosen: {names[search.best_index_]}")
print(f"fitted kernel: {best['gpr'].kernel_}")
print(f"held-out R^2 of the refitted pipeline: {best.score(X_test, y_test):.3f}")

# %%
# The ARD kernel (one length scale per feature) raised ConvergenceWarnings in
# some folds: it pushed the length scales of some features to the upper bound,
# 1e5, which says those features barely matter to the fit. The messages:
for message in sorted({str(w.message).split(" is close")[0] for w in caught}):
    print(message)

# %%
# The cross-validated R\ :sup:`2` of each kernel (mean and spread over the
# three folds), and the chosen pipeline's predictions for the held-out
# quarter of the patients with their predictive standard deviation.
fig, (ax_cv, ax_pred) = plt.subplots(1, 2, figsize=(12, 4.5), layout="constrained",
                                     width_ratios=[1.3, 1])
order = np.argsort(mean)
ax_cv.barh(np.arange(len(names)), mean[order], xerr=std[order], color="C0", alpha=0.8)
ax_cv.set_yticks(np.arange(len(names)), [names[i] for i in order])
ax_cv.set_xlabel("R$^2$, 3-fold cross-validation")
ax_cv.set_title("GridSearchCV over kernels")

pred, pred_std = best.predict(X_test, return_std=True)
ax_pred.errorbar(y_test, pred, yerr=pred_std, fmt="o", markersize=3, alpha=0.6,
                 elinewidth=0.6)
lims = [min(y_test.min(), pred.min()), max(y_test.max(), pred.max())]
ax_pred.plot(lims, lims, "k--", linewidth=0.8)
ax_pred.set(xlabel="measured", ylabel="predicted (mean +- 1 std)",
            title="held-out patients")
plt.show()
