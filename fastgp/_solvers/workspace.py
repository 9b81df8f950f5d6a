"""The one N x N buffer of the exact path (docs/design.md, "The one-buffer
plan"), shared by the regression, GPLVM and Laplace objectives: in host
memory here, in a device's through a subclass (the GPU path's)."""

import numpy as np

from .._linalg.lapack import zero_strict_upper
from ..memory import check_memory

__all__ = ["Workspace"]


class Workspace:
    """The one N x N float64 buffer (F-contiguous, LAPACK's layout) that a fit
    reuses for K, its factor L and K^-1 in turn. Allocated on first use.

    Before allocating, :func:`fastgp.memory.check_memory` compares its 8 N^2
    bytes with the memory available and raises
    :class:`~fastgp.exceptions.InsufficientMemoryError` if it will not fit,
    so every user of a Workspace (regression, the GPLVM, the classifier) is
    covered. The fit reserves its whole estimate earlier, with remedies of
    its own (:class:`fastgp._fit.session.FitSession`); this is the backstop.
    """

    def __init__(self, n):
        self.n = int(n)
        self._buffer = None

    @property
    def nbytes(self):
        return 8 * self.n * self.n

    def buffer(self):
        """The buffer, allocated on first use after :meth:`check`."""
        if self._buffer is None:
            self.check()
            self._buffer = self.allocate()
        return self._buffer

    def check(self):
        """The memory check before the buffer is allocated (host memory)."""
        check_memory(self.nbytes, n_samples=self.n,
                     operation="Allocating fastgp's N x N workspace",
                     remedies=["use fewer samples (a random subset, or "
                               "aggregate neighbouring points)",
                               "use a machine with more memory"])

    def allocate(self):
        """A new (n, n) F-ordered float64 buffer (host memory)."""
        return np.empty((self.n, self.n), dtype=np.float64, order="F")

    @staticmethod
    def clear_strict_upper(B):
        """Zero the strict upper triangle of a buffer (the kept factor's)."""
        zero_strict_upper(B)

    def release(self):
        """Hand the buffer to the caller (for example as the kept factor L_)
        and forget it, so the next use allocates anew."""
        buffer, self._buffer = self._buffer, None
        return buffer
