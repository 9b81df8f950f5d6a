"""The opt-out: :func:`skip_memory_check` for a block of code, the
environment variable ``FASTGP_SKIP_MEMORY_CHECK`` for a whole process (the
package docstring, "Proceeding anyway")."""

import contextlib
import contextvars
import os

__all__ = ["SKIP_ENV", "skip_memory_check", "memory_check_enabled"]

#: Environment variable that disables the check for the whole process.
SKIP_ENV = "FASTGP_SKIP_MEMORY_CHECK"

_skip = contextvars.ContextVar("fastgp_skip_memory_check", default=False)


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
