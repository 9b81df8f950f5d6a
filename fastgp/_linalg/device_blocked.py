"""The one-buffer exact GP's factor, inverse and solves on a GPU, as blocked
algorithms on tiles of the one N x N buffer (docs/design.md, "The device's
factor and inverse").

Every routine is written once against the tile calls (:mod:`.tile_calls`)
and runs on the device through :class:`fastgp._linalg.cuda_tiles.CudaTiles`
or on the host, where CI tests it, through
:class:`fastgp._linalg.host_tiles.HostTiles`. The buffer ``B`` is an (n, n)
float64 matrix with unit row stride and a leading dimension >= n (a
Fortran-ordered array or a leading block of one) of the tiles' kind.

Contract shared by the factor and the inverse:

- only the lower triangle (diagonal included) of ``B`` is read or written:
  the strict upper triangle is never used as scratch and keeps whatever it
  held (NaN included);
- no float64 workspace is allocated (nothing through the tiles' ``empty``):
  every step works in place on sub-blocks of ``B``. The only allocation is
  the int32 info vector, one entry per diagonal block (the factor) or two
  (the inverse): :func:`info_entries`. On the device, cuSOLVER's own
  workspace for the diagonal-block calls (order <= ``block``) is the tiles'
  and is reused; the whole-matrix dpotrf's is the size cuSOLVER asks for
  (39 MB at N = 100,000);
- every large update is one cuBLAS call per block column (dgemm, dtrsm,
  dtrmm; a dsyrk of order <= ``syrk_order`` with the rest of its triangle in
  a few dgemms), and cuSOLVER runs only on diagonal blocks: its dpotri,
  Xtrtri and dlauum refuse matrices of 2^31 elements or more (N >= 46,341),
  which is why the inverse is blocked.

The infos of the diagonal-block calls stay on the device until one read at
the end of each routine (one wait, not one per block): a factor whose
leading minor fails still runs to its end, on values that no longer mean
anything, before it raises.
"""

import numpy as np

from ..exceptions import NotPositiveDefiniteError
from .tile_calls import square_order

__all__ = ["DEFAULT_BLOCK", "METHODS", "cholesky_in_place", "cho_inverse_in_place",
           "solve_lower_in_place", "cho_solve_in_place", "cho_solve", "factor_diagonal",
           "info_entries"]

#: Order of the diagonal blocks on the device. The inverse's dgemms are
#: rank-``block`` updates, which reach cuBLAS's dgemm rate on Hopper from
#: about 512 on; the dtrmm and dtrsm on diagonal-block triangles (about
#: 1.5 N^2 block flops, 4 % of the inverse's at N = 40,000 with 1024) and
#: the cuSOLVER calls on diagonal blocks (latency-bound, N / block of each)
#: grow with it and with its inverse respectively. bench/device_linalg.py
#: measures 1024 against 2048.
DEFAULT_BLOCK = 1024

#: The factor's methods: "whole" is cuSOLVER's dpotrf on the whole buffer
#: (the floor, measured to work in place up to N = 100,000), "blocked" the
#: right-looking blocked factor below.
METHODS = ("whole", "blocked")


def _check_block(value, name="block"):
    block = int(value)
    if block != value or block < 1:
        raise ValueError(f"{name} must be an integer >= 1, got {value!r}")
    return block


def _syrk_order(syrk_order, block):
    return block if syrk_order is None else _check_block(syrk_order, "syrk_order")


def info_entries(n, block, routine):
    """Entries of the int32 info vector that ``routine`` ("whole",
    "blocked" or "inverse") allocates at order ``n``: its whole workspace
    besides cuSOLVER's own (the module's docstring)."""
    blocks = -(-n // block)
    return {"whole": 1, "blocked": blocks, "inverse": 2 * blocks}[routine]


def _raise_on_infos(codes, starts, n, routine):
    """Raise for the first non-zero info of the diagonal blocks that begin
    at ``starts`` (one info each, in order): NotPositiveDefiniteError with
    the whole matrix's order (1-based) for a positive one, ValueError for a
    negative one (an illegal argument, which the checks rule out)."""
    for start, code in zip(starts, codes.tolist()):
        if code < 0:
            raise ValueError(f"{routine}: illegal argument {-code}")
        if code > 0:
            raise NotPositiveDefiniteError(start + code, n)


def _lower_update(tiles, trans, alpha, A, C, order):
    """C's lower triangle += alpha op(A) op(A)^T, op(A) (m, k) (A when
    ``trans`` is "N", A^T when "T") and C (m, m): one dsyrk where m <=
    ``order``; else C is split at h, a multiple of ``order`` near m / 2,
    its (2, 1) block takes one dgemm and its two diagonal blocks recurse.
    Most of the flops land in a few large dgemms (half of them in the
    first), the dsyrks are of order <= ``order``, the strict upper triangle
    is not touched."""
    m = C.shape[0]
    if m <= order:
        tiles.syrk(trans, alpha, A, 1.0, C)
        return
    h = order * ((-(-m // order) + 1) // 2)  # half the leaves, rounded up
    head, tail = (A[:h], A[h:]) if trans == "N" else (A[:, :h], A[:, h:])
    _lower_update(tiles, trans, alpha, head, C[:h, :h], order)
    if trans == "N":
        tiles.gemm("N", "T", alpha, tail, head, 1.0, C[h:, :h])
    else:
        tiles.gemm("T", "N", alpha, tail, head, 1.0, C[h:, :h])
    _lower_update(tiles, trans, alpha, tail, C[h:, h:], order)


def cholesky_in_place(tiles, B, method="whole", block=DEFAULT_BLOCK, syrk_order=None):
    """Overwrite the lower triangle of ``B`` (n, n) with the Cholesky factor
    L of the symmetric matrix K whose lower triangle it holds (K = L L^T,
    LAPACK's dpotrf, lower).

    ``method`` "whole": one dpotrf on the whole buffer (cuSOLVER's on the
    device). "blocked": right-looking, by block columns of ``block``
    (Golub and Van Loan, *Matrix Computations*, 4th ed., section 4.2.9; the
    tiled form of Kurzak, Buttari and Dongarra 2008, "Solving systems of
    linear equations on the CELL processor using Cholesky factorization",
    IEEE TPDS 19(9), with each step's tiles merged into single calls):
    dpotrf on the diagonal block, one dtrsm on the panel below it, and the
    trailing lower triangle's rank-``block`` update by dsyrk of order <=
    ``syrk_order`` (default ``block``) and dgemm (:func:`_lower_update`).

    Returns ``B``. Raises NotPositiveDefiniteError with the order of the
    first leading minor that is not positive definite (``B`` then partly
    overwritten, as by dpotrf), ValueError for a ``B`` that is not square,
    float64 and Fortran-ordered (unit row stride) or a bad ``method``,
    ``block`` or ``syrk_order``. The strict upper triangle is untouched.
    """
    n = square_order(B, "B")
    block = _check_block(block)
    order = _syrk_order(syrk_order, block)
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}, got {method!r}")
    if n == 0:
        return B
    if method == "whole":
        info = tiles.info_vector(info_entries(n, block, method))
        tiles.potrf(B, info, 0)
        _raise_on_infos(tiles.to_host(info), [0], n, "dpotrf")
        return B
    starts = range(0, n, block)
    info = tiles.info_vector(info_entries(n, block, method))
    for k, j in enumerate(starts):
        e = min(j + block, n)
        tiles.potrf(B[j:e, j:e], info, k)
        if e < n:  # L_21 = A_21 L_11^-T, then A_22 -= L_21 L_21^T
            tiles.trsm("R", "T", 1.0, B[j:e, j:e], B[e:, j:e])
            _lower_update(tiles, "N", -1.0, B[e:, j:e], B[e:, e:], order)
    _raise_on_infos(tiles.to_host(info), starts, n, "dpotrf")
    return B


def _invert_triangle(tiles, B, n, block, info):
    """Overwrite the lower triangle of ``B`` (the factor L) with X = L^-1,
    by the third of the triangular inverse's blocked variants in
    Bientinesi, Gunter and van de Geijn, "Families of algorithms related to
    the inversion of a symmetric positive definite matrix", ACM TOMS 35(1),
    2008 (fastgp/_linalg/blocked.py's order). With L split at block row j
    into L_00 (j x j), L_10, L_11 (the diagonal block) and L_20, L_21 below,
    the columns 0:j below row j hold Y = L_{j:,0:j} L_00^-1 when step j
    begins, and X_10 = -L_11^-1 Y_1, Y_2 := Y_2 - (L_21 L_11^-1) Y_1. So:

    1. every diagonal block becomes L_kk^-1 (Xtrtri, ``info[k]``) and the
       panel below it L_21 L_11^-1 (one dtrmm from the right);
    2. step j: Y_2 -= (L_21 L_11^-1) Y_1, one dgemm of (n - j - block) x j
       x block; then Y_1 := -L_11^-1 Y_1 (one dtrmm), which is X_10.

    Nearly all of the n^3 / 3 flops are the dgemms of step 2."""
    starts = range(0, n, block)
    for k, j in enumerate(starts):
        e = min(j + block, n)
        tiles.trtri(B[j:e, j:e], info, k)
        if e < n:
            tiles.trmm("R", "N", 1.0, B[j:e, j:e], B[e:, j:e])
    for j in starts[1:]:
        e = min(j + block, n)
        if e < n:
            tiles.gemm("N", "N", -1.0, B[e:, j:e], B[j:e, :j], 1.0, B[e:, :j])
        tiles.trmm("L", "N", -1.0, B[j:e, j:e], B[j:e, :j])


def _gram_lower(tiles, B, n, block, info, order):
    """Overwrite the lower triangle of ``B`` (holding a lower triangular X)
    with that of X^T X (LAPACK's dlauum, lower), by block rows from the top
    as OpenBLAS's dlauum orders them (fastgp/_linalg/blocked.py's
    ``_gram_lower``). With R_i the Gram matrix of X's first i rows (in its
    leading i x i block), the block row P = X[i:i+ib, 0:i] and its diagonal
    block X_ii:

        R[0:i, 0:i]       += P^T P           (rank-ib update: _lower_update)
        R[i:i+ib, 0:i]     = X_ii^T P        (one dtrmm, in place)
        R[i:i+ib, i:i+ib]  = X_ii^T X_ii     (dlauum of order ib, ``info[k]``)

    R_i lies where X[0:i, 0:i] was, which no later step reads."""
    for k, i in enumerate(range(0, n, block)):
        e = min(i + block, n)
        if i > 0:
            _lower_update(tiles, "T", 1.0, B[i:e, :i], B[:i, :i], order)
            tiles.trmm("L", "T", 1.0, B[i:e, i:e], B[i:e, :i])
        tiles.lauum(B[i:e, i:e], info, k)


def cho_inverse_in_place(tiles, B, block=DEFAULT_BLOCK, syrk_order=None):
    """Overwrite the lower triangle of ``B`` (n, n), holding the Cholesky
    factor L of K, with the lower triangle of K^-1 = L^-T L^-1 (LAPACK's
    dpotri, lower): L^-1 by a blocked triangular inverse
    (:func:`_invert_triangle`), then X^T X by a blocked dlauum
    (:func:`_gram_lower`), both by block rows of ``block``; cuSOLVER's
    Xtrtri and dlauum only on diagonal blocks, dsyrk of order <=
    ``syrk_order`` (default ``block``).

    Returns ``B``. Raises NotPositiveDefiniteError where a diagonal entry
    of L is exactly zero (dpotri's info; the order is that entry's, 1-based,
    and ``B`` is left unchanged), ValueError for a ``B`` that is not square,
    float64 and Fortran-ordered or a bad ``block`` or ``syrk_order``. The
    strict upper triangle is untouched.
    """
    n = square_order(B, "B")
    block = _check_block(block)
    order = _syrk_order(syrk_order, block)
    if n == 0:
        return B
    zeros = np.flatnonzero(factor_diagonal(tiles, B) == 0.0)
    if zeros.size:
        raise NotPositiveDefiniteError(int(zeros[0]) + 1, n)
    starts = range(0, n, block)
    info = tiles.info_vector(info_entries(n, block, "inverse"))
    _invert_triangle(tiles, B, n, block, info)
    _gram_lower(tiles, B, n, block, info[len(starts):], order)
    codes = tiles.to_host(info)
    _raise_on_infos(codes[:len(starts)], starts, n, "Xtrtri")
    _raise_on_infos(codes[len(starts):], starts, n, "dlauum")
    return B


def factor_diagonal(tiles, L):
    """diag(L) (n,) of the square ``L`` as a host NumPy array (one
    device-to-host copy of n floats), so that the caller sums log L_ii on
    the host as the CPU path does (:func:`fastgp._linalg.lapack.log_det_from_factor`)."""
    square_order(L, "L")
    return np.asarray(tiles.to_host(tiles.xp.diagonal(L)), dtype=np.float64)


def solve_lower_in_place(tiles, L, V):
    """Overwrite ``V`` (n, T) with L^-1 V (one dtrsm), L the lower triangle
    (non-unit) of ``L`` (n, n). Returns ``V``. L comes from a successful
    factor: a zero on its diagonal gives inf or NaN, as dtrsm does."""
    tiles.trsm("L", "N", 1.0, L, V)
    return V


def cho_solve_in_place(tiles, L, V):
    """Overwrite ``V`` (n, T) with K^-1 V = L^-T (L^-1 V) (two dtrsm, as
    LAPACK's dpotrs), L the lower Cholesky factor of K in ``L`` (n, n).
    Returns ``V``."""
    tiles.trsm("L", "N", 1.0, L, V)
    tiles.trsm("L", "T", 1.0, L, V)
    return V


def cho_solve(tiles, L, Y):
    """A = K^-1 Y (n, T), a new Fortran-ordered array of the tiles' kind,
    for ``Y`` (n, T) (host or device; not modified) and the lower Cholesky
    factor of K in ``L`` (n, n): :func:`cho_solve_in_place` on a copy.
    ValueError unless Y is 2-D with n rows."""
    return cho_solve_in_place(tiles, L, tiles.array(Y))
