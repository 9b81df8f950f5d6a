"""Cholesky factor and inverse in place, blocked over LAPACK and level-3 BLAS.

OpenBLAS's own dpotrf and dpotri (through dlauum) update their trailing
matrix with its threaded dsyrk, whose per-thread packing buffer grows with
(columns handled by one thread) x GEMM_Q. Where that passes the buffer
OpenBLAS reserved (about N = 16,000 with two threads and its SkylakeX
kernels), the process dies with a segmentation fault (docs/reliability.md,
"Large N and OpenBLAS's threaded dsyrk"). The routines here compute the same
factor and inverse by blocked algorithms on the lower triangle (a
right-looking Cholesky with look-ahead, the triangular inverse's
rank-block-update variant, and dlauum in OpenBLAS's own order) with every
large update done by dgemm, dtrsm or dtrmm, whose threaded drivers pack in
blocks of bounded size, with LAPACK's dpotrf, dtrtri and dlauum called only
on diagonal blocks of order ``block`` (or the Gram step's
:data:`DEFAULT_BLOCK`) and dsyrk only on blocks of at most that order, far
below the faulty size. Each step's updates are tiles (:mod:`.tiles`) whose
shapes are a function of n alone: inside a fit they run on single-threaded
BLAS, shared out over fastgp's threads, so the bits do not depend on the
thread count; outside one they run in turn, each on OpenBLAS's threads.

Everything works on the caller's one buffer: BLAS and LAPACK are called
through the function pointers that :mod:`scipy.linalg.cython_blas` and
:mod:`scipy.linalg.cython_lapack` export (the OpenBLAS that
``scipy.linalg.lapack`` uses), with the address of a sub-block and the
buffer's leading dimension, so no sub-matrix is copied. ctypes releases the
GIL around each call, so two threads may run these routines at once on
different buffers.

Buffers: ``A`` (n, n) float64 with unit row stride (Fortran order, or a
leading (n, n) block of a larger Fortran-ordered array); only its lower
triangle is read and written, the strict upper triangle is left as it was.
"""

import ctypes

import numpy as np
from scipy.linalg import cython_blas, cython_lapack

from .tiles import TILE_COLUMNS, TILE_ROWS, run_tiles, width

__all__ = ["DEFAULT_BLOCK", "cholesky_lower", "inverse_from_cholesky_lower",
           "solve_lower_columns", "solve_right_lower_transposed_rows",
           "subtract_outer_lower",
           "leading_dimension", "cholesky_lower_float32", "solve_float32",
           "symmetric_matvec"]

#: Order of the diagonal blocks. Each block column's dgemm packs the whole
#: trailing panel once, a cost that falls as 1 / block, while the dtrsm and
#: dtrmm on diagonal-block triangles grow as block / N. At N = 4,000 with two
#: threads (factor + inverse over LAPACK's dpotrf + dpotri): 128 -> 1.21,
#: 256 -> 1.03, 512 -> 0.99 (docs/reliability.md). LAPACK's routines on a
#: block of 512 run OpenBLAS's threaded dsyrk on at most 512 columns, far
#: below where it fails.
DEFAULT_BLOCK = 512

#: Inside a fit, below this order the factor's and the triangular inverse's
#: diagonal blocks, and the tiles of all three steps, have SMALL_TILE rows
#: (TILE_ROWS from it on): at N = 1,000 blocks of 256 leave four block
#: columns, too few to keep two threads busy. Factor + inverse over
#: OpenBLAS's threaded dpotrf + dpotri, two tile threads (medians of 9,
#: docs/benchmarks.md, "Tiles and the blocked factor and inverse"): at N = 1,000
#: 0.94 with 128 against 1.06 with 256; at 2,000, 3,000 and 5,000 the two
#: are within 0.02 of each other; at 8,000 1.04 against 0.98.
SMALL_ORDER = 2048
SMALL_TILE = 128

_get_name = ctypes.pythonapi.PyCapsule_GetName
_get_name.restype = ctypes.c_char_p
_get_name.argtypes = [ctypes.py_object]
_get_pointer = ctypes.pythonapi.PyCapsule_GetPointer
_get_pointer.restype = ctypes.c_void_p
_get_pointer.argtypes = [ctypes.py_object, ctypes.c_char_p]


def _fortran_routine(module, name, n_args):
    """The routine ``name`` of a scipy Cython BLAS/LAPACK module as a ctypes
    function of ``n_args`` pointer arguments (Fortran convention: every
    argument by reference, no return value). CFUNCTYPE, not PYFUNCTYPE, so
    the GIL is released during the call."""
    capsule = module.__pyx_capi__[name]
    address = _get_pointer(capsule, _get_name(capsule))
    if not address:  # pragma: no cover - scipy always exports these
        raise ImportError(f"scipy exports no address for {name}")
    return ctypes.CFUNCTYPE(None, *([ctypes.c_void_p] * n_args))(address)


# Every routine used here, by (name, number of arguments); the single
# precision ones and dsymv serve the classifier's float32 Newton iterations.
(_dgemm, _dtrsm, _dtrmm, _dsyrk, _sgemm, _strsm, _ssyrk, _dsymv) = (
    _fortran_routine(cython_blas, name, n_args) for name, n_args in (
        ("dgemm", 13), ("dtrsm", 11), ("dtrmm", 11), ("dsyrk", 10),
        ("sgemm", 13), ("strsm", 11), ("ssyrk", 10), ("dsymv", 10)))
(_dpotrf, _dtrtri, _dlauum, _spotrf, _spotrs) = (
    _fortran_routine(cython_lapack, name, n_args) for name, n_args in (
        ("dpotrf", 5), ("dtrtri", 6), ("dlauum", 5), ("spotrf", 5), ("spotrs", 8)))

# Read-only constants shared by every call (thread-safe: never written).
_CHARS = {c: ctypes.c_char(c.encode()) for c in "LRNTU"}
_ONE = ctypes.c_double(1.0)
_MINUS_ONE = ctypes.c_double(-1.0)


def _ch(c):
    return ctypes.byref(_CHARS[c])


def _int(value):
    return ctypes.byref(ctypes.c_int(int(value)))


class _Blocks:
    """Addresses of sub-blocks of one column-major buffer of ``dtype``:
    ``at(i, j)`` is the address of element (i, j), itemsize (i + j lda)
    bytes from the start."""

    def __init__(self, A, dtype=np.float64, read_only=False):
        self.base = A.ctypes.data
        self.size = np.dtype(dtype).itemsize
        self.lda = leading_dimension(A, dtype, read_only)
        self.ld = _int(self.lda)

    def at(self, i, j):
        return ctypes.c_void_p(self.base + self.size * (i + j * self.lda))


def leading_dimension(A, dtype=np.float64, read_only=False):
    """LAPACK's leading dimension of ``A`` (n, n): its column stride in
    elements. Raises ValueError unless A is a square array of ``dtype``
    (float64, or float32 for the single-precision routines) with unit row
    stride (Fortran order, or a leading block of a Fortran-ordered array, or
    any other column stride >= n), aligned, writeable (unless ``read_only``:
    a factor that a solve only reads), whose columns do not overlap."""
    dtype = np.dtype(dtype)
    size = dtype.itemsize
    if A.ndim != 2 or A.shape[0] != A.shape[1]:
        raise ValueError(f"expected a square matrix, got shape {A.shape}")
    if A.dtype != dtype or not (A.flags.writeable or read_only) or not A.flags.aligned:
        raise ValueError(f"the buffer must be writeable, aligned {dtype.name}")
    n = A.shape[0]
    if n > 1 and A.strides[0] != size:
        raise ValueError("the buffer must be Fortran-ordered (unit row stride)")
    lda = A.strides[1] // size if n > 1 else 1
    if n > 1 and (A.strides[1] % size or lda < n):
        raise ValueError(f"column stride {A.strides[1]} bytes is not a leading "
                         f"dimension >= n = {n}")
    if max(n, lda) >= 2**31 or n * lda >= 2**62:
        raise ValueError("the matrix is too large for 32-bit LAPACK indices")
    return max(lda, 1)


def _global_info(routine, info, offset):
    """LAPACK's ``info`` from a diagonal block starting at row ``offset``, as
    the whole matrix's info: 0, or offset + info (1-based order). A negative
    info (an illegal argument, which the checks above rule out) raises."""
    if info < 0:
        raise ValueError(f"{routine}: illegal argument {-info}")
    return offset + info if info > 0 else 0


def _tile_order(n):
    """Rows of the factor's and the inverse's tiles at order ``n``:
    SMALL_TILE inside a fit below SMALL_ORDER, else TILE_ROWS (read at call
    time). A function of n alone, so the bits stay independent of the
    thread count."""
    return SMALL_TILE if width() is not None and n < SMALL_ORDER else TILE_ROWS


def _check_block(block, n):
    """``block``, or the default at order ``n``: DEFAULT_BLOCK outside a
    fit, :func:`_tile_order` inside one (:mod:`.tiles`: BLAS on one thread,
    smaller blocks keep both threads busy)."""
    if block is None:
        block = DEFAULT_BLOCK if width() is None else _tile_order(n)
    block = int(block)
    if block < 1:
        raise ValueError(f"block must be >= 1, got {block}")
    return block


def cholesky_lower(A, block=None):
    """Overwrite the lower triangle of ``A`` (n, n) with the Cholesky factor L
    of the symmetric matrix whose lower triangle it holds (K = L L^T).

    A blocked dpotrf, lower, right-looking with one step of look-ahead
    (:func:`_blocked_cholesky`): block column j (width ``block``, default
    :data:`DEFAULT_BLOCK` read at call time, :func:`_tile_order` inside a
    fit) is factored by dpotrf on its diagonal block and one dtrsm below it,
    then the trailing lower triangle takes its rank-``block`` update as
    tiles of dsyrk (order <= block) and dgemm.

    Returns LAPACK's info: 0 on success, else the order (1-based, in the
    whole matrix) of the first leading minor that is not positive definite;
    ``A`` is then partly overwritten, as by dpotrf.
    """
    return _blocked_cholesky(A, block, np.float64)


def _blocked_cholesky(A, block, dtype):
    """:func:`cholesky_lower` with the routines of ``dtype`` (float64:
    dsyrk, dpotrf, dgemm, dtrsm; float32: their s versions).

    Right-looking, with one step of look-ahead (Golub and Van Loan,
    *Matrix Computations*, 4th ed., section 4.2.9; Kurzak, Buttari and
    Dongarra 2008 for the look-ahead): block column j is factored
    (dpotrf on its diagonal block, one dtrsm on the panel below), then the
    trailing lower triangle takes the rank-``block`` update
    A_22 -= L_21 L_21^T as tiles (:mod:`.tiles`), one per column panel of
    ``block`` columns: a dsyrk on the panel's diagonal block and one dgemm
    on every row below it. The first tile, the next block column, also
    factors that block column once its update is in, so that the dpotrf
    and dtrsm on the critical path run beside the other tiles and each
    step has one barrier. Every tile is a function of n and ``block``
    alone, and every entry takes its updates in the order of j."""
    syrk, potrf, gemm, trsm, one, minus_one = (
        globals()[name] for name in _CHOLESKY_ROUTINES[np.dtype(dtype)])
    n = A.shape[0]
    block = _check_block(block, n)
    m = _Blocks(A, dtype)
    one, minus_one = ctypes.byref(one), ctypes.byref(minus_one)
    failed = []  # the whole matrix's info of a failed dpotrf, from any tile

    def factor_block_column(j):
        jb = min(block, n - j)
        info = ctypes.c_int(0)
        potrf(_ch("L"), _int(jb), m.at(j, j), m.ld, ctypes.byref(info))
        if info.value != 0:
            failed.append(_global_info("dpotrf" if dtype == np.float64 else "spotrf",
                                       info.value, j))
        elif n - j - jb > 0:  # L_21 = A_21 L_11^-T
            trsm(_ch("R"), _ch("L"), _ch("T"), _ch("N"), _int(n - j - jb), _int(jb),
                 one, m.at(j, j), m.ld, m.at(j + jb, j), m.ld)

    def update_panel(j, c, width):
        """A[c:, c:c+width] -= L[c:, j:j+jb] L[c:c+width, j:j+jb]^T."""
        jb = min(block, n - j)
        syrk(_ch("L"), _ch("N"), _int(width), _int(jb), minus_one,
             m.at(c, j), m.ld, one, m.at(c, c), m.ld)
        rows = n - c - width
        if rows > 0:
            gemm(_ch("N"), _ch("T"), _int(rows), _int(width), _int(jb), minus_one,
                 m.at(c + width, j), m.ld, m.at(c, j), m.ld, one, m.at(c + width, c), m.ld)

    if n == 0:
        return 0
    factor_block_column(0)
    for j in range(0, n - block, block):
        if failed:
            break
        following = j + block
        width = min(block, n - following)

        def look_ahead(j=j, following=following, width=width):
            update_panel(j, following, width)
            factor_block_column(following)

        run_tiles([look_ahead] + [lambda c=c, cols=cols, j=j: update_panel(j, c, cols)
                                  for c, cols in _column_tiles(following + width, n, block)])
    return failed[0] if failed else 0


def _row_tiles(start, stop, size=None):
    """(first row, rows) of the tiles of rows [start, stop): ``size``
    (default TILE_ROWS) each from ``start``, the last shorter (a function of
    the bounds alone)."""
    size = TILE_ROWS if size is None else size
    return [(r, min(size, stop - r)) for r in range(start, stop, size)]


def _column_tiles(start, stop, size=None):
    """(first column, columns) of the tiles of columns [start, stop)."""
    size = TILE_COLUMNS if size is None else size
    return [(c, min(size, stop - c)) for c in range(start, stop, size)]


def _invert_triangle_lower(A, m, block):
    """Overwrite the lower triangle of ``A`` (a lower triangular L with a
    non-zero diagonal) with X = L^-1, by block rows from the top, the
    update of each step a rank-``block`` dgemm (the third of the triangular
    inverse's blocked variants in Bientinesi, Gunter and van de Geijn,
    "Families of algorithms related to the inversion of a symmetric positive
    definite matrix", ACM TOMS 35(1), 2008). With L partitioned at block
    row j into L_00 (j x j), L_10, L_11 (block) and L_20, L_21 below, the
    columns 0:j below row j hold Y = L_{j:,0:j} L_00^-1 when step j begins,
    and X_10 = -L_11^-1 Y_1, X_{2:,0:j} = -L_22^-1 (Y_2 - L_21 L_11^-1 Y_1).
    So:

    1. every diagonal block becomes L_kk^-1 and every panel below it
       L_21 L_11^-1 (dtrtri, then dtrmm from the right by row tiles): these
       depend on L alone, so they run as independent tiles first;
    2. step j, by tiles of :func:`_tile_order` columns c of 0:j:
       Y_2[:, c] -= (L_21 L_11^-1) Y_1[:, c] (one dgemm of every row below),
       then Y_1[:, c] := -L_11^-1 Y_1[:, c] (dtrmm), which is X_10[:, c].

    Nearly all of the n^3/3 flops are the dgemms of step 2, each of a long
    panel. The caller has checked that no diagonal entry is zero."""
    n = A.shape[0]
    one, minus_one = ctypes.byref(_ONE), ctypes.byref(_MINUS_ONE)
    starts = range(0, n, block)
    tile = _tile_order(n)

    def invert_diagonal_block(j):
        info = ctypes.c_int(0)
        _dtrtri(_ch("L"), _ch("N"), _int(min(block, n - j)), m.at(j, j), m.ld,
                ctypes.byref(info))
        if info.value != 0:  # pragma: no cover - the caller checked the diagonal
            raise ValueError(f"dtrtri: info {info.value} on diagonal block {j}")

    run_tiles([lambda j=j: invert_diagonal_block(j) for j in starts])
    run_tiles([lambda r=r, rows=rows, j=j: _dtrmm(  # L_21 := L_21 L_11^-1
        _ch("R"), _ch("L"), _ch("N"), _ch("N"), _int(rows), _int(min(block, n - j)),
        one, m.at(j, j), m.ld, m.at(r, j), m.ld)
        for j in starts for r, rows in _row_tiles(j + block, n, tile)])

    def step_columns(j, c, cols):
        jb = min(block, n - j)
        below = n - j - jb
        if below > 0:
            _dgemm(_ch("N"), _ch("N"), _int(below), _int(cols), _int(jb), minus_one,
                   m.at(j + jb, j), m.ld, m.at(j, c), m.ld, one, m.at(j + jb, c), m.ld)
        _dtrmm(_ch("L"), _ch("L"), _ch("N"), _ch("N"), _int(jb), _int(cols),
               minus_one, m.at(j, j), m.ld, m.at(j, c), m.ld)

    for j in starts[1:]:
        run_tiles([lambda c=c, cols=cols, j=j: step_columns(j, c, cols)
                   for c, cols in _column_tiles(0, j, tile)])


def _gram_lower(A, m, block):
    """Overwrite the lower triangle of ``A`` (holding a lower triangular M)
    with the lower triangle of M^T M (dlauum, lower), by row blocks from the
    top, as OpenBLAS's own dlauum orders it. With R_i the Gram matrix of M's
    first i rows (its leading i x i block), row block P = M[i:i+ib, 0:i]
    and its diagonal block M_ii:

        R_{i+ib}[0:i, 0:i]       = R_i + P^T P        (rank-ib update)
        R_{i+ib}[i:i+ib, 0:i]    = M_ii^T P           (dtrmm, in place)
        R_{i+ib}[i:i+ib, i:i+ib] = M_ii^T M_ii        (dlauum of order ib)

    R_i lies where M[0:i, 0:i] was, which no later step reads. The rank-ib
    update, nearly all of the n^3/3 flops, runs as one tile per column panel
    of :func:`_tile_order` columns: a dsyrk on its diagonal block (never
    OpenBLAS's faulty order: docs/reliability.md) and one dgemm on every row
    below it; then the dtrmm by tiles of P's columns. (The reference dlauum's
    inner-product order, a dgemm of ib rows and a long inner dimension per
    row block, put the inverse at 1.18 x OpenBLAS's dpotri at N = 12,000;
    docs/benchmarks.md, "Tiles and the blocked factor and inverse".)"""
    n = A.shape[0]
    info = ctypes.c_int(0)
    one = ctypes.byref(_ONE)
    tile = _tile_order(n)

    def update_panel(i, ib, c, panel):
        _dsyrk(_ch("L"), _ch("T"), _int(panel), _int(ib), one,
               m.at(i, c), m.ld, one, m.at(c, c), m.ld)
        rows = i - c - panel
        if rows > 0:
            _dgemm(_ch("T"), _ch("N"), _int(rows), _int(panel), _int(ib), one,
                   m.at(i, c + panel), m.ld, m.at(i, c), m.ld, one, m.at(c + panel, c), m.ld)

    for i in range(0, n, block):
        ib = min(block, n - i)
        if i > 0:
            run_tiles([lambda c=c, panel=panel, i=i, ib=ib: update_panel(i, ib, c, panel)
                       for c, panel in _column_tiles(0, i, tile)])
            run_tiles([lambda c=c, cols=cols, i=i, ib=ib: _dtrmm(
                _ch("L"), _ch("L"), _ch("T"), _ch("N"), _int(ib), _int(cols),
                one, m.at(i, i), m.ld, m.at(i, c), m.ld)
                for c, cols in _column_tiles(0, i, tile)])
        _dlauum(_ch("L"), _int(ib), m.at(i, i), m.ld, ctypes.byref(info))
        if info.value != 0:  # pragma: no cover - dlauum fails only on bad arguments
            raise ValueError(f"dlauum: illegal argument {-info.value}")


def inverse_from_cholesky_lower(A, block=None):
    """Overwrite the lower triangle of ``A`` (n, n), holding the Cholesky
    factor L of K, with the lower triangle of K^-1 = L^-T L^-1 (dpotri):
    L^-1 by a blocked dtrtri, then (L^-1)^T L^-1 by a blocked dlauum.
    ``block`` is the order of both steps' diagonal blocks; by default the
    dtrtri's is :data:`DEFAULT_BLOCK` outside a fit and :func:`_tile_order`
    inside one (as for the factor), the dlauum's :data:`DEFAULT_BLOCK` (its
    rank-block updates are dgemms with an inner dimension of that order:
    TILE_ROWS there made the Gram step about 15 % slower on one thread at
    N = 5,000, measured when the tiles came in).

    Returns dpotri's info: 0, or i (1-based) if L_ii is exactly zero, in
    which case ``A`` is left unchanged.
    """
    n = A.shape[0]
    gram_block = _check_block(DEFAULT_BLOCK if block is None else block, n)
    block = _check_block(block, n)
    m = _Blocks(A)
    if n == 0:
        return 0
    zeros = np.flatnonzero(np.diagonal(A) == 0.0)
    if zeros.size:
        return int(zeros[0]) + 1
    _invert_triangle_lower(A, m, block)
    _gram_lower(A, m, gram_block)
    return 0


# ------------------------------------------------------------ solves
def _column_major(B, rows):
    """(address, leading dimension) of ``B`` (rows, k) float64 with unit row
    stride; ValueError otherwise."""
    k = B.shape[1] if B.ndim == 2 else 0
    if (B.ndim != 2 or B.shape[0] != rows or B.dtype != np.float64
            or not B.flags.writeable or not B.flags.aligned
            or (rows > 1 and B.strides[0] != 8)
            or (k > 1 and (B.strides[1] % 8 or B.strides[1] < 8 * rows))):
        raise ValueError(f"expected a writeable Fortran-ordered float64 ({rows}, k) array")
    lda = B.strides[1] // 8 if k > 1 else max(rows, 1)
    return B.ctypes.data, lda


def solve_lower_columns(L, B, both=False, transposed=False):
    """Overwrite ``B`` (n, k) float64 Fortran-ordered with L^-1 B, with
    L^-T B where ``transposed``, or with (L L^T)^-1 B where ``both``
    (dpotrs), L the lower triangle of ``L`` (n, n) with unit row stride:
    dtrsm by tiles of TILE_COLUMNS columns of B (:mod:`.tiles`). The caller
    has checked that L's diagonal has no zero."""
    n = L.shape[0]
    m = _Blocks(L, read_only=True)
    base, ldb = _column_major(B, n)
    if n == 0 or B.shape[1] == 0:
        return B
    one = ctypes.byref(_ONE)

    def tile(c, cols):
        at = ctypes.c_void_p(base + 8 * c * ldb)
        for trans in ("NT" if both else "T" if transposed else "N"):
            _dtrsm(_ch("L"), _ch("L"), _ch(trans), _ch("N"), _int(n), _int(cols), one,
                   m.at(0, 0), m.ld, at, _int(ldb))

    run_tiles([lambda c=c, cols=cols: tile(c, cols)
               for c, cols in _column_tiles(0, B.shape[1])])
    return B


def solve_right_lower_transposed_rows(L, B):
    """Overwrite ``B`` (k, n) float64 Fortran-ordered with B L^-T, L the
    lower triangle of ``L`` (n, n) with unit row stride: dtrsm from the
    right by tiles of TILE_ROWS rows of B (:mod:`.tiles`)."""
    n = L.shape[0]
    m = _Blocks(L, read_only=True)
    k = B.shape[0]
    if B.ndim != 2 or B.shape[1] != n:
        raise ValueError(f"expected a (k, {n}) array")
    if k == 0 or n == 0:
        return B
    base, ldb = _column_major(B, k)
    one = ctypes.byref(_ONE)
    run_tiles([lambda r=r, rows=rows: _dtrsm(
        _ch("R"), _ch("L"), _ch("T"), _ch("N"), _int(rows), _int(n), one,
        m.at(0, 0), m.ld, ctypes.c_void_p(base + 8 * r), _int(ldb))
        for r, rows in _row_tiles(0, k)])
    return B


def subtract_outer_lower(A, F):
    """Overwrite the lower triangle of ``A`` (n, n) float64 with unit row
    stride with that of A - F F^T, F (n, k) float64 Fortran-ordered (read
    only): per tile of TILE_COLUMNS columns [c, c + w), one dsyrk on the
    diagonal block (order w) and one dgemm on the rows below it. The tiles
    write disjoint blocks (so run in any order, with the same bits on any
    thread count: :mod:`.tiles`), nothing N x N is allocated and the strict
    upper triangle is not touched. 2 n^2 k flops: the restricted
    likelihood's rank-k correction of K^-1 (docs/design.md, "A mean
    estimated with the covariance")."""
    n = A.shape[0]
    m = _Blocks(A)
    if F.shape[0] != n or F.ndim != 2:
        raise ValueError(f"expected an ({n}, k) array")
    k = F.shape[1]
    if n == 0 or k == 0:
        return A
    F = F if F.flags.writeable else F.copy(order="F")  # alive through the calls
    base, ldf = _column_major(F, n)
    one, minus = ctypes.byref(_ONE), ctypes.byref(_MINUS_ONE)

    def tile(c, w):
        _dsyrk(_ch("L"), _ch("N"), _int(w), _int(k), minus,
               ctypes.c_void_p(base + 8 * c), _int(ldf), one, m.at(c, c), m.ld)
        rows = n - c - w
        if rows > 0:
            _dgemm(_ch("N"), _ch("T"), _int(rows), _int(w), _int(k), minus,
                   ctypes.c_void_p(base + 8 * (c + w)), _int(ldf),
                   ctypes.c_void_p(base + 8 * c), _int(ldf), one, m.at(c + w, c), m.ld)

    run_tiles([lambda c=c, w=w: tile(c, w) for c, w in _column_tiles(0, n)])
    return A


# ------------------------------------------------------------ float32, dsymv
# For the classifier's float32 Newton iterations (docs/gpc.md, "Float32 early
# iterations"), reached through fastgp._linalg.lapack: a float32 factor in a strided
# view of a float64 buffer (any column stride), its solve, and dsymv.
_ONE_F32 = ctypes.c_float(1.0)
_MINUS_ONE_F32 = ctypes.c_float(-1.0)
_ZERO = ctypes.c_double(0.0)

#: The blocked Cholesky's routines and constants by dtype, by their names in
#: this module (looked up at call time): syrk, potrf, gemm, trsm, 1, -1.
_CHOLESKY_ROUTINES = {
    np.dtype(np.float64): ("_dsyrk", "_dpotrf", "_dgemm", "_dtrsm", "_ONE", "_MINUS_ONE"),
    np.dtype(np.float32): ("_ssyrk", "_spotrf", "_sgemm", "_strsm", "_ONE_F32",
                           "_MINUS_ONE_F32"),
}


def cholesky_lower_float32(A, block=None):
    """:func:`cholesky_lower` in single precision, on ``A`` (n, n) float32
    with unit row stride and any column stride >= n: ssyrk, spotrf, sgemm
    and strsm per block column of ``block`` (default as for
    :func:`cholesky_lower`).
    Returns spotrf's info as :func:`cholesky_lower` does."""
    return _blocked_cholesky(A, block, np.float32)


def solve_float32(A, x):
    """Overwrite ``x`` (n,) float32 contiguous with (L L^T)^-1 x, L the lower
    factor in ``A`` from :func:`cholesky_lower_float32` (spotrs)."""
    n, lda = A.shape[0], leading_dimension(A, np.float32)
    if x.dtype != np.float32 or x.shape != (n,) or not x.flags.c_contiguous:
        raise ValueError("x must be a contiguous float32 vector of length n")
    info = ctypes.c_int(0)
    _spotrs(_ch("L"), _int(n), _int(1), ctypes.c_void_p(A.ctypes.data), _int(lda),
            ctypes.c_void_p(x.ctypes.data), _int(max(n, 1)), ctypes.byref(info))
    _global_info("spotrs", info.value, 0)  # raises on an illegal argument
    return x


def symmetric_matvec(A, x, out, lower):
    """out = S x by dsymv, S the symmetric matrix whose lower (``lower``) or
    upper triangle, diagonal included, ``A`` (n, n) float64 holds; x and out
    (n,) float64 contiguous."""
    n, lda = A.shape[0], leading_dimension(A)
    for v in (x, out):
        if v.dtype != np.float64 or v.shape != (n,) or not v.flags.c_contiguous:
            raise ValueError("x and out must be contiguous float64 vectors of length n")
    _dsymv(_ch("L" if lower else "U"), _int(n), ctypes.byref(_ONE),
           ctypes.c_void_p(A.ctypes.data), _int(lda), ctypes.c_void_p(x.ctypes.data),
           _int(1), ctypes.byref(_ZERO), ctypes.c_void_p(out.ctypes.data), _int(1))
    return out
