"""Serial execution for problems too small to gain from threads.

Below a few hundred samples one objective evaluation is microseconds of work,
and waking Numba's and OpenBLAS's worker threads costs more than it saves. On
a machine whose cores are busy it costs far more: a parallel region or a
multithreaded dpotri waits for a time slice on every call. Measured on a
loaded 2-core machine, a GPLVM fit on 30 samples (114 evaluations) took 14.9 s
with the default threads and 0.14 s serial.

:func:`threads_for` runs such problems on one thread. The Numba thread count is
thread-local and restored in ``finally``; the BLAS limit (threadpoolctl) is
process-wide for the duration of the block, so it is only taken for small
problems, where the block is short.
"""

import threading
from contextlib import contextmanager, nullcontext

import numba
from threadpoolctl import threadpool_limits

__all__ = ["SERIAL_BELOW", "threads_for"]

#: Problems with fewer samples than this run on one thread.
SERIAL_BELOW = 256

# The BLAS limit is process-wide, so concurrent serial blocks share one
# limiter: the first to enter takes it, the last to leave restores the user's
# setting. Nested ``threadpool_limits`` blocks entered from two threads would
# each save what they found and restore it in the order they end, leaving
# BLAS on one thread for good when the block that started second ends last
# (issue 6: a fit changes no global state).
_BLAS_LOCK = threading.Lock()
_blas_users = 0
_blas_limiter = None


def _acquire_serial_blas():
    global _blas_users, _blas_limiter
    with _BLAS_LOCK:
        if _blas_users == 0:
            _blas_limiter = threadpool_limits(limits=1, user_api="blas")
        _blas_users += 1


def _release_serial_blas():
    global _blas_users, _blas_limiter
    with _BLAS_LOCK:
        _blas_users -= 1
        if _blas_users == 0:
            _blas_limiter.restore_original_limits()
            _blas_limiter = None


@contextmanager
def _serial():
    before = numba.get_num_threads()
    numba.set_num_threads(1)
    try:
        _acquire_serial_blas()
        try:
            yield
        finally:
            _release_serial_blas()
    finally:
        numba.set_num_threads(before)


def threads_for(n_samples):
    """Context manager: one thread (Numba and BLAS) if ``n_samples`` is below
    :data:`SERIAL_BELOW`, else the user's settings unchanged."""
    return _serial() if n_samples < SERIAL_BELOW else nullcontext()
