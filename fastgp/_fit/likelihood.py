"""What a fitted estimator's ``log_marginal_likelihood(theta)`` does before
it evaluates: scikit-learn's contract for ``theta``, ``eval_gradient`` and
``clone_kernel``, and the memory check of one evaluation."""

from .._backend.covariance import make_covariance
from .._validation import kernel_for_likelihood
from ..memory import check_memory

__all__ = ["likelihood_request", "check_evaluation_memory"]


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


def check_evaluation_memory(needed_bytes, n_samples):
    """The memory check of one ``log_marginal_likelihood(theta)``
    (:func:`fastgp.memory.check_memory`, with its remedies)."""
    check_memory(needed_bytes, n_samples=n_samples,
                 operation="log_marginal_likelihood(theta)",
                 remedies=["evaluate it on fewer samples", "use a machine with more memory"])
