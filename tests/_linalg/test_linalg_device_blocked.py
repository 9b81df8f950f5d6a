"""The GPU's blocked factor, inverse and solves (fastgp._linalg.device_blocked)
and the tile calls they are written on (tile_calls, host_tiles, cuda_tiles).

Every algorithm runs through three implementations of the tile calls:

- "host": HostTiles (SciPy's BLAS and LAPACK on NumPy views);
- "emulated": CudaTiles itself, with stand-ins for CuPy and nvmath's cuBLAS
  and cuSOLVER bindings that carry out each call on host memory from its
  raw pointers and leading dimensions (tests/_fake_cuda.py), so that CI
  checks CudaTiles' argument mapping by the numbers, without a GPU;
- "cuda": CudaTiles on a real GPU (marked gpu: FASTGP_TEST_DEVICE=cuda runs
  it; an expected skip elsewhere).

Small N (1 to 200) and tiny blocks (1 to 64), N not a multiple of the block,
N below and equal to it, against NumPy and SciPy to 1e-12 relative; the
strict upper triangle is NaN on entry and must stay NaN.
"""

import numpy as np
import pytest
import scipy.linalg

from fastgp._linalg import device_blocked
from fastgp._linalg.cuda_tiles import CUSOLVER_ELEMENT_LIMIT, CudaTiles, device_pointer
from fastgp._linalg.device_blocked import (DEFAULT_BLOCK, cho_inverse_in_place, cho_solve,
                                           cho_solve_in_place, cholesky_in_place,
                                           factor_diagonal, info_entries,
                                           solve_lower_in_place)
from fastgp._linalg.host_tiles import HostTiles
from fastgp._linalg.tile_calls import (gemm_shape, info_slot, layout, operation, side,
                                       square_order, syrk_shape, triangular_shape)
from fastgp.exceptions import NotPositiveDefiniteError

from _fake_cuda import FakeBindings, FakeCupy

RTOL = 1e-12

#: (n, block): several blocks with a short last one, n a multiple of the
#: block, n < block, n = block, 1 x 1, block 1.
SHAPES = [(1, 1), (5, 8), (16, 16), (20, 3), (20, 8), (37, 8), (64, 16), (100, 7),
          (129, 32), (200, 16), (200, 64)]


def _emulated():
    memory = FakeCupy()
    return CudaTiles(xp=memory, cublas=FakeBindings(memory), cusolver=FakeBindings(memory))


KINDS = ["host", "emulated", pytest.param("cuda", marks=pytest.mark.gpu)]


@pytest.fixture(params=KINDS)
def tiles(request):
    if request.param == "host":
        yield HostTiles()
        return
    made = _emulated() if request.param == "emulated" else CudaTiles()
    yield made
    made.close()


class Recording:
    """The tiles, every method call recorded as (name, shapes or values)."""

    def __init__(self, tiles):
        self._tiles = tiles
        self.xp = tiles.xp
        self.calls = []

    def __getattr__(self, name):
        method = getattr(self._tiles, name)

        def call(*args):
            self.calls.append((name, [tuple(a.shape) if hasattr(a, "shape") else a
                                      for a in args]))
            return method(*args)
        return call

    def named(self, name):
        return [args for called, args in self.calls if called == name]


def _spd(n, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, n + 3))
    return X @ X.T / (n + 3) + 0.5 * np.eye(n)


def _lower_with_nan_upper(M):
    A = np.asfortranarray(np.tril(M))
    A[np.triu_indices(len(M), 1)] = np.nan
    return A


def _buffer(tiles, M):
    """M's lower triangle, NaN above it, as the tiles' (n, n) F-ordered array."""
    return tiles.array(_lower_with_nan_upper(M))


def _assert_lower(tiles, B, expected):
    """B's lower triangle matches ``expected``'s to RTOL (relative to its
    largest entry) and every entry above the diagonal is still NaN."""
    got = tiles.to_host(B)
    n = len(expected)
    upper = np.triu_indices(n, 1)
    assert np.isnan(got[upper]).all(), "the strict upper triangle was written"
    scale = np.max(np.abs(np.tril(expected))) if n else 1.0
    np.testing.assert_allclose(np.tril(np.nan_to_num(got)), np.tril(expected),
                               rtol=0, atol=RTOL * scale)


# ---------------------------------------------------------------- the factor
@pytest.mark.parametrize("n, block", SHAPES)
@pytest.mark.parametrize("syrk_order", [None, 1, 40, 10**6])
def test_blocked_factor_matches_numpy_and_keeps_the_upper_triangle(tiles, n, block,
                                                                    syrk_order):
    K = _spd(n)
    B = _buffer(tiles, K)
    assert cholesky_in_place(tiles, B, "blocked", block, syrk_order) is B
    _assert_lower(tiles, B, np.linalg.cholesky(K))


@pytest.mark.parametrize("n", [1, 2, 37, 128])
def test_whole_factor_matches_numpy_and_keeps_the_upper_triangle(tiles, n):
    K = _spd(n, seed=3)
    B = _buffer(tiles, K)
    cholesky_in_place(tiles, B)  # "whole" by default
    _assert_lower(tiles, B, np.linalg.cholesky(K))


@pytest.mark.parametrize("method, block", [("whole", 8), ("blocked", 8), ("blocked", 1),
                                           ("blocked", 64)])
@pytest.mark.parametrize("failing", [1, 9, 30, 50])
def test_factor_reports_the_first_failing_leading_minor(tiles, method, block, failing):
    # K's leading minors are positive definite up to order failing - 1 and
    # not from ``failing`` on: its (failing - 1)-th diagonal entry is negative
    K = _spd(50, seed=4)
    K[failing - 1, failing - 1] = -1.0
    B = _buffer(tiles, K)
    with pytest.raises(NotPositiveDefiniteError) as raised:
        cholesky_in_place(tiles, B, method, block)
    assert raised.value.order == failing
    assert f"order {failing} (of 50)" in str(raised.value)


# ---------------------------------------------------------------- the inverse
@pytest.mark.parametrize("n, block", SHAPES)
@pytest.mark.parametrize("syrk_order", [None, 2, 10**6])
def test_inverse_matches_numpy_inv_and_keeps_the_upper_triangle(tiles, n, block, syrk_order):
    K = _spd(n, seed=1)
    B = _buffer(tiles, np.linalg.cholesky(K))
    assert cho_inverse_in_place(tiles, B, block, syrk_order) is B
    _assert_lower(tiles, B, np.linalg.inv(K))


@pytest.mark.parametrize("n, block", [(37, 8), (64, 64), (200, 16)])
def test_factor_then_inverse_in_one_buffer(tiles, n, block):
    # the one-buffer plan's steps 2 and 4: K in, K^-1's lower triangle out
    K = _spd(n, seed=2)
    B = _buffer(tiles, K)
    cholesky_in_place(tiles, B, "blocked", block)
    cho_inverse_in_place(tiles, B, block)
    _assert_lower(tiles, B, np.linalg.inv(K))


def test_inverse_refuses_a_zero_pivot_and_leaves_the_buffer(tiles):
    L = np.linalg.cholesky(_spd(30, seed=5))
    L[17, 17] = 0.0
    B = _buffer(tiles, L)
    with pytest.raises(NotPositiveDefiniteError) as raised:
        cho_inverse_in_place(tiles, B, 8)
    assert raised.value.order == 18
    _assert_lower(tiles, B, L)


# ---------------------------------------------------------------- the solves
@pytest.mark.parametrize("n, T", [(1, 1), (37, 1), (64, 3), (200, 5)])
def test_solves_and_the_diagonal_match_scipy(tiles, n, T):
    rng = np.random.default_rng(n)
    K = _spd(n, seed=6)
    L = np.linalg.cholesky(K)
    B = _buffer(tiles, L)
    Y = np.asfortranarray(rng.standard_normal((n, T)))
    Y_before = Y.copy()

    A = cho_solve(tiles, B, Y)
    expected = scipy.linalg.cho_solve((L, True), Y)
    np.testing.assert_allclose(tiles.to_host(A), expected, rtol=RTOL,
                               atol=RTOL * np.abs(expected).max())
    np.testing.assert_array_equal(Y, Y_before)  # Y is not modified

    V = tiles.array(Y)
    assert solve_lower_in_place(tiles, B, V) is V
    expected = scipy.linalg.solve_triangular(L, Y, lower=True)
    np.testing.assert_allclose(tiles.to_host(V), expected, rtol=RTOL,
                               atol=RTOL * np.abs(expected).max())

    V = tiles.array(Y)
    assert cho_solve_in_place(tiles, B, V) is V
    np.testing.assert_allclose(tiles.to_host(V), tiles.to_host(A), rtol=RTOL,
                               atol=RTOL * np.abs(expected).max())

    diagonal = factor_diagonal(tiles, B)
    assert isinstance(diagonal, np.ndarray) and diagonal.dtype == np.float64
    np.testing.assert_array_equal(diagonal, np.diag(L))
    _assert_lower(tiles, B, L)  # the factor is only read


# ---------------------------------------------------------------- workspace and calls
@pytest.mark.parametrize("n, block", [(20, 3), (64, 16), (64, 64), (129, 32)])
def test_workspace_is_the_info_vector_alone(tiles, n, block):
    # the stated bound: no float64 workspace at all (nothing through empty),
    # and one int32 info vector of info_entries(n, block, routine)
    recording = Recording(tiles)
    B = _buffer(tiles, _spd(n))
    for method in ("blocked", "whole"):
        recording.calls.clear()
        cholesky_in_place(recording, tiles.array(tiles.to_host(B)), method, block)
        assert not recording.named("empty")
        assert recording.named("info_vector") == [[info_entries(n, block, method)]]
    recording.calls.clear()
    cholesky_in_place(tiles, B, "blocked", block)
    cho_inverse_in_place(recording, B, block)
    assert not recording.named("empty")
    assert recording.named("info_vector") == [[info_entries(n, block, "inverse")]]
    assert info_entries(n, block, "inverse") == 2 * -(-n // block)


def test_host_tiles_record_their_allocations():
    host = HostTiles()
    host.empty((3, 2))
    host.info_vector(4)
    assert host.allocations == [("empty", (3, 2)), ("info", (4,))]


@pytest.mark.parametrize("n, block", [(64, 16), (129, 32)])
def test_cusolver_runs_on_diagonal_blocks_only_and_updates_are_one_call_per_block(n, block):
    recording = Recording(HostTiles())
    B = HostTiles().array(_lower_with_nan_upper(_spd(n)))
    blocks = -(-n // block)
    cholesky_in_place(recording, B, "blocked", block, syrk_order=10**6)
    cho_inverse_in_place(recording, B, block, syrk_order=10**6)
    for name in ("potrf", "trtri", "lauum"):
        shapes = [args[0] for args in recording.named(name)]
        assert len(shapes) == blocks
        assert all(r == c <= block for r, c in shapes)
    # with dsyrk unsplit: per block column one dtrsm and one dsyrk in the
    # factor; one dtrmm (panel) and, past the first, one dgemm and one dtrmm
    # in the triangular inverse; one dsyrk and one dtrmm in the Gram step
    assert len(recording.named("trsm")) == blocks - 1
    assert len(recording.named("syrk")) == 2 * (blocks - 1)
    assert len(recording.named("gemm")) == blocks - 2
    assert len(recording.named("trmm")) == 3 * (blocks - 1)
    assert max(args[-1][0] for args in recording.named("gemm")) == n - 2 * block


@pytest.mark.parametrize("m, order, leaves", [(16, 4, 4), (17, 4, 5), (4, 4, 1), (9, 8, 2)])
@pytest.mark.parametrize("trans", ["N", "T"])
def test_lower_update_splits_into_dsyrk_of_bounded_order_and_dgemm(m, order, leaves, trans):
    rng = np.random.default_rng(m)
    A = np.asfortranarray(rng.standard_normal((m, 5) if trans == "N" else (5, m)))
    C = _lower_with_nan_upper(_spd(m))
    expected = np.tril(C) + (A @ A.T if trans == "N" else A.T @ A)
    recording = Recording(HostTiles())
    device_blocked._lower_update(recording, trans, 1.0, A, C, order)
    assert [args[-1][0] <= order for args in recording.named("syrk")] == [True] * leaves
    assert len(recording.named("gemm")) == leaves - 1
    assert np.isnan(C[np.triu_indices(m, 1)]).all()
    np.testing.assert_allclose(np.tril(np.nan_to_num(C)), np.tril(expected), rtol=1e-13)


def test_host_tiles_refuse_an_output_that_overlaps_an_input():
    host = HostTiles()
    B = host.array(np.eye(6))
    with pytest.raises(ValueError, match="overlaps"):
        host.gemm("N", "N", 1.0, B[:, :3], B[:3, :3], 1.0, B[:, 2:5])
    with pytest.raises(ValueError, match="overlaps"):
        host.trmm("L", "N", 1.0, B[:3, :3], B[:3, 2:])


# ---------------------------------------------------------------- bad input
def test_bad_buffers_raise_value_error(tiles):
    K = _spd(6)
    for array in (np.ascontiguousarray(K),                   # C-ordered
                  np.asfortranarray(K, dtype=np.float32),    # not float64
                  np.asfortranarray(K[:, :5]),               # not square
                  np.ascontiguousarray(K[0])):               # not 2-D
        order = "F" if array.ndim == 2 and not array.flags.c_contiguous else "C"
        B = tiles.xp.array(array, dtype=array.dtype, order=order)  # on the tiles' device
        for call in (lambda: cholesky_in_place(tiles, B),
                     lambda: cholesky_in_place(tiles, B, "blocked", 2),
                     lambda: cho_inverse_in_place(tiles, B, 2),
                     lambda: factor_diagonal(tiles, B)):
            with pytest.raises(ValueError):
                call()


def test_read_only_buffer_and_bad_parameters_raise_value_error():
    host = HostTiles()
    K = np.asfortranarray(_spd(6))
    read_only = K.copy(order="F")
    read_only.flags.writeable = False
    with pytest.raises(ValueError, match="writeable"):
        cholesky_in_place(host, read_only)
    for kwargs in ({"method": "magma"}, {"block": 0}, {"block": 2.5},
                   {"method": "blocked", "syrk_order": 0}):
        with pytest.raises(ValueError):
            cholesky_in_place(host, K.copy(order="F"), **kwargs)
    with pytest.raises(ValueError):
        cho_inverse_in_place(host, np.linalg.cholesky(K).copy(order="F"), block=-1)
    L = np.asfortranarray(np.linalg.cholesky(K))
    with pytest.raises(ValueError):  # Y of the wrong length
        cho_solve(host, L, np.ones((5, 1)))
    with pytest.raises(ValueError):  # Y not 2-D
        cho_solve(host, L, np.ones(6))
    np.testing.assert_array_equal(K, np.asfortranarray(_spd(6)))


# ---------------------------------------------------------------- tile_calls' arithmetic
class FakeMatrix:
    """Anything with CuPy's attributes: shape, strides (bytes), dtype and
    data.ptr; sub-blocks by ``block``."""

    def __init__(self, shape, strides, ptr=0x10000, dtype=np.float64, writeable=None):
        self.shape, self.strides, self.dtype = tuple(shape), tuple(strides), np.dtype(dtype)
        self.data = type("Pointer", (), {"ptr": ptr})()
        if writeable is not None:
            self.flags = type("Flags", (), {"writeable": writeable})()

    def block(self, i, j, rows, cols):
        ptr = self.data.ptr + i * self.strides[0] + j * self.strides[1]
        return FakeMatrix((rows, cols), self.strides, ptr, self.dtype)


def _buffer_of(n, ptr=0x10000):
    return FakeMatrix((n, n), (8, 8 * n), ptr)


def test_layout_reads_the_leading_dimension_of_blocks_and_columns():
    big = _buffer_of(100)
    assert layout(big) == (100, 100, 100)
    assert layout(big.block(10, 20, 30, 40)) == (30, 40, 100)
    assert layout(FakeMatrix((7, 1), (8, 8))) == (7, 1, 7)     # one column: ld = rows
    assert layout(FakeMatrix((7, 1), (8, 123))) == (7, 1, 7)   # its stride unread
    assert layout(FakeMatrix((1, 5), (40, 8))) == (1, 5, 1)    # one row of a C array
    assert layout(FakeMatrix((0, 5), (8, 8))) == (0, 5, 1)
    assert square_order(big.block(3, 3, 9, 9)) == 9


@pytest.mark.parametrize("matrix, message", [
    (FakeMatrix((4, 4), (32, 8)), "Fortran-ordered"),             # C order
    (FakeMatrix((4, 4), (8, 24)), "leading dimension"),           # ld 3 < 4 rows
    (FakeMatrix((4, 4), (8, 36)), "leading dimension"),           # not whole elements
    (FakeMatrix((4, 4), (8, -32)), "leading dimension"),          # negative
    (FakeMatrix((4, 4), (4, 16), dtype=np.float32), "float64"),
    (FakeMatrix((4,), (8,)), "2-D"),
    (FakeMatrix((4, 4), (8, 32), writeable=False), "writeable"),
    (FakeMatrix((2**31, 2), (8, 2**34)), "32-bit"),
])
def test_layout_refuses_what_blas_cannot_take(matrix, message):
    with pytest.raises(ValueError, match=message):
        layout(matrix)


def test_shapes_of_the_calls_and_their_letters():
    big = _buffer_of(50)
    A, B, C = big.block(0, 0, 6, 4), big.block(0, 10, 4, 5), big.block(20, 0, 6, 5)
    assert gemm_shape("N", "N", A, B, C) == (6, 5, 4)
    assert gemm_shape("T", "N", big.block(0, 0, 4, 6), B, C) == (6, 5, 4)
    assert gemm_shape("N", "T", A, big.block(0, 0, 5, 4), C) == (6, 5, 4)
    with pytest.raises(ValueError, match="does not fit"):
        gemm_shape("T", "N", A, B, C)
    assert syrk_shape("N", A, big.block(10, 10, 6, 6)) == (6, 4)
    assert syrk_shape("T", A, big.block(10, 10, 4, 4)) == (4, 6)
    with pytest.raises(ValueError, match="does not fit"):
        syrk_shape("N", A, big.block(10, 10, 4, 4))
    with pytest.raises(ValueError, match="square"):
        syrk_shape("N", A, big.block(10, 10, 6, 5))
    assert triangular_shape("L", big.block(0, 0, 6, 6), big.block(0, 6, 6, 3)) == (6, 3)
    assert triangular_shape("R", big.block(0, 0, 3, 3), big.block(0, 6, 6, 3)) == (6, 3)
    with pytest.raises(ValueError, match="does not fit"):
        triangular_shape("R", big.block(0, 0, 6, 6), big.block(0, 6, 6, 3))
    assert (operation("N"), operation("T"), side("L"), side("R")) == (0, 1, 0, 1)
    for bad in ("C", "n", None):
        with pytest.raises(ValueError):
            operation(bad)
        with pytest.raises(ValueError):
            side(bad)


def test_info_slots_and_device_pointers():
    info = FakeMatrix((6,), (4,), dtype=np.int32)
    assert [info_slot(info, slot) for slot in (0, 1, 5)] == [0, 4, 20]
    for slot in (-1, 6):
        with pytest.raises(ValueError, match="outside"):
            info_slot(info, slot)
    with pytest.raises(ValueError, match="int32"):
        info_slot(FakeMatrix((6,), (8,), dtype=np.int64), 0)
    with pytest.raises(ValueError, match="contiguous"):
        info_slot(FakeMatrix((6,), (8,), dtype=np.int32), 0)
    assert device_pointer(_buffer_of(10).block(3, 2, 2, 2)) == 0x10000 + 8 * (3 + 2 * 10)
    with pytest.raises(ValueError, match="aligned"):
        device_pointer(FakeMatrix((2, 2), (8, 16), ptr=0x10004))


# ---------------------------------------------------------------- CudaTiles' calls, argument by argument
def _recorded_tiles(stream=0x5000):
    memory = FakeCupy(stream)
    cublas, cusolver = FakeBindings(), FakeBindings()
    return CudaTiles(xp=memory, cublas=cublas, cusolver=cusolver), memory, cublas, cusolver


def test_cuda_tiles_set_up_their_handles_and_follow_the_current_stream():
    tiles, memory, cublas, cusolver = _recorded_tiles()
    assert cublas.calls == [("create", ()), ("set_pointer_mode", (0x1000, 0))]
    assert cusolver.calls == [("create", ())]
    big = _buffer_of(20)
    tiles.trsm("L", "N", 1.0, big.block(0, 0, 4, 4), big.block(0, 4, 4, 2))
    tiles.trsm("L", "N", 1.0, big.block(0, 0, 4, 4), big.block(0, 4, 4, 2))
    memory.stream = 0x7000
    tiles.trsm("L", "N", 1.0, big.block(0, 0, 4, 4), big.block(0, 4, 4, 2))
    assert [args for name, args in cublas.calls if name == "set_stream"] == [
        (0x1000, 0x5000), (0x1000, 0x7000)]
    assert [args for name, args in cusolver.calls if name == "set_stream"] == [
        (0x1000, 0x5000), (0x1000, 0x7000)]
    tiles.xpotrf(memory.array(np.eye(3), order="F"), memory.zeros(1, np.int32), 0)
    tiles.close()
    tiles.close()  # once only
    assert cublas.calls[-1] == ("destroy", (0x1000,))
    assert cusolver.calls[-2:] == [("destroy_params", (0x2000,)), ("destroy", (0x1000,))]
    assert cublas.names().count("destroy") == cusolver.names().count("destroy") == 1


def test_cuda_tiles_map_blas_calls_to_cublas_arguments():
    tiles, _, cublas, _ = _recorded_tiles()
    n, base = 100, 0x10000
    big = _buffer_of(n, base)

    def at(i, j):
        return base + 8 * (i + j * n)

    cublas.calls.clear()
    tiles.gemm("N", "T", -1.0, big.block(30, 10, 60, 8), big.block(20, 10, 12, 8), 1.0,
               big.block(30, 20, 60, 12))
    tiles.gemm("T", "N", 2.5, big.block(40, 0, 8, 30), big.block(40, 30, 8, 5), 0.0,
               big.block(50, 60, 30, 5))
    tiles.syrk("T", 1.0, big.block(40, 0, 8, 30), 1.0, big.block(0, 0, 30, 30))
    tiles.trsm("R", "T", 1.0, big.block(10, 10, 8, 8), big.block(18, 10, 82, 8))
    tiles.trmm("L", "T", -1.0, big.block(10, 10, 8, 8), big.block(10, 0, 8, 10))
    # the scalars' host addresses are taken from the calls; their values,
    # read from those addresses during each call, are checked at the end
    calls = [(name, args[1:]) for name, args in cublas.calls if name != "set_stream"]
    assert calls[0] == ("dgemm", (0, 1, 60, 12, 8, calls[0][1][5], at(30, 10), n,
                                  at(20, 10), n, calls[0][1][10], at(30, 20), n))
    assert calls[1] == ("dgemm", (1, 0, 30, 5, 8, calls[1][1][5], at(40, 0), n,
                                  at(40, 30), n, calls[1][1][10], at(50, 60), n))
    assert calls[2] == ("dsyrk", (0, 1, 30, 8, calls[2][1][4], at(40, 0), n,
                                  calls[2][1][7], at(0, 0), n))
    assert calls[3] == ("dtrsm", (1, 0, 1, 0, 82, 8, calls[3][1][6], at(10, 10), n,
                                  at(18, 10), n))
    # cuBLAS's dtrmm is out of place: B passed as C too, for BLAS's in-place one
    assert calls[4] == ("dtrmm", (0, 0, 1, 0, 8, 10, calls[4][1][6], at(10, 10), n,
                                  at(10, 0), n, at(10, 0), n))
    assert cublas.scalars == [(-1.0, 1.0), (2.5, 0.0), (1.0, 1.0), (1.0,), (-1.0,)]
    assert all(args[0] == 0x1000 for name, args in cublas.calls)  # the cuBLAS handle


def test_cuda_tiles_map_lapack_calls_to_cusolver_arguments_with_cached_workspaces():
    tiles, memory, _, cusolver = _recorded_tiles()
    n = 40
    B = memory.array(np.eye(n), order="F")
    info = memory.zeros(4, np.int32)
    base, info_base = B.data.ptr, info.data.ptr
    extra = FakeBindings.LWORK_EXTRA
    cusolver.calls.clear()
    tiles.potrf(B[8:16, 8:16], info, 1)
    tiles.potrf(B[16:24, 16:24], info, 2)  # same (n, ld): no second query
    tiles.lauum(B[0:8, 0:8], info, 3)
    tiles.trtri(B[0:8, 0:8], info, 0)
    tiles.potri(B, info, 0)
    calls = [(name, args) for name, args in cusolver.calls if name != "set_stream"]
    names = [name for name, _ in calls]
    assert names == ["dpotrf_buffer_size", "dpotrf", "dpotrf", "dlauum_buffer_size",
                     "dlauum", "xtrtri_buffer_size", "xtrtri", "dpotri_buffer_size",
                     "dpotri"]
    work = calls[1][1][5]
    assert calls[0][1] == (0x1000, 0, 8, base + 8 * (8 + 8 * n), n)
    assert calls[1][1] == (0x1000, 0, 8, base + 8 * (8 + 8 * n), n, work, 8 + extra,
                           info_base + 4)
    assert calls[2][1] == (0x1000, 0, 8, base + 8 * (16 + 16 * n), n, work, 8 + extra,
                           info_base + 8)
    assert calls[4][1][:5] == (0x1000, 0, 8, base, n) and calls[4][1][6:] == (8 + extra,
                                                                             info_base + 12)
    device_bytes, host_bytes = FakeBindings._x_sizes(8)
    xtrtri = calls[6][1]
    assert xtrtri[:7] == (0x1000, 0, 0, 8, 1, base, n)
    assert xtrtri[8] == device_bytes and xtrtri[10] == host_bytes and xtrtri[11] == info_base
    assert calls[8][1][2:5] == (n, base, n) and calls[8][1][6] == n + extra
    # every workspace is one CuPy (here: fake) allocation, grown to the largest size
    final = calls[8][1][5]
    memory.view(final, (8 * (n + extra),), (1,), np.uint8)
    assert tiles.workspace_bytes == 8 * (n + extra)


def test_cuda_tiles_refuse_cusolver_calls_past_two_to_the_31_elements():
    tiles, _, _, cusolver = _recorded_tiles()
    info = FakeMatrix((1,), (4,), dtype=np.int32)
    order = 46341
    assert order * order >= CUSOLVER_ELEMENT_LIMIT > (order - 1) ** 2
    whole = _buffer_of(order)
    for call in (tiles.potri, tiles.trtri, tiles.lauum):
        cusolver.calls.clear()
        with pytest.raises(ValueError, match="2\\^31"):
            call(whole, info, 0)
        assert [name for name, _ in cusolver.calls if name != "set_stream"] == []
    # a diagonal block of the same buffer is small: it goes through
    calls_before = len(cusolver.calls)
    tiles.trtri(whole.block(0, 0, DEFAULT_BLOCK, DEFAULT_BLOCK), info, 0)
    assert "xtrtri" in [name for name, _ in cusolver.calls[calls_before:]]


def test_cuda_tiles_skip_empty_calls_and_check_their_operands():
    tiles, _, cublas, _ = _recorded_tiles()
    big = _buffer_of(10)
    cublas.calls.clear()
    tiles.gemm("N", "N", 1.0, big.block(0, 0, 0, 3), big.block(0, 0, 3, 4), 0.0,
               big.block(0, 0, 0, 4))
    tiles.trsm("L", "N", 1.0, big.block(0, 0, 0, 0), big.block(0, 0, 0, 4))
    assert cublas.calls == []
    with pytest.raises(ValueError, match="Fortran"):
        tiles.syrk("N", 1.0, FakeMatrix((3, 2), (16, 8)), 0.0, big.block(0, 0, 3, 3))
    with pytest.raises(ValueError, match="does not fit"):
        tiles.trmm("R", "N", 1.0, big.block(0, 0, 3, 3), big.block(0, 0, 3, 4))
    assert cublas.calls == []
