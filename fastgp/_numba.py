"""Numba configuration for fastgp, in one place.

Every jitted routine in fastgp is declared through :func:`jit` (serial) or
:func:`parallel_jit` (``prange`` loops). Both compile lazily on first call,
cache the machine code on disk (``cache=True``) so that later processes load it
instead of compiling again, and release the GIL so that LAPACK or another
Python thread can run beside them.

Importing this module compiles nothing and changes no global Numba setting:
fastgp never sets the threading layer or the thread count. It reads the thread
count that the user chose (``numba.set_num_threads`` or ``NUMBA_NUM_THREADS``).

Numba's default ``workqueue`` threading layer aborts the process if two Python
threads enter a parallel region at the same time. fastgp therefore runs its
parallel kernels under :data:`PARALLEL_LOCK`; LAPACK calls, which dominate the
cost, run outside it, so two estimators fitted in two threads still overlap.
"""

import threading

import numba

__all__ = ["jit", "parallel_jit", "PARALLEL_LOCK", "prange"]

prange = numba.prange

#: Serialises entry into Numba parallel regions (see the module docstring).
PARALLEL_LOCK = threading.RLock()

_COMMON = dict(cache=True, nogil=True, error_model="numpy", fastmath=False)


def jit(func=None, **extra):
    """``numba.njit`` with fastgp's options (cached, nogil, numpy error model)."""
    options = {**_COMMON, **extra}
    if func is None:
        return lambda f: numba.njit(**options)(f)
    return numba.njit(**options)(func)


def parallel_jit(func):
    """``numba.njit(parallel=True)`` with fastgp's options."""
    return numba.njit(parallel=True, **_COMMON)(func)
