"""Shared fixtures and kernel sets for fastgp's tests.

Every numerical test compares fastgp against scikit-learn (the reference) or
against central finite differences, on small, well-conditioned problems: the
inputs are spread over a few length scales and the training covariance gets
``alpha`` = 1e-2 or a WhiteKernel on its diagonal, so that LAPACK's rounding
(which differs between fastgp's dpotri and scikit-learn's cho_solve) stays far
below the 1e-8 relative tolerance.

The GPU path (``device="cuda"``) is tested here under numba-cuda's simulator
and the blocked linear algebra's host stand-in, unless FASTGP_TEST_DEVICE=cuda
says that this machine's GPU runs them for real; tests marked ``gpu`` need a
real GPU and are an expected skip elsewhere (docs/testing.md).
"""

import os
from contextlib import ExitStack

#: Set FASTGP_TEST_DEVICE=cuda on a machine with a GPU to run the GPU path's
#: tests on it; otherwise numba-cuda runs them in its simulator, which Numba
#: reads when it is first imported: so before anything imports it.
DEVICE_ENV = "FASTGP_TEST_DEVICE"
ON_GPU = os.environ.get(DEVICE_ENV) == "cuda"
if not ON_GPU:
    os.environ.setdefault("NUMBA_ENABLE_CUDASIM", "1")

import numpy as np
import pytest
from threadpoolctl import threadpool_info, threadpool_limits
from sklearn.gaussian_process.kernels import RBF, Matern, RationalQuadratic, WhiteKernel
from sklearn.gaussian_process.kernels import ConstantKernel as C

#: Input dimension of the test problems (2, so per-dimension length scales differ
#: from isotropic ones).
N_FEATURES = 2

#: Diagonal added to the training covariance in comparisons (sklearn's alpha).
ALPHA = 1e-2


def _leaves():
    return {
        "C": C(1.7),
        "White": WhiteKernel(0.3),
        "RBF": RBF(0.8),
        "RBF-ard": RBF([0.6, 1.7]),
        "Matern12": Matern(0.9, nu=0.5),
        "Matern12-ard": Matern([0.7, 1.3], nu=0.5),
        "Matern32": Matern(0.9, nu=1.5),
        "Matern32-ard": Matern([0.7, 1.3], nu=1.5),
        "Matern52": Matern(0.9, nu=2.5),
        "Matern52-ard": Matern([0.7, 1.3], nu=2.5),
        "MaternInf": Matern(0.9, nu=np.inf),
        "RQ": RationalQuadratic(length_scale=0.8, alpha=1.5),
    }


def _compositions():
    return {
        "C*RBF+White": C(1.5) * RBF([0.6, 1.7]) + WhiteKernel(0.1),
        "RBF+Matern32": RBF(1.1) + Matern([0.7, 1.3], nu=1.5),
        "Matern12*RQ": Matern(0.9, nu=0.5) * RationalQuadratic(0.8, alpha=0.7),
        "C*(Matern52+RQ)*RBF": C(0.8) * (Matern(0.9, nu=2.5)
                                         + RationalQuadratic(1.2, alpha=2.0)) * RBF(2.0),
        "(C*RBF)*(C*Matern32)": (C(1.2) * RBF([0.6, 1.7]))
                                * (C(0.7) * Matern(1.1, nu=1.5)),
        "RQ**2": RationalQuadratic(0.8, alpha=1.5) ** 2,
        "fixed-C*RBF+White": C(2.0, constant_value_bounds="fixed") * RBF([0.6, 1.7])
                             + WhiteKernel(0.1),
        "C*fixed-RBF-ard+fixed-White": C(1.3) * RBF([0.6, 1.7], length_scale_bounds="fixed")
                                       + WhiteKernel(0.1, noise_level_bounds="fixed"),
        "RQ-fixed-alpha*Matern52": RationalQuadratic(0.8, alpha=1.5, alpha_bounds="fixed")
                                   * Matern([0.7, 1.3], nu=2.5),
        "all-fixed": C(1.1, "fixed") * RBF(0.9, "fixed") + WhiteKernel(0.2, "fixed"),
    }


#: name -> kernel: every kernel on the fast path, alone and composed.
KERNELS = {**_leaves(), **_compositions()}

#: Kernels with at least one free hyperparameter (gradients have components).
FREE_KERNELS = {name: k for name, k in KERNELS.items() if k.n_dims > 0}


def kernel_params(kernels=KERNELS):
    """pytest.param list over ``kernels`` (a fresh clone each), ids by name."""
    return [pytest.param(k.clone_with_theta(k.theta), id=name)
            for name, k in kernels.items()]


#: Set by .ci/run: a skip whose reason starts with none of
#: :data:`EXPECTED_SKIPS` fails the test, so a condition that silently stops
#: holding on CI's machine (Linux, two cores, root, the test extras) cannot
#: turn a comparison into a pass.
STRICT_SKIPS_ENV = "FASTGP_STRICT_SKIPS"

#: The skips CI's machine is expected to take (the reason's start -> why the
#: skip is right there). Every other skip in the suite names a condition
#: that does not hold on CI's machine (fewer than two cores, no /proc, not
#: root, an extra not installed).
#: Why a test marked ``gpu`` is skipped where FASTGP_TEST_DEVICE is not "cuda".
NO_GPU = "no GPU here (FASTGP_TEST_DEVICE=cuda runs the gpu-marked tests on one)"

EXPECTED_SKIPS = {
    "SCIPY_ARRAY_API is not set": (
        "scikit-learn's estimator checks try array-API inputs only under "
        "SCIPY_ARRAY_API=1; fastgp's estimators take NumPy arrays"),
    NO_GPU: ("CI has no GPU: the GPU path runs there under numba-cuda's simulator "
             "and the host stand-in of its linear algebra; the tests marked gpu "
             "check the real device's calls"),
}


def pytest_collection_modifyitems(config, items):
    """Tests marked ``gpu`` skip, as expected, where no GPU runs them."""
    if ON_GPU:
        return
    skip = pytest.mark.skip(reason=NO_GPU)
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


def _skip_reason(report):
    reason = (report.longrepr[2] if isinstance(report.longrepr, tuple)
              else str(report.longrepr))
    return reason.removeprefix("Skipped: ")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """Under :data:`STRICT_SKIPS_ENV`, an unexpected skip is a failure."""
    outcome = yield
    report = outcome.get_result()
    if (not report.skipped or hasattr(report, "wasxfail")
            or os.environ.get(STRICT_SKIPS_ENV) != "1"):
        return
    reason = _skip_reason(report)
    if not any(reason.startswith(expected) for expected in EXPECTED_SKIPS):
        report.outcome = "failed"
        report.longrepr = (f"unexpected skip ({STRICT_SKIPS_ENV}=1; "
                           f"tests/conftest.py's EXPECTED_SKIPS does not list it): "
                           f"{reason}")


class _BlasPin:
    """The session's limit of one BLAS thread, which a test can lift."""

    def __init__(self):
        self._stack = None

    def hold(self):
        self._stack = ExitStack()
        self._stack.enter_context(threadpool_limits(limits=1, user_api="blas"))

    def release(self):
        """Back to the machine's own BLAS thread counts, and no Python thread
        holding threadpoolctl's control of OpenBLAS (see
        fastgp._linalg.blas_threads._set_library_threads)."""
        self._stack.close()
        self._stack = None


@pytest.fixture(scope="session", autouse=True)
def single_threaded_blas():
    """One BLAS thread for the whole session (yields the pin).

    The test problems are small (N <= 800). OpenBLAS runs dpotri multithreaded
    even at N = 50, and on a busy 2-core runner its threads wait on each other
    for 0.2-0.3 s per call (measured; 0.1 ms with one thread), which would make
    every optimiser step cost that much. Numba's thread count, which fastgp
    controls, is tested. The tests whose numbers may depend on the BLAS thread
    count, or on which Python thread may change it, lift the pin with the
    ``machine_blas_threads`` fixture; tests of fastgp's own BLAS limit set
    another limit inside it, or run in a fresh process without it.
    """
    pin = _BlasPin()
    pin.hold()
    try:
        yield pin
    finally:
        pin.release()


@pytest.fixture(scope="session", autouse=True)
def private_memory_ledger(tmp_path_factory):
    """fastgp's machine-wide memory ledger (fastgp.memory.ledger) in a
    directory of this session's own (the environment variable is inherited
    by the processes the tests start): another test run on the machine must
    not make a test wait for its reservations, or turn a test's fake "tiny
    machine" into one that would fit after others release."""
    from fastgp.memory.ledger import LEDGER_ENV

    before = os.environ.get(LEDGER_ENV)
    os.environ[LEDGER_ENV] = str(tmp_path_factory.mktemp("memory-ledger"))
    try:
        yield os.environ[LEDGER_ENV]
    finally:
        if before is None:
            del os.environ[LEDGER_ENV]
        else:
            os.environ[LEDGER_ENV] = before


@pytest.fixture
def ledger(tmp_path, monkeypatch):
    """A memory ledger of this test's own (its path), no FASTGP_MEMORY_LIMIT,
    the default timeout, the memory check on."""
    from fastgp.memory import SKIP_ENV
    from fastgp.memory.ledger import LEDGER_ENV, LIMIT_ENV, TIMEOUT_ENV

    path = tmp_path / "ledger"
    monkeypatch.setenv(LEDGER_ENV, str(path))
    for name in (LIMIT_ENV, TIMEOUT_ENV, SKIP_ENV):
        monkeypatch.delenv(name, raising=False)
    return path


@pytest.fixture
def machine_blas_threads(single_threaded_blas):
    """The machine's own BLAS thread counts for one test (the session's pin
    lifted, and held again afterwards); yields the sorted distinct counts of
    the loaded BLAS libraries.

    While the pin is held, the main thread is threadpoolctl's "controlling"
    thread of a pthreads OpenBLAS, and a limit set from any other Python
    thread is ignored; with it lifted, fastgp's own limits work from every
    thread, as in a user's program.
    """
    single_threaded_blas.release()
    try:
        yield sorted({pool["num_threads"] for pool in threadpool_info()
                      if pool["user_api"] == "blas"})
    finally:
        single_threaded_blas.hold()


@pytest.fixture
def counted_threads(monkeypatch):
    """The Numba thread counts the passes ran on during a test (a set): the
    fill, the matrix-free product and Vecchia's terms, whichever the solver
    runs; with fastgp's per-evaluation thread policy off (the user's count
    throughout)."""
    import numba

    from fastgp._backend.covariance import FastCovariance
    from fastgp._engine.threads import ADAPTIVE_ENV

    monkeypatch.setenv(ADAPTIVE_ENV, "0")
    seen = set()

    def spy_on(name):
        original = getattr(FastCovariance, name)

        def spy(self, *args, **kwargs):
            seen.add(numba.get_num_threads())
            return original(self, *args, **kwargs)

        monkeypatch.setattr(FastCovariance, name, spy)

    for name in ("fill_lower", "matmat", "vecchia_partials"):
        spy_on(name)
    return seen


@pytest.fixture
def numba_threads(request):
    """Set Numba's thread count (this Python thread's); restores it after.
    Skips only a test whose ``count`` exceeds NUMBA_NUM_THREADS (fixed at
    start-up): with one thread there, the one-thread comparisons still run."""
    import numba

    count = request.node.callspec.params["count"]
    if count > numba.config.NUMBA_NUM_THREADS:
        pytest.skip(f"NUMBA_NUM_THREADS={numba.config.NUMBA_NUM_THREADS}: this case "
                    f"runs {count} Numba threads")
    before = numba.get_num_threads()
    yield numba.set_num_threads
    numba.set_num_threads(before)


@pytest.fixture
def rng():
    """A seeded generator, fresh per test."""
    return np.random.default_rng(20261129)


def assert_peaks_within_checked_estimates(monkeypatch, calls, share):
    """Each of ``calls`` (callables: a prediction of the regressor) peaks,
    as tracemalloc measures it, at most at the estimate that the
    regressor's first memory check of the call compared with the memory
    available (fastgp.regressor.check_memory), and at least at ``share``
    of it."""
    import tracemalloc

    import fastgp.regressor as regressor

    checked, check = [], regressor.check_memory
    monkeypatch.setattr(regressor, "check_memory", lambda needed, **kwargs:
                        checked.append(needed) or check(needed, **kwargs))
    for call in calls:
        checked.clear()
        tracemalloc.start()
        try:
            call()
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        assert share * checked[0] <= peak <= checked[0], (peak, checked)


def make_problem(rng, n_samples=40, n_targets=None, n_features=N_FEATURES):
    """Inputs spread over a few length scales and smooth noisy targets.

    Returns X (n_samples, n_features) and y (n_samples,) if ``n_targets`` is
    None, else (n_samples, n_targets) with columns on different scales and
    offsets (so normalize_y matters).
    """
    X = rng.uniform(-2.0, 2.0, size=(n_samples, n_features))
    f = np.sin(1.3 * X[:, 0]) + 0.5 * np.cos(X[:, -1])
    if n_targets is None:
        return X, f + 0.1 * rng.standard_normal(n_samples) + 0.7
    cols = [(k + 1.0) * f + k + 0.1 * rng.standard_normal(n_samples)
            for k in range(n_targets)]
    return X, np.column_stack(cols)


def random_theta(kernel, rng, spread=0.7):
    """kernel.theta moved by up to +-spread in every log-space component."""
    return kernel.theta + rng.uniform(-spread, spread, size=kernel.n_dims)


def assert_gradient_close(actual, expected, rtol=1e-8):
    """Gradients equal to ``rtol`` relative, where components near zero are
    judged relative to the largest component (their own scale is rounding)."""
    actual, expected = np.asarray(actual), np.asarray(expected)
    assert actual.shape == expected.shape
    scale = max(np.max(np.abs(expected), initial=0.0), 1e-300)
    np.testing.assert_allclose(actual, expected, rtol=rtol, atol=rtol * scale)


def assert_regressor_matches_sklearn(ours, ref, thetas, X_query, value_rtol=1e-8,
                                     std_rtol=1e-6, std_atol=0.0):
    """A fitted fastgp regressor ``ours`` and scikit-learn's ``ref``, fitted
    on the same data, agree on the log marginal likelihood (``value_rtol``
    relative) and its gradient (:func:`assert_gradient_close`, 1e-8) at every
    theta of ``thetas``, and at X_query (n_query, n_features) on the
    predictive mean (1e-8 relative, 1e-10 absolute) and standard deviation
    (``std_rtol`` relative, ``std_atol`` absolute)."""
    for theta in thetas:
        value, grad = ours.log_marginal_likelihood(theta, eval_gradient=True)
        ref_value, ref_grad = ref.log_marginal_likelihood(theta, eval_gradient=True)
        np.testing.assert_allclose(value, ref_value, rtol=value_rtol)
        assert_gradient_close(grad, ref_grad, rtol=1e-8)
    mean, std = ours.predict(X_query, return_std=True)
    ref_mean, ref_std = ref.predict(X_query, return_std=True)
    np.testing.assert_allclose(mean, ref_mean, rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(std, ref_std, rtol=std_rtol, atol=std_atol)


def assert_same_bits_on_one_and_two_threads(compute):
    """``compute()`` (a tuple of arrays) gives the same bits on one and on
    two Numba threads; Numba's thread count is restored afterwards. Skips
    where Numba started with one thread (nothing to compare)."""
    import numba

    if numba.config.NUMBA_NUM_THREADS < 2:
        pytest.skip("NUMBA_NUM_THREADS < 2 at start-up: one thread count to compare")

    def run(count):
        numba.set_num_threads(count)
        return compute()

    default = numba.get_num_threads()
    try:
        one, two = run(1), run(2)
    finally:
        numba.set_num_threads(default)
    for a, b in zip(one, two):
        np.testing.assert_array_equal(a, b)


def assert_fill_matches_kernel(covariance, kernel, theta, X, diag_add):
    """``covariance.fill_lower`` at theta writes kernel(X) + diag(diag_add)
    into the lower triangle of an (n, n) F-ordered buffer (1e-13 relative,
    1e-15 absolute), X (n, n_features), diag_add (n,), and leaves its strict
    upper triangle untouched."""
    n = len(X)
    K = np.full((n, n), np.nan, order="F")
    covariance.fill_lower(theta, diag_add, K)
    expected = kernel.clone_with_theta(theta)(X) + np.diag(diag_add)
    lower = np.tril_indices(n)
    np.testing.assert_allclose(K[lower], expected[lower], rtol=1e-13, atol=1e-15)
    assert np.all(np.isnan(K[np.triu_indices(n, 1)]))
