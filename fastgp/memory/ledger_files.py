"""The ledger's files: where they live, whose they may be, and locks that
never hang (docs/reliability.md, "Who can affect whose fits").

The ledger (:mod:`fastgp.memory.ledger`) is a directory of reservation files,
read and extended under a lock. Whatever is in that directory is input from
whoever can write it, so every operation here assumes it may be hostile:

- **Private by default.** Without ``FASTGP_MEMORY_LEDGER`` the directory is
  ``fastgp-memory-ledger-<uid>`` under the system's temporary directory,
  created with mode 0700, and used only if it is a real directory (not a
  symbolic link) owned by this user and closed to everyone else: a directory
  that another user made in advance under that name is refused, not trusted.
  ``FASTGP_MEMORY_LEDGER`` names a directory to share, for a team that trusts
  its members (created 0700 where missing: the team makes it group-writable
  itself); it is refused where everyone may write it without the sticky bit
  (anyone could delete anyone's reservations).
- **No symbolic link is followed.** The lock file and every reservation file
  are opened with ``O_NOFOLLOW`` and must be regular files.
- **No lock is waited for without end.** Every ``flock`` is taken without
  blocking and retried for at most ``FASTGP_MEMORY_LOCK_TIMEOUT`` seconds
  (default :data:`DEFAULT_LOCK_TIMEOUT`): a process that holds the ledger's
  lock (one ``flock`` command) cannot make a fit wait for ever.
- **Entries are checked, never trusted.** A reservation file is read only up
  to :data:`MAX_ENTRY_BYTES`, must hold the fields a reservation writes with
  their types, a size between 0 and the machine's physical memory, and in
  the private ledger must belong to this user; anything else is ignored.

Where the ledger cannot be used safely (a refused directory, a lock held past
the timeout, a symbolic link), :class:`LedgerUnavailable` is raised and the
caller falls back to this process's own view of the memory (the check against
the memory available now), with one
:class:`~fastgp.exceptions.MemoryLedgerWarning` per problem and process. An
ignored entry gets one such warning too. Nothing here raises into a fit.
"""

import contextlib
import json
import os
import stat
import tempfile
import threading
import time

from .._user_warnings import warn_user
from ..exceptions import MemoryLedgerWarning

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None

__all__ = [
    "LEDGER_ENV",
    "LOCK_TIMEOUT_ENV",
    "DEFAULT_LOCK_TIMEOUT",
    "MAX_ENTRY_BYTES",
    "LedgerUnavailable",
    "ledger_dir",
    "lock_timeout",
    "usable_ledger",
    "locked",
    "read_entries",
    "create_entry",
]

#: Environment variable: a directory to share the ledger in (trusted).
LEDGER_ENV = "FASTGP_MEMORY_LEDGER"
#: Environment variable: seconds a lock is retried before the ledger is given up.
LOCK_TIMEOUT_ENV = "FASTGP_MEMORY_LOCK_TIMEOUT"
#: Seconds a lock is retried by default: ledger operations take microseconds.
DEFAULT_LOCK_TIMEOUT = 5.0
#: A reservation file is a few hundred bytes; anything longer is not one.
MAX_ENTRY_BYTES = 4096

#: The fields of a reservation and the types each may have.
_FIELDS = {"pid": (int,), "bytes": (int,), "operation": (str,),
           "resident": (int, type(None)), "created": (int, float), "kept": (bool,)}

_warned = set()
_warned_lock = threading.Lock()


class LedgerUnavailable(Exception):
    """There is no ledger that can be used safely here (module docstring):
    the caller checks against this process's own view of the memory."""


def warn_once(key, message):
    """One :class:`~fastgp.exceptions.MemoryLedgerWarning` per ``key`` and
    process."""
    with _warned_lock:
        if key in _warned:
            return
        _warned.add(key)
    warn_user(message, MemoryLedgerWarning)


def lock_timeout():
    """Seconds a ledger lock is retried: ``FASTGP_MEMORY_LOCK_TIMEOUT``, or
    :data:`DEFAULT_LOCK_TIMEOUT`.

    Returns
    -------
    float

    Raises
    ------
    ValueError
        The variable is not a non-negative number.
    """
    return seconds_from_env(LOCK_TIMEOUT_ENV, DEFAULT_LOCK_TIMEOUT)


def seconds_from_env(name, default):
    """Read the environment variable ``name`` as a number of seconds.

    Parameters
    ----------
    name : str
        The environment variable.
    default : float
        The seconds where it is unset or blank.

    Returns
    -------
    float
        Its value, or ``default``.

    Raises
    ------
    ValueError
        The variable is not a non-negative number; the message names it.
    """
    text = os.environ.get(name, "").strip()
    if not text:
        return default
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not value >= 0.0:
        raise ValueError(f"{name}={text!r} is not a non-negative number of seconds.")
    return value


def _shared():
    return bool(os.environ.get(LEDGER_ENV))


def ledger_dir():
    """The ledger's directory, created (mode 0700) where missing.

    Returns
    -------
    str
        ``FASTGP_MEMORY_LEDGER`` where set; else ``fastgp-memory-ledger-<uid>``
        under :func:`tempfile.gettempdir`, private to this user.
    """
    path = os.environ.get(LEDGER_ENV) or os.path.join(
        tempfile.gettempdir(), f"fastgp-memory-ledger-{os.getuid()}")
    with contextlib.suppress(FileExistsError):
        os.mkdir(path, 0o700)  # never through a link: mkdir does not follow one
    return path


def _refuse(key, why):
    warn_once(key, f"fastgp's machine-wide memory ledger is not used: {why} This "
                   "fit checks the memory it needs against the memory available "
                   "now, without the other fits' reservations.")
    raise LedgerUnavailable(why)


def usable_ledger():
    """The ledger's directory, checked (module docstring); raises
    :class:`LedgerUnavailable` where there is none to use (no ``fcntl``, a
    directory that cannot be made, or one that is refused)."""
    if fcntl is None:
        raise LedgerUnavailable("no fcntl on this platform")
    try:
        path = ledger_dir()
        info = os.lstat(path)
    except OSError as exc:
        raise LedgerUnavailable(str(exc)) from exc
    if stat.S_ISLNK(info.st_mode):
        _refuse(("link", path), f"{path} is a symbolic link, which fastgp does not "
                                "follow.")
    if not stat.S_ISDIR(info.st_mode):
        _refuse(("not a directory", path), f"{path} is not a directory.")
    if _shared():
        if info.st_mode & stat.S_IWOTH and not info.st_mode & stat.S_ISVTX:
            _refuse(("world-writable", path),
                    f"{path} ({LEDGER_ENV}) may be written by every user and has no "
                    "sticky bit, so anyone could remove anyone's reservations; make "
                    "it writable by your team only (chmod o-w), or set the sticky "
                    "bit (chmod +t).")
    elif info.st_uid != os.getuid() or info.st_mode & 0o077:
        _refuse(("not private", path),
                f"{path} should be this user's alone (uid {os.getuid()}, mode 0700) "
                f"but is owned by uid {info.st_uid} with mode "
                f"{stat.S_IMODE(info.st_mode):04o}; another user may have made it. "
                f"Remove it, or set {LEDGER_ENV} to a directory of your own.")
    return path


def _open_regular(path, flags, mode=0o600):
    """``os.open`` without following a symbolic link, of a regular file
    only; raises OSError otherwise."""
    fd = os.open(path, flags | os.O_NOFOLLOW | os.O_NONBLOCK, mode)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(f"{path} is not a regular file")
    except BaseException:
        os.close(fd)
        raise
    return fd


def _flock(fd, kind, timeout, what):
    """``flock(fd, kind)`` without blocking, retried for up to ``timeout``
    seconds; raises :class:`LedgerUnavailable` after that."""
    deadline = time.monotonic() + timeout
    pause = 0.001
    while True:
        try:
            fcntl.flock(fd, kind | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            if time.monotonic() >= deadline:
                _refuse(("lock held", what),
                        f"{what} has been locked by another process for more than "
                        f"{timeout:g} s ({LOCK_TIMEOUT_ENV}).")
            time.sleep(pause)
            pause = min(2 * pause, 0.05)


@contextlib.contextmanager
def locked(directory):
    """Hold the ledger's exclusive lock (its ``.lock`` file), taken within
    :func:`lock_timeout` seconds; raises :class:`LedgerUnavailable` where it
    cannot be (a symbolic link, a file that cannot be made, a lock held past
    the timeout), and in place of an ``OSError`` inside the block."""
    path = os.path.join(directory, ".lock")
    try:
        # read-only is enough for flock, and works on a team member's lock file
        fd = _open_regular(path, os.O_RDONLY | os.O_CREAT,
                           0o666 if _shared() else 0o600)
    except OSError as exc:
        _refuse(("lock file", path), f"its lock file {path} cannot be opened safely "
                                     f"({exc}).")
    try:
        _flock(fd, fcntl.LOCK_EX, lock_timeout(), f"the ledger's lock file {path}")
        try:
            yield
        except OSError as exc:  # the directory not writable, the disk full
            raise LedgerUnavailable(str(exc)) from exc
    finally:
        os.close(fd)  # closing drops the lock


def _well_formed(record):
    """Whether ``record`` has exactly a reservation's fields, each of its
    type (a bool is not an int here)."""
    if not isinstance(record, dict) or set(record) != set(_FIELDS):
        return False
    for key, types in _FIELDS.items():
        value = record[key]
        if isinstance(value, bool) != (bool in types) or not isinstance(value, types):
            return False
    return True


def _record(fd, name, path, physical):
    """The checked reservation in the open file ``fd``, or None (warned)."""
    data = os.pread(fd, MAX_ENTRY_BYTES + 1, 0)
    problem = None
    if len(data) > MAX_ENTRY_BYTES:
        problem = f"it is longer than {MAX_ENTRY_BYTES} bytes"
    elif not _shared() and os.fstat(fd).st_uid != os.getuid():
        problem = f"it belongs to uid {os.fstat(fd).st_uid}, not to this user"
    else:
        try:
            record = json.loads(data or b"{}")
        except ValueError:  # a process that died while writing, or garbage
            record = None
        if not _well_formed(record):
            problem = "it is not a reservation fastgp wrote"
        elif record["pid"] <= 0 or not 0 <= record["bytes"] <= physical:
            problem = (f"it reserves {record['bytes']} bytes, more than the machine's "
                       f"{physical} bytes of memory" if record["bytes"] > physical
                       else "its size or process id is impossible")
    if problem is not None:
        warn_once(("entry", path), f"fastgp ignores the memory ledger's entry {path}: "
                                   f"{problem}.")
        return None
    record["name"] = name
    return record


def read_entries(directory, physical):
    """The live reservations in ``directory`` (call under :func:`locked`),
    as dicts (bytes, pid, operation, resident, created, kept, name); files
    of dead reservations are removed on the way, entries that fail the
    checks of the module docstring are ignored with a warning.
    ``physical``: the machine's memory in bytes (the largest plausible
    reservation)."""
    entries = []
    for name in os.listdir(directory):
        if not name.endswith(".json"):
            continue
        path = os.path.join(directory, name)
        try:
            fd = _open_regular(path, os.O_RDONLY)
        except OSError:  # released meanwhile, or not a regular file
            continue
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
            except BlockingIOError:  # its owner holds it: alive
                record = _record(fd, name, path, physical)
                if record is not None:
                    entries.append(record)
                continue
            with contextlib.suppress(OSError):  # dead: reclaim (if we may)
                os.unlink(path)
        finally:
            os.close(fd)
    return entries


def create_entry(directory, name):
    """A new reservation file ``name`` in ``directory``, created (never
    through a link) and exclusively locked: its descriptor. Raises
    :class:`LedgerUnavailable` where it cannot be."""
    path = os.path.join(directory, name)
    try:
        fd = _open_regular(path, os.O_RDWR | os.O_CREAT | os.O_EXCL,
                           0o644 if _shared() else 0o600)
    except OSError as exc:
        raise LedgerUnavailable(str(exc)) from exc
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # a new file: nobody holds it
    except OSError as exc:
        os.close(fd)
        with contextlib.suppress(OSError):
            os.unlink(path)
        raise LedgerUnavailable(str(exc)) from exc
    return fd
