"""One memory budget per machine, shared by every fastgp process and thread.

:func:`fastgp.memory.check_memory` compares one operation's estimate with the
memory available now. Two fits that start together (``GridSearchCV(n_jobs=2)``,
joblib workers, two scripts on one workstation) would each pass that check
and then allocate together, past what the machine has. So a fit *reserves*
its estimate in a ledger that every fastgp process on the machine reads
(:func:`reserve`), and holds the reservation while its buffers exist.

The ledger
----------
A directory private to the user, by default ``fastgp-memory-ledger-<uid>``
under the system's temporary directory (:func:`tempfile.gettempdir`), or a
directory that a team shares, named by ``FASTGP_MEMORY_LEDGER`` (all
processes that should share a budget must see the same directory; tests
point it elsewhere). Its files are checked as input from whoever can write
them (:mod:`fastgp.memory.ledger_files`: no symbolic link followed, every
lock taken within ``FASTGP_MEMORY_LOCK_TIMEOUT`` seconds, entries validated).
Each reservation is one file
``<pid>-<token>.json`` holding its bytes, the process id, the operation and
the process's resident memory when it reserved. Reading the ledger and adding
to it happen under an exclusive ``fcntl.flock`` on the directory's ``.lock``
file, so two fits cannot both take the last free bytes.

The reserving process holds an exclusive ``flock`` on its reservation's file
for as long as the reservation lives. The kernel drops that lock when the
process ends, however it ends (killed for memory, ``SIGKILL``, a crash), so a
reader that can take the lock knows the reservation is dead, removes the file
and does not count it: reservations of processes that died are reclaimed
without relying on process ids, which the system reuses.

Free memory under reservations
------------------------------
With ``FASTGP_MEMORY_LIMIT`` set (bytes, or a number with kB, MB, GB, TB, KiB,
MiB, GiB or TiB: ``FASTGP_MEMORY_LIMIT=12GiB``) the budget is a pure ledger:
free = the limit - every live reservation. The limit replaces the detected
available memory; it says how much fastgp may use on this machine, whatever
the operating system reports.

Without it, the detected available memory A (:func:`fastgp.memory.available_memory`:
``MemAvailable``, control-group limits) already lacks whatever the reserving
processes have allocated, so subtracting their whole reservations would count
that memory twice. The rule: a reservation's *unspent* part is its bytes less
the growth of its process's resident memory (``/proc/<pid>/statm``) since it
was made, less what that process's later reservations already took of that
growth, clipped to [0, its bytes]; free = A - the sum of the unspent parts. A
buffer that exists counts once (in A), a buffer still to come counts once (in
the unspent part). Where a process's resident memory cannot be read, all of
its reservations count as unspent (the safe side).

Waiting
-------
A fit that does not fit now, but would if the other reservations were
released, waits: it emits one :class:`MemoryWaitWarning` naming the process
ids that hold memory, polls the ledger, and raises
:class:`~fastgp.exceptions.InsufficientMemoryError` if it still does not fit after
``FASTGP_MEMORY_TIMEOUT`` seconds (default :data:`DEFAULT_TIMEOUT`; 0 never
waits). A fit that could never fit (more than the limit, or more than the
available memory plus everything reserved by others, less what this process
keeps in fitted models) raises at once. The timeout is an environment
variable rather than an estimator parameter for the reason
:func:`fastgp.memory.skip_memory_check` is a context: it describes the
machine and the pipeline, not the model.

Kept factors
------------
A fit's reservation shrinks to its kept factor ``L_`` when the fit ends and
lives until that array is freed (``weakref.finalize``): ``del estimator``,
refitting it (the old ``L_`` is dropped when the new one is published), or the
process's end. An unpickled estimator holds no reservation.

Without ``fcntl`` (Windows), or where the ledger's directory cannot be
created, written, locked or trusted, there is no machine-wide ledger: each
check is against this process's own view, the memory available now (or the
limit), with a :class:`~fastgp.exceptions.MemoryLedgerWarning` saying why.
"""

import contextlib
import contextvars
import json
import os
import re
import threading
import time
import uuid
import weakref

from .._user_warnings import warn_user
from ..exceptions import MemoryWaitWarning
from . import reading as probe
from .ledger_files import (LEDGER_ENV, LOCK_TIMEOUT_ENV, LedgerUnavailable, create_entry,
                           ledger_dir, locked, read_entries, seconds_from_env,
                           usable_ledger)
from .reading import MemoryReading
from .refuse import refuse_if_short, refusal
from .switch import memory_check_enabled
from .units import format_bytes

__all__ = [
    "LIMIT_ENV",
    "LEDGER_ENV",
    "LOCK_TIMEOUT_ENV",
    "TIMEOUT_ENV",
    "DEFAULT_TIMEOUT",
    "MemoryWaitWarning",
    "Reservation",
    "parse_memory_size",
    "memory_limit",
    "wait_timeout",
    "ledger_dir",
    "budget_reading",
    "reserve",
    "check_could_fit",
    "covered_by_reservation",
]

#: Environment variable: the machine's memory budget for fastgp, overriding
#: the detected available memory.
LIMIT_ENV = "FASTGP_MEMORY_LIMIT"
#: Environment variable: seconds a fit waits for others to release memory.
TIMEOUT_ENV = "FASTGP_MEMORY_TIMEOUT"
#: Seconds a fit waits by default.
DEFAULT_TIMEOUT = 600.0

_UNITS = {"": 1, "b": 1, "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12,
          "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40}
_SIZE = re.compile(r"^\s*([0-9]+(?:\.[0-9]*)?|\.[0-9]+)\s*([a-z]*)\s*$", re.IGNORECASE)

#: Set while a reservation covers this thread's (and asyncio task's) work: the
#: workspace's own backstop check would otherwise count the fit's reservation
#: against the fit.
_covered = contextvars.ContextVar("fastgp_covered_by_reservation", default=False)


def parse_memory_size(text):
    """Parse a memory size: ``"12GiB"``, ``"1.5 GB"``, ``"500000000"``.

    Parameters
    ----------
    text : str
        A non-negative number, optionally followed by a unit: B, kB, MB, GB,
        TB (powers of 1000) or KiB, MiB, GiB, TiB (powers of 1024); case does
        not matter.

    Returns
    -------
    int
        Bytes (rounded down).

    Raises
    ------
    ValueError
        Anything else, with the accepted forms in the message.
    """
    match = _SIZE.match(str(text))
    unit = match.group(2).lower() if match else None
    if match is None or unit not in _UNITS:
        raise ValueError(
            f"{LIMIT_ENV}={text!r} is not a memory size. Use a number of bytes, or a "
            "number with a unit: kB, MB, GB, TB (powers of 1000) or KiB, MiB, GiB, "
            f"TiB (powers of 1024), for example {LIMIT_ENV}=12GiB.")
    return int(float(match.group(1)) * _UNITS[unit])


def memory_limit():
    """The budget set by ``FASTGP_MEMORY_LIMIT`` in bytes, or None if unset.

    Returns
    -------
    int or None
        Bytes (:func:`parse_memory_size`); None where the variable is unset
        or empty.

    Raises
    ------
    ValueError
        The variable is set to something that is not a memory size.
    """
    text = os.environ.get(LIMIT_ENV, "").strip()
    return parse_memory_size(text) if text else None


def wait_timeout():
    """Read how many seconds a fit waits for memory.

    Returns
    -------
    float
        ``FASTGP_MEMORY_TIMEOUT``, or :data:`DEFAULT_TIMEOUT` where unset.

    Raises
    ------
    ValueError
        The variable is not a non-negative number.
    """
    return seconds_from_env(TIMEOUT_ENV, DEFAULT_TIMEOUT)


def _resident_bytes(pid):
    """Resident memory of process ``pid`` (``/proc/<pid>/statm``), or None."""
    try:
        with open(f"/proc/{pid}/statm", "rb") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, IndexError, ValueError):
        return None


def _unspent(entries):
    """Sum of the reservations' bytes not yet resident (module docstring,
    "Free memory under reservations").

    Per process, from its latest reservation back: each is spent by the
    growth of the process's resident memory since it was made, less what its
    later reservations were already given, between 0 and its bytes. So
    growth counts once, towards the reservations made before it, and two
    reservations made together share it.
    """
    by_pid = {}
    for entry in entries:
        by_pid.setdefault(entry["pid"], []).append(entry)
    unspent = 0
    for pid, mine in by_pid.items():
        now = _resident_bytes(pid)
        attributed = 0
        for entry in sorted(mine, key=lambda e: e.get("created", 0.0), reverse=True):
            total, start = int(entry["bytes"]), entry.get("resident")
            spent = 0
            if now is not None and start is not None:
                spent = min(max(now - start - attributed, 0), total)
            attributed += spent
            unspent += total - spent
    return unspent


def _free(entries):
    """(free, source, capacity): bytes a new reservation may take now, where
    that figure came from, and what it could take if every reservation but
    this process's kept ones were released. None where nothing can be read."""
    limit = memory_limit()
    reserved = sum(int(entry["bytes"]) for entry in entries)
    own_kept = sum(int(entry["bytes"]) for entry in entries
                   if entry["pid"] == os.getpid() and entry.get("kept"))
    if limit is not None:
        return limit - reserved, f"{LIMIT_ENV}={format_bytes(limit)}", limit - own_kept
    reading = probe.available_memory()
    if reading is None:
        return None
    free = reading.available - _unspent(entries)
    return free, reading.source, free + reserved - own_kept


def _own_view():
    """The memory this process may use by its own view, with no ledger:
    ``FASTGP_MEMORY_LIMIT``, or the memory available now."""
    limit = memory_limit()
    return (probe.available_memory() if limit is None
            else MemoryReading(limit, f"{LIMIT_ENV}={format_bytes(limit)}"))


def _physical():
    """The machine's memory, the largest reservation an entry may claim."""
    return probe.physical_memory() or 2**62


def _read_ledger():
    """(live entries, :func:`_free`'s state) read under the ledger's lock;
    raises :class:`~fastgp.memory.ledger_files.LedgerUnavailable` where there
    is no ledger to use."""
    directory = usable_ledger()
    with locked(directory):
        entries = read_entries(directory, _physical())
        return entries, _free(entries)


def _holders(entries):
    """'pid 123 (1.2 GB), pid 456 (800.0 MB)': who holds the reservations."""
    by_pid = {}
    for entry in entries:
        by_pid[entry["pid"]] = by_pid.get(entry["pid"], 0) + int(entry["bytes"])
    return ", ".join(f"pid {pid} ({format_bytes(n)})" for pid, n in sorted(by_pid.items()))


def _ledger_reading(after_release, unavailable):
    """A :class:`~fastgp.memory.MemoryReading` from the ledger, its source
    naming the reservations' holders: the bytes a new operation may use now
    (``after_release`` False), or once every other fit released its
    reservations (True). ``unavailable()`` answers where there is no ledger
    to use; None where nothing can be read."""
    try:
        entries, state = _read_ledger()
    except LedgerUnavailable:
        return unavailable()
    if state is None:
        return None
    free, source, capacity = state
    return MemoryReading(max(0, int(capacity if after_release else free)),
                         _with_reservations(source, entries))


def budget_reading():
    """The memory a new operation may use now on this machine.

    ``FASTGP_MEMORY_LIMIT`` or the detected available memory, less the live
    reservations (the module docstring says how they count).

    Returns
    -------
    fastgp.memory.MemoryReading or None
        Bytes and where they were read (the holders named); None where
        nothing can be read.
    """
    return _ledger_reading(False, _own_view)


def budget_capacity():
    """The memory a new operation could use on this machine once every other
    fit released its reservations (it would wait for them, not be refused):
    what the solver choice compares an estimate with.

    Returns
    -------
    fastgp.memory.MemoryReading or None
        As :func:`budget_reading`; None where nothing can be read.
    """
    return _ledger_reading(True, _own_view)


def _with_reservations(source, entries):
    if not entries:
        return source
    return (f"{source}, less the reservations of fastgp fits on this machine: "
            f"{_holders(entries)}")


# ---------------------------------------------------------------- reservations
class Reservation:
    """A live reservation of ``nbytes`` in the machine's ledger.

    The file stays locked while the reservation lives; :meth:`release` (or the
    process's end) ends it. Use :meth:`covering` around the work it pays for,
    and :meth:`keep` to hand it to a kept array.
    """

    def __init__(self, directory, nbytes, operation):
        self.nbytes = int(nbytes)
        name = f"{os.getpid()}-{uuid.uuid4().hex}.json"
        self.path = os.path.join(directory, name)
        self._fd = create_entry(directory, name)
        self._operation = operation
        self._resident = _resident_bytes(os.getpid())
        self._created = time.time()
        self._lock = threading.Lock()
        self._write(kept=False)

    def _write(self, kept):
        record = {"pid": os.getpid(), "bytes": self.nbytes, "operation": self._operation,
                  "resident": self._resident, "created": self._created, "kept": kept}
        data = json.dumps(record).encode()
        os.ftruncate(self._fd, 0)
        os.pwrite(self._fd, data, 0)

    @property
    def released(self):
        return self._fd is None

    @contextlib.contextmanager
    def covering(self):
        """Inside the block this thread's memory checks are covered by the
        reservation (the workspace's backstop check is skipped)."""
        token = _covered.set(True)
        try:
            yield self
        finally:
            _covered.reset(token)

    def keep(self, array):
        """Shrink the reservation to ``array.nbytes`` and hold it until
        ``array`` is freed (the kept factor ``L_``)."""
        with contextlib.suppress(LedgerUnavailable):  # then it stays at its full size
            with locked(os.path.dirname(self.path)), self._lock:
                if self._fd is None:
                    return
                self.nbytes = int(array.nbytes)
                self._write(kept=True)
        weakref.finalize(array, self.release)

    def release(self):
        """End the reservation (idempotent). Takes no ledger lock, so it is
        safe from a garbage-collection callback at any point."""
        with self._lock:
            fd, self._fd = self._fd, None
        if fd is None:
            return
        with contextlib.suppress(OSError):
            os.unlink(self.path)
        os.close(fd)


class _NoReservation:
    """What :func:`reserve` returns when nothing is recorded (the check is
    switched off, or there is no ledger on this platform)."""

    nbytes = 0
    released = True

    @contextlib.contextmanager
    def covering(self):
        yield self

    def keep(self, array):
        pass

    def release(self):
        pass


def covered_by_reservation():
    """Whether a reservation covers this thread's work now
    (:meth:`Reservation.covering`)."""
    return _covered.get()


def _refuse(needed, free, source, entries, budget, reason):
    return refusal(needed, max(0, int(free)), _with_reservations(source, entries),
                   reason=reason, **budget)


def check_could_fit(needed, *, n_samples, operation, remedies, size=None):
    """Raise :class:`~fastgp.exceptions.InsufficientMemoryError` at once if
    ``needed`` bytes could not be reserved even after every other fit on the
    machine released its memory; reserve nothing. For a fit whose work runs
    in workers that reserve for themselves (parallel restarts)."""
    if not memory_check_enabled():
        return
    try:
        entries, state = _read_ledger()
    except LedgerUnavailable:
        return  # each worker's own check refuses it
    if state is not None and needed > state[2]:
        budget = dict(n_samples=n_samples, operation=operation, remedies=remedies, size=size)
        raise _refuse(needed, state[2], state[1], entries, budget,
                      "It could not fit even if every other fastgp fit released its memory.")


def reserve(needed, *, n_samples, operation, remedies, size=None, timeout=None,
            poll=0.05):
    """Reserve ``needed`` bytes in the machine's ledger, waiting if need be.

    If it does not fit now it waits for others to release memory (module
    docstring).

    Parameters
    ----------
    needed : int
        Estimated peak bytes of the operation (:mod:`fastgp.memory`).
    n_samples : int
        The N that sets the size, named in a refusal.
    operation : str
        What would allocate it, named in a refusal and the wait message.
    remedies : sequence of str
        What the user can do, most useful first.
    size : str or None
        How a refusal names the size (:func:`fastgp.memory.check_memory`).
    timeout : float or None
        Seconds to wait at most; None reads ``FASTGP_MEMORY_TIMEOUT``.
    poll : float
        First interval between reads of the ledger, in seconds; it doubles up
        to one second.

    Returns
    -------
    Reservation
        Live until released (or kept, :meth:`Reservation.keep`). A do-nothing
        stand-in where the check is off (:func:`fastgp.memory.skip_memory_check`)
        or there is no ledger (no ``fcntl``; then it is
        :func:`fastgp.memory.check_memory`'s check alone).

    Raises
    ------
    fastgp.exceptions.InsufficientMemoryError
        At once if it could never fit; after ``timeout`` seconds if it did
        not fit by then.
    """
    budget = dict(n_samples=n_samples, operation=operation, remedies=remedies, size=size)
    if not memory_check_enabled():
        return _NoReservation()
    timeout = wait_timeout() if timeout is None else float(timeout)
    started, warned = time.monotonic(), False
    while True:
        try:
            directory = usable_ledger()
            with locked(directory):
                entries = read_entries(directory, _physical())
                state = _free(entries)
                if state is None or needed <= state[0]:
                    # nothing can be read: record the reservation for others anyway
                    return Reservation(directory, needed, operation)
        except LedgerUnavailable:
            if not covered_by_reservation():
                refuse_if_short(needed, _own_view(), **budget)
            return _NoReservation()
        free, source, capacity = state
        if needed > capacity:
            raise _refuse(needed, capacity, source, entries, budget,
                          "It could not fit even if every other fastgp fit released "
                          "its memory.")
        waited = time.monotonic() - started
        if waited >= timeout:
            raise _refuse(needed, free, source, entries, budget,
                          f"fastgp waited {waited:.0f} s ({TIMEOUT_ENV}) for other fits "
                          "to release memory.")
        if not warned:
            warn_user(
                f"{operation} needs {format_bytes(needed)} of memory and only "
                f"{format_bytes(max(0, free))} is free now ({source}): it waits up to "
                f"{timeout:g} s ({TIMEOUT_ENV}) for the other fastgp fits on this "
                f"machine to release memory: {_holders(entries)}.",
                MemoryWaitWarning)
            warned = True
        time.sleep(min(poll, max(0.0, timeout - waited)))
        poll = min(2 * poll, 1.0)
