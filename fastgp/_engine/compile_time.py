"""The time Numba spends compiling, or loading compiled routines from its
disk cache, inside a block: what a fit's clock leaves out of an evaluation's
time (:mod:`fastgp._fit.clock`), and whether anything was compiled at all
(what the command line's report says). No jitted code (not in the cache
stamp)."""

import contextlib

from numba.core import event

__all__ = ["compile_seconds", "compiling_seconds"]


@contextlib.contextmanager
def compile_seconds():
    """Yields a list; when the block ends, the seconds Numba held its
    compiler lock in it (compiling and cache loading: Numba's
    ``"numba:compiler_lock"`` event spans both; nested holds counted once)
    are appended, if it held it at all. Numba's events reach every
    listener of the process, so a compilation in another Python thread
    during the block counts too."""
    spent = []
    with event.install_timer("numba:compiler_lock", spent.append):
        yield spent


@contextlib.contextmanager
def compiling_seconds():
    """Yields a list; when the block ends, the seconds Numba spent
    compiling routines that no cache held (its ``"numba:compile"`` event,
    which a load from the disk cache does not raise) are appended, if it
    compiled anything: empty after a run whose routines all came from the
    cache."""
    spent = []
    with event.install_timer("numba:compile", spent.append):
        yield spent
