"""What a fitted estimator's ``log_marginal_likelihood(theta)`` does before
it evaluates: scikit-learn's contract for ``theta``, ``eval_gradient`` and
``clone_kernel``, and the memory check of one evaluation."""

import numpy as np

from .._backend.covariance import make_covariance
from .._validation import kernel_for_likelihood
from ..memory import check_memory

__all__ = ["likelihood_request", "check_evaluation_memory", "evaluate_likelihood"]


def likelihood_request(estimator, theta, eval_gradient, clone_kernel):
    """What a fitted estimator's ``log_marginal_likelihood(theta,
    eval_gradient, clone_kernel)`` evaluates, by scikit-learn's contract.

    Returns None where ``theta`` is None (the caller returns its fitted
    value), else ``(kernel, theta, covariance)``: the kernel at ``theta``
    (:func:`fastgp._validation.kernel_for_likelihood`), ``theta`` as float64
    and the covariance backend over the estimator's ``X_train_``.
    """
    at_theta = kernel_for_likelihood(estimator.kernel_, theta, eval_gradient, clone_kernel)
    if at_theta is None:
        return None
    kernel, theta = at_theta
    return kernel, theta, make_covariance(kernel, estimator.X_train_, warn=False)


def evaluate_likelihood(objective, theta, eval_gradient, place):
    """The log likelihood (numpy.float64) at ``theta`` and, with
    ``eval_gradient``, its gradient: the negated value and gradient of
    ``objective`` (a :class:`~fastgp._solvers.base.GuardedObjective`), each
    evaluated as ``place(function, theta)`` (a solver's ``outside_fit``).
    NumPy's float64, as scikit-learn returns: arithmetic with float32
    numbers stays float64 under NumPy 2's promotion rules."""
    if eval_gradient:
        value, grad = place(objective, theta)
        return np.float64(-value), -grad
    return np.float64(-place(objective.value, theta))


def check_evaluation_memory(needed_bytes, n_samples):
    """The memory check of one ``log_marginal_likelihood(theta)``
    (:func:`fastgp.memory.check_memory`, with its remedies)."""
    check_memory(needed_bytes, n_samples=n_samples,
                 operation="log_marginal_likelihood(theta)",
                 remedies=["evaluate it on fewer samples", "use a machine with more memory"])
