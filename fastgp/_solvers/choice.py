"""Which solver a regression fit takes: the estimator's ``solver`` parameter
resolved against the kernel and the memory available (docs/design.md, "The
matrix-free path")."""

from .._user_warnings import warn_user
from ..memory import fits_in_memory, format_bytes

__all__ = ["choose_solver"]


def choose_solver(solver, is_fast, kernel, n_samples, dense_bytes, iterative_bytes):
    """"cholesky" or "iterative".

    solver : "auto", "cholesky" or "iterative" (the estimator's parameter)
    is_fast : bool, whether the kernel runs on the fast path (the iterative
        path needs its product passes)
    kernel : the kernel, named in messages
    n_samples : int; dense_bytes, iterative_bytes : int, the two paths'
        estimates (:mod:`fastgp.memory`)

    "auto" takes the iterative path, with a UserWarning giving both
    estimates, where the kernel is on the fast path and the Cholesky path's
    estimate does not fit the machine's memory budget (even once the other
    fits running now release theirs: :func:`fastgp.memory.fits_in_memory`)
    but the iterative one's does; otherwise the Cholesky path (whose refusal, where nothing fits,
    names the remedies).
    Raises ValueError for "iterative" with a kernel off the fast path.
    """
    if solver == "iterative":
        if not is_fast:
            raise ValueError(
                f'solver="iterative" needs a kernel on fastgp\'s fast path, and {kernel!r} '
                "(or inputs that are not a float array) is not: the matrix-free path "
                "computes kernel products tile by tile from the lowered kernel. Use "
                'solver="cholesky", or a kernel built from the fast path\'s '
                "(docs/adding_a_kernel.md).")
        return "iterative"
    if solver == "cholesky" or not is_fast:
        return "cholesky"
    fits, reading = fits_in_memory(dense_bytes)
    if fits or not fits_in_memory(iterative_bytes)[0]:
        return "cholesky"
    warn_user(
        f'solver="auto" chose the iterative solver: the Cholesky path needs about '
        f"{format_bytes(dense_bytes)} for N = {n_samples:,} samples, but only "
        f"{format_bytes(reading.available)} is available to it ({reading.source}); the "
        f"matrix-free path needs about {format_bytes(iterative_bytes)}. Its likelihood "
        'is a stochastic estimate; pass solver="cholesky" or solver="iterative" to '
        "choose yourself.", UserWarning)
    return "iterative"
