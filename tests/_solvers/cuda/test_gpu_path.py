"""The GPU path (``device="cuda"``) against the CPU path and the dense
reference: the conformance battery, the estimators end to end, and what a
user meets when something is missing or runs out (docs/gpu.md).

Here (CI, no GPU) everything runs under numba-cuda's simulator with the
blocked linear algebra on its host stand-in (tests/conftest.py), with small
thread blocks and small linear-algebra blocks so that small problems run the
multi-row and multi-block paths; with FASTGP_TEST_DEVICE=cuda the same tests
run on the GPU, at its own block sizes.
"""

import pickle
import warnings

import numpy as np
import pytest
from sklearn.gaussian_process.kernels import RBF, DotProduct, Matern, WhiteKernel
from sklearn.gaussian_process.kernels import ConstantKernel as C

from _conformance import CASES, SolverConformance, assert_same_bits, problem
from conftest import ON_GPU, assert_gradient_close
from fastgp import GPLVM, GaussianProcessClassifier, GaussianProcessRegressor
from fastgp._solvers.choice import exact_solver
from fastgp._solvers.cuda import CudaSolver
from fastgp._solvers.cuda import device as device_module
from fastgp._solvers.cuda.workspace import DeviceWorkspace
from fastgp.exceptions import DeviceUnavailableError, InsufficientMemoryError, JitterWarning
from fastgp.memory import estimates

#: Threads per block and linear-algebra block of the simulated runs (on a
#: GPU: the solver's own).
THREADS, BLOCK = 4, 8


@pytest.fixture(autouse=True)
def small_blocks(monkeypatch):
    if not ON_GPU:
        monkeypatch.setattr(CudaSolver, "threads", THREADS)
        monkeypatch.setattr(CudaSolver, "block", BLOCK)


def _data(n=40, d=2, seed=3):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-2.0, 2.0, size=(n, d))
    y = np.sin(1.3 * X[:, 0]) * np.cos(X[:, -1]) + 0.1 * rng.standard_normal(n)
    return X, y, rng.uniform(-2.2, 2.2, size=(7, d))


class TestCudaSolver(SolverConformance):
    """The battery (tests/_conformance.py) on the GPU path: exact, so the
    CPU's tolerances. Above the tile here means above one thread block of
    the passes and one block of the linear algebra: the same questions at
    N = 53 (several of each), and the same bits on two runs (the passes' sums
    have a fixed order: docs/design.md, "The GPU path")."""

    name = "cholesky"
    params = {"device": "cuda"}
    predict_memory_share = 0.4  # the CPU path's estimate; measured 0.46 simulated

    @pytest.mark.parametrize("case", list(CASES))
    def test_conformance_above_the_tile_matches_the_reference_in_the_same_bits_on_1_and_2_threads(
            self, case):
        kernel, X, Y, diag_add, X_query = problem(case, n=max(3 * THREADS, 6 * BLOCK) + 5)
        first = self.answers(kernel, X, Y, diag_add, X_query)
        second = self.answers(kernel, X, Y, diag_add, X_query)
        assert_same_bits(first, second)
        self.assert_answers_match_the_dense_reference(first, kernel, X, Y, diag_add, X_query)

    @pytest.mark.gpu
    def test_conformance_memory_estimate_bounds_a_measured_fit(self):
        # the estimate's growth with N against the measured peak's, device
        # and host together, so that a wrong N-dependent term fails whatever
        # the fixed allowance. On a GPU only: the simulator copies every
        # array a kernel is given, the N x N buffer included
        from fastgp._backend.covariance import make_covariance

        solver = self.solver()
        peaks, needs = [], []
        for n in (200, 2000, 4000):  # the first warms the kernels' compilation up
            X, y, _ = _data(n)
            kernel = C(1.0) * RBF([1.0, 1.0]) + WhiteKernel(0.1)
            with solver.memory_peak() as peak:
                objective = solver.objective(make_covariance(kernel, X), y, np.full(n, 1e-8),
                                             None)
                objective(kernel.theta)
                del objective
            peaks.append(peak["host"] + peak["device"])
            need = solver.fit_memory(self._problem(n, kernel))
            needs.append(need.host + need.device)
        measured, estimated = peaks[2] - peaks[1], needs[2] - needs[1]
        assert 0.6 * estimated <= measured <= 1.05 * estimated, (measured, estimated)

    @staticmethod
    def _problem(n, kernel):
        from fastgp._solvers.base import Problem

        return Problem(n, 2, 1, kernel.n_dims, True)


# ------------------------------------------------------------ estimators
@pytest.mark.slow  # fits under the simulator: tens of seconds
def test_gpu_regressor_fit_equals_the_cpu_fit():
    X, y, X_query = _data()
    kernel = C(1.0) * RBF([1.0, 1.0]) + WhiteKernel(0.1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the short fits stop at max_iter
        cpu = GaussianProcessRegressor(kernel, max_iter=4, normalize_y=True).fit(X, y)
        gpu = GaussianProcessRegressor(kernel, max_iter=4, normalize_y=True,
                                       device="cuda").fit(X, y)
    assert gpu.solver_ == "cholesky" and gpu.device == "cuda"
    np.testing.assert_allclose(gpu.kernel_.theta, cpu.kernel_.theta, rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(gpu.log_marginal_likelihood_value_,
                               cpu.log_marginal_likelihood_value_, rtol=1e-10)
    for a, b in zip(gpu.predict(X_query, return_std=True),
                    cpu.predict(X_query, return_std=True)):
        np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(gpu.predict(X_query, return_cov=True)[1],
                               cpu.predict(X_query, return_cov=True)[1], rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(gpu.sample_y(X_query, 2, random_state=0),
                               cpu.sample_y(X_query, 2, random_state=0), rtol=1e-7, atol=1e-9)
    theta = cpu.kernel_.theta + 0.3
    value, grad = gpu.log_marginal_likelihood(theta, eval_gradient=True)
    ref_value, ref_grad = cpu.log_marginal_likelihood(theta, eval_gradient=True)
    np.testing.assert_allclose(value, ref_value, rtol=1e-10)
    assert_gradient_close(grad, ref_grad, rtol=1e-9)


@pytest.mark.parametrize("kernel", [C(1.0) * RBF([1.0, 1.4]) + WhiteKernel(0.1),
                                    C(0.8) * Matern(0.9, nu=1.5) + WhiteKernel(0.05),
                                    DotProduct(0.5) + WhiteKernel(0.2)],
                         ids=["RBF-ard", "Matern32", "DotProduct"])
def test_gpu_gplvm_objective_equals_the_cpu_objective_and_finite_differences(kernel):
    rng = np.random.default_rng(0)
    n, Q = 30, 2
    Y = rng.standard_normal((n, 3))
    Y -= Y.mean(axis=0)
    cpu = exact_solver("cpu").latent_objective(kernel, Y, Q, 1e-6)
    gpu = exact_solver("cuda").latent_objective(kernel, Y, Q, 1e-6)
    z = cpu.pack(rng.standard_normal((n, Q)), kernel.theta)
    value, grad = gpu(z)
    ref_value, ref_grad = cpu(z)
    np.testing.assert_allclose(value, ref_value, rtol=1e-11)
    assert_gradient_close(grad, ref_grad, rtol=1e-9)
    h = 1e-6
    for k in (0, 7, z.size - 1):  # a latent coordinate, another, the last theta
        e = np.zeros(z.size)
        e[k] = h
        difference = (gpu.value(z + e) - gpu.value(z - e)) / (2 * h)
        np.testing.assert_allclose(grad[k], difference, rtol=1e-5,
                                   atol=1e-6 * np.max(np.abs(grad)))


@pytest.mark.slow  # fits under the simulator: tens of seconds
def test_gpu_gplvm_fit_transform_and_inverse_equal_the_cpu_ones():
    rng = np.random.default_rng(1)
    t = rng.uniform(0, 3, size=30)
    Y = np.column_stack([np.sin(t), np.cos(t), t]) + 0.05 * rng.standard_normal((30, 3))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cpu = GPLVM(n_components=1, max_iter=3, random_state=0).fit(Y)
        gpu = GPLVM(n_components=1, max_iter=3, random_state=0, device="cuda").fit(Y)
    np.testing.assert_allclose(gpu.embedding_, cpu.embedding_, rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(gpu.log_marginal_likelihood_value_,
                               cpu.log_marginal_likelihood_value_, rtol=1e-10)
    np.testing.assert_allclose(gpu.inverse_transform(cpu.embedding_[:4]),
                               cpu.inverse_transform(cpu.embedding_[:4]), rtol=1e-9)
    np.testing.assert_allclose(gpu.transform(Y[:3] + 0.02), cpu.transform(Y[:3] + 0.02),
                               rtol=1e-6, atol=1e-8)


@pytest.mark.slow  # fits under the simulator: tens of seconds
def test_gpu_keyboard_interrupt_keeps_the_best_point_then_propagates(monkeypatch):
    from fastgp._solvers.cuda.objective import DeviceNegLogMarginalLikelihood
    from _interrupt import Interrupting

    X, y, _ = _data()
    interrupting = Interrupting(monkeypatch, DeviceNegLogMarginalLikelihood, after=3)
    gpr = GaussianProcessRegressor(C(1.0) * RBF([1.0, 1.0]) + WhiteKernel(0.1),
                                   device="cuda")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(KeyboardInterrupt):
            gpr.fit(X, y)
    theta, value = interrupting.best()
    np.testing.assert_array_equal(gpr.kernel_.theta, theta)
    np.testing.assert_allclose(gpr.log_marginal_likelihood_value_, -value, rtol=1e-10)


# ------------------------------------------------------- bad input, faults
def test_gpu_jitter_ladder_and_its_message_are_the_cpus():
    # duplicated inputs and no noise: K is singular; both add the same jitter
    X = np.repeat(np.linspace(0, 1, 12)[:, None], 2, axis=0)
    y = np.sin(6 * X[:, 0])
    messages, jitters = [], []
    for device in ("cpu", "cuda"):
        with pytest.warns(JitterWarning) as caught:
            gpr = GaussianProcessRegressor(RBF(0.3), alpha=0.0, optimizer=None,
                                           device=device).fit(X, y)
        messages.append(str(caught[0].message))
        jitters.append(gpr.jitter_)
    assert messages[0] == messages[1] and jitters[0] == jitters[1] > 0


def test_gpu_refuses_a_fit_its_memory_cannot_hold_and_names_the_largest_n(monkeypatch):
    X, y, X_query = _data()
    gpr = GaussianProcessRegressor(RBF(1.0) + WhiteKernel(0.1), optimizer=None,
                                   device="cuda").fit(X, y)
    before = gpr.predict(X_query)
    free = estimates.device_fit_bytes(25, 2, 1, 2)
    monkeypatch.setattr(device_module.Device, "free_bytes",
                        lambda self: (free, "free memory of the test's GPU"))
    with pytest.raises(InsufficientMemoryError) as caught:
        gpr.fit(*_data(60)[:2])
    message = str(caught.value)
    assert "at most N = 25 samples" in message and 'solver="vecchia"' in message
    assert "free memory of the test's GPU" in message
    np.testing.assert_array_equal(gpr.predict(X_query), before)  # the old fit stands


def test_gpu_running_out_of_memory_mid_fit_leaves_the_estimator_and_releases(monkeypatch):
    X, y, X_query = _data()
    gpr = GaussianProcessRegressor(RBF(1.0) + WhiteKernel(0.1), device="cuda",
                                   optimizer=None).fit(X, y)
    before = gpr.predict(X_query)
    gpr.set_params(optimizer="fmin_l_bfgs_b")  # the refit's evaluations fail
    released = []
    original = DeviceWorkspace.release
    monkeypatch.setattr(DeviceWorkspace, "release",
                        lambda self: released.append(self) or original(self))

    class DeviceOutOfMemory(MemoryError):
        size = 8 * 60 * 60

    def failing(objective, theta):
        objective.workspace.buffer()
        raise DeviceOutOfMemory("out of memory allocating 28,800 bytes")

    from fastgp._solvers.cuda.objective import DeviceNegLogMarginalLikelihood

    monkeypatch.setattr(DeviceNegLogMarginalLikelihood, "value_and_grad_at", failing)
    with pytest.raises(InsufficientMemoryError, match="cuda:0"):
        GaussianProcessRegressor(RBF(1.0) + WhiteKernel(0.1), device="cuda").fit(
            *_data(60)[:2])
    with pytest.raises(InsufficientMemoryError):
        gpr.fit(*_data(60)[:2])
    np.testing.assert_array_equal(gpr.predict(X_query), before)
    assert released and all(w._buffer is None for w in released)


def test_gpu_without_the_extra_names_what_is_missing(monkeypatch):
    monkeypatch.setattr(device_module, "simulator_requested", lambda: False)
    monkeypatch.setattr(device_module, "_installed", lambda name: name == "numba_cuda")
    device_module._device.cache_clear()
    try:
        X, y, _ = _data()
        gpr = GaussianProcessRegressor(device="cuda")
        with pytest.raises(DeviceUnavailableError,
                           match=r"CuPy .* nvmath-python .* are not installed: pip install "
                                 r'"fastgp\[cuda\]"'):
            gpr.fit(X, y)
        assert not hasattr(gpr, "X_train_")
        with pytest.raises(DeviceUnavailableError, match="CuPy"):
            GPLVM(device="cuda:1").fit(np.random.default_rng(0).standard_normal((20, 3)))
    finally:
        device_module._device.cache_clear()


@pytest.mark.parametrize("device, message", [
    ("gpu", "device must be 'cpu', 'cuda' or 'cuda:<index>'"),
    ("cuda:x", "device must be"),
])
def test_gpu_device_names_are_checked(device, message):
    X, y, _ = _data()
    with pytest.raises(ValueError, match=message):
        GaussianProcessRegressor(device=device).fit(X, y)


@pytest.mark.parametrize("solver", ["vecchia", "iterative"])
def test_gpu_approximate_solvers_refuse_a_gpu(solver):
    X, y, _ = _data()
    with pytest.raises(ValueError, match=f'solver="{solver}" runs on the CPU only'):
        GaussianProcessRegressor(solver=solver, device="cuda").fit(X, y)


def test_gpu_kernel_off_the_fast_path_is_refused():
    X, y, _ = _data()
    with pytest.raises(ValueError, match="device='cuda' needs a kernel on fastgp's fast"):
        GaussianProcessRegressor(Matern(1.0, nu=0.7), device="cuda").fit(X, y)


def test_gpu_classifier_stays_on_the_cpu():
    with pytest.raises(ValueError, match="runs on the CPU only"):
        exact_solver("cuda").laplace_objective(None, np.zeros(3), 10, False)
    assert "device" not in GaussianProcessClassifier().get_params()


def test_gpu_inputs_on_a_device_are_read_once_to_the_host(monkeypatch):
    class OnGPU:
        __cuda_array_interface__ = {}

    class OnCPU:
        def __dlpack_device__(self):
            return (1, 0)  # kDLCPU

    cpu_input = OnCPU()
    assert device_module.host_input(cpu_input) is cpu_input
    monkeypatch.setattr(device_module, "_installed", lambda name: False)
    with pytest.raises(DeviceUnavailableError, match="reading it needs CuPy"):
        device_module.host_input(OnGPU())


def test_gpu_fitted_model_round_trips_through_pickle():
    X, y, X_query = _data()
    gpr = GaussianProcessRegressor(RBF(1.0) + WhiteKernel(0.1), optimizer=None,
                                   device="cuda").fit(X, y)
    back = pickle.loads(pickle.dumps(gpr))
    for a, b in zip(back.predict(X_query, return_std=True), gpr.predict(X_query,
                                                                      return_std=True)):
        np.testing.assert_array_equal(a, b)
    assert type(back.L_) is type(gpr.L_)


@pytest.mark.gpu
def test_gpu_the_factor_stays_on_the_device():
    import cupy

    X, y, _ = _data()
    gpr = GaussianProcessRegressor(RBF(1.0) + WhiteKernel(0.1), optimizer=None,
                                   device="cuda").fit(X, y)
    assert isinstance(gpr.L_, cupy.ndarray) and gpr.L_.flags.f_contiguous
    assert isinstance(gpr.alpha_, np.ndarray)


def test_gpu_a_pickled_factor_needs_its_gpu_to_load(monkeypatch):
    class OnGPU:
        __cuda_array_interface__ = {}

        def get(self):
            return np.eye(3, order="F")

    state = device_module.portable_state({"L_": OnGPU(), "alpha_": np.ones(3)}, "cuda:0")
    assert isinstance(state["L_"], device_module.HostCopy)
    np.testing.assert_array_equal(state["L_"].array, np.eye(3))
    back = pickle.loads(pickle.dumps(state))
    monkeypatch.setattr(device_module, "simulator_requested", lambda: False)
    monkeypatch.setattr(device_module, "_installed", lambda name: False)
    device_module._device.cache_clear()
    try:
        with pytest.raises(DeviceUnavailableError,
                           match="fitted on cuda:0 .* fit it again with device='cpu'"):
            device_module.restored_state(back)
    finally:
        device_module._device.cache_clear()


@pytest.mark.gpu
def test_gpu_a_pickled_model_goes_back_to_its_gpu():
    import cupy

    X, y, X_query = _data()
    gpr = GaussianProcessRegressor(RBF(1.0) + WhiteKernel(0.1), optimizer=None,
                                   device="cuda").fit(X, y)
    back = pickle.loads(pickle.dumps(gpr))
    assert isinstance(back.L_, cupy.ndarray)
    np.testing.assert_array_equal(back.predict(X_query), gpr.predict(X_query))


def test_gpu_memory_estimate_is_the_buffer_and_a_bounded_rest():
    # the device's estimate: at least the N x N buffer, at most 1.1 times it
    # plus 256 MB (the target a fit's measured peak is held to on a GPU)
    for n in (2_000, 40_000, 120_000):
        buffer = 8 * n * n
        needed = estimates.device_fit_bytes(n, 10, 1, 12)
        assert buffer < needed <= 1.1 * buffer + 256e6
        largest = estimates.device_largest_n(needed, 10, 1, 12)
        assert largest == n
