"""The tile calls (:mod:`.tile_calls`) on NumPy arrays, through SciPy's BLAS
and LAPACK: the stand-in for :class:`fastgp._linalg.cuda_tiles.CudaTiles` on
which CI runs every blocked algorithm of :mod:`.device_blocked` at small N.

Each call copies its operands (a sub-block view is not contiguous, and
SciPy's wrappers would copy it anyway), calls the reference routine and
writes the result back into the view it was given: the whole output
rectangle for gemm, trsm and trmm, only the lower triangle (diagonal
included) for syrk, potrf, trtri, lauum and potri, so that an entry above
the diagonal is never written, as BLAS and LAPACK promise for lower
triangles. Speed is no aim here; fidelity to the routines' contracts is.

It also checks what the device could not: that no call's output shares
memory with one of its inputs (BLAS's results are undefined there), and it
records every allocation that the algorithms make through it
(:attr:`HostTiles.allocations`), so that tests can hold them to their
stated workspace bound.
"""

import numpy as np
from scipy.linalg import blas, lapack

from .tile_calls import (gemm_shape, info_slot, layout, operation, side, square_order,
                         syrk_shape, triangular_shape)

__all__ = ["HostTiles"]


class HostTiles:
    """The tile calls on NumPy Fortran-ordered float64 arrays (the methods
    are described in :mod:`fastgp._linalg.tile_calls`).

    Parameters
    ----------
    check_overlap : bool
        Raise ValueError when a call's output shares memory with one of its
        inputs (exact, so slow for large matrices; meant for tests).

    Attributes
    ----------
    allocations : list of (str, tuple)
        ("empty", shape) or ("info", (count,)) for every array that
        :meth:`empty` and :meth:`info_vector` made, in order.
    """

    xp = np

    def __init__(self, check_overlap=True):
        self.check_overlap = check_overlap
        self.allocations = []

    # ------------------------------------------------------------ arrays
    def empty(self, shape):
        self.allocations.append(("empty", tuple(shape)))
        return np.empty(shape, dtype=np.float64, order="F")

    def array(self, Y):
        return np.array(Y, dtype=np.float64, order="F", copy=True)

    def info_vector(self, count):
        self.allocations.append(("info", (int(count),)))
        return np.zeros(int(count), dtype=np.int32)

    def to_host(self, x):
        return np.array(x, copy=True)

    def synchronize(self):
        """Nothing to wait for: every call has finished when it returns."""

    # ------------------------------------------------------------ BLAS
    def _disjoint(self, out, *inputs):
        if self.check_overlap and any(np.shares_memory(out, x) for x in inputs):
            raise ValueError("a call's output overlaps one of its inputs")

    def gemm(self, trans_a, trans_b, alpha, A, B, beta, C):
        m, n, k = gemm_shape(trans_a, trans_b, A, B, C)
        self._disjoint(C, A, B)
        if m and n:
            C[...] = blas.dgemm(alpha, A, B, beta=beta, c=np.asfortranarray(C),
                                trans_a=operation(trans_a), trans_b=operation(trans_b))

    def syrk(self, trans, alpha, A, beta, C):
        n, _ = syrk_shape(trans, A, C)
        self._disjoint(C, A)
        if n:
            result = blas.dsyrk(alpha, A, beta=beta, c=np.asfortranarray(C),
                                trans=operation(trans), lower=1)
            _write_lower(C, result)

    def trsm(self, letter, trans, alpha, A, B):
        self._triangular(blas.dtrsm, letter, trans, alpha, A, B)

    def trmm(self, letter, trans, alpha, A, B):
        self._triangular(blas.dtrmm, letter, trans, alpha, A, B)

    def _triangular(self, routine, letter, trans, alpha, A, B):
        m, n = triangular_shape(letter, A, B)
        self._disjoint(B, A)
        if m and n:
            B[...] = routine(alpha, A, B, side=side(letter), lower=1,
                             trans_a=operation(trans), diag=0)

    # ------------------------------------------------------------ LAPACK
    def potrf(self, A, info, slot):
        self._lapack(lambda c: lapack.dpotrf(c, lower=1, clean=0), A, info, slot)

    def trtri(self, A, info, slot):
        self._lapack(lambda c: lapack.dtrtri(c, lower=1, unitdiag=0), A, info, slot)

    def lauum(self, A, info, slot):
        self._lapack(lambda c: lapack.dlauum(c, lower=1), A, info, slot)

    def potri(self, A, info, slot):
        self._lapack(lambda c: lapack.dpotri(c, lower=1), A, info, slot)

    xpotrf = potrf

    def _lapack(self, call, A, info, slot):
        """``call`` (returning (result, info)) on a copy of the square ``A``;
        its lower triangle written back, its info into ``info[slot]``."""
        n = square_order(A)
        info_slot(info, slot)
        if n == 0:
            info[slot] = 0
            return
        result, code = call(np.array(A, order="F"))
        _write_lower(A, result)
        info[slot] = code


def _write_lower(C, result):
    """Write the lower triangle (diagonal included) of ``result`` into the
    view ``C``, nothing above it."""
    rows, columns = np.tril_indices(layout(C, "C")[0])
    C[rows, columns] = result[rows, columns]
