"""The one N x N buffer of the Cholesky path (docs/design.md, "The one-buffer
plan"), shared by the regression, GPLVM and Laplace objectives."""

import numpy as np

from ..._linalg.lapack import zero_strict_upper
from ...memory import check_memory

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
        if self._buffer is None:
            check_memory(self.nbytes, n_samples=self.n,
                         operation="Allocating fastgp's N x N workspace",
                         remedies=["use fewer samples (a random subset, or "
                                   "aggregate neighbouring points)",
                                   "use a machine with more memory"])
            self._buffer = np.empty((self.n, self.n), dtype=np.float64, order="F")
        return self._buffer

    @staticmethod
    def clear_strict_upper(B):
        """Zero the strict upper triangle of a buffer (the kept factor's)."""
        zero_strict_upper(B)

    def release(self):
        """Hand the buffer to the caller (for example as the kept factor L_)
        and forget it, so the next use allocates anew."""
        buffer, self._buffer = self._buffer, None
        return buffer
