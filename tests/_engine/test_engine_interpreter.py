"""The one kernel interpreter (fastgp._engine.interpreter.eval_tile) in all
its modes: for every leaf and operator, on tiles longer than one TILE, the
values do not depend on the mode, the combined mode's theta- and input
derivatives equal the single modes' bit for bit, and they equal
scikit-learn's K_gradient and central finite differences of the kernel
object (their NumPy twins)."""

import numpy as np
import pytest
from sklearn.gaussian_process.kernels import RBF, DotProduct, ExpSineSquared
from sklearn.gaussian_process.kernels import ConstantKernel as C

from fastgp import kernels as fastgp_kernels
from fastgp._engine import interpreter as it
from fastgp._backend.covariance import kernel_input
from fastgp._backend.lowering import lower_kernel
from _latent_kernels import TILE_KERNELS, kernel_input_derivatives

Q = 2
#: The GPLVM tests' leaves and compositions, and the cases they lack: shared
#: parameters of the ARD kernels, a fixed hyperparameter, a three-level tree.
KERNELS = {
    **TILE_KERNELS,
    "RQ-ard-shared": fastgp_kernels.RationalQuadratic(0.9, alpha=2.1),
    "ExpSine-ard-shared-p": fastgp_kernels.ExpSineSquared([1.1, 0.8], 2.7),
    "ExpSine-ard-shared-l": fastgp_kernels.ExpSineSquared(0.9, [2.5, 3.1]),
    "fixed-C*RBF": C(1.5, constant_value_bounds="fixed") * RBF([0.6, 1.7]),
    "ExpSine*RQ-ard+Dot": (ExpSineSquared(1.2, 2.5)
                           * fastgp_kernels.RationalQuadratic([0.7, 1.4], alpha=0.9)
                           + DotProduct(0.3)),
}
ALL = it.D_THETA | it.D_X1 | it.D_X2
MODES = (it.VALUES, it.D_THETA, it.D_X1, it.D_X1 | it.D_X2, it.D_THETA | it.D_X1, ALL)


def _params():
    return [pytest.param(k, id=name) for name, k in KERNELS.items()]


def _inputs():
    rng = np.random.default_rng(7)
    X1 = rng.uniform(-1.5, 1.5, size=(it.TILE + 9, Q))  # two tiles, the second short
    X2 = rng.uniform(-1.5, 1.5, size=(3, Q))
    X1[5] = X2[1]  # r = 0 off the diagonal (Matern 1/2, ExpSineSquared limits)
    return X1, X2


def _evaluate(kernel, X1, X2, mode):
    """Values (n1, n2), G (n1, n2, n_theta), D1, D2 (n1, n2, Q) of eval_tile
    in ``mode`` over all tiles of X1 against each row of X2."""
    program = lower_kernel(kernel, Q)
    params = program.params(kernel.theta)
    V, G, D1, D2, Wk = it.allocate_scratch(program.stack_depth, program.n_theta, Q)
    n1, n2 = X1.shape[0], X2.shape[0]
    X1_T, X2_T = kernel_input(X1), kernel_input(X2)  # the passes' layout (d, n)
    out = dict(V=np.full((n1, n2), np.nan), G=np.full((n1, n2, program.n_theta), np.nan),
               D1=np.full((n1, n2, Q), np.nan), D2=np.full((n1, n2, Q), np.nan))
    for j in range(n2):
        for i0 in range(0, n1, it.TILE):
            n = min(it.TILE, n1 - i0)
            assert it.eval_tile(it.engine_table(), X1_T, i0, n, X2_T, j, -1, program.ops,
                                program.op_float, params, program.theta_of_param, mode,
                                V, G, D1, D2, Wk) == 1
            rows = slice(i0, i0 + n)
            out["V"][rows, j] = V[0, :n]
            if mode & it.D_THETA:
                out["G"][rows, j] = G[:program.n_theta, :n].T
            if mode & (it.D_X1 | it.D_X2):
                out["D1"][rows, j] = D1[0, :, :n].T
            if mode & it.D_X2:
                out["D2"][rows, j] = D2[0, :, :n].T
    return out


def _finite_differences_theta(kernel, X1, X2, h=1e-6):
    theta = kernel.theta
    G = np.empty((X1.shape[0], X2.shape[0], theta.size))
    for p in range(theta.size):
        e = np.zeros(theta.size)
        e[p] = h
        G[:, :, p] = (kernel.clone_with_theta(theta + e)(X1, X2)
                      - kernel.clone_with_theta(theta - e)(X1, X2)) / (2 * h)
    return G


@pytest.mark.parametrize("kernel", _params())
def test_eval_tile_modes_agree_with_each_other_and_with_the_kernel(kernel):
    X1, X2 = _inputs()
    results = {mode: _evaluate(kernel, X1, X2, mode) for mode in MODES}
    combined = results[ALL]
    for mode, result in results.items():
        np.testing.assert_array_equal(result["V"], combined["V"], err_msg=f"mode {mode}")
    np.testing.assert_array_equal(results[it.D_THETA]["G"], combined["G"])
    np.testing.assert_array_equal(results[it.D_THETA | it.D_X1]["G"], combined["G"])
    for mode in (it.D_X1, it.D_X1 | it.D_X2, it.D_THETA | it.D_X1):
        np.testing.assert_array_equal(results[mode]["D1"], combined["D1"])
    np.testing.assert_array_equal(results[it.D_X1 | it.D_X2]["D2"], combined["D2"])

    np.testing.assert_allclose(combined["V"], kernel(X1, X2), rtol=1e-12, atol=1e-14)
    # K_gradient of the stacked inputs: its X1-by-X2 block (no diagonal entries)
    n1 = X1.shape[0]
    _, K_gradient = kernel(np.vstack([X1, X2]), eval_gradient=True)
    np.testing.assert_allclose(combined["G"], K_gradient[:n1, n1:], rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(combined["G"], _finite_differences_theta(kernel, X1, X2),
                               rtol=1e-6, atol=1e-8)
    D1_ref, D2_ref = kernel_input_derivatives(kernel, X1, X2)
    np.testing.assert_allclose(combined["D1"], D1_ref, rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(combined["D2"], D2_ref, rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("kernel", _params())
def test_eval_tile_white_noise_and_its_gradient_only_on_the_diagonal(kernel):
    X1, _ = _inputs()
    program = lower_kernel(kernel, Q)
    V, G, D1, D2, Wk = it.allocate_scratch(program.stack_depth, program.n_theta, Q)
    n = it.TILE
    j, i0 = 3, 0  # entry t = 3 is the training diagonal (X1[3], X1[3])
    it.eval_tile(it.engine_table(), kernel_input(X1), i0, n, kernel_input(X1), j, j - i0,
                 program.ops, program.op_float,
                 program.params(kernel.theta), program.theta_of_param, ALL,
                 V, G, D1, D2, Wk)
    K, K_gradient = kernel(X1[:n], eval_gradient=True)
    np.testing.assert_allclose(V[0, :n], K[:, j], rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(G[:program.n_theta, :n].T, K_gradient[:, j], rtol=1e-10,
                               atol=1e-12)
