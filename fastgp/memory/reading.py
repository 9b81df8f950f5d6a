"""How much memory the machine has available now: ``MemAvailable``, the
control groups' limits, or the platform's own figure (the package docstring,
"Available memory"), read in a few microseconds before any large allocation.
"""

import os
import sys
from dataclasses import dataclass

__all__ = ["MemoryReading", "available_memory", "physical_memory", "meminfo_available",
           "cgroup_available"]

#: cgroup v1 reports "no limit" as a huge page-aligned number (2**63 - 4096 on
#: x86-64); anything at or above this is treated as unlimited.
_UNLIMITED = 2**60


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


def _meminfo(path):
    """``/proc/meminfo``'s fields in bytes (name -> int), or None."""
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
    return fields


def physical_memory(path="/proc/meminfo"):
    """The machine's physical memory in bytes (``MemTotal``, else the
    physical pages that ``sysconf`` counts), or None where neither can be
    read: the most that any reservation can honestly claim."""
    fields = _meminfo(path) or {}
    if "MemTotal" in fields:
        return fields["MemTotal"]
    try:
        pages, page_size = os.sysconf("SC_PHYS_PAGES"), os.sysconf("SC_PAGE_SIZE")
    except (AttributeError, ValueError, OSError):
        return None
    return pages * page_size if pages > 0 and page_size > 0 else None


def meminfo_available(path="/proc/meminfo"):
    """``MemAvailable`` in bytes from ``/proc/meminfo``; on kernels older than
    3.14, which lack it, ``MemFree + Buffers + Cached``. None if unreadable."""
    fields = _meminfo(path)
    if fields is None:
        return None
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
