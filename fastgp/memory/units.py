"""Byte counts for people."""

__all__ = ["format_bytes"]


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
