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
so code cached for a leaf would survive a change to
``vector_math.exp_inplace``, which it inlines, and run stale (wrong numbers,
or a crash; a pass that calls the interpreter through its address, as every
pass does, would also keep calling it with the argument types it was cached
with). fastgp's routines are therefore cached under a stamp that hashes the
sources of the modules of this subpackage that shape compiled code
(:data:`STAMPED_MODULES`: every module with a jitted routine and those they
read as they compile; all jitted code lives here): any change to any of them
recompiles them all, and a change to the thread policy recompiles nothing.

Where the cache lives. Numba's own locators are used, in Numba's order and
subclassed for the stamp: ``NUMBA_CACHE_DIR`` if set, then ``__pycache__``
beside the source (the in-tree cache), then the user-wide directory
(``$XDG_CACHE_HOME/numba`` or ``~/.cache/numba``); new machine code is written
to the first of them that is writable, and loaded from that one or, failing
it, from any other that exists, writable or not, so a shared, read-only
install whose in-tree cache an administrator filled with
``python -m fastgp.precompile`` compiles nothing. Where no location is
writable, the routines compile in memory (as without ``cache=True``) and
:class:`NumbaCacheWarning` says so once per process; Numba itself would raise
``RuntimeError("cannot cache function ...: no locator available")`` when
``enable_caching`` builds the ``FunctionCache``, which ``cache=True`` does at
decoration, that is on import. fastgp therefore
looks for the locations on a routine's first compile, not at import.

Numba's default ``workqueue`` threading layer aborts the process if two Python
threads enter a parallel region at the same time. fastgp therefore runs its
parallel kernels under :data:`PARALLEL_LOCK`; LAPACK calls, which dominate the
cost, run outside it, so two estimators fitted in two threads still overlap.
:func:`parallel_region` takes the lock.

OpenMP workers that spin. Under Numba's ``omp`` threading layer (GNU OpenMP,
the default where TBB is absent), the workers busy-wait after every parallel
region before they sleep (``OMP_WAIT_POLICY`` unset: GNU's active policy).
A fastgp evaluation follows its Numba fill with LAPACK's dpotrf on OpenBLAS's
threads at once, and for the first milliseconds a spinning worker holds a
core that OpenBLAS needs: on the 2-core benchmark machine at N = 2,000,
dpotrf took 42.5 ms right after the fill and 22.1 ms with the passive policy
(measured 2026-12-01). So the first parallel region fastgp runs starts
Numba's threads with ``OMP_WAIT_POLICY=PASSIVE`` in the environment (GNU
OpenMP reads it when Numba's pool loads it), then restores the environment:
no other library, child process or later code sees the change. Nothing is
changed where the program set ``OMP_WAIT_POLICY`` or ``GOMP_SPINCOUNT``
itself, where Numba's threads were already started, or with
``FASTGP_OMP_PASSIVE=0``; the TBB and workqueue layers do not spin.
"""

import functools
import hashlib
import inspect
import os
import threading
import warnings
from contextlib import contextmanager
from pathlib import Path

import numba
from numba.core import caching

from ..exceptions import NumbaCacheWarning

__all__ = ["jit", "parallel_jit", "PARALLEL_LOCK", "parallel_region", "prange",
           "NumbaCacheWarning", "OMP_PASSIVE_ENV", "start_numba_threads"]

prange = numba.prange

#: Serialises entry into Numba parallel regions (see the module docstring).
PARALLEL_LOCK = threading.RLock()

#: Environment variable: "0" leaves GNU OpenMP's wait policy as it is.
OMP_PASSIVE_ENV = "FASTGP_OMP_PASSIVE"

_threads_started = False


def start_numba_threads():
    """Start Numba's thread pool once, with GNU OpenMP's passive wait policy
    unless the program chose one (module docstring). Anything that asks Numba
    for its thread count starts the pool, so fastgp calls this first: in
    :func:`parallel_region` and before it reads the thread count of a fit
    (:func:`fastgp._engine.threads.threads_for`)."""
    global _threads_started
    if _threads_started:
        return
    with PARALLEL_LOCK:
        if _threads_started:
            return
        from numba.np.ufunc import parallel

        chosen = any(name in os.environ for name in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT"))
        passive = (not getattr(parallel, "_is_initialized", True) and not chosen
                   and os.environ.get(OMP_PASSIVE_ENV, "1").strip() != "0")
        if passive:
            os.environ["OMP_WAIT_POLICY"] = "PASSIVE"
            try:
                parallel._launch_threads()
            finally:
                del os.environ["OMP_WAIT_POLICY"]
        _threads_started = True


@contextmanager
def parallel_region():
    """Hold :data:`PARALLEL_LOCK` around a call of a parallel routine, Numba's
    threads started first (:func:`start_numba_threads`)."""
    with PARALLEL_LOCK:
        start_numba_threads()
        yield

#: Floating-point contraction only: LLVM may fuse a * b + c into one
#: fused multiply-add (one rounding instead of two), nothing else of
#: fastmath (no reassociation, no assumptions about NaN or inf). Sums keep
#: their written order, so results stay independent of the thread count.
#: The polynomials of :mod:`.vector_math` run 1.7 x as fast with it, at the
#: same accuracy (one ulp).
_COMMON = dict(nogil=True, error_model="numpy", fastmath={"contract"})

_ENGINE_DIR = Path(__file__).resolve().parent

#: The engine's modules whose text shapes compiled code, and only those: every
#: module that holds a jitted routine, and the modules those read when they
#: compile (this configuration, the opcodes' constants, the fixed signatures,
#: the address-table intrinsics and the lane intrinsics). The thread policy
#: (``threads.py``), the compile timer (``compile_time.py``) and the package
#: docstring hold no compiled code, so editing them recompiles nothing.
#: tests/_engine/test_numba_cache.py checks the list against every routine that
#: ``python -m fastgp.precompile`` compiles.
STAMPED_MODULES = ("address_call", "config", "interpreter", "lanes", "latent_passes",
                   "leaves", "maxmin", "opcodes", "passes", "product_passes", "signatures",
                   "vecchia_batch", "vecchia_block", "vecchia_passes", "vecchia_workers",
                   "vector_math")


@functools.lru_cache(maxsize=None)
def jitted_sources_digest():
    """SHA-256 over the names and contents of the :data:`STAMPED_MODULES` of
    ``fastgp/_engine``: the cache stamp of every fastgp routine (see the
    module docstring)."""
    digest = hashlib.sha256()
    for name in sorted(STAMPED_MODULES):
        path = _ENGINE_DIR / f"{name}.py"
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


#: Numba's cache locations, in Numba's order of preference.
_LOCATOR_CLASSES = (_UserProvidedLocator, _InTreeLocator, _UserWideLocator)


class _ReadOnly:
    """A location that is read where it exists, writable or not, and never
    written: a cache that someone else filled (``python -m fastgp.precompile``)."""

    @classmethod
    def from_function(cls, py_func, py_file):
        locator = cls(py_func, py_file)
        return locator if Path(locator.get_cache_path()).is_dir() else None

    def ensure_cache_path(self):
        raise PermissionError(f"fastgp reads {self.get_cache_path()}, never writes it")


class _ReadOnlyUserProvidedLocator(_ReadOnly, _UserProvidedLocator):
    @classmethod
    def from_function(cls, py_func, py_file):
        if not numba.config.CACHE_DIR:
            return None
        return super().from_function(py_func, py_file)


class _ReadOnlyInTreeLocator(_ReadOnly, _InTreeLocator):
    pass


class _ReadOnlyUserWideLocator(_ReadOnly, _UserWideLocator):
    pass


def _function_cache_class(*locator_classes):
    """A ``FunctionCache`` class that uses the first usable of *locator_classes*."""
    impl = type("_PackageCacheImpl", (caching.CompileResultCacheImpl,),
                {"_locator_classes": list(locator_classes)})
    return type("_PackageFunctionCache", (caching.FunctionCache,), {"_impl_class": impl})


#: The cache that is written: the first writable location, as Numba chooses it.
_WritableFunctionCache = _function_cache_class(*_LOCATOR_CLASSES)
#: The caches that are only read, one per location, in the same order.
_READ_ONLY_FUNCTION_CACHES = (_function_cache_class(_ReadOnlyUserProvidedLocator),
                              _function_cache_class(_ReadOnlyInTreeLocator),
                              _function_cache_class(_ReadOnlyUserWideLocator))


def _open_cache(cache_class, py_func):
    """``cache_class(py_func)``, or None where none of its locations is usable
    (Numba's "no locator available"; any other RuntimeError propagates)."""
    try:
        return cache_class(py_func)
    except RuntimeError:
        source = inspect.getfile(py_func)
        if any(cls.from_function(py_func, source) is not None
               for cls in cache_class._impl_class._locator_classes):
            raise
        return None


_WARNED = False
_WARN_LOCK = threading.Lock()


def _warn_no_cache_once(py_func):
    global _WARNED
    with _WARN_LOCK:
        if _WARNED:
            return
        _WARNED = True
    source = inspect.getfile(py_func)
    tried = [("NUMBA_CACHE_DIR", "unset")]
    if numba.config.CACHE_DIR:
        tried = [("NUMBA_CACHE_DIR", _UserProvidedLocator(py_func, source).get_cache_path())]
    tried += [("in-tree", _InTreeLocator(py_func, source).get_cache_path()),
              ("user-wide", _UserWideLocator(py_func, source).get_cache_path())]
    warnings.warn(
        "fastgp found no writable location for Numba's on-disk cache, so its "
        "routines compile in memory: seconds now, and again in every new "
        "process. Set NUMBA_CACHE_DIR to a writable directory to cache them there; "
        "on a shared or read-only install, its administrator can run "
        "`python -m fastgp.precompile` once to fill the in-tree cache for everyone. "
        "Locations tried: " + "; ".join(f"{name}: {path}" for name, path in tried),
        NumbaCacheWarning, stacklevel=2)


class _PackageCache(caching._Cache):
    """The on-disk cache of one fastgp routine (see the module docstring).

    Its locations are looked for on the first compile (Numba's
    ``Dispatcher.compile`` calls :meth:`load_overload` first, under its
    compiler lock), so importing fastgp touches no directory. Loads try the
    writable location, then every other existing one; saves go to the writable
    one, or nowhere. The package stamp is read at decoration, so it is the
    stamp of the sources that were imported.
    """

    def __init__(self, py_func):
        self._py_func = py_func
        jitted_sources_digest()  # computed now, from the sources being imported
        self._enabled = True
        self._writable = None
        self._layers = None
        self._resolve_lock = threading.Lock()

    def _resolve(self):
        with self._resolve_lock:
            if self._layers is None:
                self._writable = _open_cache(_WritableFunctionCache, self._py_func)
                layers = [self._writable] if self._writable is not None else []
                for cache_class in _READ_ONLY_FUNCTION_CACHES:
                    cache = _open_cache(cache_class, self._py_func)
                    if cache is not None and all(cache.cache_path != c.cache_path
                                                 for c in layers):
                        layers.append(cache)
                self._layers = tuple(layers)
        return self._layers

    @property
    def layers(self):
        """The ``FunctionCache`` of each location read, the writable first."""
        return self._resolve()

    @property
    def writable(self):
        """The ``FunctionCache`` that new machine code goes to, or None."""
        self._resolve()
        return self._writable

    @property
    def cache_path(self):
        layers = self._resolve()
        return layers[0].cache_path if layers else None

    def load_overload(self, sig, target_context):
        if not self._enabled:
            return None
        for cache in self._resolve():
            cres = cache.load_overload(sig, target_context)
            if cres is not None:
                return cres
        if self._writable is None:
            _warn_no_cache_once(self._py_func)
        return None

    def save_overload(self, sig, data):
        if self._enabled and self.writable is not None:
            self._writable.save_overload(sig, data)

    def enable(self):
        self._enabled = True

    def disable(self):
        self._enabled = False

    def flush(self):
        if self.writable is not None:
            self._writable.flush()


def _with_package_cache(dispatcher):
    """What ``cache=True`` does (``Dispatcher.enable_caching``), with the
    package-wide stamp and the locations looked for on first compile."""
    dispatcher._cache = _PackageCache(dispatcher.py_func)
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


def is_routine(obj):
    """Whether *obj* is a routine declared with :func:`jit` or :func:`parallel_jit`."""
    return isinstance(obj, numba.core.registry.CPUDispatcher) and isinstance(
        obj._cache, _PackageCache)


def cache_directory(routine):
    """The directory that *routine*'s machine code is written to, or None where
    no location is writable (it then compiles in memory)."""
    writable = routine._cache.writable
    return None if writable is None else writable.cache_path


def cached_signatures(routine):
    """The signatures that *routine*'s caches hold for the current sources, in
    every location it reads (a routine that another one inlines is loaded
    with its caller and may hold none in memory)."""
    return {key[0] for cache in routine._cache.layers
            for key in cache._cache_file._load_index()}
