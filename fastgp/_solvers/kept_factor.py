"""An exact solver's last step: the factor of the model a fit keeps
(Rasmussen & Williams 2006, Alg. 2.1 lines 2-3), for the regression, the
GPLVM and the classifier alike, wherever the buffer lies (host or device
memory: the objective's workspace knows)."""

import numpy as np

from .._user_warnings import warn_user
from ..exceptions import JitterWarning, NonFiniteMatrixError, NotPositiveDefiniteError
from .base import KeptModel, PointFailed

__all__ = ["final_factor"]


def final_factor(objective, point, messages):
    """The :class:`~fastgp._solvers.base.KeptModel` at ``point``: its L is the
    workspace's buffer, released to the caller, holding the lower Cholesky
    factor with jitter where K is not numerically positive definite
    (:func:`fastgp._linalg.lapack.cholesky_with_jitter`) and its strict upper
    triangle zeroed; A = K^-1 Y.

    objective : any objective with ``factor_with_jitter(point)`` -> (L, A,
        value, jitter), A in host memory, and a ``workspace`` (``release()``
        and ``clear_strict_upper(L)``); its ``kept_mean(L)`` is the kept
        model's mean (None without one)
    messages : fastgp._solvers.base.FactorMessages

    Raises ValueError (K not finite, or the value or A not finite) and
    numpy.linalg.LinAlgError (not positive definite even with jitter) with
    ``messages``' texts; warns :class:`~fastgp.exceptions.JitterWarning`
    where jitter was added.
    """
    try:
        L, A, value, jitter = objective.factor_with_jitter(point)
    except PointFailed as exc:  # a mean's GLS with no finite answer
        raise np.linalg.LinAlgError(messages.not_positive_definite(0.0)) from exc
    except NonFiniteMatrixError as exc:
        raise ValueError(messages.non_finite(), str(exc)) from exc
    except NotPositiveDefiniteError as exc:
        raise np.linalg.LinAlgError(
            messages.not_positive_definite(getattr(exc, "jitter", 0.0)), str(exc)
        ) from exc
    if jitter > 0.0:
        warn_user(messages.jitter(jitter), JitterWarning)
    if not (np.isfinite(value) and np.all(np.isfinite(A))):
        raise ValueError(messages.overflow())
    mean = objective.kept_mean(L)
    objective.workspace.clear_strict_upper(L)
    released = objective.workspace.release()
    if released is not L:
        raise AssertionError("the final factor is not the workspace's buffer")
    return KeptModel(A=A, value=float(value), jitter=jitter, L=L, mean=mean)
