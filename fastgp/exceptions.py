"""Every warning and error that fastgp raises for its users to catch or filter.

One module, as scikit-learn's ``sklearn.exceptions``: a user who wants to
silence a warning or catch an error finds its class here, whatever part of
fastgp raises it. Optimiser trouble is scikit-learn's own
``sklearn.exceptions.ConvergenceWarning``, as in scikit-learn.

The classes are also importable where they were defined before
(``fastgp.memory.InsufficientMemoryError``, ``fastgp.NumbaCacheWarning``,
``fastgp.plotting.MissingMatplotlibError``; ``fastgp.covariance``,
``fastgp.linalg`` and ``fastgp.memory_budget`` with a DeprecationWarning).

This module imports nothing of fastgp's, so every layer may import it.
"""

import numpy as np

__all__ = [
    "InsufficientMemoryError",
    "MemoryWaitWarning",
    "MemoryLedgerWarning",
    "SlowKernelWarning",
    "LongFitWarning",
    "JitterWarning",
    "NotPositiveDefiniteError",
    "NonFiniteMatrixError",
    "NumbaCacheWarning",
    "MissingMatplotlibError",
    "DeviceUnavailableError",
]


class InsufficientMemoryError(MemoryError):
    """An operation would need more memory than the machine has available.

    Parameters
    ----------
    message : str
        The text shown: both figures, N, where the figure was read and the
        remedies.
    needed : int
        Estimated bytes the operation would allocate.
    available : int
        Bytes available when the check ran.
    n_samples : int
        The N that sets the size.
    source : str
        Where ``available`` was read.

    Attributes
    ----------
    needed : int
        Estimated bytes the operation would allocate.
    available : int
        Bytes available when the check ran.
    n_samples : int
        The N of the N x N buffer.
    source : str
        Where ``available`` was read.
    """

    def __init__(self, message, needed, available, n_samples, source):
        super().__init__(message)
        self.needed = needed
        self.available = available
        self.n_samples = n_samples
        self.source = source


class MemoryWaitWarning(UserWarning):
    """A fit waits for other fastgp fits on this machine to release memory."""


class MemoryLedgerWarning(UserWarning):
    """The machine-wide memory ledger cannot be used safely here.

    Its directory is not this user's own, a file in it is a symbolic link,
    its lock is held past the timeout, or an entry is not a reservation
    fastgp wrote; the message says which. The fit then checks its memory
    against the memory available now, without the other fits' reservations.
    """


class SlowKernelWarning(UserWarning):
    """The kernel is evaluated through its Python object, not fastgp's fast path."""


class LongFitWarning(UserWarning):
    """A fit will likely take longer than about half a minute.

    Given once per fit, after its first evaluation: that evaluation's time,
    the typical number of evaluations, the estimated total and, where there
    is one, a faster solver; ``max_time`` caps a fit and ``verbose`` shows
    its progress with an estimated time to go (docs/reliability.md, "Long
    fits").
    """


class JitterWarning(UserWarning):
    """Jitter was added to the diagonal of a kernel matrix.

    The matrix was not numerically positive definite; the amount added is in
    the message.
    """


class NotPositiveDefiniteError(np.linalg.LinAlgError):
    """A Cholesky factorisation found a leading minor not positive definite.

    Raised where LAPACK's dpotrf (or fastgp's blocked factor) reports one.

    Parameters
    ----------
    order : int
        The order (1-based) of the first failing leading minor, LAPACK's info.
    n : int
        The order of the whole matrix.

    Attributes
    ----------
    order : int
        The order (1-based) of the first failing leading minor, LAPACK's info.
    """

    def __init__(self, order, n):
        self.order = order
        super().__init__(
            f"the kernel matrix is not positive definite: its leading minor of "
            f"order {order} (of {n}) is not."
        )


class NonFiniteMatrixError(np.linalg.LinAlgError):
    """The matrix to factor holds NaN or infinity; no jitter can mend it."""


class NumbaCacheWarning(UserWarning):
    """No location for Numba's on-disk cache is writable.

    fastgp's routines then compile in memory, in this process and again in
    every new one. Issued once per process, on the first compile.
    """


class MissingMatplotlibError(ImportError):
    """The matplotlib package, needed to draw a figure, is not installed.

    An ``ImportError``, so code that already catches one still does.
    """


class DeviceUnavailableError(RuntimeError):
    """A ``device="cuda"`` fit cannot run here.

    The GPU extra is not installed or does not import, or there is no such
    GPU. The message names what is missing and how to install it
    (docs/gpu.md); the estimator is left as it was.
    """
