"""One adapter per library, all answering the same questions about one
problem (see :mod:`bench._problems`):

- ``loss_grad(theta) -> (value, grad)``: the negative log marginal likelihood
  and its gradient with respect to scikit-learn's log-space ``theta`` (for the
  GPLVM, the latent points first, then ``theta``; for the classifier, the
  Laplace approximation's);
- ``loss(theta) -> value``;
- ``fit() -> dict``: a full fit from the problem's start with SciPy's L-BFGS-B
  within the kernel's bounds, the driver scikit-learn uses, so that every
  library takes the same path and only the cost of an evaluation differs.

Each adapter maps ``theta`` to its library's own parametrisation, so all of
them evaluate the same function (the comparison reports each library's value
at the start beside fastgp's to show it).

Adapters import their library lazily: importing this package imports no peer.
"""

from ._base import Adapter, lbfgsb_driver
from .floor import Floor

__all__ = ["Adapter", "ADAPTERS", "LIBRARY_LABELS", "get_adapter", "library_for",
           "lbfgsb_driver", "Floor"]

#: name -> "module:Class"; the comparison's ``--peers`` takes these names.
ADAPTERS = {
    "fastgp": "bench.peers.fastgp_engine:FastGP",
    "fastgp-iterative": "bench.peers.fastgp_iterative:FastGPIterative",
    "sklearn": "bench.peers.sklearn_gpr:Sklearn",
    "gpy": "bench.peers.gpy_gpr:GPyRegression",
    "gpytorch-exact": "bench.peers.gpytorch_gpr:GPyTorchExact",
    "gpytorch": "bench.peers.gpytorch_gpr:GPyTorchDefault",
    "jax": "bench.peers.jax_gpr:JaxCholesky",
    "fastgp-gplvm": "bench.peers.gplvm:FastGPLVM",
    "gpy-gplvm": "bench.peers.gplvm:GPyGPLVM",
    "jax-gplvm": "bench.peers.gplvm:JaxGPLVM",
    "fastgp-gpc": "bench.peers.gpc:FastGPClassifier",
    "sklearn-gpc": "bench.peers.gpc:SklearnClassifier",
}

LIBRARY_LABELS = {
    "fastgp": "fastgp",
    "fastgp-iterative": 'fastgp (solver="iterative")',
    "sklearn": "scikit-learn",
    "gpy": "GPy",
    "gpytorch-exact": "GPyTorch (Cholesky)",
    "gpytorch": "GPyTorch (default: CG/Lanczos above 800)",
    "jax": "JAX (value_and_grad, Cholesky)",
    "fastgp-gplvm": "fastgp GPLVM",
    "gpy-gplvm": "GPy GPLVM",
    "jax-gplvm": "JAX GPLVM",
    "fastgp-gpc": "fastgp GaussianProcessClassifier",
    "sklearn-gpc": "scikit-learn GaussianProcessClassifier",
    "floor-potrf": "floor: dpotrf",
    "floor-potrf-potri": "floor: dpotrf + dpotri",
}


#: problems whose rows have adapters of their own, named "<peer>-<problem>"
OWN_ADAPTERS = ("gplvm", "gpc")


def library_for(peer, problem):
    """The adapter name of ``peer`` (``"fastgp"``, ``"sklearn"``, ...) on
    ``problem``: the peer itself, or ``"<peer>-<problem>"`` for the GPLVM and
    classifier problems (None where that peer has no such adapter)."""
    if problem in OWN_ADAPTERS:
        name = f"{peer}-{problem}"
        return name if name in ADAPTERS else None
    return peer


def get_adapter(name):
    """The adapter class registered as ``name``."""
    import importlib

    module, cls = ADAPTERS[name].split(":")
    return getattr(importlib.import_module(module), cls)
