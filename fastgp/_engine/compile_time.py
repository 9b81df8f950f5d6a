"""The time Numba spends compiling, or loading compiled routines from its
disk cache, inside a block: what a fit's clock leaves out of an evaluation's
time (:mod:`fastgp._fit.clock`). No jitted code (not in the cache stamp)."""

import contextlib

from numba.core import event

__all__ = ["compile_seconds"]


@contextlib.contextmanager
def compile_seconds():
    """Yields a list; when the block ends, the seconds Numba held its
    compiler lock in it (compiling and cache loading: Numba's
    ``"numba:compiler_lock"`` event spans both; nested holds counted once)
    are appended, if it held it at all."""
    spent = []
    with event.install_timer("numba:compiler_lock", spent.append):
        yield spent
