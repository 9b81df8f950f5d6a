"""The latent kernels and the central-difference input derivatives shared by
the interpreter's tests (tests/_engine/test_engine_interpreter.py) and the
GPLVM's (tests/_solvers/cholesky/test_gplvm_gradient.py)."""

import numpy as np
from sklearn.gaussian_process.kernels import (RBF, DotProduct, ExpSineSquared, Matern,
                                              RationalQuadratic, WhiteKernel)
from sklearn.gaussian_process.kernels import ConstantKernel as C

from fastgp import kernels as fastgp_kernels

__all__ = ["TILE_KERNELS", "kernel_input_derivatives"]


def _tile_kernels():
    """Every leaf with an input derivative, alone and composed (Q = 2)."""
    return {
        "C": C(1.7),
        "White": WhiteKernel(0.3),
        "RBF": RBF(0.8),
        "RBF-ard": RBF([0.6, 1.7]),
        "Matern12-ard": Matern([0.7, 1.3], nu=0.5),
        "Matern32": Matern(0.9, nu=1.5),
        "Matern52-ard": Matern([0.7, 1.3], nu=2.5),
        "RQ": RationalQuadratic(length_scale=0.8, alpha=1.5),
        "RQ-ard": fastgp_kernels.RationalQuadratic([0.7, 1.4], alpha=0.9),
        "ExpSine": ExpSineSquared(1.2, 2.5),
        "ExpSine-ard": fastgp_kernels.ExpSineSquared([1.1, 0.8], [2.5, 3.1]),
        "Dot": DotProduct(0.7),
        "C*RBF+White": C(1.5) * RBF([0.6, 1.7]) + WhiteKernel(0.1),
        "Dot*RBF": DotProduct(0.5) * RBF(1.3),
        "(RQ+Matern32)**1.5": (RationalQuadratic(0.8, alpha=1.5)
                               + Matern(1.1, nu=1.5)) ** 1.5,
        "Dot**2+C": DotProduct(0.4) ** 2 + C(0.5),
    }


TILE_KERNELS = _tile_kernels()


def kernel_input_derivatives(kernel, X1, X2, h=1e-6):
    """NumPy twin of eval_tile's input derivatives (mode D_X1 | D_X2):
    central differences of the scikit-learn
    kernel object in each coordinate of X1 (first argument) and X2 (second).
    Returns D1, D2 of shape (n1, n2, Q)."""
    n1, Q = X1.shape
    D1 = np.empty((n1, X2.shape[0], Q))
    D2 = np.empty_like(D1)
    for q in range(Q):
        e = np.zeros(Q)
        e[q] = h
        D1[:, :, q] = (kernel(X1 + e, X2) - kernel(X1 - e, X2)) / (2 * h)
        D2[:, :, q] = (kernel(X1, X2 + e) - kernel(X1, X2 - e)) / (2 * h)
    return D1, D2
