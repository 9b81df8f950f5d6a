"""Level-3 work as fixed tiles on a pool of threads, so that its results do
not depend on how many threads run it (docs/design.md, "Parallel passes,
determinism and threads").

OpenBLAS splits a threaded call by its thread count, and its kernels round
the pieces' edges differently: the same dpotrf, dpotri or dgemm gives other
bits on one thread than on two (docs/benchmarks.md, "Determinism and
threads"). fastgp's blocked routines
(:mod:`.blocked`) therefore cut every large call into tiles whose shapes are
a function of the matrix's order alone and run each tile as one call of
single-threaded BLAS; the tiles of one step are independent (they write
disjoint blocks), so which thread runs which tile, and how many threads
there are, changes nothing in the result. Inside a fit the thread policy
(:mod:`fastgp._engine.threads`) keeps BLAS itself on one thread and sets how
many threads run the tiles (:func:`set_width`); outside one (a direct call),
the tiles run one after another in the calling thread, each on BLAS's own
threads, as before.

ctypes releases the GIL during each BLAS call (:mod:`.blocked`), so the
pool's threads compute at once.
"""

import os
import threading
from concurrent.futures import ThreadPoolExecutor

__all__ = ["set_width", "width", "run_tiles", "usable_cpus", "is_tile_worker", "TILE_ROWS",
           "TILE_COLUMNS"]

#: Rows of one tile of a panel update or solve (dgemm, dtrsm), and the order
#: of the diagonal blocks inside a fit from N = 2,048 on (below it,
#: :data:`fastgp._linalg.blocked.SMALL_TILE`). With two threads, factor +
#: inverse over OpenBLAS's threaded dpotrf + dpotri at N = 2,000 / 5,000 /
#: 8,000, medians of 9: 0.95 / 0.97 / 0.98 with tiles of 256, 0.93 / 0.96 /
#: 1.04 with 128 (docs/benchmarks.md, "Tiles and the blocked factor and
#: inverse").
TILE_ROWS = 256

#: Columns of one tile of a triangular multiply or a solve with many
#: right-hand sides (dtrmm, dtrsm).
TILE_COLUMNS = 128

_local = threading.local()
_pool = None
_pool_lock = threading.Lock()
_worker_idents = set()  # threading.get_ident() of the pool's threads


def set_width(count):
    """Run this thread's tiles on ``count`` threads (an int >= 1), with BLAS
    on one thread; None: outside a fit (the module docstring). Returns the
    previous setting."""
    previous = getattr(_local, "width", None)
    _local.width = None if count is None else max(1, int(count))
    return previous


def width():
    """This thread's tile threads, or None outside a fit."""
    return getattr(_local, "width", None)


def usable_cpus():
    """The number of CPUs this process may run on: its affinity mask where
    the platform has one, else every CPU (the thread governor's count too,
    :mod:`fastgp._engine.threads`)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not Linux
        return os.cpu_count() or 1


def _register_worker():
    _worker_idents.add(threading.get_ident())


def is_tile_worker(thread):
    """Whether ``thread`` (a :class:`threading.Thread`) is one of the tile
    pool's threads. Between two calls of :func:`run_tiles` they are idle:
    each call waits for every tile it submitted."""
    return thread.ident in _worker_idents


def _executor():
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(max_workers=max(1, usable_cpus() - 1),
                                       thread_name_prefix="fastgp-tiles",
                                       initializer=_register_worker)
        return _pool


def run_tiles(tasks):
    """Call every callable of ``tasks`` (a list of independent tiles), on
    this thread's :func:`width` threads (the caller's among them); in order
    in the caller's thread where the width is 1 or unset. The first
    exception raised by a tile is raised here once all have stopped."""
    threads = width() or 1
    if threads <= 1 or len(tasks) <= 1:
        for task in tasks:
            task()
        return
    queue = iter(tasks)  # next() on a list iterator is atomic under the GIL
    failures = []

    def drain():
        for task in queue:
            try:
                task()
            except BaseException as exc:  # noqa: BLE001 - re-raised in the caller
                failures.append(exc)

    helpers = [_executor().submit(drain) for _ in range(min(threads, len(tasks)) - 1)]
    drain()
    for helper in helpers:
        helper.result()
    if failures:
        raise failures[0]
