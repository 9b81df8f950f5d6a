"""In-place LAPACK steps on the one N x N workspace (DESIGN.md steps 2 to 4).

scipy.linalg.lapack's wrappers copy their input unless it is float64,
Fortran-contiguous and passed with the overwrite flag. A silent copy would
double fastgp's memory, so every wrapper here checks that LAPACK handed back
the very buffer it was given and raises otherwise.
"""

import numpy as np
from scipy.linalg import lapack

__all__ = [
    "NotPositiveDefiniteError",
    "cholesky_in_place",
    "cho_solve_factor",
    "cho_inverse_in_place",
    "solve_lower_in_place",
    "log_det_from_factor",
]


class NotPositiveDefiniteError(np.linalg.LinAlgError):
    """dpotrf found a leading minor that is not positive definite.

    Attributes
    ----------
    order : int
        The order (1-based) of the first failing leading minor, LAPACK's info.
    """

    def __init__(self, order, n):
        self.order = order
        super().__init__(
            f"the kernel matrix is not positive definite: its leading minor of "
            f"order {order} (of {n}) is not."
        )


def _check_same(result, buffer, routine):
    if result is not buffer and not np.shares_memory(result, buffer):
        raise RuntimeError(
            f"{routine} copied its {buffer.shape} argument instead of working in "
            "place; the buffer must be float64 and Fortran-contiguous."
        )


def cholesky_in_place(B, clean=False):
    """Overwrite the lower triangle of ``B`` (n, n) float64 F-contiguous with
    the Cholesky factor L of the symmetric matrix whose lower triangle it holds
    (dpotrf). The strict upper triangle is left as it was unless ``clean``,
    which zeroes it.

    Raises NotPositiveDefiniteError (B is then partly overwritten).
    """
    L, info = lapack.dpotrf(B, lower=1, clean=1 if clean else 0, overwrite_a=1)
    _check_same(L, B, "dpotrf")
    if info > 0:
        raise NotPositiveDefiniteError(info, B.shape[0])
    if info < 0:
        raise ValueError(f"dpotrf: illegal argument {-info}")
    return B


def cho_solve_factor(L, Y):
    """Return K^-1 Y (n, T) C-contiguous, with L (n, n) F-contiguous holding
    the lower Cholesky factor of K (dpotrs). ``Y`` is not modified."""
    Yf = np.array(Y, dtype=np.float64, order="F", copy=True)
    X, info = lapack.dpotrs(L, Yf, lower=1, overwrite_b=1)
    if info != 0:
        raise ValueError(f"dpotrs: illegal argument {-info}")
    return np.ascontiguousarray(X)


def cho_inverse_in_place(L):
    """Overwrite the lower triangle of ``L`` (the Cholesky factor, F-contiguous)
    with the lower triangle of K^-1 (dpotri)."""
    Kinv, info = lapack.dpotri(L, lower=1, overwrite_c=1)
    _check_same(Kinv, L, "dpotri")
    if info != 0:
        raise NotPositiveDefiniteError(info, L.shape[0])
    return L


def solve_lower_in_place(L, B):
    """Overwrite ``B`` (n, m) float64 F-contiguous with L^-1 B (dtrtrs), L the
    lower triangle of an (n, n) F-contiguous array."""
    X, info = lapack.dtrtrs(L, B, lower=1, trans=0, unitdiag=0, overwrite_b=1)
    _check_same(X, B, "dtrtrs")
    if info != 0:
        raise np.linalg.LinAlgError(f"dtrtrs failed with info={info}")
    return B


def log_det_from_factor(L):
    """log |K| = 2 sum_i log L_ii for the lower Cholesky factor L of K."""
    return 2.0 * np.sum(np.log(np.diagonal(L)))
