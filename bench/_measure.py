"""Measurement helpers shared by every benchmark: time, peak memory, the
environment, and running one case in a fresh guarded process.

Time: the median of repeats after warm-up (:func:`median_time`), or of
interleaved rounds when two things are compared in one run
(:func:`interleaved_medians`), so that a machine that slows down mid-run slows
both sides alike.

Memory: :class:`PeakMemory` reports the peak resident set size reached inside
a ``with`` block minus the resident set size just before it. On Linux it resets
the kernel's high-water mark (``/proc/self/clear_refs``, value 5, Linux >= 4.0)
on entry, so what happened before the block (imports, Numba or XLA
compilation, an earlier case) does not leak into the figure. Elsewhere it falls
back to ``getrusage``'s ``ru_maxrss``, which is not reset, and says so.
Each case should run in its own process (:func:`run_in_subprocess`).

Only the standard library and NumPy are needed here (psutil is optional), so
the smoke test runs with the ``test`` extra alone.
"""

import gc
import json
import os
import platform
import resource
import subprocess
import sys
import tempfile
import threading
import time
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path

import numpy as np

__all__ = [
    "REPO_ROOT",
    "median_time",
    "interleaved_medians",
    "PeakMemory",
    "current_rss_bytes",
    "available_memory_bytes",
    "total_memory_bytes",
    "environment",
    "run_in_subprocess",
    "write_json",
    "MB",
]

REPO_ROOT = Path(__file__).resolve().parent.parent
MB = 2.0**20


# ---------------------------------------------------------------------- time
def median_time(fn, repeats=5, warmup=1):
    """Median wall time of ``fn()`` over ``repeats`` calls after ``warmup``
    calls. Returns a dict: median_s, min_s, times_s (list)."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return _summary(times)


def interleaved_medians(cases, repeats=5, warmup=1):
    """Time several callables in interleaved rounds.

    Parameters
    ----------
    cases : dict name -> fn or (setup, fn)
        ``setup()`` (untimed) runs before each timed ``fn()``; use it to copy
        a matrix into a buffer that ``fn`` overwrites.
    repeats, warmup : int
        Rounds timed, and rounds run first untimed.

    Returns
    -------
    dict name -> {median_s, min_s, times_s}
    """
    norm = {k: (v if isinstance(v, tuple) else (None, v)) for k, v in cases.items()}
    times = {k: [] for k in norm}
    for round_ in range(warmup + repeats):
        for name, (setup, fn) in norm.items():
            if setup is not None:
                setup()
            start = time.perf_counter()
            fn()
            elapsed = time.perf_counter() - start
            if round_ >= warmup:
                times[name].append(elapsed)
    return {k: _summary(v) for k, v in times.items()}


def _summary(times):
    return {"median_s": float(np.median(times)), "min_s": float(np.min(times)),
            "times_s": [float(t) for t in times]}


# -------------------------------------------------------------------- memory
def _proc_status_kb(field):
    """A ``VmXXX`` field of /proc/self/status in bytes, or None."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


def current_rss_bytes():
    """Resident set size of this process now, in bytes."""
    rss = _proc_status_kb("VmRSS")
    if rss is not None:
        return rss
    try:
        import psutil
        return psutil.Process().memory_info().rss
    except ImportError:  # pragma: no cover - no /proc and no psutil
        return _ru_maxrss_bytes()


def _ru_maxrss_bytes():
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak if sys.platform == "darwin" else peak * 1024  # macOS: bytes


def _reset_peak():
    """Reset the kernel's peak-RSS mark; True if it could."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def _peak_rss_bytes():
    hwm = _proc_status_kb("VmHWM")
    return hwm if hwm is not None else _ru_maxrss_bytes()


class PeakMemory:
    """``with PeakMemory() as m: ...``; then ``m.delta_bytes`` is the peak
    resident memory inside the block above the resident memory on entry.

    Attributes (after exit): baseline_bytes, peak_bytes, delta_bytes, method.
    """

    def __enter__(self):
        gc.collect()
        self.method = "VmHWM reset" if _reset_peak() else "ru_maxrss (not reset)"
        self.baseline_bytes = current_rss_bytes()
        return self

    def __exit__(self, *exc):
        self.peak_bytes = _peak_rss_bytes()
        self.delta_bytes = max(0, self.peak_bytes - self.baseline_bytes)
        return False

    def as_dict(self, n=None):
        out = {"baseline_mb": self.baseline_bytes / MB, "peak_mb": self.peak_bytes / MB,
               "delta_mb": self.delta_bytes / MB, "method": self.method}
        if n:
            out["multiple_of_8n2"] = self.delta_bytes / (8.0 * n * n)
        return out


def _meminfo_bytes(field):
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def available_memory_bytes():
    """Memory the system can give a new process now (MemAvailable)."""
    avail = _meminfo_bytes("MemAvailable")
    if avail is not None:
        return avail
    try:
        import psutil
        return psutil.virtual_memory().available
    except ImportError:  # pragma: no cover
        return None


def total_memory_bytes():
    total = _meminfo_bytes("MemTotal")
    if total is not None:
        return total
    try:
        import psutil
        return psutil.virtual_memory().total
    except ImportError:  # pragma: no cover
        return None


# --------------------------------------------------------------- environment
_PACKAGES = ["fastgp", "numpy", "scipy", "numba", "llvmlite", "scikit-learn",
             "threadpoolctl", "GPy", "paramz", "torch", "gpytorch", "linear_operator",
             "jax", "jaxlib", "matplotlib", "pytest-benchmark", "psutil"]


def _version(name):
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def _cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _git_revision():
    try:
        rev = subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO_ROOT,
                             capture_output=True, text=True, timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"],
                               cwd=REPO_ROOT, capture_output=True, text=True,
                               timeout=10).stdout.strip()
        return {"revision": rev or None, "dirty": bool(dirty)}
    except (OSError, subprocess.SubprocessError):
        return {"revision": None, "dirty": None}


def environment():
    """Versions, thread counts, BLAS, machine and git revision, as a dict.

    Imports numpy, scipy.linalg and numba (to read their BLAS and thread
    settings) but no peer library.
    """
    import scipy.linalg  # noqa: F401  (loads scipy's BLAS for threadpoolctl)

    env = {
        "date_utc": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "cpu_model": _cpu_model(),
        "cpu_count": os.cpu_count(),
        "memory_total_gb": (total_memory_bytes() or 0) / 2**30,
        "memory_available_gb": (available_memory_bytes() or 0) / 2**30,
        "versions": {name: _version(name) for name in _PACKAGES},
        "git": _git_revision(),
        "env_vars": {k: os.environ[k] for k in sorted(os.environ)
                     if k.startswith(("NUMBA_", "OMP_", "OPENBLAS_", "MKL_",
                                      "XLA_", "JAX_"))},
    }
    try:
        import numba
        env["numba_threads"] = numba.get_num_threads()
        env["numba_threading_layer_config"] = numba.config.THREADING_LAYER
    except ImportError:  # pragma: no cover
        env["numba_threads"] = None
    try:
        from threadpoolctl import threadpool_info
        # the library's file name, not its path on this machine
        env["blas"] = [{**{k: info.get(k) for k in ("internal_api", "version",
                                                    "num_threads", "architecture",
                                                    "threading_layer")},
                        "library": Path(info.get("filepath") or "").name}
                       for info in threadpool_info()]
    except ImportError:  # pragma: no cover
        env["blas"] = None
    return env


def write_json(path, payload):
    """Write ``payload`` as indented JSON, creating the folder."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(payload, indent=2, sort_keys=False, default=_jsonable))
    return path


def _jsonable(obj):
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, Path):
        return str(obj)
    raise TypeError(f"not JSON serialisable: {type(obj)}")


# ----------------------------------------------------------- fresh processes
def _child_rss_bytes(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


def run_in_subprocess(module, spec, timeout_s=600, memory_limit_bytes=None,
                      env=None, python=None):
    """Run ``python -m module`` in a fresh process on one case and return its
    answer.

    The child receives ``spec`` (JSON-able dict) plus ``"out"``, a path where
    it writes its result as JSON. A watchdog thread reads the child's resident
    memory every 20 ms (Linux) and kills it above ``memory_limit_bytes``,
    before the operating system's out-of-memory killer takes something else.
    ``python`` is the child's interpreter (default: this one's), for a peer
    installed in an environment of its own.

    Returns
    -------
    dict: the child's result with ``"status": "ok"``; or ``{"status":
    "killed-memory" | "timeout" | "error", "reason": ...}``.
    """
    with tempfile.TemporaryDirectory(prefix="fastgp-bench-") as tmp:
        out = Path(tmp) / "result.json"
        err = Path(tmp) / "stderr.txt"
        child_env = dict(os.environ if env is None else env)
        child_env["PYTHONPATH"] = os.pathsep.join(
            [str(REPO_ROOT)] + [p for p in child_env.get("PYTHONPATH", "").split(os.pathsep) if p])
        payload = dict(spec, out=str(out))
        with open(err, "w") as err_file:
            proc = subprocess.Popen([python or sys.executable, "-m", module, json.dumps(payload)],
                                    cwd=REPO_ROOT, env=child_env,
                                    stdout=subprocess.DEVNULL, stderr=err_file)
            killed = {"why": None, "peak": 0}
            stop = threading.Event()

            def watch():
                while not stop.is_set():
                    rss = _child_rss_bytes(proc.pid)
                    if rss is not None:
                        killed["peak"] = max(killed["peak"], rss)
                        if memory_limit_bytes and rss > memory_limit_bytes:
                            killed["why"] = "memory"
                            proc.kill()
                            return
                    stop.wait(0.02)

            watcher = threading.Thread(target=watch, daemon=True)
            watcher.start()
            try:
                proc.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                killed["why"] = killed["why"] or "timeout"
                proc.kill()
                proc.wait()
            finally:
                stop.set()
                watcher.join()
        stderr_tail = err.read_text(errors="replace")[-2000:]
        if killed["why"] == "memory":
            return {"status": "killed-memory",
                    "reason": f"killed at {killed['peak'] / MB:.0f} MB resident, above the "
                              f"guard of {memory_limit_bytes / MB:.0f} MB"}
        if killed["why"] == "timeout":
            return {"status": "timeout", "reason": f"ran past {timeout_s} s"}
        if proc.returncode != 0 or not out.exists():
            last = stderr_tail.strip().splitlines()[-1:] or [""]
            return {"status": "error",
                    "reason": f"exit code {proc.returncode}: {last[0][:300]}",
                    "stderr_tail": stderr_tail}
        result = json.loads(out.read_text())
        result.setdefault("status", "ok")
        return result
