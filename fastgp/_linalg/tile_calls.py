"""The "tile calls": the level-3 BLAS and LAPACK calls on sub-blocks of one
Fortran-ordered buffer that the device's blocked factor and inverse
(:mod:`.device_blocked`) are written against, and the checks that both of
its implementations share (docs/design.md, "The device's factor and
inverse").

Two classes implement the calls: :class:`fastgp._linalg.cuda_tiles.CudaTiles`
(CuPy arrays, cuBLAS and cuSOLVER through nvmath-python's raw bindings) and
:class:`fastgp._linalg.host_tiles.HostTiles` (NumPy arrays, SciPy's BLAS and
LAPACK), the stand-in on which CI tests every blocked algorithm. Both have:

``xp``
    The array module (``numpy`` or ``cupy``).
``empty(shape)``
    An uninitialised Fortran-ordered float64 array of ``shape``.
``array(Y)``
    A new Fortran-ordered float64 copy of the 2-D ``Y`` (host or device).
``info_vector(count)``
    A zeroed int32 vector of ``count`` entries, into which the LAPACK-style
    calls below write their ``info`` (on the device, where it stays until
    :meth:`to_host` reads it: one copy, one wait, for many calls).
``to_host(x)``
    A NumPy copy of ``x`` (on the device: a device-to-host copy, which
    waits for the work queued before it).
``gemm(trans_a, trans_b, alpha, A, B, beta, C)``
    C := alpha op(A) op(B) + beta C; C (m, n), op(A) (m, k), op(B) (k, n).
``syrk(trans, alpha, A, beta, C)``
    The lower triangle of C (n, n) := alpha op(A) op(A)^T + beta C, op(A)
    (n, k) (``trans`` "N": A; "T": A^T); C's strict upper triangle is
    neither read nor written.
``trsm(side, trans, alpha, A, B)``
    B := alpha op(A)^-1 B (``side`` "L") or alpha B op(A)^-1 ("R"), A the
    lower triangle (non-unit diagonal) of a square array.
``trmm(side, trans, alpha, A, B)``
    B := alpha op(A) B ("L") or alpha B op(A) ("R"), in place, A as for trsm.
``potrf(A, info, slot)``, ``trtri(A, info, slot)``, ``lauum(A, info, slot)``
    LAPACK's dpotrf (L L^T = A), dtrtri (L := L^-1, non-unit) and dlauum
    (the lower triangle of L^T L), lower, in place on the square ``A``;
    each writes its info into ``info[slot]`` and touches no entry above the
    diagonal. The blocked algorithms call trtri and lauum on diagonal
    blocks only.
``potri(A, info, slot)``, ``xpotrf(A, info, slot)``
    dpotri and the 64-bit API's Cholesky on a whole matrix: floors for the
    benchmark (bench/device_linalg.py), not used by the blocked algorithms.
``synchronize()``
    Wait for every call queued so far.

Every matrix argument is a 2-D float64 array with unit row stride and a
column stride of ``ld`` elements, ``ld`` >= its rows (the leading dimension
of BLAS): the buffer itself, or a sub-block view of it. ``trans`` and
``side`` are the one-letter strings of BLAS ("N"/"T", "L"/"R"). Nothing here
imports CuPy or NumPy's array types: the checks read ``shape``, ``strides``
and ``dtype`` (and ``flags.writeable`` where there is one), so that they run,
and are tested, without a GPU.
"""

import numpy as np

__all__ = ["FLOAT64", "layout", "square_order", "gemm_shape", "syrk_shape",
           "triangular_shape", "operation", "side", "info_slot", "INT32_LIMIT"]

FLOAT64 = np.dtype(np.float64)

#: Every dimension and leading dimension passed to the 32-bit BLAS and
#: LAPACK interfaces must stay below this.
INT32_LIMIT = 2**31

_OPERATIONS = {"N": 0, "T": 1}  # cublasOperation_t: CUBLAS_OP_N, CUBLAS_OP_T
_SIDES = {"L": 0, "R": 1}       # cublasSideMode_t: CUBLAS_SIDE_LEFT, _RIGHT


def _code(table, letter, name):
    """cuBLAS's enum value of BLAS's ``letter`` in ``table``; ValueError
    naming ``name`` and the letters allowed for anything else."""
    try:
        return table[letter]
    except (KeyError, TypeError):
        allowed = " or ".join(repr(key) for key in table)
        raise ValueError(f"{name} must be {allowed}, got {letter!r}") from None


def operation(trans):
    """cuBLAS's operation for BLAS's ``trans`` letter: "N" -> 0, "T" -> 1;
    ValueError for anything else."""
    return _code(_OPERATIONS, trans, "trans")


def side(letter):
    """cuBLAS's side for BLAS's ``side`` letter: "L" -> 0, "R" -> 1;
    ValueError for anything else."""
    return _code(_SIDES, letter, "side")


def layout(A, name="A"):
    """(rows, columns, leading dimension) of the matrix ``A``, as BLAS takes
    it: column-major, element (i, j) at ``i + j * ld`` elements from the
    first.

    Raises ValueError unless ``A`` is 2-D, float64, writeable (where it has
    a ``flags.writeable``), with a row stride of 8 bytes (or one row) and a
    column stride that is a whole number of elements, at least the rows (or
    one column: then ``ld`` is max(rows, 1)), every figure below 2^31.
    """
    shape = tuple(A.shape)
    if len(shape) != 2:
        raise ValueError(f"{name} must be a 2-D matrix, got shape {shape}")
    if np.dtype(A.dtype) != FLOAT64:
        raise ValueError(f"{name} must be float64, got {A.dtype}")
    flags = getattr(A, "flags", None)
    if not getattr(flags, "writeable", True):
        raise ValueError(f"{name} must be writeable")
    rows, cols = shape
    row_stride, col_stride = tuple(A.strides)
    if rows > 1 and row_stride != FLOAT64.itemsize:
        raise ValueError(f"{name} must be Fortran-ordered (unit row stride): its "
                         f"strides are {tuple(A.strides)} bytes")
    if cols > 1:
        if col_stride % FLOAT64.itemsize or col_stride < FLOAT64.itemsize * rows:
            raise ValueError(f"{name}'s column stride of {col_stride} bytes is not a "
                             f"leading dimension >= its {rows} rows")
        ld = col_stride // FLOAT64.itemsize
    else:
        ld = max(rows, 1)
    if max(rows, cols, ld) >= INT32_LIMIT:
        raise ValueError(f"{name} is too large for 32-bit BLAS indices: shape "
                         f"{shape}, leading dimension {ld}")
    return rows, cols, ld


def square_order(A, name="A"):
    """The order n of the square matrix ``A`` (checked by :func:`layout`);
    ValueError if it is not square."""
    rows, cols, _ = layout(A, name)
    if rows != cols:
        raise ValueError(f"{name} must be square, got shape {tuple(A.shape)}")
    return rows


def _operand_shape(A, trans, name):
    rows, cols, _ = layout(A, name)
    return (rows, cols) if operation(trans) == 0 else (cols, rows)


def gemm_shape(trans_a, trans_b, A, B, C):
    """(m, n, k) of C := op(A) op(B) + C, every operand checked: C (m, n),
    op(A) (m, k), op(B) (k, n); ValueError where they do not fit."""
    m, n, _ = layout(C, "C")
    a_rows, k = _operand_shape(A, trans_a, "A")
    b_rows, b_cols = _operand_shape(B, trans_b, "B")
    if (a_rows, b_rows, b_cols) != (m, k, n):
        raise ValueError(f"gemm: op(A) {(a_rows, k)} times op(B) {(b_rows, b_cols)} "
                         f"does not fit C {(m, n)}")
    return m, n, k


def syrk_shape(trans, A, C):
    """(n, k) of C := op(A) op(A)^T + C, C (n, n), op(A) (n, k); ValueError
    where they do not fit."""
    n = square_order(C, "C")
    a_rows, k = _operand_shape(A, trans, "A")
    if a_rows != n:
        raise ValueError(f"syrk: op(A) {(a_rows, k)} does not fit C {(n, n)}")
    return n, k


def triangular_shape(letter, A, B):
    """(m, n) of B for a triangular A applied from ``letter`` ("L": A is
    m x m; "R": n x n); ValueError where they do not fit."""
    order = square_order(A, "A")
    m, n, _ = layout(B, "B")
    if order != (m if side(letter) == 0 else n):
        raise ValueError(f"{letter!r}-side triangle of order {order} does not fit "
                         f"B {(m, n)}")
    return m, n


def info_slot(info, slot):
    """Check that ``info`` is a contiguous int32 vector and ``slot`` one of
    its entries; return the slot's byte offset from the vector's start."""
    itemsize = np.dtype(np.int32).itemsize
    shape = tuple(info.shape)
    if np.dtype(info.dtype) != np.int32 or len(shape) != 1:
        raise ValueError(f"info must be an int32 vector, got {info.dtype} {shape}")
    if shape[0] > 1 and tuple(info.strides) != (itemsize,):
        raise ValueError("info must be contiguous")
    if not 0 <= slot < shape[0]:
        raise ValueError(f"info slot {slot} is outside the vector of {shape[0]}")
    return itemsize * int(slot)
