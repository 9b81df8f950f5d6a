"""fastgp: exact Gaussian-process hyperparameter optimisation whose gradient
costs one N x N buffer.

Importing fastgp compiles nothing and changes no global state; the Numba
routines compile (or load from Numba's on-disk cache) on first use.
"""

from .exceptions import NumbaCacheWarning
from . import kernels  # noqa: F401 - registers its kernels on the fast path
from .classifier import GaussianProcessClassifier
from .gplvm import GPLVM
from .regressor import GaussianProcessRegressor

__all__ = ["GaussianProcessRegressor", "GaussianProcessClassifier", "GPLVM",
           "NumbaCacheWarning", "__version__"]
__version__ = "0.1.0"
