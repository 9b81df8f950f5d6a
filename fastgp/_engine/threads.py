"""Thread settings of a fit: as many threads as there are idle cores.

fastgp's work runs in two thread pools in turn: Numba's (the fill and the
fused gradient pass) and the LAPACK steps' tiles (dpotrf, dpotri: fastgp's
own pool of threads, each tile one call of single-threaded BLAS). Each takes
every core by default. That is right on a quiet machine and ruinous on a
busy one: with another process running two OpenBLAS threads on a 2-core
machine, a multithreaded dpotri's threads wait for time slices on every call,
and one loss+gradient at N = 1,500 took a median 2.7x and up to 79x its quiet
single-thread time. Two rules follow.

- **Small problems run serial.** Below :data:`SERIAL_BELOW` samples one
  evaluation is microseconds of work and waking worker threads costs more
  than it saves (a GPLVM fit on 30 samples: 14.9 s with the default threads
  on a loaded 2-core machine, 0.14 s serial).
- **Otherwise, where asked for (``FASTGP_ADAPTIVE_THREADS=1``), each
  evaluation uses the idle cores.** Off by default: measured on whole fits
  beside a competing 2-thread OpenBLAS process on the 2-core machine
  (bench/bench_busy_machine.py ``--fits``; docs/benchmarks.md, "Busy
  machines: the thread policy"), 2-D ARD fits with 3 restarts at
  N = 1,000 took 14.5 and 15.5 s with the policy on against 9.6 and 9.6 s
  with the user's thread counts throughout: giving up a thread for a whole
  evaluation loses more than the time slices it saves. :class:`Governor`
  decides before every evaluation, from :func:`idle_cores`, how many threads
  Numba and BLAS may use: ``min(the user's setting, idle cores)``, at least
  one. On a quiet machine that is the user's setting, as without fastgp's
  policy. Deciding costs a read of ``/proc/loadavg`` (microseconds) and,
  only when other tasks seem to be running, one small read per thread of
  this process.
- **Only lasting load counts.** A reading of busy cores must hold for a
  short window (:data:`CONFIRM_WINDOW_S`, at most :data:`CONFIRM_SHARE` of
  the previous evaluation's time) before an evaluation gives up threads;
  one idle look in the window keeps them. A competing computation stays
  runnable throughout; what the window filters out are blips of a few
  milliseconds. On the quiet 2-core benchmark machine, the scheduler's run
  count exceeded every runnable thread that ``/proc`` lists by one for up to
  about 4 ms after OpenBLAS restarted its workers, at one evaluation in
  five of ``python -m fastgp``: without the window those evaluations ran on
  one thread, slower, and rounded differently, so the optimiser's path (76
  to 176 iterations) changed from run to run on a quiet machine.

The user's settings are restored in ``finally``: the Numba thread count is
thread-local; the BLAS limit is process-wide, so concurrent fits share one
saved copy of the user's limits (the first to enter saves it, the last to
leave restores it: :mod:`fastgp._linalg.blas_threads`). Results do not
depend on any thread count: the Numba passes reduce over a fixed number of
column blocks, BLAS runs on one thread (OpenBLAS's threaded dpotrf, dpotri,
dgemm, dgemv and ddot round differently with different thread counts), and
the LAPACK steps run as fixed tiles on the threads the policy chose
(:mod:`fastgp._linalg.tiles`), so a fit on a busy machine gives the quiet
machine's bits (docs/reliability.md). Without ``FASTGP_ADAPTIVE_THREADS=1``
(the default) the user's settings are used throughout; small problems still
run serial.
"""

import os
import threading
import time
from contextlib import contextmanager

import numba

from .._linalg.blas_pool import release_blas_workers
from .._linalg.blas_threads import enter as enter_blas
from .._linalg.blas_threads import leave as leave_blas
from .._linalg.blas_threads import set_count as set_blas_count
from .._linalg.tiles import set_width, usable_cpus, width
from .config import start_numba_threads

__all__ = ["SERIAL_BELOW", "ADAPTIVE_ENV", "usable_cpus", "idle_cores", "Governor", "threads_for"]

#: Problems with fewer samples than this run on one thread.
SERIAL_BELOW = 256

#: Environment variable: "1" switches the per-evaluation policy on (off by
#: default: module docstring).
ADAPTIVE_ENV = "FASTGP_ADAPTIVE_THREADS"

#: Longest time (seconds) a reading of busy cores is watched before an
#: evaluation gives up threads (module docstring).
CONFIRM_WINDOW_S = 0.010

#: ... and at most this share of the previous evaluation's wall time, so
#: that short evaluations on a busy machine do not wait longer than they run.
CONFIRM_SHARE = 0.1

#: Seconds between two looks inside the window.
CONFIRM_STEP_S = 0.0005


# ------------------------------------------------------------ idle cores
def _runnable_tasks(path="/proc/loadavg"):
    """The scheduler's count of runnable threads on the whole machine now
    (proc(5): the fourth field of /proc/loadavg, "the number of currently
    runnable kernel scheduling entities"; the reading thread is one of
    them), or None where it cannot be read. Unlike the load averages in the
    first three fields, it is not smoothed over minutes."""
    try:
        with open(path, "rb") as f:
            return int(f.read().split()[3].split(b"/")[0])
    except (OSError, IndexError, ValueError):
        return None


def _own_runnable_threads(task_dir="/proc/self/task"):
    """How many threads of this process are runnable (state ``R`` in
    ``/proc/self/task/<tid>/stat``), the reader included. OpenBLAS's workers
    spin for a while after each call, so this process's own threads are often
    among the runnable ones and must not count as load."""
    count = 0
    try:
        tids = os.listdir(task_dir)
    except OSError:
        return 1
    for tid in tids:
        try:
            with open(f"{task_dir}/{tid}/stat", "rb") as f:
                stat = f.read()
        except OSError:  # the thread ended
            continue
        end = stat.rfind(b")")  # the name may hold spaces and parentheses
        if stat[end + 2:end + 3] == b"R":
            count += 1
    return max(count, 1)


def idle_cores(loadavg="/proc/loadavg", task_dir="/proc/self/task"):
    """Cores this process may use that no other task is running on now.

    The cores of the CPU affinity mask, less the runnable threads of other
    processes (:func:`_runnable_tasks` less :func:`_own_runnable_threads`).
    The run count covers the whole machine; where the affinity mask holds
    only part of it, the other tasks are assumed spread evenly over all
    cores. At least 1; every usable core where nothing can be read (not
    Linux).
    """
    cpus = usable_cpus()
    runnable = _runnable_tasks(loadavg)
    if runnable is None:
        return cpus
    others = runnable - 1  # this thread is runnable: it is reading
    if others > 0:
        others = runnable - _own_runnable_threads(task_dir)
    if others <= 0:
        return cpus
    total = os.cpu_count() or cpus
    if cpus < total:
        others = others * cpus / total
    return max(1, cpus - int(round(others)))


# ------------------------------------------------------------ the policy
class Governor:
    """The thread policy of one fit (or prediction), in force between
    :func:`threads_for`'s entry and exit.

    ``evaluate(function, *args, **kwargs)`` calls ``function(*args, **kwargs)`` with Numba and
    BLAS limited to the idle cores (:func:`idle_cores`), never above the
    user's settings (``numba_threads``, ``blas_threads``), deciding anew
    before every call. Settings are changed only when the decision changes.
    Busy cores count only when the reading lasts (:meth:`threads_now`).
    """

    def __init__(self, numba_threads, blas_threads, adaptive):
        self.numba_threads = int(numba_threads)
        self.blas_threads = int(blas_threads)
        self.adaptive = bool(adaptive)
        self.current = max(self.numba_threads, self.blas_threads)
        self.last_seconds = None  # wall time of the latest evaluation

    def _confirm_window(self):
        if self.last_seconds is None:
            return CONFIRM_WINDOW_S
        return min(CONFIRM_WINDOW_S, CONFIRM_SHARE * self.last_seconds)

    def threads_now(self):
        """The thread count the next evaluation may use: the user's
        setting, less the cores that :func:`idle_cores` finds busy at every
        look during the confirmation window (module docstring)."""
        wanted = max(self.numba_threads, self.blas_threads)
        idle = idle_cores()
        if idle < wanted:
            deadline = time.perf_counter() + self._confirm_window()
            while idle < wanted and time.perf_counter() < deadline:
                time.sleep(CONFIRM_STEP_S)
                idle = max(idle, idle_cores())
        return min(wanted, idle)

    def evaluate(self, function, *args, **kwargs):
        if not self.adaptive:
            return function(*args, **kwargs)
        count = self.threads_now()
        if count != self.current:
            numba.set_num_threads(min(count, self.numba_threads))
            set_width(min(count, self.blas_threads))
            self.current = count
        start = time.perf_counter()
        try:
            return function(*args, **kwargs)
        finally:
            self.last_seconds = time.perf_counter() - start


def _adaptive_enabled():
    return os.environ.get(ADAPTIVE_ENV, "0").strip() == "1"


@contextmanager
def threads_for(n_samples, adaptive=True, max_threads=None):
    """Context manager for a fit, prediction or evaluation on ``n_samples``
    training samples; yields its :class:`Governor`.

    Inside, BLAS itself runs on one thread and the LAPACK steps run as fixed
    tiles on as many threads as the user lets BLAS use
    (:mod:`fastgp._linalg.tiles`), so that no result depends on a thread
    count. Below :data:`SERIAL_BELOW` samples everything inside runs on one
    thread (Numba and the tiles).
    Otherwise the governor limits each evaluation it runs to the idle cores,
    if ``adaptive`` and ``FASTGP_ADAPTIVE_THREADS`` is "1"; code run
    inside the block but not through the governor uses the latest decision.
    ``max_threads`` (an int) caps Numba's and the tiles' threads inside the
    block whatever the policy: a joblib worker that shares the machine with
    others takes its share of the cores. The user's Numba thread count (this
    thread's) and BLAS limits are restored on exit, whatever happens inside.
    """
    start_numba_threads()  # before Numba's thread count is read (that starts them)
    before = numba.get_num_threads()
    serial = n_samples < SERIAL_BELOW
    adaptive = adaptive and not serial and _adaptive_enabled()
    cap = None if max_threads is None else max(1, int(max_threads))
    user_blas = enter_blas()
    previous_width = width()
    try:
        set_blas_count(1)  # every BLAS call single-threaded: its bits
        # workers left spinning by the caller's threaded BLAS calls would take
        # the cores from the first evaluation (fastgp._linalg.blas_pool)
        release_blas_workers()
        if serial:
            numba.set_num_threads(1)
            set_width(1)
            yield Governor(1, 1, adaptive=False)
        else:
            numba_threads = before if cap is None else min(before, cap)
            if cap is not None:
                user_blas = min(user_blas, cap)
                numba.set_num_threads(numba_threads)
            set_width(user_blas)
            yield Governor(numba_threads, user_blas, adaptive=adaptive)
    finally:
        try:
            leave_blas()
        finally:
            set_width(previous_width)
            numba.set_num_threads(before)
