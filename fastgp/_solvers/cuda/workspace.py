"""The one N x N buffer of the GPU path, in device memory (docs/design.md,
"The GPU path"), and how the jitter ladder factors it."""

import numpy as np

from ..._linalg.device_blocked import cholesky_in_place, factor_diagonal
from ..workspace import Workspace

__all__ = ["DeviceWorkspace", "DeviceFactor"]

#: Columns per step of the blockwise passes over the buffer below (their
#: temporaries are at most COLUMNS^2 floats).
COLUMNS = 1024


class DeviceWorkspace(Workspace):
    """The one N x N float64 buffer (F-ordered) in a device's memory that a
    fit reuses for K, its factor L and K^-1 in turn; allocated on first use,
    after the device's memory is checked (the backstop: the fit's own check
    comes first, with remedies of its own).

    Parameters
    ----------
    device : fastgp._solvers.cuda.device.Device
    n : int
    check : callable ``check(needed_bytes, n_samples=..., operation=...,
        remedies=...)``, the solver's device memory check
    """

    def __init__(self, device, n, check):
        super().__init__(n)
        self.device = device
        self._check_device = check

    def check(self):
        self._check_device(self.nbytes, n_samples=self.n,
                           operation="Allocating fastgp's N x N workspace on "
                                     + self.device.name,
                           remedies=["use fewer samples (a random subset, or aggregate "
                                     "neighbouring points)"])

    def allocate(self):
        return self.device.xp.empty((self.n, self.n), order="F")

    def clear_strict_upper(self, B):
        """Zero the strict upper triangle of B (n, n) on the device, a block
        of columns at a time (no N x N temporary)."""
        xp = self.device.xp
        n = B.shape[0]
        for j0 in range(0, n, COLUMNS):
            j1 = min(n, j0 + COLUMNS)
            B[:j0, j0:j1] = 0.0
            diagonal = B[j0:j1, j0:j1]
            diagonal[...] = xp.tril(diagonal)


class DeviceFactor:
    """How :func:`fastgp._linalg.lapack.cholesky_with_jitter` factors a buffer
    in device memory and reads its diagonal (its ``buffer`` argument)."""

    def __init__(self, device):
        self.device = device

    def factor(self, B):
        cholesky_in_place(self.device.tiles, B)

    def diagonal(self, B):
        return np.asarray(factor_diagonal(self.device.tiles, B))

    def lower_is_finite(self, B):
        xp = self.device.xp
        n = B.shape[0]
        for j0 in range(0, n, COLUMNS):
            j1 = min(n, j0 + COLUMNS)
            if not bool(xp.isfinite(xp.tril(B[j0:j1, j0:j1])).all()):
                return False
            if not bool(xp.isfinite(B[j1:, j0:j1]).all()):
                return False
        return True
