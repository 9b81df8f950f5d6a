"""BLAS's process-wide thread count, as fits set it and as the tiled LAPACK
steps need it (docs/design.md, "Parallel passes, determinism and threads").

The BLAS limit is process-wide, so concurrent fits share one saved copy of
the user's limits: the first to enter (:func:`enter`) saves them, the last
to leave (:func:`leave`) restores them. Nested ``threadpool_limits`` blocks
entered from two threads would each save what they found and restore it in
the order they end, leaving BLAS limited for good when the block that
started second ends last (a fit changes no global state).

Between the two, the thread policy sets the count for NumPy's and SciPy's
BLAS calls (:func:`set_count`; results of OpenBLAS's dgemm and dgemv do not
depend on it: each output entry is one thread's sum in a fixed order),
while the tiled LAPACK steps (:mod:`.tiles`) and code whose BLAS calls
reduce across threads (:func:`on_one_blas_thread`) run BLAS on one thread
(:func:`single_threaded`): a tile is one single-threaded call, whatever the
count outside. While any thread is inside a tiled step, BLAS stays on one
thread and a count set meanwhile takes effect when the last step ends.
"""

import functools
import threading
from contextlib import contextmanager

__all__ = ["enter", "leave", "set_count", "single_threaded", "on_one_blas_thread"]

_LOCK = threading.Lock()
_users = 0
_saved = None  # [(library controller, user's thread count)]
_controller = None
_count = None  # the count set by set_count (None: the user's)
_single = 0  # threads inside single_threaded()


def _libraries():
    """threadpoolctl's controllers of the loaded BLAS libraries, found once
    (scanning the loaded libraries costs milliseconds; setting a count on a
    known one costs about a microsecond)."""
    global _controller
    if _controller is None:
        from threadpoolctl import ThreadpoolController

        _controller = ThreadpoolController().select(user_api="blas")
    return _controller.lib_controllers


def enter():
    """Save the user's BLAS limits (first user) and return their smallest."""
    global _users, _saved
    with _LOCK:
        if _users == 0:
            _saved = [(lib, lib.num_threads) for lib in _libraries()]
        _users += 1
        return min((count for _, count in _saved), default=1)


def _set_library_threads(lib, count):
    """Set one BLAS library's process-wide thread count from this thread.

    threadpoolctl >= 3.8 lets one "controlling" Python thread change a
    process-wide OpenBLAS pool (the first to set it) and silently ignores the
    others. fastgp serialises its own changes under ``_LOCK``, so it takes
    control for the call and hands it back at once (``clear_controlling_thread``
    clears it only where this thread holds it); otherwise the restore made by
    the last of two overlapping fits, from another thread, would do nothing
    and leave BLAS on one thread for good. A user's thread that holds control
    (inside its own ``threadpool_limits`` block) keeps it: fastgp's change is
    then ignored, and so is its restore."""
    lib.set_num_threads(count)
    release = getattr(type(lib), "clear_controlling_thread", None)
    if release is not None:
        release()


def _apply(count):
    """Every saved library at ``count`` threads, none above the user's;
    the caller holds ``_LOCK``."""
    for lib, user in _saved or ():
        _set_library_threads(lib, user if count is None else min(count, user))


def set_count(count):
    """Set every BLAS library to ``count`` threads, none above the user's
    (deferred while a tiled step runs)."""
    global _count
    with _LOCK:
        _count = count
        if _single == 0:
            _apply(count)


def leave():
    global _users, _saved, _count
    with _LOCK:
        _users -= 1
        if _users == 0:
            _apply(None)
            _saved = None
            _count = None


@contextmanager
def single_threaded():
    """BLAS on one thread inside the block (a tiled LAPACK step), restored to
    the count last set when the last such block in the process ends. Outside
    :func:`enter` / :func:`leave` (a direct call) it changes nothing."""
    global _single
    with _LOCK:
        active = _saved is not None
        if active:
            if _single == 0:
                _apply(1)
            _single += 1
    try:
        yield
    finally:
        if active:
            with _LOCK:
                _single -= 1
                if _single == 0:
                    _apply(_count)


def on_one_blas_thread(function):
    """``function`` run inside :func:`single_threaded`: for code whose NumPy
    BLAS calls include reductions that OpenBLAS splits by its thread count
    (ddot, and dgemm with a long inner dimension on few outputs), such as
    the matrix-free path's Krylov iterations."""
    @functools.wraps(function)
    def wrapper(*args, **kwargs):
        with single_threaded():
            return function(*args, **kwargs)
    return wrapper
