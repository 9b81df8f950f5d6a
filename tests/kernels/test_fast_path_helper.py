"""fastgp.kernels.fast_path: whether a kernel on given inputs takes the fast
path, the first part that keeps it off and why, and the solvers that accept
it; and that its answer is the estimators' own (the backend a fit builds,
the solvers a fit accepts)."""

import doctest
import warnings

import numpy as np
import pytest
from sklearn.gaussian_process.kernels import (
    RBF,
    ExpSineSquared,
    Kernel,
    Matern,
    PairwiseKernel,
    RationalQuadratic,
    WhiteKernel,
)
from sklearn.gaussian_process.kernels import ConstantKernel as C

import fastgp.kernels
from fastgp import GaussianProcessRegressor
from fastgp._backend.covariance import make_covariance
from fastgp.exceptions import SlowKernelWarning
from fastgp.kernels import FastPath, fast_path

ALL_SOLVERS = ("cholesky", "iterative", "vecchia")


class TwiceRBF(Kernel):
    """A user's own kernel: 2 exp(-|x - x'|^2 / 2), no hyperparameters."""

    def __init__(self, scale=2.0):
        self.scale = scale

    def __call__(self, X, Y=None, eval_gradient=False):
        Y = X if Y is None else Y
        K = self.scale * RBF(1.0)(X, Y)
        return (K, np.empty(K.shape + (0,))) if eval_gradient else K

    def diag(self, X):
        return np.full(len(X), float(self.scale))

    def is_stationary(self):
        return True


class MyRBF(RBF):
    """A subclass of a fast-path kernel (it may change __call__)."""


def _X(n=6, d=2):
    return np.random.default_rng(0).normal(size=(n, d))


def test_fast_path_supported_kernel_is_on_it_with_every_solver():
    kernel = C(1.0) * RBF([1.0, 2.0]) ** 2 + WhiteKernel(0.1)
    result = fast_path(kernel, _X())
    assert isinstance(result, FastPath)
    assert bool(result) and result.on_fast_path
    assert result.reason == ""
    assert result.solvers == ALL_SOLVERS
    assert str(result).startswith("on fastgp's fast path")
    # without inputs: the per-dimension length scale sets the columns
    assert fast_path(kernel)
    assert fast_path(fastgp.kernels.ExpSineSquared([1.0, 2.0], [3.0, 4.0]))


def test_fast_path_user_kernel_is_named_with_the_remedy():
    result = fast_path(C(1.0) * TwiceRBF() + WhiteKernel(), _X())
    assert not result
    assert result.reason.startswith("TwiceRBF is not on the fast path, which covers ")
    assert "register it" in result.reason and "docs/adding_a_kernel.md" in result.reason
    assert result.solvers == ("cholesky",)
    assert str(result).startswith("not on fastgp's fast path: TwiceRBF")


def test_fast_path_subclass_of_a_fast_kernel_says_classes_match_exactly():
    result = fast_path(MyRBF(1.0) + WhiteKernel(), _X())
    assert not result
    assert "MyRBF is a subclass of RBF" in result.reason
    assert "exactly" in result.reason


def test_fast_path_scikit_learn_kernel_off_it_lists_what_it_covers():
    result = fast_path(PairwiseKernel(), _X())
    assert not result
    assert result.reason.startswith("PairwiseKernel is not on the fast path")
    assert "Matern (nu in 0.5, 1.5, 2.5, inf)" in result.reason
    assert "register it" not in result.reason  # scikit-learn's, not the user's


def test_fast_path_rejects_a_registered_type_for_its_hyperparameters():
    # Matern is on the fast path for four values of nu only (Bessel functions
    # otherwise): rejected for a hyperparameter, not for its type
    result = fast_path(RBF(1.0) + Matern(1.0, nu=1.0), _X())
    assert not result
    assert result.reason.startswith("Matern(length_scale=1, nu=1) is not on the fast path")
    assert "nu in 0.5, 1.5, 2.5, inf" in result.reason
    assert result.solvers == ("cholesky",)
    assert fast_path(RBF(1.0) + Matern(1.0, nu=2.5), _X())


@pytest.mark.parametrize("X, described", [
    (["abc", "de", "f"], "the inputs are a list of str (structured)"),
    ([("a", 1), ("b", 2)], "the inputs are a list of tuple (structured)"),
    (np.array(["ab", "cd"]), "the inputs are an ndarray of dtype <U2 (structured)"),
])
def test_fast_path_structured_inputs_are_named(X, described):
    result = fast_path(RBF(1.0), X)
    assert not result
    assert result.reason.startswith(described)
    assert "only numeric 2-D arrays run on the fast path" in result.reason
    assert result.solvers == ("cholesky",)


def test_fast_path_one_dimensional_inputs_say_how_to_make_a_column():
    result = fast_path(RBF(1.0), np.arange(5.0))
    assert not result
    assert "shape (5,)" in result.reason and "reshape(-1, 1)" in result.reason


def test_fast_path_numeric_lists_and_integers_are_converted_as_a_fit_does():
    assert fast_path(RBF([1.0, 2.0]), [[1, 2], [3, 4]])
    assert fast_path(RBF([1.0, 2.0]), np.arange(6, dtype=np.int32).reshape(3, 2))


def test_fast_path_kernel_that_does_not_fit_the_inputs_has_no_solver():
    result = fast_path(RBF([1.0, 2.0, 3.0]), _X(d=2))
    assert not result
    assert result.solvers == ()
    assert "does not fit inputs with 2 feature(s)" in result.reason
    assert "(3!=2)" in result.reason  # scikit-learn's own words
    result = fast_path(RationalQuadratic(length_scale=[1.0, 2.0]), _X())
    assert "only supports isotropic version" in result.reason


@pytest.mark.parametrize("kernel, n_features", [
    (C(1.0) * RBF([1.0, 2.0]) + WhiteKernel(0.1), 2),
    # scikit-learn's ExpSineSquared is positive definite in one dimension only
    (ExpSineSquared(1.0, 2.0) ** 2, 1),
    (RBF(1.0) * Matern(1.0, nu=1.0), 2),
    (TwiceRBF(), 2),
    (PairwiseKernel(), 2),
], ids=["fast", "exp-sine-pow", "matern-nu-1", "user", "pairwise"])
def test_fast_path_agrees_with_the_backend_and_the_solvers_a_fit_accepts(kernel,
                                                                         n_features):
    X = _X(d=n_features)
    result = fast_path(kernel, X)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SlowKernelWarning)
        assert make_covariance(kernel, X, warn=False).is_fast == bool(result)
    y = X[:, 0]
    for solver in ALL_SOLVERS:
        gpr = GaussianProcessRegressor(kernel, solver=solver, optimizer=None, alpha=1e-2)
        if solver in result.solvers:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # SlowKernelWarning off the fast path
                gpr.fit(X, y)
        else:
            with pytest.raises(ValueError, match=f'solver="{solver}" needs a kernel'):
                gpr.fit(X, y)


def test_fast_path_docstring_example_runs():
    finder = doctest.DocTestFinder()
    runner = doctest.DocTestRunner(optionflags=doctest.NORMALIZE_WHITESPACE)
    for test in finder.find(fastgp.kernels.fast_path, "fast_path",
                            globs={"__name__": "fastgp.kernels"}):
        runner.run(test)
    assert runner.summarize(verbose=False).failed == 0
    assert runner.summarize(verbose=False).attempted >= 4
