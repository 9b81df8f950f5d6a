"""The refusal: the :class:`~fastgp.exceptions.InsufficientMemoryError`
that names both figures, N and what the user can do."""

from ..exceptions import InsufficientMemoryError
from .switch import SKIP_ENV
from .units import format_bytes

__all__ = ["refusal", "refuse_if_short"]


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


def refuse_if_short(needed, reading, *, n_samples, operation, remedies, size=None):
    """Raise :func:`refusal`'s error if ``needed`` bytes exceed
    ``reading.available`` (a :class:`~fastgp.memory.MemoryReading`); nothing
    where they fit or ``reading`` is None (no figure could be read)."""
    if reading is not None and needed > reading.available:
        raise refusal(needed, reading.available, reading.source, n_samples=n_samples,
                      operation=operation, remedies=remedies, size=size)
