"""Memory: how much an operation will need, how much the machine has now, and
the check between the two that runs before any N x N buffer is allocated.

Every estimate of fastgp's peak memory lives here (``*_bytes``); the
estimators and :mod:`fastgp._fit.session` call :func:`check_memory` with them.

The people fastgp is for were killed by the operating system's out-of-memory
killer at N = 10,000 and never told why. A killed process gives no traceback
and loses the session; a :class:`InsufficientMemoryError` (a ``MemoryError``)
raised *before* the allocation says how much was needed, how much there was,
and what to do, and costs a few reads of ``/proc``.

Available memory
----------------
:func:`available_memory` takes the smallest of the figures it can read:

- Linux: ``MemAvailable`` from ``/proc/meminfo`` (the kernel's own estimate of
  what can be allocated without swapping, page cache it can drop included);
- a control group's limit where one is set, for every level from the
  process's own group up to the root of the hierarchy (a container's limit is
  often set on an ancestor): cgroup v2 ``memory.max - memory.current``,
  cgroup v1 ``memory.limit_in_bytes - memory.usage_in_bytes``, each with the
  group's reclaimable inactive page cache added back (the kernel drops it
  before it kills, as ``docker stats`` accounts it);
- elsewhere: ``psutil.virtual_memory().available`` when psutil is installed,
  ``GlobalMemoryStatusEx`` on Windows, and the free physical pages
  (``sysconf``) on other POSIX systems.

Where no figure can be read the check is skipped rather than guessed.

Proceeding anyway
-----------------
A user who knows better (the estimate is pessimistic for their case, or swap
is acceptable) turns the check off for a block of code with
:func:`skip_memory_check`, or for a whole process (and joblib workers it
starts) with the environment variable ``FASTGP_SKIP_MEMORY_CHECK=1``. The
switch is a context, not an estimator parameter: it says something about the
machine, not about the model, so it does not belong in ``get_params``, in a
pickled estimator, or in scikit-learn's constructor signature that fastgp
mirrors (the same reasoning as ``sklearn.config_context`` and
``threadpoolctl``).
"""

from ..exceptions import InsufficientMemoryError
from . import ledger
from .check import check_memory, fits_in_memory
from .estimates import (
    fit_bytes,
    gplvm_fit_bytes,
    iterative_fit_bytes,
    iterative_predict_cov_bytes,
    laplace_fit_bytes,
    log_marginal_likelihood_bytes,
    predict_cov_bytes,
    sample_y_bytes,
    vecchia_fit_bytes,
    vecchia_predict_cov_bytes,
)
from .reading import MemoryReading, available_memory
from .refuse import refusal
from .switch import SKIP_ENV, memory_check_enabled, skip_memory_check
from .units import format_bytes

__all__ = [
    "InsufficientMemoryError",
    "MemoryReading",
    "available_memory",
    "check_memory",
    "skip_memory_check",
    "memory_check_enabled",
    "format_bytes",
    "refusal",
    "fit_bytes",
    "iterative_fit_bytes",
    "iterative_predict_cov_bytes",
    "fits_in_memory",
    "gplvm_fit_bytes",
    "laplace_fit_bytes",
    "log_marginal_likelihood_bytes",
    "predict_cov_bytes",
    "sample_y_bytes",
    "vecchia_fit_bytes",
    "vecchia_predict_cov_bytes",
    "SKIP_ENV",
    "ledger",
]
