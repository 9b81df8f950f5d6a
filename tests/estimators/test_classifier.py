"""GaussianProcessClassifier against scikit-learn's and against finite
differences: the approximate log marginal likelihood and its gradient at the
same theta, predictions, fitted optima, multi-class wrapping, warm starts,
the fallback path and the one-buffer algebra of fastgp._solvers.cholesky.laplace."""

import numpy as np
import pytest
from sklearn.datasets import load_iris
from sklearn.gaussian_process import GaussianProcessClassifier as SklearnGPC
from sklearn.gaussian_process.kernels import (
    RBF,
    DotProduct,
    Matern,
    PairwiseKernel,
    RationalQuadratic,
    WhiteKernel,
)
from sklearn.gaussian_process.kernels import ConstantKernel as C

from fastgp import GaussianProcessClassifier
from fastgp._backend.covariance import make_covariance
from fastgp.exceptions import SlowKernelWarning
from fastgp._solvers.workspace import Workspace
from fastgp._solvers.cholesky.laplace import (
    LaplaceObjective,
    fill_B_from_upper,
    mirror_lower_to_upper,
)
from fastgp._solvers.laplace_predictive import (MIXTURE_COEFFICIENTS,
                                                positive_class_probability)
from fastgp._linalg.lapack import symmetric_matvec

from _laplace_cases import NegativeDefinite

#: The Newton iterations stop when log q rises by less than 1e-10, so values
#: and gradients agree with scikit-learn's to well within this.
RTOL = 1e-6

KERNELS = {
    "C*RBF-ard": lambda: C(2.0) * RBF([0.8, 1.5]),
    "C*Matern32+White": lambda: C(1.0) * Matern(1.0, nu=1.5) + WhiteKernel(0.1),
    "RQ": lambda: C(3.0) * RationalQuadratic(length_scale=1.2, alpha=0.7),
    "Matern52-ard*C": lambda: Matern([0.7, 1.3], nu=2.5) * C(4.0),
    "DotProduct+RBF": lambda: DotProduct(0.5) + C(2.0) * RBF(1.0),
}


def _binary_data(n=60, seed=0, d=2):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-3, 3, size=(n, d))
    y = (np.sin(X[:, 0]) + 0.5 * X[:, 1] + 0.3 * rng.standard_normal(n) > 0).astype(int)
    return X, y


def _fitted_pair(kernel, X, y, **params):
    """fastgp's and scikit-learn's classifiers fitted with the same
    parameters (kernel kept where optimizer=None)."""
    ours = GaussianProcessClassifier(kernel, **params).fit(X, y)
    theirs = SklearnGPC(kernel, **params).fit(X, y)
    return ours, theirs


# ----------------------------------------------------------- LML and gradient
@pytest.mark.parametrize("name", sorted(KERNELS))
@pytest.mark.parametrize("shift", [0.0, 0.4, -0.7])
def test_classifier_lml_and_gradient_equal_sklearns(name, shift):
    X, y = _binary_data()
    ours, theirs = _fitted_pair(KERNELS[name](), X, y, optimizer=None)
    theta = ours.kernel_.theta + shift
    value, grad = ours.log_marginal_likelihood(theta, eval_gradient=True)
    ref_value, ref_grad = theirs.log_marginal_likelihood(theta, eval_gradient=True)
    np.testing.assert_allclose(value, ref_value, rtol=RTOL)
    np.testing.assert_allclose(grad, ref_grad, rtol=RTOL, atol=RTOL * np.abs(ref_grad).max())
    np.testing.assert_allclose(ours.log_marginal_likelihood(theta), ref_value, rtol=RTOL)
    np.testing.assert_allclose(ours.log_marginal_likelihood_value_,
                               theirs.log_marginal_likelihood_value_, rtol=RTOL)


@pytest.mark.parametrize("name", sorted(KERNELS))
def test_classifier_gradient_matches_central_finite_differences(name):
    X, y = _binary_data(n=50, seed=3)
    gpc = GaussianProcessClassifier(KERNELS[name](), optimizer=None).fit(X, y)
    theta = gpc.kernel_.theta + 0.2
    _, grad = gpc.log_marginal_likelihood(theta, eval_gradient=True)
    h = 1e-5
    fd = np.array([(gpc.log_marginal_likelihood(theta + h * e)
                    - gpc.log_marginal_likelihood(theta - h * e)) / (2 * h)
                   for e in np.eye(theta.size)])
    np.testing.assert_allclose(grad, fd, rtol=1e-5, atol=1e-6 * max(1.0, np.abs(fd).max()))


def test_classifier_gradient_with_saturated_probabilities_is_finite_and_right():
    """Far from the boundary pi rounds to 0 or 1 and W to 0; the gradient
    must not divide by W (fastgp._solvers.cholesky.laplace's s2 has no division)."""
    X, y = _binary_data(n=40, seed=5)
    X = X.copy()
    X[:, 0] *= 3.0
    y = (X[:, 0] > 0).astype(int)  # separable
    kernel = C(1e4, "fixed") * RBF(3.0)
    ours, theirs = _fitted_pair(kernel, X, y, optimizer=None)
    theta = ours.kernel_.theta
    value, grad = ours.log_marginal_likelihood(theta, eval_gradient=True)
    ref_value, ref_grad = theirs.log_marginal_likelihood(theta, eval_gradient=True)
    assert np.all(np.isfinite(grad))
    np.testing.assert_allclose(value, ref_value, rtol=RTOL)
    np.testing.assert_allclose(grad, ref_grad, rtol=1e-5, atol=1e-8)


# ---------------------------------------------------------------- predictions
def _sklearn_latent_moments(fitted, X_query):
    """R&W (2006) Alg. 3.2 lines 4-6 from scikit-learn's fitted binary model
    (its own pi_, W_sr_ and L_): scikit-learn's classifier has no
    latent_mean_and_variance before 1.7, and fastgp supports 1.6."""
    from scipy.linalg import solve_triangular

    base = fitted.base_estimator_
    K_star = base.kernel_(base.X_train_, X_query)
    mean = K_star.T @ (base.y_train_ - base.pi_)
    v = solve_triangular(base.L_, base.W_sr_[:, None] * K_star, lower=True)
    return mean, base.kernel_.diag(X_query) - np.einsum("ij,ij->j", v, v)


@pytest.mark.parametrize("name", sorted(KERNELS))
def test_classifier_predictions_equal_sklearns(name):
    X, y = _binary_data()
    ours, theirs = _fitted_pair(KERNELS[name](), X, y, optimizer=None)
    Xq = np.random.default_rng(1).uniform(-4, 4, size=(70, 2))
    np.testing.assert_allclose(ours.predict_proba(Xq), theirs.predict_proba(Xq),
                               rtol=0, atol=1e-7)
    mean, var = ours.latent_mean_and_variance(Xq)
    ref_mean, ref_var = _sklearn_latent_moments(theirs, Xq)
    np.testing.assert_allclose(mean, ref_mean, rtol=1e-7, atol=1e-9)
    np.testing.assert_allclose(var, ref_var, rtol=1e-7, atol=1e-9)
    decided = np.abs(ref_mean) > 1e-8  # the sign of a latent mean at 0 is rounding
    np.testing.assert_array_equal(ours.predict(Xq)[decided], theirs.predict(Xq)[decided])


def test_classifier_predictions_in_chunks_equal_one_block(monkeypatch):
    import fastgp._solvers.chunks as predictive

    X, y = _binary_data()
    gpc = GaussianProcessClassifier(KERNELS["C*RBF-ard"](), optimizer=None).fit(X, y)
    Xq = np.random.default_rng(2).uniform(-4, 4, size=(23, 2))
    whole = gpc.predict_proba(Xq)
    monkeypatch.setattr(predictive, "CHUNK_BYTES", 8 * 60 * 4)  # 4 rows per chunk
    np.testing.assert_allclose(gpc.predict_proba(Xq), whole, rtol=0, atol=1e-15)


def test_classifier_probability_formula_is_the_gaussian_integral_of_the_probit_mixture():
    """positive_class_probability against numerical integration of the
    logistic function over N(mean, var): the mixture approximates it to
    about 1e-3 (Williams & Barber 1998); at mean 0 it is half the sum of
    scikit-learn's rounded coefficients, 5.0e-9 below 0.5."""
    z, w = np.polynomial.hermite_e.hermegauss(80)
    mean = np.array([-3.0, -0.5, 0.0, 0.7, 2.5])
    var = np.array([0.1, 2.0, 5.0, 0.5, 9.0])
    exact = np.array([np.sum(w / (1 + np.exp(-(m + np.sqrt(v) * z)))) / np.sqrt(2 * np.pi)
                      for m, v in zip(mean, var)])
    got = positive_class_probability(mean, var)
    np.testing.assert_allclose(got, exact, atol=2e-3)
    assert got[2] == 0.5 * MIXTURE_COEFFICIENTS.sum()
    assert 0.5 - 5.1e-9 < got[2] < 0.5 - 4.9e-9


# ------------------------------------------------------------------ optimum
@pytest.mark.parametrize("name", ["C*RBF-ard", "C*Matern32+White"])
def test_classifier_fit_reaches_sklearns_optimum_from_the_same_start(name):
    X, y = _binary_data(n=70, seed=4)
    ours, theirs = _fitted_pair(KERNELS[name](), X, y, random_state=0)
    assert ours.log_marginal_likelihood_value_ >= theirs.log_marginal_likelihood_value_ - 1e-5
    np.testing.assert_allclose(ours.log_marginal_likelihood_value_,
                               theirs.log_marginal_likelihood_value_, rtol=1e-5)
    # away from flat directions (a bound, or a length scale the data cannot see)
    np.testing.assert_allclose(ours.kernel_.theta, theirs.kernel_.theta, atol=2e-2)
    Xq = np.random.default_rng(1).uniform(-3, 3, size=(40, 2))
    np.testing.assert_allclose(ours.predict_proba(Xq), theirs.predict_proba(Xq), atol=1e-3)


def test_classifier_default_kernel_is_sklearns_fixed_one():
    X, y = _binary_data()
    ours, theirs = _fitted_pair(None, X, y)
    assert repr(ours.kernel_) == repr(theirs.kernel_)
    assert ours.kernel_.n_dims == 0
    np.testing.assert_allclose(ours.log_marginal_likelihood_value_,
                               theirs.log_marginal_likelihood_value_, rtol=RTOL)
    np.testing.assert_allclose(ours.predict_proba(X), theirs.predict_proba(X), atol=1e-7)


# -------------------------------------------------------------- multi-class
@pytest.mark.parametrize("multi_class", ["one_vs_rest", "one_vs_one"])
def test_classifier_multi_class_equals_sklearns(multi_class):
    X, y = load_iris(return_X_y=True)
    X, y = X[::2], y[::2]
    kernel = C(1.0) * RBF(1.0)
    ours, theirs = _fitted_pair(kernel, X, y, multi_class=multi_class, optimizer=None)
    assert type(ours.base_estimator_) is type(theirs.base_estimator_)
    assert len(ours.base_estimator_.estimators_) == len(theirs.base_estimator_.estimators_)
    np.testing.assert_allclose(ours.log_marginal_likelihood_value_,
                               theirs.log_marginal_likelihood_value_, rtol=RTOL)
    np.testing.assert_array_equal(ours.predict(X), theirs.predict(X))
    theta = ours.kernel_.theta  # the compound kernel's
    np.testing.assert_allclose(ours.log_marginal_likelihood(theta),
                               theirs.log_marginal_likelihood(theta), rtol=RTOL)
    np.testing.assert_allclose(ours.log_marginal_likelihood(theta[:2] + 0.1),
                               theirs.log_marginal_likelihood(theta[:2] + 0.1), rtol=RTOL)
    if multi_class == "one_vs_rest":
        np.testing.assert_allclose(ours.predict_proba(X), theirs.predict_proba(X), atol=1e-7)
    else:
        with pytest.raises(ValueError, match="one_vs_one multi-class mode does not support"):
            ours.predict_proba(X)
    with pytest.raises(ValueError, match="only supported for binary classification"):
        ours.latent_mean_and_variance(X)
    with pytest.raises(NotImplementedError):
        ours.log_marginal_likelihood(theta, eval_gradient=True)


def test_classifier_multi_class_with_n_jobs_equals_sequential():
    X, y = load_iris(return_X_y=True)
    X, y = X[::3], y[::3]
    sequential = GaussianProcessClassifier(C(1.0) * RBF(1.0)).fit(X, y)
    parallel = GaussianProcessClassifier(C(1.0) * RBF(1.0), n_jobs=2).fit(X, y)
    np.testing.assert_allclose(parallel.kernel_.theta, sequential.kernel_.theta, rtol=1e-10)
    np.testing.assert_allclose(parallel.predict_proba(X), sequential.predict_proba(X),
                               rtol=1e-10)


def test_classifier_string_labels_and_classes():
    X, y = _binary_data()
    labels = np.array(["no", "yes"])[y]
    gpc = GaussianProcessClassifier(C(1.0) * RBF(1.0), optimizer=None).fit(X, labels)
    np.testing.assert_array_equal(gpc.classes_, ["no", "yes"])
    assert gpc.n_classes_ == 2
    assert set(gpc.predict(X)) <= {"no", "yes"}
    assert gpc.score(X, labels) > 0.8


# --------------------------------------------------------------- warm start
def test_classifier_warm_start_starts_newton_from_the_last_mode():
    X, y = _binary_data()
    kernel = C(2.0) * RBF([0.8, 1.5])
    covariance = make_covariance(kernel, X)
    cold = LaplaceObjective(covariance, y, Workspace(len(y)), warm_start=False)
    warm = LaplaceObjective(covariance, y, Workspace(len(y)), warm_start=True)
    theta = kernel.theta
    for objective in (cold, warm):
        objective(theta)
    first = warm.mode.n_iterations
    cold_value, cold_grad = cold(theta + 1e-3)
    warm_value, warm_grad = warm(theta + 1e-3)
    assert warm.mode.n_iterations < cold.mode.n_iterations == first
    np.testing.assert_allclose(warm_value, cold_value, rtol=1e-9)
    np.testing.assert_allclose(warm_grad, cold_grad, rtol=1e-6)


def test_classifier_warm_start_fit_equals_cold_fit():
    X, y = _binary_data()
    warm = GaussianProcessClassifier(C(1.0) * RBF(1.0), warm_start=True).fit(X, y)
    cold = GaussianProcessClassifier(C(1.0) * RBF(1.0)).fit(X, y)
    # the same optimum, to L-BFGS-B's stopping tolerance on a flat maximum
    np.testing.assert_allclose(warm.kernel_.theta, cold.kernel_.theta, atol=1e-2)
    np.testing.assert_allclose(warm.log_marginal_likelihood_value_,
                               cold.log_marginal_likelihood_value_, rtol=1e-6)


# ------------------------------------------------------------- fallback path
def test_classifier_fallback_kernel_warns_and_equals_sklearn():
    X, y = _binary_data(n=40)
    kernel = PairwiseKernel(gamma=0.5, metric="laplacian")
    with pytest.warns(SlowKernelWarning):
        ours = GaussianProcessClassifier(kernel, random_state=0).fit(X, y)
    theirs = SklearnGPC(kernel, random_state=0).fit(X, y)
    np.testing.assert_allclose(ours.log_marginal_likelihood_value_,
                               theirs.log_marginal_likelihood_value_, rtol=1e-5)
    theta = ours.kernel_.theta + 0.3
    value, grad = ours.log_marginal_likelihood(theta, eval_gradient=True)
    ref_value, ref_grad = theirs.log_marginal_likelihood(theta, eval_gradient=True)
    np.testing.assert_allclose(value, ref_value, rtol=RTOL)
    np.testing.assert_allclose(grad, ref_grad, rtol=RTOL)


def test_classifier_on_non_vector_inputs_through_a_fallback_kernel():
    """scikit-learn's kernels on strings (requires_vector_input False) work
    through the kernel object, unvalidated X included."""
    from sklearn.gaussian_process.kernels import GenericKernelMixin, Hyperparameter, Kernel

    class SequenceKernel(GenericKernelMixin, Kernel):
        def __init__(self, baseline=0.5, baseline_bounds=(1e-3, 1.0)):
            self.baseline = baseline
            self.baseline_bounds = baseline_bounds

        @property
        def hyperparameter_baseline(self):
            return Hyperparameter("baseline", "numeric", self.baseline_bounds)

        def _f(self, a, b):
            return sum(1.0 if x == z else self.baseline for x in a for z in b)

        def __call__(self, X, Y=None, eval_gradient=False):
            Y = X if Y is None else Y
            K = np.array([[self._f(a, b) for b in Y] for a in X])
            if eval_gradient:
                dK = np.array([[sum(0.0 if x == z else 1.0 for x in a for z in b)
                                for b in Y] for a in X]) * self.baseline
                return K, dK[:, :, None]
            return K

        def diag(self, X):
            return np.array([self._f(a, a) for a in X])

        def is_stationary(self):
            return False

    X = ["AGCT", "AGC", "AACT", "TAA", "AAA", "GAACA", "TTGA", "GGA"]
    y = [0, 0, 0, 1, 1, 1, 1, 0]
    with pytest.warns(SlowKernelWarning):
        ours = GaussianProcessClassifier(SequenceKernel(), optimizer=None).fit(X, y)
    theirs = SklearnGPC(SequenceKernel(), optimizer=None).fit(X, y)
    np.testing.assert_allclose(ours.predict_proba(X), theirs.predict_proba(X), atol=1e-7)
    np.testing.assert_allclose(ours.log_marginal_likelihood_value_,
                               theirs.log_marginal_likelihood_value_, rtol=RTOL)


# ------------------------------------------------------ the one-buffer algebra
def _random_spd(n, seed):
    rng = np.random.default_rng(seed)
    A = rng.standard_normal((n, n))
    return A @ A.T / n + np.eye(n)


@pytest.mark.parametrize("n", [5, 40, 700])
def test_laplace_triangle_helpers_equal_dense_algebra(n):
    """mirror, symmetric products from either triangle and B's fill, against
    dense NumPy, at sizes below, at and above one column block."""
    K = _random_spd(n, n)
    buffer = np.asfortranarray(np.tril(K) + np.triu(np.full((n, n), np.nan), 1))
    mirror_lower_to_upper(buffer)
    np.testing.assert_array_equal(buffer, K)
    V = np.random.default_rng(1).standard_normal((n, 3))
    kdiag = np.diag(K).copy()
    np.fill_diagonal(buffer, np.nan)  # the diagonal comes from kdiag
    for v in V.T:
        np.testing.assert_allclose(symmetric_matvec(buffer, v, lower=False, diag=kdiag),
                                   K @ v, rtol=1e-12, atol=1e-12)
    s = np.random.default_rng(2).uniform(0.1, 0.5, n)
    fill_B_from_upper(buffer, s, kdiag, jitter=1e-3)
    B = np.eye(n) * (1 + 1e-3) + s[:, None] * K * s[None, :]
    np.testing.assert_allclose(np.tril(buffer), np.tril(B), rtol=1e-14, atol=1e-15)
    np.testing.assert_array_equal(np.triu(buffer, 1), np.triu(K, 1))  # K kept
    np.testing.assert_allclose(symmetric_matvec(buffer, V[:, 0], lower=True),
                               B @ V[:, 0], rtol=1e-12, atol=1e-12)


def test_laplace_objective_never_allocates_a_second_workspace(monkeypatch):
    """Every evaluation and the final factor work in the one workspace."""
    X, y = _binary_data()
    kernel = C(2.0) * RBF([0.8, 1.5])
    workspace = Workspace(len(y))
    objective = LaplaceObjective(make_covariance(kernel, X), y, workspace)
    objective(kernel.theta)
    first = workspace.buffer()
    objective(kernel.theta + 0.1)
    objective.value(kernel.theta - 0.1)
    L, _, _, _ = objective.factor_with_jitter(kernel.theta)
    assert workspace.buffer() is first and L is first


def test_laplace_objective_not_positive_definite_answers_inf():
    X, y = _binary_data(n=10)
    objective = LaplaceObjective(NegativeDefinite(len(y)), y, Workspace(len(y)))
    value, grad = objective(np.array([0.0]))
    assert value == np.inf and np.all(grad == 0.0)
    assert objective.value(np.array([0.0])) == np.inf
    assert objective.n_evaluations == 2
