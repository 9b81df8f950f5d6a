"""Warnings that point at the user's line.

A warning's ``stacklevel`` counted by hand breaks whenever a call moves
between modules, and a fit reaches fastgp's warnings through different depths
(``fit`` or ``fit_transform``, scikit-learn's ``_fit_context`` wrapper,
``cross_val_score`` and the joblib machinery under it, SciPy's optimiser
calling the objective...). :func:`warn_user` attributes the warning to the
first frame outside fastgp and the libraries that call it (scikit-learn,
joblib, SciPy) instead: the line that called the estimator, which is where
the user can act on it (and where Python's "default" filter shows a warning
once per location). Every warning fastgp emits goes through it.
"""

import os
import sys
import warnings

import joblib
import scipy
import sklearn

__all__ = ["warn_user"]

#: Frames in these directories are library code, not the user's.
_LIBRARY_DIRS = tuple(os.path.join(os.path.dirname(os.path.abspath(module.__file__)), "")
                      for module in (sys.modules[__package__], sklearn, joblib, scipy))


def warn_user(message, category):
    """``warnings.warn(message, category)`` attributed to the first calling
    frame whose file is outside fastgp, scikit-learn, joblib and SciPy."""
    frame = sys._getframe(1)  # warn_user's caller: stacklevel 2
    stacklevel = 2
    while frame is not None and frame.f_code.co_filename.startswith(_LIBRARY_DIRS):
        frame = frame.f_back
        stacklevel += 1
    warnings.warn(message, category, stacklevel=stacklevel)
