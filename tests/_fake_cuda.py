"""Stand-ins for CuPy and nvmath-python's cuBLAS and cuSOLVER bindings, so
that fastgp._linalg.cuda_tiles.CudaTiles runs, and is checked argument by
argument, on a machine without a GPU (tests/_linalg/test_linalg_device_blocked.py).

- :class:`FakeCupy` makes "device" arrays in host memory: NumPy arrays whose
  ``data.ptr`` is their address, each inside a registered allocation.
- :class:`FakeBindings` records every call (name, arguments) and, where
  ``memory`` is given, carries it out as cuBLAS or cuSOLVER would: it turns
  each (pointer, rows, columns, leading dimension) back into a NumPy view of
  the registered allocation that holds it (an address outside every
  allocation, or a matrix running past its end, fails the test instead of
  touching memory) and computes the routine's result there. A mistake in
  CudaTiles' pointers, leading dimensions, transposes or argument order
  then shows as a wrong number, not only as a different tuple.

The emulation follows the bindings' signatures in nvmath-python's
``nvmath/bindings/cublas.pyx`` and ``cusolverDn.pyx`` (cuBLAS's out-of-place
dtrmm, C = alpha op(A) B, included) and implements the lower triangle only,
which is all that CudaTiles asks for: an UPPER fill mode fails the test.
"""

import ctypes
import types

import numpy as np
from scipy.linalg import blas, lapack

ALIGN = 256


class DeviceArray(np.ndarray):
    """A NumPy array with CuPy's ``data.ptr``: its first element's address."""

    @property
    def data(self):
        return types.SimpleNamespace(ptr=self.ctypes.data)


class FakeCupy:
    """The few functions of CuPy that CudaTiles and the algorithms use, on
    host memory, with a registry of every allocation for FakeBindings."""

    float64, int32, uint8 = np.float64, np.int32, np.uint8

    def __init__(self, stream=0x5000):
        self.allocations = []  # (start address, raw uint8 buffer)
        self.stream = stream
        self.synchronized = 0
        self.cuda = types.SimpleNamespace(get_current_stream=self._current_stream)

    def _current_stream(self):
        return types.SimpleNamespace(ptr=self.stream, synchronize=self._synchronize)

    def _synchronize(self):
        self.synchronized += 1

    def empty(self, shape, dtype=np.float64, order="C"):
        shape = (shape,) if np.ndim(shape) == 0 else tuple(shape)
        dtype = np.dtype(dtype)
        nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
        raw = np.zeros(nbytes + ALIGN, dtype=np.uint8)
        offset = -raw.ctypes.data % ALIGN
        self.allocations.append((raw.ctypes.data + offset, raw[offset:offset + nbytes]))
        array = np.ndarray(shape, dtype, buffer=raw, offset=offset, order=order)
        array.fill(np.nan if dtype.kind == "f" else 0)  # garbage, as cudaMalloc's
        return array.view(DeviceArray)

    def zeros(self, shape, dtype=np.float64):
        out = self.empty(shape, dtype)
        out[...] = 0
        return out

    def array(self, Y, dtype=np.float64, order="K", copy=True):
        Y = np.asarray(Y, dtype=dtype)
        out = self.empty(Y.shape, dtype, order="F" if order == "F" else "C")
        out[...] = Y
        return out

    def asnumpy(self, x):
        return np.array(x)

    diagonal = staticmethod(np.diagonal)

    def view(self, ptr, shape, strides, dtype):
        """A NumPy view of ``shape`` and ``strides`` (bytes) at ``ptr``,
        inside one allocation; AssertionError if none holds it whole."""
        dtype = np.dtype(dtype)
        extent = dtype.itemsize + sum((s - 1) * st for s, st in zip(shape, strides))
        for start, raw in self.allocations:
            if start <= ptr and ptr + extent <= start + raw.nbytes:
                return np.ndarray(shape, dtype, buffer=raw, offset=ptr - start,
                                  strides=strides)
        raise AssertionError(f"{shape} at {ptr:#x} lies outside every device allocation")


def _host_double(ptr):
    return ctypes.c_double.from_address(ptr).value


class FakeBindings:
    """``cublas`` and ``cusolver`` stand-ins (one object serves as either):
    every call is appended to :attr:`calls` as (name, args); with ``memory``
    (a :class:`FakeCupy`) the routines are carried out on its allocations.
    Scalars (alpha, beta) are read from their host addresses at call time
    and recorded as values in :attr:`scalars`."""

    LWORK_EXTRA = 5  # the workspaces asked for: n + 5 elements, 8 n + 40 bytes

    def __init__(self, memory=None):
        self.memory = memory
        self.calls = []
        self.scalars = []
        self._handles = 0

    def _record(self, name, *args):
        self.calls.append((name, args))

    def names(self):
        return [name for name, _ in self.calls]

    # ------------------------------------------------------------ handles
    def create(self):
        self._handles += 1
        self._record("create")
        return 0x1000 * self._handles

    create_params = create

    def destroy(self, handle):
        self._record("destroy", handle)

    def destroy_params(self, params):
        self._record("destroy_params", params)

    def set_stream(self, handle, stream):
        self._record("set_stream", handle, stream)

    def set_pointer_mode(self, handle, mode):
        self._record("set_pointer_mode", handle, mode)

    # ------------------------------------------------------------ memory
    def _matrix(self, ptr, rows, cols, ld):
        assert ld >= max(1, rows), f"leading dimension {ld} < rows {rows}"
        return self.memory.view(ptr, (rows, cols), (8, 8 * ld), np.float64)

    def _info(self, ptr, value):
        self.memory.view(ptr, (1,), (4,), np.int32)[0] = value

    def _workspace(self, ptr, nbytes):
        self.memory.view(ptr, (max(nbytes, 1),), (1,), np.uint8)  # inside an allocation

    @staticmethod
    def _disjoint(out, *inputs):
        assert not any(np.shares_memory(out, x) for x in inputs), "output overlaps an input"

    @staticmethod
    def _op(M, trans):
        assert trans in (0, 1)
        return M.T if trans else M

    @staticmethod
    def _triangle(A, uplo, diag):
        assert uplo == 0, "the fake implements the lower triangle only"
        assert diag == 0, "the fake implements non-unit triangles only"
        return np.tril(A)

    # ------------------------------------------------------------ cuBLAS
    def dgemm(self, handle, transa, transb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc):
        self._record("dgemm", handle, transa, transb, m, n, k, alpha, a, lda, b, ldb,
                     beta, c, ldc)
        alpha, beta = _host_double(alpha), _host_double(beta)
        self.scalars.append((alpha, beta))
        if self.memory is None:
            return
        A = self._matrix(a, *((m, k) if transa == 0 else (k, m)), lda)
        B = self._matrix(b, *((k, n) if transb == 0 else (n, k)), ldb)
        C = self._matrix(c, m, n, ldc)
        self._disjoint(C, A, B)
        product = alpha * (self._op(A, transa) @ self._op(B, transb))
        C[...] = product + beta * C if beta else product

    def dsyrk(self, handle, uplo, trans, n, k, alpha, a, lda, beta, c, ldc):
        self._record("dsyrk", handle, uplo, trans, n, k, alpha, a, lda, beta, c, ldc)
        alpha, beta = _host_double(alpha), _host_double(beta)
        self.scalars.append((alpha, beta))
        if self.memory is None:
            return
        assert uplo == 0, "the fake implements the lower triangle only"
        A = self._matrix(a, *((n, k) if trans == 0 else (k, n)), lda)
        C = self._matrix(c, n, n, ldc)
        self._disjoint(C, A)
        opA = self._op(A, trans)
        product = alpha * (opA @ opA.T)
        lower = np.tril_indices(n)
        C[lower] = (product + beta * C)[lower] if beta else product[lower]

    def _triangular_operands(self, alpha, side, m, n, a, lda, b, ldb):
        """(alpha, A, B) of a dtrsm or dtrmm (A the triangle, B the m x n
        operand), alpha recorded; None where no memory is emulated."""
        alpha = _host_double(alpha)
        self.scalars.append((alpha,))
        if self.memory is None:
            return None
        order = m if side == 0 else n
        A = self._matrix(a, order, order, lda)
        B = self._matrix(b, m, n, ldb)
        self._disjoint(B, A)
        return alpha, A, B

    def dtrsm(self, handle, side, uplo, trans, diag, m, n, alpha, a, lda, b, ldb):
        self._record("dtrsm", handle, side, uplo, trans, diag, m, n, alpha, a, lda, b, ldb)
        operands = self._triangular_operands(alpha, side, m, n, a, lda, b, ldb)
        if operands is None:
            return
        alpha, A, B = operands
        self._triangle(A, uplo, diag)
        B[...] = blas.dtrsm(alpha, np.array(A), np.array(B), side=side, lower=1,
                            trans_a=trans, diag=0)

    def dtrmm(self, handle, side, uplo, trans, diag, m, n, alpha, a, lda, b, ldb, c, ldc):
        self._record("dtrmm", handle, side, uplo, trans, diag, m, n, alpha, a, lda, b, ldb,
                     c, ldc)
        operands = self._triangular_operands(alpha, side, m, n, a, lda, b, ldb)
        if operands is None:
            return
        alpha, A, B = operands
        C = self._matrix(c, m, n, ldc)
        T = self._op(self._triangle(A, uplo, diag), trans)
        C[...] = alpha * (T @ B if side == 0 else B @ T)  # cuBLAS: out of place

    # ------------------------------------------------------------ cuSOLVER
    def _lapack(self, name, routine, n, a, lda, info):
        """``routine`` on a copy of the (n, n) lower triangle at ``a``; the
        lower triangle written back, the info to the device int at ``info``."""
        if self.memory is None:
            return
        A = self._matrix(a, n, n, lda)
        result, code = routine(np.array(A, order="F"))
        lower = np.tril_indices(n)
        A[lower] = result[lower]
        self._info(info, code)

    def _legacy_size(self, name, handle, uplo, n, a, lda):
        self._record(f"d{name}_buffer_size", handle, uplo, n, a, lda)
        assert uplo == 0, "the fake implements the lower triangle only"
        return n + self.LWORK_EXTRA

    def _legacy(self, name, routine, handle, uplo, n, a, lda, work, lwork, info):
        self._record(f"d{name}", handle, uplo, n, a, lda, work, lwork, info)
        assert uplo == 0, "the fake implements the lower triangle only"
        assert lwork >= n + self.LWORK_EXTRA, f"lwork {lwork} below the size asked for"
        if self.memory is not None:
            self._workspace(work, 8 * lwork)
        self._lapack(name, routine, n, a, lda, info)

    def dpotrf_buffer_size(self, *args):
        return self._legacy_size("potrf", *args)

    def dpotri_buffer_size(self, *args):
        return self._legacy_size("potri", *args)

    def dlauum_buffer_size(self, *args):
        return self._legacy_size("lauum", *args)

    def dpotrf(self, *args):
        self._legacy("potrf", lambda c: lapack.dpotrf(c, lower=1, clean=0), *args)

    def dpotri(self, *args):
        self._legacy("potri", lambda c: lapack.dpotri(c, lower=1), *args)

    def dlauum(self, *args):
        self._legacy("lauum", lambda c: lapack.dlauum(c, lower=1), *args)

    @staticmethod
    def _x_sizes(n):
        return 8 * n + 8 * FakeBindings.LWORK_EXTRA, 24

    def _x_work(self, n, dwork, dbytes, hwork, hbytes):
        need_device, need_host = self._x_sizes(n)
        assert dbytes >= need_device and hbytes >= need_host, "workspace below its size"
        assert hwork != 0
        if self.memory is not None:
            self._workspace(dwork, dbytes)

    def xtrtri_buffer_size(self, handle, uplo, diag, n, data_type, a, lda):
        self._record("xtrtri_buffer_size", handle, uplo, diag, n, data_type, a, lda)
        return self._x_sizes(n)

    def xtrtri(self, handle, uplo, diag, n, data_type, a, lda, dwork, dbytes, hwork, hbytes,
               info):
        self._record("xtrtri", handle, uplo, diag, n, data_type, a, lda, dwork, dbytes,
                     hwork, hbytes, info)
        assert (uplo, diag, data_type) == (0, 0, 1), "lower, non-unit, CUDA_R_64F"
        self._x_work(n, dwork, dbytes, hwork, hbytes)
        self._lapack("trtri", lambda c: lapack.dtrtri(c, lower=1, unitdiag=0), n, a, lda,
                     info)

    def xpotrf_buffer_size(self, handle, params, uplo, n, data_type, a, lda, compute_type):
        self._record("xpotrf_buffer_size", handle, params, uplo, n, data_type, a, lda,
                     compute_type)
        return self._x_sizes(n)

    def xpotrf(self, handle, params, uplo, n, data_type, a, lda, compute_type, dwork, dbytes,
               hwork, hbytes, info):
        self._record("xpotrf", handle, params, uplo, n, data_type, a, lda, compute_type,
                     dwork, dbytes, hwork, hbytes, info)
        assert (uplo, data_type, compute_type) == (0, 1, 1), "lower, CUDA_R_64F"
        self._x_work(n, dwork, dbytes, hwork, hbytes)
        self._lapack("potrf", lambda c: lapack.dpotrf(c, lower=1, clean=0), n, a, lda, info)
