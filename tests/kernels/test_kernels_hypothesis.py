"""Property-based tests: random kernel expressions on the fast path against
scikit-learn's log marginal likelihood and gradient.

Expressions are random trees of Sum, Product and Exponentiation, up to three
operator levels deep, over random leaves from every fast-path kernel, with
random positive hyperparameters and a random fixed/free mask; inputs are
random problems in one to three dimensions, mostly small (3-12 samples) and
sometimes of two or three tiles (TILE rows: the threaded, multi-tile
passes), on an input scale s from 1e-3 to 1e3 with length scales and periods
in proportion (0.5 s to 2 s), so that absolute length scales span 5e-4 to 2e3.
A WhiteKernel (free or fixed) and sklearn's ``alpha`` keep the matrices
conditioned; draws whose K + alpha I has a condition number above 1e7 (a
DotProduct at s = 1e3) are discarded, since two Cholesky solvers then differ by
more than the 1e-8 compared. Inputs are positive so
that DotProduct is positive and fractional powers are defined; scikit-learn's
ExpSineSquared is drawn only in one dimension (on the Euclidean distance it is
not positive definite in more).
"""

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from sklearn.gaussian_process import GaussianProcessRegressor as SklearnGPR
from sklearn.gaussian_process import kernels as skk

from conftest import ALPHA, assert_gradient_close
from fastgp import GaussianProcessRegressor
from fastgp import kernels as fk
from fastgp._engine.interpreter import TILE
from fastgp._backend.covariance import FastCovariance, make_covariance

PARAM = st.floats(0.5, 2.0)
FREE = (1e-5, 1e5)

#: Input scales s: X in [0, 2 s); length scales and periods are s x PARAM.
SCALES = st.floats(-3.0, 3.0).map(lambda e: 10.0 ** e)

#: Sample counts: mostly small, sometimes two or three tiles of TILE rows
#: (one_of picks a branch about evenly: the small branch is repeated).
N_SAMPLES = st.one_of(*([st.integers(3, 12)] * 4),
                      st.sampled_from([2 * TILE + 37, 3 * TILE - 50]))

#: Largest condition number of K + alpha I compared at 1e-8.
MAX_CONDITION = 1e7

SETTINGS = settings(max_examples=60, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow,
                                           HealthCheck.filter_too_much])


@st.composite
def bounds(draw):
    return "fixed" if draw(st.booleans()) else FREE


@st.composite
def length_scales(draw, n_features, scale=1.0):
    if n_features > 1 and draw(st.booleans()):
        return [scale * v for v in draw(st.lists(PARAM, min_size=n_features,
                                                  max_size=n_features))]
    return scale * draw(PARAM)


@st.composite
def leaves(draw, n_features, scale):
    kinds = ["C", "RBF", "Matern", "RQ", "Dot", "fk.RQ", "fk.ExpSine"]
    if n_features == 1:
        kinds.append("ExpSine")
    kind = draw(st.sampled_from(kinds))
    if kind == "C":
        return skk.ConstantKernel(draw(PARAM), draw(bounds()))
    if kind == "RBF":
        return skk.RBF(draw(length_scales(n_features, scale)), draw(bounds()))
    if kind == "Matern":
        nu = draw(st.sampled_from([0.5, 1.5, 2.5, np.inf]))
        return skk.Matern(draw(length_scales(n_features, scale)), draw(bounds()), nu=nu)
    if kind == "RQ":
        return skk.RationalQuadratic(scale * draw(PARAM), draw(PARAM), draw(bounds()),
                                     draw(bounds()))
    if kind == "ExpSine":
        return skk.ExpSineSquared(scale * draw(PARAM), scale * draw(PARAM), draw(bounds()),
                                  draw(bounds()))
    if kind == "Dot":
        return skk.DotProduct(draw(PARAM), draw(bounds()))
    if kind == "fk.RQ":
        return fk.RationalQuadratic(draw(length_scales(n_features, scale)), draw(PARAM),
                                    draw(bounds()), draw(bounds()))
    return fk.ExpSineSquared(draw(length_scales(n_features, scale)),
                             draw(length_scales(n_features, scale)), draw(bounds()),
                             draw(bounds()))


@st.composite
def expressions(draw, n_features, scale, levels=3):
    """A leaf, or an operator over expressions with one level fewer."""
    if levels == 0 or draw(st.integers(0, 2)) == 0:
        return draw(leaves(n_features, scale))
    operator = draw(st.sampled_from(["sum", "product", "power"]))
    left = draw(expressions(n_features, scale, levels - 1))
    if operator == "power":
        return skk.Exponentiation(left, draw(st.sampled_from([2.0, 3.0, 0.5, 1.5])))
    right = draw(expressions(n_features, scale, levels - 1))
    return skk.Sum(left, right) if operator == "sum" else skk.Product(left, right)


@st.composite
def problems(draw):
    n_features = draw(st.integers(1, 3))
    scale = draw(SCALES)
    kernel = draw(expressions(n_features, scale))
    kernel = kernel + skk.WhiteKernel(draw(st.floats(0.05, 0.5)), draw(bounds()))
    n_samples = draw(N_SAMPLES)
    seed = draw(st.integers(0, 2**31 - 1))
    rng = np.random.default_rng(seed)
    X = scale * rng.uniform(0.0, 2.0, size=(n_samples, n_features))
    y = np.sin(2.0 * X.sum(axis=1) / scale) + 0.1 * rng.standard_normal(n_samples)
    return kernel, X, y, rng


@pytest.mark.slow  # hundreds of kernels against scikit-learn
@SETTINGS
@given(problems())
def test_kernels_hypothesis_lml_and_gradient_match_sklearn(problem):
    kernel, X, y, rng = problem
    assert isinstance(make_covariance(kernel, X), FastCovariance)
    try:
        ref = SklearnGPR(kernel, alpha=ALPHA, optimizer=None).fit(X, y)
    except np.linalg.LinAlgError:  # a fractional power of a sum need not be PD
        assume(False)
    K = kernel(X) + ALPHA * np.eye(len(X))
    assume(np.all(np.isfinite(K)))
    eigenvalues = np.linalg.eigvalsh(K)
    assume(eigenvalues[0] > 0 and eigenvalues[-1] / eigenvalues[0] < MAX_CONDITION)
    ours = GaussianProcessRegressor(kernel, alpha=ALPHA, optimizer=None).fit(X, y)
    theta = kernel.theta + rng.uniform(-0.3, 0.3, size=kernel.n_dims)
    ref_value, ref_grad = ref.log_marginal_likelihood(theta, eval_gradient=True)
    assume(np.isfinite(ref_value))
    value, grad = ours.log_marginal_likelihood(theta, eval_gradient=True)
    np.testing.assert_allclose(value, ref_value, rtol=1e-8, atol=1e-10)
    assert grad.shape == (kernel.n_dims,)
    if kernel.n_dims:
        assert_gradient_close(grad, ref_grad, rtol=1e-8)
