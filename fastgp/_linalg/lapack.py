"""In-place LAPACK steps on the one N x N workspace (docs/design.md, "The
one-buffer plan", steps 2 to 4).

scipy.linalg.lapack's wrappers copy their input unless it is float64,
Fortran-contiguous and passed with the overwrite flag. A silent copy would
double fastgp's memory, so every wrapper here checks that LAPACK handed back
the very buffer it was given and raises otherwise.

:func:`cholesky_with_jitter` is the factorisation a fitted model keeps: where
K is not numerically positive definite it adds diagonal jitter in growing
steps up to a bound (docs/design.md, "Failure is an answer, not a crash").

From order :data:`BLOCKED_MIN_N` on, the factor and the inverse are computed
by :mod:`fastgp._linalg.blocked` (reference LAPACK's blocked algorithms over
dgemm, dtrsm and dtrmm on sub-blocks of the same buffer) instead of one call
of OpenBLAS's dpotrf or dpotri, whose threaded dsyrk crashes the process on
large matrices on some processors (docs/reliability.md, "Large N and
OpenBLAS's threaded dsyrk"). Results agree to rounding.

:func:`release_blas_before_pass` is the one door through which an objective,
after its last LAPACK or BLAS call and before a Numba pass, sends OpenBLAS's
spinning workers to sleep (:mod:`fastgp._linalg.blas_pool`).
"""

import math

import numpy as np
from scipy.linalg import blas, lapack

from ..exceptions import NonFiniteMatrixError, NotPositiveDefiniteError
from . import blas_pool
from . import blocked as blocked_lapack
from . import tiles

__all__ = [
    "cholesky_with_jitter",
    "HostFactor",
    "log_det_from_diagonal",
    "zero_strict_upper",
    "rank_tolerance",
    "exact_sum",
    "cholesky_in_place",
    "cho_solve_factor",
    "cho_solve_in_place",
    "cho_inverse_in_place",
    "release_blas_before_pass",
    "solve_lower_in_place",
    "solve_lower_transposed_in_place",
    "subtract_outer_lower",
    "solve_right_lower_transposed",
    "log_det_from_factor",
    "BLOCKED_MIN_N",
    "float32_lower_view",
    "cholesky_float32_in_place",
    "cho_solve_float32",
    "symmetric_matvec",
]

#: Order from which :func:`cholesky_in_place` and :func:`cho_inverse_in_place`
#: take the blocked path outside a fit (read at call time): below it one
#: LAPACK call, far below the sizes where OpenBLAS's dsyrk fails. Inside a
#: fit (a tile width set: :mod:`fastgp._linalg.tiles`) they take it at every
#: order, as fixed tiles whose bits do not depend on the thread count; below
#: one block (256 inside a fit) that is LAPACK's one call on one thread.
#: Measured against OpenBLAS's threaded routines in docs/benchmarks.md
#: ("Determinism and threads").
BLOCKED_MIN_N = 4096


def _check_same(result, buffer, routine):
    if result is not buffer and not np.shares_memory(result, buffer):
        raise RuntimeError(
            f"{routine} copied its {buffer.shape} argument instead of working in "
            "place; the buffer must be float64 and Fortran-contiguous."
        )


def _require_fortran(buffer, routine):
    """The blocked path's counterpart of :func:`_check_same`: it cannot copy,
    so it refuses up front what scipy's wrapper would have copied."""
    if (buffer.dtype != np.float64 or not buffer.flags.f_contiguous
            or not buffer.flags.writeable or buffer.shape[0] != buffer.shape[1]):
        raise RuntimeError(
            f"{routine} cannot work in place on this {buffer.shape} {buffer.dtype} "
            "argument; the buffer must be square, writeable, float64 and "
            "Fortran-contiguous."
        )


def _takes_blocked_path(B):
    return B.ndim == 2 and (B.shape[0] >= BLOCKED_MIN_N or tiles.width() is not None)


def zero_strict_upper(B, block=256):
    """Zero the strict upper triangle of square ``B`` in column blocks (no
    N x N temporary)."""
    n = B.shape[0]
    for j0 in range(0, n, block):
        j1 = min(n, j0 + block)
        B[:j0, j0:j1] = 0.0
        diagonal_block = B[j0:j1, j0:j1]
        diagonal_block[np.triu_indices(j1 - j0, 1)] = 0.0


def cholesky_in_place(B, clean=False):
    """Overwrite the lower triangle of ``B`` (n, n) float64 F-contiguous with
    the Cholesky factor L of the symmetric matrix whose lower triangle it holds
    (dpotrf; from order :data:`BLOCKED_MIN_N` on, the blocked
    :func:`fastgp._linalg.blocked.cholesky_lower`). The strict upper triangle
    is left as it was unless ``clean``, which zeroes it.

    Raises NotPositiveDefiniteError (B is then partly overwritten).
    """
    if _takes_blocked_path(B):
        _require_fortran(B, "dpotrf")
        info = blocked_lapack.cholesky_lower(B)
        if info > 0:
            raise NotPositiveDefiniteError(info, B.shape[0])
        if clean:
            zero_strict_upper(B)
        return B
    L, info = lapack.dpotrf(B, lower=1, clean=1 if clean else 0, overwrite_a=1)
    _check_same(L, B, "dpotrf")
    if info > 0:
        raise NotPositiveDefiniteError(info, B.shape[0])
    if info < 0:
        raise ValueError(f"dpotrf: illegal argument {-info}")
    return B


def _tiles_apply(L, B, axis=0):
    """Whether a solve with factor ``L`` on ``B`` runs as tiles
    (:mod:`fastgp._linalg.blocked`): both float64 with unit row stride, B
    writeable and its ``axis`` of L's order, so that no operand is copied."""
    return (L.ndim == 2 and L.dtype == np.float64 and L.flags.f_contiguous
            and B.ndim == 2 and B.dtype == np.float64 and B.flags.f_contiguous
            and B.flags.writeable and B.shape[axis] == L.shape[0])


def cho_solve_factor(L, Y):
    """Return K^-1 Y (n, T) C-contiguous, with L (n, n) F-contiguous holding
    the lower Cholesky factor of K (dpotrs). ``Y`` is not modified."""
    Yf = np.array(Y, dtype=np.float64, order="F", copy=True)
    if Yf.ndim == 1:
        Yf = Yf.reshape(-1, 1, order="F")
        return np.ascontiguousarray(cho_solve_in_place(L, Yf)).ravel()
    return np.ascontiguousarray(cho_solve_in_place(L, Yf))


def cho_solve_in_place(L, B):
    """Overwrite ``B`` (n, m) float64 F-contiguous with K^-1 B (dpotrs, as
    fixed tiles of B's columns: :mod:`fastgp._linalg.tiles`), L (n, n)
    F-contiguous holding the lower Cholesky factor of K (read only)."""
    if _tiles_apply(L, B):
        return blocked_lapack.solve_lower_columns(L, B, both=True)
    X, info = lapack.dpotrs(L, B, lower=1, overwrite_b=1)
    _check_same(X, B, "dpotrs")
    if info != 0:
        raise ValueError(f"dpotrs: illegal argument {-info}")
    return B


def cho_inverse_in_place(L):
    """Overwrite the lower triangle of ``L`` (the Cholesky factor, F-contiguous)
    with the lower triangle of K^-1 (dpotri; from order :data:`BLOCKED_MIN_N`
    on, the blocked :func:`fastgp._linalg.blocked.inverse_from_cholesky_lower`).
    The strict upper triangle is left as it was."""
    if _takes_blocked_path(L):
        _require_fortran(L, "dpotri")
        info = blocked_lapack.inverse_from_cholesky_lower(L)
        if info != 0:
            raise NotPositiveDefiniteError(info, L.shape[0])
        return L
    Kinv, info = lapack.dpotri(L, lower=1, overwrite_c=1)
    _check_same(Kinv, L, "dpotri")
    if info != 0:
        raise NotPositiveDefiniteError(info, L.shape[0])
    return L


def release_blas_before_pass():
    """Call after the last LAPACK or BLAS call that comes before a Numba
    pass (an objective's dpotri, then its gradient pass; a preconditioner's
    products, then a product pass): OpenBLAS's pthreads workers would
    otherwise spin for about 0.1 s on cores the pass needs, and are sent to
    sleep where that is safe (:func:`fastgp._linalg.blas_pool.release_blas_workers`;
    the next threaded BLAS call starts them again). Changes no result.
    Returns whether any were released."""
    return blas_pool.release_blas_workers()


def solve_lower_in_place(L, B):
    """Overwrite ``B`` (n, m) float64 F-contiguous with L^-1 B (dtrtrs, as
    fixed tiles of B's columns: :mod:`fastgp._linalg.tiles`), L the lower
    triangle of an (n, n) F-contiguous array."""
    return _solve_lower(L, B, transposed=False)


def solve_lower_transposed_in_place(L, B):
    """Overwrite ``B`` (n, m) float64 F-contiguous with L^-T B (dtrtrs with
    the transpose, as fixed tiles of B's columns), L the lower triangle of
    an (n, n) F-contiguous array."""
    return _solve_lower(L, B, transposed=True)


def _solve_lower(L, B, transposed):
    """L^-1 B or L^-T B over B in place (the two functions above)."""
    if _tiles_apply(L, B):
        zeros = np.flatnonzero(np.diagonal(L) == 0.0)
        if zeros.size:
            raise np.linalg.LinAlgError(f"dtrtrs failed with info={int(zeros[0]) + 1}")
        return blocked_lapack.solve_lower_columns(L, B, transposed=transposed)
    X, info = lapack.dtrtrs(L, B, lower=1, trans=int(transposed), unitdiag=0, overwrite_b=1)
    _check_same(X, B, "dtrtrs")
    if info != 0:
        raise np.linalg.LinAlgError(f"dtrtrs failed with info={info}")
    return B


def subtract_outer_lower(B, F):
    """Overwrite the lower triangle of ``B`` (n, n) float64 F-contiguous with
    that of B - F F^T, F (n, k) float64 (made F-contiguous if it is not), in
    column tiles of dsyrk and dgemm in place
    (:func:`fastgp._linalg.blocked.subtract_outer_lower`): no N x N
    temporary; the strict upper triangle is left as it was."""
    _require_fortran(B, "dsyrk")
    return blocked_lapack.subtract_outer_lower(
        B, np.asarray(F, dtype=np.float64, order="F"))


def solve_right_lower_transposed(L, B):
    """B L^-T (BLAS dtrsm from the right) for B (m, n) float64 and the lower
    triangle of L (n, n): written over B where B is F-contiguous (as fixed
    tiles of B's rows: :mod:`fastgp._linalg.tiles`), a copy otherwise, as
    SciPy's wrapper makes; returns the result."""
    if _tiles_apply(L, B, axis=1):
        return blocked_lapack.solve_right_lower_transposed_rows(L, B)
    return blas.dtrsm(1.0, L, B, side=1, lower=1, trans_a=1, overwrite_b=1)


def log_det_from_factor(L):
    """log |K| = 2 sum_i log L_ii for the lower Cholesky factor L of K."""
    return log_det_from_diagonal(np.diagonal(L))


def log_det_from_diagonal(diagonal):
    """log |K| = 2 sum_i log L_ii from the factor's diagonal (n,), a host
    array (a device factor's, copied)."""
    if not np.all((diagonal > 0.0) & np.isfinite(diagonal)):
        with np.errstate(divide="ignore", invalid="ignore"):
            return 2.0 * float(np.sum(np.log(diagonal)))  # -inf or nan, as LAPACK left it
    # math.log and math.fsum, element by element: NumPy's SIMD log and sum
    # round differently with the array's memory alignment (seen with NumPy
    # 1.25), and a fit's bits must not depend on where an allocator put them
    return 2.0 * math.fsum(math.log(x) for x in diagonal.tolist())


def exact_sum(values):
    """math.fsum of ``values`` (a 1-D float64 array): exactly rounded, so the
    same bits wherever the array lies in memory; NumPy's sum (inf or nan)
    where the exact sum overflows or the values are not finite."""
    try:
        return math.fsum(values.tolist())
    except (OverflowError, ValueError):
        return float(np.sum(values))


def rank_tolerance(n, max_diag):
    """n eps max_i K_ii: the numerical-rank threshold of ``numpy.linalg.matrix_rank``
    (S.max() * max(M, N) * eps) with the largest diagonal entry standing in
    for the largest eigenvalue (which it bounds from below, to within n).

    A Cholesky pivot L_ii with L_ii^2 below it is rounding, not information:
    the squared pivots bound K's smallest eigenvalue from above, so K is
    singular to working precision and K^-1 y is noise of magnitude 1 / L_ii^2.
    """
    return n * np.finfo(np.float64).eps * max_diag


def _lower_is_finite(B, block=256):
    """Whether the lower triangle (diagonal included) of square ``B`` is all
    finite, in column blocks so that no N x N temporary is made (the strict
    upper triangle may hold stale values and is not read)."""
    n = B.shape[0]
    for j0 in range(0, n, block):
        j1 = min(n, j0 + block)
        if not np.isfinite(np.tril(B[j0:j1, j0:j1])).all():
            return False
        if not np.isfinite(B[j1:, j0:j1]).all():
            return False
    return True


class HostFactor:
    """What :func:`cholesky_with_jitter` does to a buffer in host memory: a
    device's buffer brings its own object with the same three methods."""

    @staticmethod
    def factor(B):
        """The lower Cholesky factor in place; NotPositiveDefiniteError."""
        cholesky_in_place(B)

    @staticmethod
    def diagonal(B):
        """The diagonal (n,) as a host NumPy array."""
        return np.diagonal(B)

    @staticmethod
    def lower_is_finite(B):
        return _lower_is_finite(B)


def cholesky_with_jitter(fill, B, min_relative_jitter=1e-10, max_relative_jitter=1e-6,
                         growth=10.0, buffer=HostFactor):
    """Factor K in place, adding diagonal jitter in growing steps if needed.

    Parameters
    ----------
    fill : callable ``fill(B, jitter)``
        Writes the lower triangle of K + jitter I into ``B``.
    B : ndarray of shape (n, n) float64, F-contiguous
        Overwritten: on return its lower triangle holds the Cholesky factor of
        K + jitter I (the strict upper triangle is stale).
    min_relative_jitter : float
        The first step, times max_i K_ii (raised to 10 x :func:`rank_tolerance`
        where that is larger).
    max_relative_jitter : float
        The bound: jitter never exceeds this times max_i K_ii.
    growth : float
        Factor between successive jitters.
    buffer : how to factor ``B`` and read its diagonal
        (:class:`HostFactor`; a device buffer's object for one in device
        memory), so that the ladder below is the same wherever K lies.

    Returns
    -------
    jitter : float
        0.0 if K factored as it was, else the amount added to the diagonal.

    K counts as positive definite when dpotrf succeeds and every squared pivot
    exceeds :func:`rank_tolerance` (a factor that dpotrf accepts but whose
    smallest pivot is rounding, as for duplicated inputs without noise, would
    give K^-1 y of magnitude 1 / eps silently). Otherwise the jitter ladder
    starts at 1e-10 x max_i K_ii, scikit-learn's default ``alpha`` relative to
    the kernel's scale (so that a jittered model is conditioned no worse than
    a default scikit-learn one; the smallest amount that passes the rank test,
    10 n eps max_i K_ii, would leave a condition number near 1 / (n eps) and
    predictions with errors of order 1e-3), and grows by ``growth`` up to the
    bound, 1e-6 x max_i K_ii, five steps in all. GPy's ``jitchol`` climbs
    from 1e-6 x mean(diag K) to 1e-2 x; fastgp stops where the added noise
    would start to change the model rather than its rounding, and says so.

    Raises
    ------
    NonFiniteMatrixError
        K holds NaN or infinity (jitter cannot help).
    NotPositiveDefiniteError
        Not positive definite even at the bound; ``.jitter`` is the largest
        amount tried.
    """
    n = B.shape[0]
    fill(B, 0.0)
    diag = buffer.diagonal(B)
    if not np.isfinite(diag).all():
        raise NonFiniteMatrixError("the kernel matrix has non-finite diagonal entries.")
    max_diag = float(diag.max()) if n else 0.0
    tol = rank_tolerance(n, max_diag)
    bound = max_relative_jitter * max_diag
    jitter = 0.0
    while True:
        failure = _try_cholesky(B, tol, buffer)
        if failure is None:
            return jitter
        first = max(min_relative_jitter * max_diag, 10.0 * tol)
        following = first if jitter == 0.0 else jitter * growth
        if not (0.0 < following <= bound * (1.0 + 1e-9)):  # rounding of the steps
            failure.jitter = jitter
            raise failure
        jitter = following
        fill(B, jitter)
        if jitter == first and not buffer.lower_is_finite(B):
            raise NonFiniteMatrixError("the kernel matrix has non-finite entries.")


def _try_cholesky(B, tol, buffer=HostFactor):
    """The factor in place; None on success, else the NotPositiveDefiniteError."""
    try:
        buffer.factor(B)
    except NotPositiveDefiniteError as exc:
        return exc
    pivots = buffer.diagonal(B)
    smallest = int(np.argmin(pivots)) if len(pivots) else 0
    if len(pivots) and not pivots[smallest] ** 2 > tol:
        exc = NotPositiveDefiniteError(smallest + 1, B.shape[0])
        exc.args = (
            f"the kernel matrix is singular to working precision: its pivot "
            f"{smallest + 1} (of {B.shape[0]}) squared, {pivots[smallest] ** 2:.3g}, "
            f"is below n eps max(diag K) = {tol:.3g}.",
        )
        return exc
    return None


# ------------------------------------------------- float32 factors in a buffer
# Single-precision doors for Newton's early iterations in the classifier
# (docs/gpc.md, "Float32 early iterations"): the factor lives in a strided
# float32 view of a float64 buffer's lower triangle, which
# scipy.linalg.lapack's wrappers would copy, so the routines run through
# fastgp._linalg.blocked's pointer calls with the view's leading dimension.


def float32_lower_view(B):
    """An (n, n) float32 view that lies inside the lower triangle (diagonal
    included) of ``B`` (n, n) float64 F-contiguous, with a column stride of
    2n float32 elements: element (i, j), i >= j, is 4 (n + i + 2 n j) bytes
    from B's start, in float64 column j at row (n + i) // 2 >= j. Only the
    view's lower triangle may be used; B's strict upper triangle is never
    touched through it."""
    _require_fortran(B, "float32_lower_view")
    n = B.shape[0]
    words = B.ravel(order="F").view(np.float32)  # a view: B is F-contiguous
    return words.reshape((2 * n, n), order="F")[n:, :]


def cholesky_float32_in_place(A):
    """Overwrite the lower triangle of ``A`` (n, n) float32, unit row stride
    and any column stride >= n (such as :func:`float32_lower_view`), with the
    Cholesky factor of the symmetric matrix whose lower triangle it holds
    (:func:`fastgp._linalg.blocked.cholesky_lower_float32`: reference
    LAPACK's blocked spotrf over ssyrk, sgemm and strsm). Raises
    NotPositiveDefiniteError (A partly overwritten)."""
    info = blocked_lapack.cholesky_lower_float32(A)
    if info > 0:
        raise NotPositiveDefiniteError(info, A.shape[0])
    return A


def cho_solve_float32(A, y):
    """(L L^T)^-1 y (n,) float64, with ``A`` (n, n) float32 holding the lower
    factor L from :func:`cholesky_float32_in_place` (spotrs, in single
    precision: relative error about cond(L L^T) x 6e-8). ``y`` is not
    modified."""
    x = np.array(y, dtype=np.float32, order="F", copy=True)
    blocked_lapack.solve_float32(A, x)
    return x.astype(np.float64)


def symmetric_matvec(A, x, lower, diag=None):
    """S @ x (n,) float64 for the symmetric S whose off-diagonal entries are
    the strict lower (``lower=True``) or strict upper triangle of ``A``
    (n, n) float64 F-contiguous and whose diagonal is ``diag`` (None: A's
    own): one dsymv (one pass over the triangle, no copy). The other
    triangle is not read. With ``diag`` given, A's diagonal is swapped for
    it during the call and its bits restored after it (they may belong to a
    float32 view such as :func:`float32_lower_view`)."""
    _require_fortran(A, "dsymv")
    x = np.ascontiguousarray(x, dtype=np.float64)
    out = np.zeros(A.shape[0])
    if A.shape[0] == 0:
        return out
    saved = None
    if diag is not None:
        saved = np.diagonal(A.view(np.uint64)).copy()
        np.fill_diagonal(A, diag)
    try:
        blocked_lapack.symmetric_matvec(A, x, out, lower)
    finally:
        if saved is not None:
            np.fill_diagonal(A.view(np.uint64), saved)
    return out
