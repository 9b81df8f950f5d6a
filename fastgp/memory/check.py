"""The check: does an operation's estimate fit in the machine's memory
budget now (:func:`check_memory`), or once the other fits release theirs
(:func:`fits_in_memory`)?"""

from .ledger import budget_capacity, budget_reading, covered_by_reservation
from .refuse import refuse_if_short
from .switch import memory_check_enabled

__all__ = ["check_memory", "fits_in_memory"]


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
    # FASTGP_MEMORY_LIMIT or the machine's memory, less what other fits keep
    # for good; a fit that fits once others release waits for them instead
    reading = budget_capacity()
    return reading is None or needed <= reading.available, reading


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
    if not memory_check_enabled() or covered_by_reservation():
        return None
    reading = budget_reading() if reading is None else reading
    refuse_if_short(needed, reading, n_samples=n_samples, operation=operation,
                    remedies=remedies, size=size)
    return reading
