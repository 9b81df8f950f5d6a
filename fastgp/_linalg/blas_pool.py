"""OpenBLAS's worker threads, sent to sleep between LAPACK and a Numba pass.

After every threaded call, OpenBLAS's pthreads workers busy-wait for the next
one for about 2^28 cycles (its THREAD_TIMEOUT, ~0.1 s) before they sleep. One
loss+gradient ends its LAPACK work with dpotri and then runs the gradient
pass on Numba's threads (and, a few milliseconds later, the next
evaluation's fill): for all of that the spinning workers hold cores the pass
needs. On the 2-core benchmark machine a spinning worker made the GPLVM's
pass at N = 2,000 run at about half speed (measured 2026-11-30).

:func:`release_blas_workers` calls OpenBLAS's ``blas_thread_shutdown_``,
which wakes the workers and joins them (the routine OpenBLAS itself runs
before ``fork``); the next threaded BLAS call starts them again
(``blas_thread_init``, tens of microseconds). Thread counts set by the user
or by threadpoolctl are kept. The objectives call it through one door,
:func:`fastgp._linalg.lapack.release_blas_before_pass`, after their last
LAPACK or BLAS call before a Numba pass.

A fit also releases them as it starts (:func:`fastgp._engine.threads.threads_for`):
inside it BLAS runs on one thread and never wakes them, but workers left
spinning by the user's own threaded BLAS calls just before (building the
data, the previous fit's last step) would share the cores with the first
evaluation's tiles and passes for their 0.1 s.

Safety. The shutdown frees the workers' buffers and joins them, so a BLAS
call running at that moment in another thread of the same library would lose
its workers. fastgp therefore releases only when no other thread can be
inside the library: every other Python thread is one of fastgp's tile
threads (:mod:`.tiles`), and at most one fit is in progress, the caller's
own (the tile threads run only the tiles of a fit's :func:`~.tiles.run_tiles`,
which waits for them, so between two such calls they are idle; a fit in
another thread would be another Python thread). Only pthreads builds of
OpenBLAS are released (an OpenMP build waits by its own OMP_WAIT_POLICY; MKL
and BLIS are left alone). ``FASTGP_RELEASE_BLAS_WORKERS=0`` switches it off.
"""

import ctypes
import os
import threading

from . import blas_threads
from .tiles import is_tile_worker

__all__ = ["release_blas_workers", "RELEASE_ENV"]

#: Environment variable that switches the release off when "0".
RELEASE_ENV = "FASTGP_RELEASE_BLAS_WORKERS"

_shutdown_routines = None
_discovery_lock = threading.Lock()


def _find_shutdown_routines():
    """``blas_thread_shutdown_`` of every loaded pthreads OpenBLAS (SciPy's
    and NumPy's copies are separate libraries, each with its own pool)."""
    from threadpoolctl import threadpool_info

    routines = []
    for info in threadpool_info():
        if info.get("internal_api") != "openblas" or info.get("threading_layer") != "pthreads":
            continue
        try:
            library = ctypes.CDLL(info["filepath"], mode=os.RTLD_NOLOAD)
            routine = library.blas_thread_shutdown_
        except (OSError, AttributeError):
            continue
        routine.restype = ctypes.c_int
        routine.argtypes = []
        routines.append(routine)
    return routines


def _enabled():
    return os.environ.get(RELEASE_ENV, "1").strip() != "0"


def _nothing_else_in_blas():
    """No other thread can be inside BLAS now (the module docstring)."""
    current = threading.current_thread()
    for thread in threading.enumerate():
        if thread is not current and not is_tile_worker(thread):
            return False
    return blas_threads.users() <= 1


def release_blas_workers():
    """Put OpenBLAS's spinning workers to sleep, when that is safe (module
    docstring). Returns whether it did."""
    global _shutdown_routines
    if not _enabled() or not _nothing_else_in_blas():
        return False
    if _shutdown_routines is None:
        with _discovery_lock:
            if _shutdown_routines is None:
                _shutdown_routines = _find_shutdown_routines()
    for routine in _shutdown_routines:
        routine()
    return bool(_shutdown_routines)
