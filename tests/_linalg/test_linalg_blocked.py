"""The blocked Cholesky factor and inverse (fastgp._linalg.blocked) against
LAPACK's dpotrf and dpotri, with small blocks so that every branch (first
block, later blocks, a short last block, a single block, N < block, 1 x 1)
runs on small matrices; and fastgp._linalg.lapack's doors through the blocked path.

None of this needs the processor on which OpenBLAS's threaded dsyrk fails:
the blocked path is checked for equality with LAPACK where LAPACK works.
"""

import json
import sys
import threading
from pathlib import Path

import numpy as np
import pytest
from scipy.linalg import lapack

from fastgp._linalg import blocked as blocked_lapack
from fastgp._linalg import lapack as linalg
from fastgp._linalg import tiles
from fastgp._linalg.blocked import cholesky_lower, inverse_from_cholesky_lower
from fastgp._linalg.lapack import cho_inverse_in_place, cholesky_in_place, cholesky_with_jitter
from fastgp.exceptions import NotPositiveDefiniteError

RTOL = 1e-12

#: (n, block): several blocks with a short last one, n a multiple of the
#: block, n < block, n = block, 1 x 1, block 1.
SHAPES = [(1, 1), (1, 8), (5, 1), (8, 8), (37, 8), (37, 64), (64, 64), (64, 16),
          (100, 7), (129, 32), (300, 64), (301, 256)]


def _spd(n, seed=0):
    """A well-conditioned symmetric positive definite (n, n), F-ordered."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, n + 3))
    return np.asfortranarray(X @ X.T / (n + 3) + 0.5 * np.eye(n))


def _with_marked_upper(K, mark=7.25):
    """K's lower triangle with ``mark`` in its strict upper triangle, which
    the routines must leave alone."""
    A = np.asfortranarray(np.tril(K))
    A[np.triu_indices(len(K), 1)] = mark
    return A


def _assert_lower_close(A, expected):
    scale = np.max(np.abs(np.tril(expected)))
    np.testing.assert_allclose(np.tril(A), np.tril(expected), rtol=0, atol=RTOL * scale)


def _lapack_factor(K):
    L, info = lapack.dpotrf(K, lower=1)
    assert info == 0
    return L


def _lapack_inverse(K):
    Kinv, info = lapack.dpotri(_lapack_factor(K), lower=1)
    assert info == 0
    return Kinv


@pytest.mark.parametrize("n, block", SHAPES)
def test_blocked_cholesky_matches_dpotrf_and_keeps_the_upper_triangle(n, block):
    K = _spd(n)
    A = _with_marked_upper(K)
    assert cholesky_lower(A, block) == 0
    _assert_lower_close(A, _lapack_factor(K))
    assert np.all(A[np.triu_indices(n, 1)] == 7.25)


@pytest.mark.parametrize("n, block", SHAPES)
def test_blocked_inverse_matches_dpotri_and_keeps_the_upper_triangle(n, block):
    K = _spd(n, seed=1)
    A = _with_marked_upper(_lapack_factor(K))
    assert inverse_from_cholesky_lower(A, block) == 0
    _assert_lower_close(A, _lapack_inverse(K))
    assert np.all(A[np.triu_indices(n, 1)] == 7.25)


@pytest.mark.parametrize("n, block, panel", [
    (100, 8, 24),   # several panels, the last one narrower than the rest
    (100, 7, 16),   # row blocks that straddle the panels' edges
    (64, 16, 16),   # panels of one row block's width
    (37, 8, 1),     # panels of one column: dsyrk of order 1, a dgemm each
])
def test_blocked_inverse_splits_the_gram_update_into_panels(monkeypatch, n, block, panel):
    """The Gram step's rank-block update runs by column panels of at most
    TILE_ROWS columns (512: dsyrk never runs at a larger order); small
    panels run every branch of the split on a small matrix."""
    monkeypatch.setattr(blocked_lapack, "TILE_ROWS", panel)
    calls = []
    real = blocked_lapack._dsyrk
    monkeypatch.setattr(blocked_lapack, "_dsyrk",
                        lambda *args: calls.append(args[2]._obj.value) or real(*args))
    K = _spd(n, seed=2)
    A = _with_marked_upper(_lapack_factor(K))
    assert inverse_from_cholesky_lower(A, block) == 0
    _assert_lower_close(A, _lapack_inverse(K))
    assert np.all(A[np.triu_indices(n, 1)] == 7.25)
    assert calls and max(calls) <= panel  # no dsyrk of a larger order
    row_blocks = range(block, n, block)
    assert len(calls) == sum(-(-i // panel) for i in row_blocks)


def test_blocked_routines_use_the_default_block_read_at_call_time(monkeypatch):
    K = _spd(70, seed=2)
    monkeypatch.setattr(blocked_lapack, "DEFAULT_BLOCK", 16)
    calls = []
    real = blocked_lapack._dpotrf
    monkeypatch.setattr(blocked_lapack, "_dpotrf",
                        lambda *args: (calls.append(1), real(*args))[1])
    A = np.array(K, order="F")
    assert cholesky_lower(A) == 0
    assert len(calls) == 5  # 70 = 4 x 16 + 6
    _assert_lower_close(A, _lapack_factor(K))
    assert inverse_from_cholesky_lower(A) == 0
    _assert_lower_close(A, _lapack_inverse(K))


@pytest.mark.parametrize("n, block", [
    (blocked_lapack.SMALL_ORDER - 300, blocked_lapack.SMALL_TILE),
    (blocked_lapack.SMALL_ORDER + 100, tiles.TILE_ROWS),
])
def test_blocks_inside_a_fit_depend_on_the_order_alone(monkeypatch, n, block):
    """Inside a fit the factor's diagonal blocks have SMALL_TILE rows below
    SMALL_ORDER and TILE_ROWS from it on, on one tile thread as on two, and
    the bits are the same on both."""
    calls = []
    real = blocked_lapack._dpotrf
    monkeypatch.setattr(blocked_lapack, "_dpotrf",
                        lambda *args: (calls.append(args[1]._obj.value), real(*args))[1])
    K = _spd(n, seed=4)
    results = []
    for width in (1, 2):
        calls.clear()
        A = np.array(K, order="F")
        previous = tiles.set_width(width)
        try:
            assert cholesky_lower(A) == 0
            assert inverse_from_cholesky_lower(A) == 0
        finally:
            tiles.set_width(previous)
        assert calls == [min(block, n - j) for j in range(0, n, block)]
        results.append(A)
    assert np.array_equal(results[0], results[1])
    _assert_lower_close(results[0], _lapack_inverse(K))


def _not_pd_at(n, order, seed=3):
    """An SPD matrix changed so that its leading minors are positive definite
    up to order - 1 and the one of order ``order`` (1-based) is not: the
    pivot's Schur complement is made -1."""
    K = _spd(n, seed)
    p = order - 1
    head = K[:p, :p]
    schur = K[p, :p] @ np.linalg.solve(head, K[:p, p]) if p else 0.0
    K[p, p] = schur - 1.0
    return K


@pytest.mark.parametrize("n, block, order", [
    (100, 16, 53),   # inside a later block
    (100, 16, 16),   # last row of the first block
    (100, 16, 17),   # first row of the second block
    (100, 16, 100),  # the very last pivot, in a short last block
    (100, 16, 1),
    (40, 64, 23),    # one block: LAPACK's own info
])
@pytest.mark.parametrize("width", [None, 2])
def test_blocked_cholesky_reports_the_failing_minor_like_dpotrf(n, block, order, width):
    """Outside a fit, and as a fit runs it (tiles on two threads, where the
    failing block's dpotrf runs inside a tile beside the other updates)."""
    K = _not_pd_at(n, order)
    assert lapack.dpotrf(K, lower=1)[1] == order
    A = np.array(K, order="F")
    previous = tiles.set_width(width)
    try:
        assert cholesky_lower(A, block) == order
    finally:
        tiles.set_width(previous)


def test_blocked_inverse_reports_a_zero_pivot_and_leaves_the_buffer():
    A = _with_marked_upper(_lapack_factor(_spd(50, seed=4)))
    A[30, 30] = 0.0
    A[40, 40] = 0.0
    before = A.copy(order="F")
    assert lapack.dpotri(A, lower=1)[1] == 31
    assert inverse_from_cholesky_lower(A, 8) == 31
    np.testing.assert_array_equal(A, before)


def test_blocked_routines_work_on_a_leading_block_of_a_bigger_workspace():
    n, block = 45, 8
    K = _spd(n, seed=5)
    workspace = np.full((n + 7, n + 4), -3.5, order="F")
    A = workspace[:n, :n]
    A[...] = np.tril(K)
    assert blocked_lapack.leading_dimension(A) == n + 7
    assert cholesky_lower(A, block) == 0
    _assert_lower_close(A, _lapack_factor(K))
    assert inverse_from_cholesky_lower(A, block) == 0
    _assert_lower_close(A, _lapack_inverse(K))
    # nothing outside the (n, n) block was touched
    assert np.all(workspace[n:, :] == -3.5) and np.all(workspace[:, n:] == -3.5)


@pytest.mark.parametrize("make, message", [
    (lambda K: np.ascontiguousarray(K), "Fortran-ordered"),                 # C order
    (lambda K: np.asfortranarray(K, dtype=np.float32), "aligned float64"),  # single
    (lambda K: np.asfortranarray(K)[:, :-1], r"square matrix, got shape \(10, 9\)"),
    (lambda K: np.asfortranarray(K)[::2, ::2], "Fortran-ordered"),          # row stride 2
    (lambda K: np.asfortranarray(K)[1:, 1:].T, "Fortran-ordered"),          # transposed
    (lambda K: np.lib.stride_tricks.as_strided(                             # overlapping
        np.asfortranarray(K), strides=(8, 8 * (len(K) - 1))),               # columns
     "column stride 72 bytes is not a leading dimension >= n = 10"),
    (lambda K: np.lib.stride_tricks.as_strided(                             # lda past
        np.asfortranarray(K), shape=(2, 2), strides=(8, 8 * 2**31)),        # 32-bit ints
     "too large for 32-bit LAPACK indices"),
])
def test_blocked_routines_refuse_what_lapack_cannot_address(make, message):
    A = make(_spd(10))
    for routine in (cholesky_lower, inverse_from_cholesky_lower):
        with pytest.raises(ValueError, match=message):
            routine(A, 4)


def test_blocked_routines_refuse_a_read_only_buffer_and_a_bad_block():
    A = np.asfortranarray(_spd(10))
    with pytest.raises(ValueError, match="block"):
        cholesky_lower(A, 0)
    A.flags.writeable = False
    with pytest.raises(ValueError, match="writeable"):
        cholesky_lower(A, 4)


def test_blocked_routines_accept_empty_and_one_by_one():
    assert cholesky_lower(np.empty((0, 0), order="F")) == 0
    assert inverse_from_cholesky_lower(np.empty((0, 0), order="F")) == 0
    A = np.full((1, 1), 4.0, order="F")
    assert cholesky_lower(A) == 0 and A[0, 0] == 2.0
    assert inverse_from_cholesky_lower(A) == 0 and A[0, 0] == 0.25
    assert cholesky_lower(np.full((1, 1), -1.0, order="F")) == 1


def test_global_info_offsets_positive_and_raises_on_negative():
    assert blocked_lapack._global_info("dpotrf", 0, 64) == 0
    assert blocked_lapack._global_info("dpotrf", 3, 64) == 67
    with pytest.raises(ValueError, match="illegal argument 2"):
        blocked_lapack._global_info("dpotrf", -2, 64)


def test_blocked_routines_in_two_threads_match_the_sequential_results():
    """Two factor + inverse runs at once on two buffers (ctypes releases the
    GIL, so OpenBLAS is entered from both threads together) give the bits of
    the same runs one after the other."""
    inputs = [_spd(260, seed=s) for s in (6, 7)]

    def run(K, out, k):
        A = np.array(K, order="F")
        for _ in range(3):
            A[...] = K
            assert cholesky_lower(A, 32) == 0
            assert inverse_from_cholesky_lower(A, 32) == 0
        out[k] = A

    sequential = {}
    for k, K in enumerate(inputs):
        run(K, sequential, k)
    together = {}
    threads = [threading.Thread(target=run, args=(K, together, k))
               for k, K in enumerate(inputs)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for k, K in enumerate(inputs):
        np.testing.assert_array_equal(together[k], sequential[k])
        _assert_lower_close(together[k], _lapack_inverse(K))


# ------------------------------------------------- fastgp._linalg.lapack's doors
@pytest.fixture
def blocked_everywhere(monkeypatch):
    """Send every order through the blocked path, with blocks of 16."""
    monkeypatch.setattr(linalg, "BLOCKED_MIN_N", 0)
    monkeypatch.setattr(blocked_lapack, "DEFAULT_BLOCK", 16)


@pytest.mark.parametrize("clean", [False, True])
def test_linalg_doors_take_the_blocked_path_and_match_lapack(blocked_everywhere, clean):
    n = 75
    K = _spd(n, seed=8)
    B = _with_marked_upper(K)
    assert cholesky_in_place(B, clean=clean) is B
    _assert_lower_close(B, _lapack_factor(K))
    upper = B[np.triu_indices(n, 1)]
    assert np.all(upper == 0.0) if clean else np.all(upper == 7.25)
    assert cho_inverse_in_place(B) is B
    _assert_lower_close(B, _lapack_inverse(K))


def test_linalg_blocked_path_is_taken_from_the_threshold_on(monkeypatch):
    calls = []
    monkeypatch.setattr(linalg, "BLOCKED_MIN_N", 20)
    monkeypatch.setattr(blocked_lapack, "cholesky_lower",
                        lambda B, block=None: calls.append(len(B)) or 0)
    cholesky_in_place(np.array(_spd(19), order="F"))
    cholesky_in_place(np.array(_spd(20), order="F"))
    assert calls == [20]


def test_linalg_blocked_factor_raises_with_the_global_order(blocked_everywhere):
    B = np.array(_not_pd_at(60, 41), order="F")
    with pytest.raises(NotPositiveDefiniteError) as caught:
        cholesky_in_place(B)
    assert caught.value.order == 41
    assert "order 41 (of 60)" in str(caught.value)


def test_linalg_blocked_inverse_raises_on_a_zero_pivot(blocked_everywhere):
    L = np.array(_lapack_factor(_spd(40, seed=9)), order="F")
    L[25, 25] = 0.0
    with pytest.raises(NotPositiveDefiniteError) as caught:
        cho_inverse_in_place(L)
    assert caught.value.order == 26


@pytest.mark.parametrize("routine", [cholesky_in_place, cho_inverse_in_place])
def test_linalg_blocked_path_refuses_a_buffer_it_would_have_to_copy(
        blocked_everywhere, routine):
    with pytest.raises(RuntimeError, match="Fortran-contiguous"):
        routine(np.ascontiguousarray(_spd(30)))


def test_cholesky_with_jitter_behaves_the_same_on_the_blocked_path(monkeypatch):
    """A rank-deficient K (duplicated inputs, no noise): the same jitter,
    blocked or not, and a factor of K + jitter I to rounding (K + jitter I is
    ill-conditioned, so the two factors themselves differ by more)."""
    x = np.repeat(np.linspace(0.0, 3.0, 25), 2)
    K = np.exp(-0.5 * (x[:, None] - x[None, :]) ** 2)

    def fill(B, jitter):
        B[...] = K + jitter * np.eye(len(K))

    results = []
    for threshold in (10**9, 0):
        monkeypatch.setattr(linalg, "BLOCKED_MIN_N", threshold)
        monkeypatch.setattr(blocked_lapack, "DEFAULT_BLOCK", 16)
        B = np.empty_like(K, order="F")
        results.append((cholesky_with_jitter(fill, B), B))
    (jitter_lapack, L_lapack), (jitter_blocked, L_blocked) = results
    assert jitter_lapack > 0.0 and jitter_blocked == jitter_lapack
    expected = K + jitter_blocked * np.eye(len(K))
    for L in (L_lapack, L_blocked):
        L = np.tril(L)
        np.testing.assert_allclose(L @ L.T, expected, rtol=0, atol=RTOL)


# ------------------------------------------------------ the large-N benchmark
def _bench_large_n():
    # bench/ is a folder of the repository, not part of the installed package
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    from bench import bench_large_n
    return bench_large_n


def test_bench_large_n_reports_a_crash_as_a_signal():
    bench = _bench_large_n()
    crashed = {"status": "error", "reason": "exit code -11: "}
    assert bench._describe_failure(crashed) == "crashed: signal 11 (SIGSEGV)"
    failed = {"status": "error", "reason": "exit code 1: AssertionError"}
    assert bench._describe_failure(failed) == "error: exit code 1: AssertionError"


@pytest.mark.slow  # child processes
def test_bench_large_n_runs_its_cases_in_child_processes(tmp_path, capsys):
    bench = _bench_large_n()
    out = tmp_path / "large_n.json"
    assert bench.main(["--sizes", "300", "--cases", "lapack,fastgp", "--out", str(out)]) == 0
    doc = json.loads(out.read_text())
    by_case = {r["case"]: r for r in doc["cases"]}
    assert by_case["lapack"]["status"] == "ok" and by_case["fastgp"]["status"] == "ok"
    # the same matrix (below BLOCKED_MIN_N: the same LAPACK calls)
    np.testing.assert_allclose(by_case["fastgp"]["check"], by_case["lapack"]["check"],
                               rtol=1e-12)
    assert "| 300 | fastgp._linalg.lapack factor + inverse | ok |" in capsys.readouterr().out
    assert by_case["fastgp"]["block"] == blocked_lapack.DEFAULT_BLOCK


@pytest.mark.parametrize("shape, order, dtype", [((4, 3), "F", np.float64),
                                                 ((3, 3), "C", np.float64),
                                                 ((3, 3), "F", np.float32)])
def test_blocked_path_refuses_buffers_it_cannot_work_in(shape, order, dtype):
    # not square, not Fortran-contiguous, not float64: the blocked routines
    # cannot copy, so they refuse before touching the buffer
    from fastgp._linalg.lapack import _require_fortran

    with pytest.raises(RuntimeError, match="square, writeable, float64"):
        _require_fortran(np.zeros(shape, order=order, dtype=dtype), "factor")
    read_only = np.zeros((3, 3), order="F")
    read_only.flags.writeable = False
    with pytest.raises(RuntimeError, match="cannot work in place"):
        _require_fortran(read_only, "factor")


def test_tiles_run_on_no_more_threads_than_the_width(monkeypatch):
    """A width of 2 is the caller's thread and one helper, however many
    workers the pool could lend (a machine of 8 CPUs here)."""
    import threading
    import time

    monkeypatch.setattr(tiles, "usable_cpus", lambda: 8)
    monkeypatch.setattr(tiles, "_pool", None)
    seen = set()

    def task():
        seen.add(threading.get_ident())
        time.sleep(0.01)

    previous = tiles.set_width(2)
    try:
        tiles.run_tiles([task] * 40)
    finally:
        tiles.set_width(previous)
        if tiles._pool is not None:
            tiles._pool.shutdown()
    assert threading.get_ident() in seen
    assert len(seen) <= 2
