"""Old import paths of public names that moved, kept working with a
DeprecationWarning (scikit-learn's practice for a renamed module).

A shim module defines ``__getattr__ = moved_names(__name__, {name: target
module})``; Python calls it for any attribute the shim does not define
(PEP 562), so ``from fastgp.linalg import JitterWarning`` still works and
says where the name lives now.
"""

import importlib
import warnings

__all__ = ["moved_names"]


def moved_names(shim, targets):
    """The module ``__getattr__`` of the shim module named ``shim``.

    targets : dict of name -> dotted name of the module that defines it now
    """
    def __getattr__(name):
        if name not in targets:
            raise AttributeError(f"module {shim!r} has no attribute {name!r}")
        warnings.warn(
            f"{shim}.{name} has moved to {targets[name]}.{name}; import it from "
            f"there. The old path will be removed in a future release.",
            DeprecationWarning, stacklevel=2)
        return getattr(importlib.import_module(targets[name]), name)

    return __getattr__
