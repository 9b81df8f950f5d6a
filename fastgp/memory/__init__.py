"""Memory: how much an operation will need, how much the machine has now, and
the check between the two that runs before any N x N buffer is allocated.

Every estimate of fastgp's peak memory lives here (``*_bytes``); the
estimators and :mod:`fastgp._fit.session` call :func:`check_memory` with them.

The people fastgp is for were killed by the operating system's out-of-memory
killer at N = 10,000 and never told why. A killed process gives no traceback
and loses the session; a :class:`InsufficientMemoryError` (a ``MemoryError``)
raised *before* the allocation says how much was needed, how much there was,
and what to do, and costs a few reads of ``/proc``.

Available memory
----------------
:func:`available_memory` takes the smallest of the figures it can read:

- Linux: ``MemAvailable`` from ``/proc/meminfo`` (the kernel's own estimate of
  what can be allocated without swapping, page cache it can drop included);
- a control group's limit where one is set, for every level from the
  process's own group up to the root of the hierarchy (a container's limit is
  often set on an ancestor): cgroup v2 ``memory.max - memory.current``,
  cgroup v1 ``memory.limit_in_bytes - memory.usage_in_bytes``, each with the
  group's reclaimable inactive page cache added back (the kernel drops it
  before it kills, as ``docker stats`` accounts it);
- elsewhere: ``psutil.virtual_memory().available`` when psutil is installed,
  ``GlobalMemoryStatusEx`` on Windows, and the free physical pages
  (``sysconf``) on other POSIX systems.

Where no figure can be read the check is skipped rather than guessed.

Proceeding anyway
-----------------
A user who knows better (the estimate is pessimistic for their case, or swap
is acceptable) turns the check off for a block of code with
:func:`skip_memory_check`, or for a whole process (and joblib workers it
starts) with the environment variable ``FASTGP_SKIP_MEMORY_CHECK=1``. The
switch is a context, not an estimator parameter: it says something about the
machine, not about the model, so it does not belong in ``get_params``, in a
pickled estimator, or in scikit-learn's constructor signature that fastgp
mirrors (the same reasoning as ``sklearn.config_context`` and
``threadpoolctl``).
"""

import contextlib
import contextvars
import os
import sys
from dataclasses import dataclass

__all__ = [
    "InsufficientMemoryError",
    "MemoryReading",
    "available_memory",
    "check_memory",
    "skip_memory_check",
    "memory_check_enabled",
    "format_bytes",
    "refusal",
    "fit_bytes",
    "iterative_fit_bytes",
    "fits_in_memory",
    "gplvm_fit_bytes",
    "laplace_fit_bytes",
    "log_marginal_likelihood_bytes",
    "predict_cov_bytes",
    "sample_y_bytes",
    "SKIP_ENV",
]

#: Environment variable that disables the check for the whole process.
SKIP_ENV = "FASTGP_SKIP_MEMORY_CHECK"

#: cgroup v1 reports "no limit" as a huge page-aligned number (2**63 - 4096 on
#: x86-64); anything at or above this is treated as unlimited.
_UNLIMITED = 2**60

_skip = contextvars.ContextVar("fastgp_skip_memory_check", default=False)


class InsufficientMemoryError(MemoryError):
    """An operation would need more memory than the machine has available.

    Parameters
    ----------
    message : str
        The text shown: both figures, N, where the figure was read and the
        remedies.
    needed : int
        Estimated bytes the operation would allocate.
    available : int
        Bytes available when the check ran.
    n_samples : int
        The N that sets the size.
    source : str
        Where ``available`` was read.

    Attributes
    ----------
    needed : int
        Estimated bytes the operation would allocate.
    available : int
        Bytes available when the check ran.
    n_samples : int
        The N of the N x N buffer.
    source : str
        Where ``available`` was read.
    """

    def __init__(self, message, needed, available, n_samples, source):
        super().__init__(message)
        self.needed = needed
        self.available = available
        self.n_samples = n_samples
        self.source = source


@dataclass(frozen=True)
class MemoryReading:
    """Bytes available now and where the figure was read.

    Parameters
    ----------
    available : int
        Bytes that can be allocated.
    source : str
        Where the figure was read ("MemAvailable in /proc/meminfo").
    """

    available: int
    source: str


# --------------------------------------------------------------- the opt-out
@contextlib.contextmanager
def skip_memory_check():
    """Context manager: fastgp does not check memory inside the block.

    The setting belongs to the current thread (and asyncio task), like
    ``sklearn.config_context``; for a whole process, or joblib workers, set
    the environment variable ``FASTGP_SKIP_MEMORY_CHECK=1`` instead.

    Yields
    ------
    None
        The block runs without the check; it is back on when the block ends.

    Examples
    --------
    >>> from fastgp.memory import skip_memory_check, memory_check_enabled
    >>> with skip_memory_check():
    ...     memory_check_enabled()
    False
    """
    token = _skip.set(True)
    try:
        yield
    finally:
        _skip.reset(token)


def memory_check_enabled():
    """Whether fastgp checks memory before large allocations here and now.

    Returns
    -------
    bool
        False inside :func:`skip_memory_check` or when
        ``FASTGP_SKIP_MEMORY_CHECK`` is set to 1, true, yes or on; True
        otherwise.
    """
    if _skip.get():
        return False
    return os.environ.get(SKIP_ENV, "").strip().lower() not in {"1", "true", "yes", "on"}


# ------------------------------------------------------------ reading /proc
def _read(path):
    try:
        with open(path, encoding="ascii") as f:
            return f.read()
    except (OSError, UnicodeDecodeError):
        return None


def _read_int(path):
    text = _read(path)
    if text is None:
        return None
    text = text.strip()
    if text == "max":  # cgroup v2: no limit
        return None
    try:
        return int(text)
    except ValueError:
        return None


def meminfo_available(path="/proc/meminfo"):
    """``MemAvailable`` in bytes from ``/proc/meminfo``; on kernels older than
    3.14, which lack it, ``MemFree + Buffers + Cached``. None if unreadable."""
    text = _read(path)
    if text is None:
        return None
    fields = {}
    for line in text.splitlines():
        name, _, rest = line.partition(":")
        parts = rest.split()
        if parts and parts[0].isdigit():
            scale = 1024 if len(parts) > 1 and parts[1].lower() == "kb" else 1
            fields[name.strip()] = int(parts[0]) * scale
    if "MemAvailable" in fields:
        return fields["MemAvailable"]
    if "MemFree" in fields:
        return fields["MemFree"] + fields.get("Buffers", 0) + fields.get("Cached", 0)
    return None


def _stat_field(path, name):
    text = _read(path)
    if text is None:
        return 0
    for line in text.splitlines():
        key, _, value = line.partition(" ")
        if key == name and value.strip().isdigit():
            return int(value)
    return 0


def _cgroup_dirs(proc_self, version):
    """Directories of the process's memory cgroup, leaf first, up to the
    mount point of the hierarchy, for cgroup ``version`` 1 or 2."""
    cgroup_text = _read(os.path.join(proc_self, "cgroup"))
    mount_text = _read(os.path.join(proc_self, "mountinfo"))
    if cgroup_text is None or mount_text is None:
        return []
    group = None
    for line in cgroup_text.splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        if version == 2 and parts[0] == "0" and parts[1] == "":
            group = parts[2]
        elif version == 1 and "memory" in parts[1].split(","):
            group = parts[2]
    if group is None:
        return []
    for line in mount_text.splitlines():
        # mountinfo(5): id parent major:minor root mount_point options ... - fstype source super_options
        head, sep, tail = line.partition(" - ")
        fields, tail_fields = head.split(), tail.split()
        if not sep or len(fields) < 5 or len(tail_fields) < 3:
            continue
        fstype, super_options = tail_fields[0], tail_fields[2]
        if version == 2 and fstype != "cgroup2":
            continue
        if version == 1 and (fstype != "cgroup" or "memory" not in super_options.split(",")):
            continue
        root, mount_point = fields[3], fields[4]
        relative = os.path.relpath(group, root) if group.startswith(root) else "."
        leaf = os.path.normpath(os.path.join(mount_point, relative))
        if not leaf.startswith(mount_point) or not os.path.isdir(leaf):
            leaf = mount_point  # a cgroup namespace hides the path: use its root
        dirs = [leaf]
        while dirs[-1] != mount_point and len(dirs) < 64:
            dirs.append(os.path.dirname(dirs[-1]))
        return dirs
    return []


def cgroup_available(proc_self="/proc/self"):
    """The smallest ``limit - usage + inactive page cache`` over the process's
    memory cgroup and its ancestors (v2 and v1), as a :class:`MemoryReading`;
    None where no level sets a limit."""
    best = None
    layouts = (
        (2, "memory.max", "memory.current", "inactive_file", "cgroup v2 memory.max - memory.current"),
        (1, "memory.limit_in_bytes", "memory.usage_in_bytes", "total_inactive_file",
         "cgroup v1 memory.limit_in_bytes - memory.usage_in_bytes"),
    )
    for version, limit_file, usage_file, inactive, label in layouts:
        for directory in _cgroup_dirs(proc_self, version):
            limit = _read_int(os.path.join(directory, limit_file))
            if limit is None or limit >= _UNLIMITED:
                continue
            usage = _read_int(os.path.join(directory, usage_file)) or 0
            reclaimable = _stat_field(os.path.join(directory, "memory.stat"), inactive)
            free = max(0, limit - max(0, usage - reclaimable))
            if best is None or free < best.available:
                best = MemoryReading(free, f"{label} in {directory}")
    return best


def _platform_available():
    """Available bytes where /proc is not there: psutil, Windows, sysconf."""
    try:
        import psutil  # optional; not a dependency of fastgp
    except ImportError:
        psutil = None
    if psutil is not None:
        try:
            return MemoryReading(int(psutil.virtual_memory().available),
                                 "psutil.virtual_memory().available")
        except Exception:  # noqa: BLE001 - a broken psutil must not break a fit
            pass
    if sys.platform == "win32":
        return _windows_available()
    try:
        pages = os.sysconf("SC_AVPHYS_PAGES")
        page_size = os.sysconf("SC_PAGE_SIZE")
    except (AttributeError, ValueError, OSError):
        return None
    if pages > 0 and page_size > 0:
        return MemoryReading(pages * page_size, "sysconf free physical pages")
    return None


def _windows_available():
    import ctypes

    class MEMORYSTATUSEX(ctypes.Structure):
        _fields_ = [(name, ctypes.c_ulonglong if name.startswith("ull") else ctypes.c_ulong)
                    for name in ("dwLength", "dwMemoryLoad", "ullTotalPhys", "ullAvailPhys",
                                 "ullTotalPageFile", "ullAvailPageFile", "ullTotalVirtual",
                                 "ullAvailVirtual", "ullAvailExtendedVirtual")]

    status = MEMORYSTATUSEX()
    status.dwLength = ctypes.sizeof(MEMORYSTATUSEX)
    if not ctypes.windll.kernel32.GlobalMemoryStatusEx(ctypes.byref(status)):
        return None
    return MemoryReading(int(status.ullAvailPhys), "GlobalMemoryStatusEx available physical")


def available_memory(meminfo="/proc/meminfo", proc_self="/proc/self"):
    """Read the bytes that can be allocated now.

    The smallest figure of those in the module docstring (MemAvailable, the
    control groups' limits, the platform's figure).

    Parameters
    ----------
    meminfo : str, default="/proc/meminfo"
        Path of the meminfo file (tests point it at a fake tree).
    proc_self : str, default="/proc/self"
        Path of this process's proc directory (for its control groups).

    Returns
    -------
    MemoryReading or None
        The smallest reading; None if none can be read.
    """
    readings = []
    from_meminfo = meminfo_available(meminfo)
    if from_meminfo is not None:
        readings.append(MemoryReading(from_meminfo, f"MemAvailable in {meminfo}"))
    else:
        platform = _platform_available()
        if platform is not None:
            readings.append(platform)
    from_cgroup = cgroup_available(proc_self)
    if from_cgroup is not None:
        readings.append(from_cgroup)
    return min(readings, key=lambda r: r.available) if readings else None


# --------------------------------------------------------------- estimates
_F8 = 8  # bytes per float64

#: What every operation allocates whatever N: scikit-learn's validation, the
#: kernel objects, SciPy's optimiser state. Measured at about 50 kB with
#: tracemalloc; 1 MiB leaves room.
_FIXED = 2**20


def fit_bytes(n_samples, n_features, n_targets, n_theta, fast=True):
    """Estimate the peak extra bytes of a fit (docs/design.md, "One N x N buffer").

    Fast path: the N x N workspace plus O(N (d + T)) vectors (X and y copies,
    A = K^-1 y, the diagonal). General path (a kernel object fastgp cannot
    lower): scikit-learn's kernel call also returns K (N x N) and its
    (N, N, n_theta) gradient, and the trace needs a full W and A A^T.

    Parameters
    ----------
    n_samples : int
        Training samples N.
    n_features : int
        Input dimensions d.
    n_targets : int
        Target columns T.
    n_theta : int
        Free hyperparameters.
    fast : bool, default=True
        Whether the kernel is on fastgp's fast path.

    Returns
    -------
    int
        Bytes.
    """
    n = int(n_samples)
    total = _FIXED + _F8 * n * n + _F8 * n * (2 * int(n_features) + 4 * int(n_targets) + 4)
    if not fast:
        total += _F8 * n * n * (int(n_theta) + 3)
    return total


#: What a matrix-free fit's process touches beside NumPy's arrays (OpenBLAS's
#: per-thread buffers, Numba's and OpenMP's thread stacks): the peak resident
#: memory of one 10-D ARD loss+gradient at N = 10,000 was 7.4 MiB above
#: NumPy's own peak (docs/benchmarks.md).
_ITERATIVE_FIXED = 8 * 2**20


def iterative_fit_bytes(n_samples, n_features, n_targets, n_probes, rank):
    """Estimate the peak extra bytes of a matrix-free fit or evaluation.

    O(N (k + t + d)) and no N x N array (docs/design.md, "The matrix-free
    path"): batched CG over c = T + t columns holds the preconditioner's
    factor (k columns) and about 14 c (solution, residual, preconditioned
    residual, direction, product, right-hand sides, the active columns'
    copies and their transposes, the probes and their draws); the
    gradient's pass needs less (its trace factor in the factor's memory, two
    (N, c) operands, CG's solutions). Plus X and y copies, the diagonals,
    and 8 MiB for what a process touches beside NumPy's arrays (BLAS and
    thread buffers).

    Parameters
    ----------
    n_samples : int
        Training samples N.
    n_features : int
        Input dimensions d.
    n_targets : int
        Target columns T.
    n_probes : int
        Probe vectors t.
    rank : int
        Preconditioner rank k.

    Returns
    -------
    int
        Bytes.
    """
    n = int(n_samples)
    c = int(n_targets) + int(n_probes)
    k = int(rank)
    return _ITERATIVE_FIXED + _F8 * n * (k + 14 * c + 2 * int(n_features) + 8)


def fits_in_memory(needed):
    """Whether ``needed`` bytes fit in the machine's memory budget.

    The budget once the other fits running now have released theirs
    (:func:`fastgp.memory.ledger.budget_capacity`): a fit waits for them.

    True where the check is off (:func:`skip_memory_check`) or no figure can
    be read, as :func:`check_memory` would let the operation proceed.

    Parameters
    ----------
    needed : int
        Estimated bytes.

    Returns
    -------
    (bool, MemoryReading or None)
        The answer and the reading it was made on.
    """
    if not memory_check_enabled():
        return True, None
    # imported here: the budget module builds on this one
    from .ledger import budget_capacity

    # FASTGP_MEMORY_LIMIT or the machine's memory, less what other fits keep
    # for good; a fit that fits once others release waits for them instead
    reading = budget_capacity()
    return reading is None or needed <= reading.available, reading


def gplvm_fit_bytes(n_samples, n_features, n_components, n_blocks):
    """Estimate the peak extra bytes of a GPLVM fit.

    The N x N workspace, the latent pass's ``n_blocks`` per-block N x Q
    partial sums (:func:`fastgp._backend.covariance.latent_blocks`), O(N (D + Q))
    vectors (the data's copies, A, the SVD of the PCA start, the optimiser's
    vectors and L-BFGS's ten correction pairs over N Q + P unknowns), and
    8 MiB of fixed cost (measured: a fit at N = 2,000, D = 12 peaked 9 MiB
    above its workspace, bench/bench_gplvm_memory.py).

    Parameters
    ----------
    n_samples : int
        Rows N of the data.
    n_features : int
        Features D.
    n_components : int
        Latent dimensions Q.
    n_blocks : int
        Column blocks of the latent pass.

    Returns
    -------
    int
        Bytes.
    """
    n, d, q = int(n_samples), int(n_features), int(n_components)
    return 8 * 2**20 + _F8 * (n * n + int(n_blocks) * n * q + n * (6 * d + 30 * q + 4))


def laplace_fit_bytes(model_sizes, n_features, n_theta, fast=True, n_parallel=1):
    """Estimate the peak extra bytes of a GaussianProcessClassifier fit.

    docs/design.md, "The Laplace classifier in one buffer". One binary
    model per entry of ``model_sizes`` (its number of samples), each keeping
    its N x N factor (``L_``, the buffer its fit worked in), so
    all of them are alive at the end; while they are fitted, the models in
    flight add O(N (d + 1)) vectors and column-block temporaries of
    N x 256 floats, and on the general path (a kernel object fastgp cannot
    lower) scikit-learn's (N, N, n_theta) gradient tensor and three N x N
    matrices each. With ``n_parallel`` > 1 (joblib workers), each model in
    flight is also sent back to the parent as a copy of its factor.

    Parameters
    ----------
    model_sizes : sequence of int
        Training samples of each binary model (N for a binary problem; N per
        class for one-vs-rest; the two classes' samples per pair for
        one-vs-one).
    n_features : int
        Input dimensions d.
    n_theta : int
        Free hyperparameters of one model.
    fast : bool, default=True
        Whether the kernel is on fastgp's fast path.
    n_parallel : int, default=1
        Models fitted at once.

    Returns
    -------
    int
        Bytes.
    """
    sizes = [int(n) for n in model_sizes]
    largest = max(sizes, default=0)
    in_flight = min(max(int(n_parallel), 1), max(len(sizes), 1))
    working = _F8 * largest * (2 * int(n_features) + 24 + 2 * 256)
    if not fast:
        working += _F8 * largest * largest * (int(n_theta) + 3)
    if in_flight > 1:
        working += _F8 * largest * largest
    return _FIXED + sum(_F8 * n * n for n in sizes) + in_flight * working


def log_marginal_likelihood_bytes(n_samples, n_targets, n_theta, eval_gradient, fast=True):
    """Estimate the peak extra bytes of one ``log_marginal_likelihood(theta)``.

    Its own N x N workspace (the fitted ``L_`` is left alone) plus, on the
    general path with a gradient, scikit-learn's tensor and temporaries.

    Parameters
    ----------
    n_samples : int
        Training samples N.
    n_targets : int
        Target columns T.
    n_theta : int
        Free hyperparameters.
    eval_gradient : bool
        Whether the gradient is asked for.
    fast : bool, default=True
        Whether the kernel is on fastgp's fast path.

    Returns
    -------
    int
        Bytes.
    """
    # a fit's estimate without its copy of X; without a gradient, the general
    # path needs no tensor either
    return fit_bytes(n_samples, 0, n_targets, n_theta, fast=fast or not eval_gradient)


def predict_cov_bytes(n_train, n_query, n_targets):
    """Estimate the peak extra bytes of ``predict(X, return_cov=True)``.

    On m query points: the (n_train, m) cross-covariance solved in place, the
    (m, m) prior covariance, the (m, m) product V^T V, and the
    (m, m, n_targets) result.

    Parameters
    ----------
    n_train : int
        Training samples of the model (0 for the prior).
    n_query : int
        Query points m.
    n_targets : int
        Target columns.

    Returns
    -------
    int
        Bytes.
    """
    n, m, t = int(n_train), int(n_query), int(n_targets)
    return _FIXED + _F8 * (n * m + 2 * m * m + m * m * t + 4 * m * t)


def sample_y_bytes(n_train, n_query, n_targets, n_draws):
    """Estimate the peak extra bytes of ``sample_y``.

    The predictive covariance (:func:`predict_cov_bytes`) plus NumPy's
    ``multivariate_normal``, which takes an SVD of the (m, m) covariance (u,
    vt and LAPACK's work array: about three more m x m) and returns
    (m, n_draws) per target.

    Parameters
    ----------
    n_train : int
        Training samples of the model (0 for the prior).
    n_query : int
        Query points m.
    n_targets : int
        Target columns.
    n_draws : int
        Draws per query point.

    Returns
    -------
    int
        Bytes.
    """
    m, t = int(n_query), int(n_targets)
    return (predict_cov_bytes(n_train, n_query, n_targets)
            + _F8 * (3 * m * m + 2 * m * int(n_draws) * t))


# -------------------------------------------------------------------- check
def format_bytes(n_bytes):
    """Format a byte count for people: ``1.2 GB``.

    Powers of 1000, as ``free --si -h`` and memory vendors.

    Parameters
    ----------
    n_bytes : int or float
        The count.

    Returns
    -------
    str
        The count with a unit (bytes, kB, MB, GB, TB or PB).
    """
    value = float(n_bytes)
    for unit in ("bytes", "kB", "MB", "GB", "TB", "PB"):
        if abs(value) < 1000 or unit == "PB":
            return f"{value:.0f} {unit}" if unit == "bytes" else f"{value:.1f} {unit}"
        value /= 1000.0
    return f"{value:.1f} PB"  # pragma: no cover


def refusal(needed, available, source, *, n_samples, operation, remedies, size=None,
            reason=""):
    """The :class:`InsufficientMemoryError` that refuses an operation.

    Parameters
    ----------
    needed, available : int
        Bytes the operation would allocate, and bytes it may have.
    source : str
        Where ``available`` was read.
    n_samples : int
        The N that sets the size (as :func:`check_memory`).
    operation : str
        What would allocate it (as :func:`check_memory`).
    remedies : sequence of str
        What the user can do (as :func:`check_memory`).
    size : str or None
        How the message names the size (as :func:`check_memory`).
    reason : str
        Said after the figures (why waiting would not help, or how long
        fastgp waited).

    Returns
    -------
    InsufficientMemoryError
        To be raised by the caller.
    """
    todo = "; ".join(list(remedies) + [
        "or, if you know better (swap, or the estimate is too high for your case), "
        "run it inside `with fastgp.memory.skip_memory_check():` or set the "
        f"environment variable {SKIP_ENV}=1"
    ])
    message = (
        f"{operation} with {size or f'N = {n_samples:,} samples'} needs about "
        f"{format_bytes(needed)} of memory, but only {format_bytes(available)} "
        f"is available now ({source}).{' ' + reason if reason else ''} fastgp stopped "
        "before allocating it, instead of letting the operating system kill the "
        f"process. What you can do: {todo}."
    )
    return InsufficientMemoryError(message, int(needed), int(available),
                                   int(n_samples), source)


def check_memory(needed, *, n_samples, operation, remedies, reading=None, size=None):
    """Refuse an allocation that would not fit in the memory available now.

    Raise :class:`InsufficientMemoryError` if ``needed`` bytes exceed the
    memory available now; do nothing if they fit, if the check is switched
    off (:func:`skip_memory_check`), if a fit's reservation already covers
    the work (:mod:`fastgp.memory.ledger`) or if no figure can be read.

    Parameters
    ----------
    needed : int
        Estimated bytes the operation would allocate.
    n_samples : int
        The N that sets the size, named in the message (and carried by the
        exception).
    operation : str
        What would allocate it ("fitting GaussianProcessRegressor").
    remedies : sequence of str
        What the user can do, most useful first; the opt-out is appended.
    reading : MemoryReading or None
        The available memory; None reads the machine's budget now
        (:func:`fastgp.memory.ledger.budget_reading`: ``FASTGP_MEMORY_LIMIT``
        or :func:`available_memory`, less other fits' reservations).
    size : str or None
        How the message names the size, where ``n_samples`` is not a number
        of training samples ("200,000 query points (the model has 500
        training samples)"); None: "N = <n_samples> samples".

    Returns
    -------
    MemoryReading or None
        The reading the decision was made on (None if not checked).
    """
    # imported here: the budget module builds on this one
    from .ledger import budget_reading, covered_by_reservation

    if not memory_check_enabled() or covered_by_reservation():
        return None
    reading = budget_reading() if reading is None else reading
    if reading is None or needed <= reading.available:
        return reading
    raise refusal(needed, reading.available, reading.source, n_samples=n_samples,
                  operation=operation, remedies=remedies, size=size)
