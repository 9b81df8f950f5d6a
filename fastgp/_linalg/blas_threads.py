"""BLAS's process-wide thread count, as a fit sets it (docs/design.md,
"Parallel passes, determinism and threads").

Inside a fit, prediction or evaluation BLAS runs on one thread: OpenBLAS
splits its threaded calls by the thread count and rounds the pieces' edges
differently, so dpotrf, dpotri, dgemm, dgemv and ddot all give other bits on
one thread than on two (docs/benchmarks.md, "Determinism and
threads"). The parallelism of the LAPACK steps comes from fastgp's own tiles
instead (:mod:`.tiles`).

The limit is process-wide, so concurrent fits share one saved copy of the
user's limits: the first to enter (:func:`enter`) saves them, the last to
leave (:func:`leave`) restores them. Nested ``threadpool_limits`` blocks
entered from two threads would each save what they found and restore it in
the order they end, leaving BLAS limited for good when the block that
started second ends last (a fit changes no global state).
"""

import threading

__all__ = ["enter", "leave", "set_count", "users"]

_LOCK = threading.Lock()
_users = 0
_saved = None  # [(library controller, user's thread count)]
_controller = None


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


def set_count(count):
    """Set every BLAS library to ``count`` threads, none above the user's;
    between :func:`enter` and :func:`leave`."""
    with _LOCK:
        for lib, user in _saved or ():
            _set_library_threads(lib, min(count, user))


def users():
    """How many fits, predictions or evaluations are between :func:`enter`
    and :func:`leave` now, in every thread."""
    return _users


def leave():
    global _users, _saved
    with _LOCK:
        _users -= 1
        if _users == 0:
            for lib, user in _saved:
                _set_library_threads(lib, user)
            _saved = None
