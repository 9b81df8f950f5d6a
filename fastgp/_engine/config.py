"""Numba configuration for fastgp's engine, in one place.

Every jitted routine in fastgp is declared through :func:`jit` (serial) or
:func:`parallel_jit` (``prange`` loops). Both compile lazily on first call,
cache the machine code on disk (``cache=True``) so that later processes load it
instead of compiling again, and release the GIL so that LAPACK or another
Python thread can run beside them.

Importing this module compiles nothing and changes no global Numba setting:
fastgp never sets the threading layer or the thread count. It reads the thread
count that the user chose (``numba.set_num_threads`` or ``NUMBA_NUM_THREADS``).

Numba's disk cache checks only the source file of the function it compiled,
so code cached for ``passes.fill_cov_lower`` would survive a change to
``interpreter.eval_tile``, which it inlines, and run stale (wrong numbers, or a
crash). fastgp's routines are therefore cached under a stamp that hashes the
sources of every module of this subpackage (``fastgp/_engine/*.py``, where all
jitted code lives and nothing else does): any change to any of them recompiles
them all. The
locators are numba's own (``NUMBA_CACHE_DIR``, then ``__pycache__`` beside the
source, then the user-wide directory), subclassed for the stamp.

Numba's default ``workqueue`` threading layer aborts the process if two Python
threads enter a parallel region at the same time. fastgp therefore runs its
parallel kernels under :data:`PARALLEL_LOCK`; LAPACK calls, which dominate the
cost, run outside it, so two estimators fitted in two threads still overlap.
"""

import functools
import hashlib
import threading
from pathlib import Path

import numba
from numba.core import caching

__all__ = ["jit", "parallel_jit", "PARALLEL_LOCK", "prange"]

prange = numba.prange

#: Serialises entry into Numba parallel regions (see the module docstring).
PARALLEL_LOCK = threading.RLock()

_COMMON = dict(nogil=True, error_model="numpy", fastmath=False)

_ENGINE_DIR = Path(__file__).resolve().parent


@functools.lru_cache(maxsize=None)
def jitted_sources_digest():
    """SHA-256 over the names and contents of ``fastgp/_engine/*.py``: the
    cache stamp of every fastgp routine (see the module docstring)."""
    digest = hashlib.sha256()
    for path in sorted(_ENGINE_DIR.glob("*.py")):
        digest.update(path.name.encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()


class _PackageStamp:
    def get_source_stamp(self):
        return jitted_sources_digest()


class _UserProvidedLocator(_PackageStamp, caching.UserProvidedCacheLocator):
    pass


class _InTreeLocator(_PackageStamp, caching.InTreeCacheLocator):
    pass


class _UserWideLocator(_PackageStamp, caching.UserWideCacheLocator):
    pass


class _PackageCacheImpl(caching.CompileResultCacheImpl):
    _locator_classes = [_UserProvidedLocator, _InTreeLocator, _UserWideLocator]


class _PackageFunctionCache(caching.FunctionCache):
    _impl_class = _PackageCacheImpl


def _with_package_cache(dispatcher):
    """What ``cache=True`` does (``Dispatcher.enable_caching``), with the
    package-wide stamp."""
    dispatcher._cache = _PackageFunctionCache(dispatcher.py_func)
    return dispatcher


def jit(func=None, **extra):
    """``numba.njit`` with fastgp's options (cached under the package-wide
    stamp, nogil, numpy error model)."""
    options = {**_COMMON, **extra}
    if func is None:
        return lambda f: _with_package_cache(numba.njit(**options)(f))
    return _with_package_cache(numba.njit(**options)(func))


def parallel_jit(func):
    """``numba.njit(parallel=True)`` with fastgp's options."""
    return _with_package_cache(numba.njit(parallel=True, **_COMMON)(func))
