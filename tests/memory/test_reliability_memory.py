"""Memory, before it is spent: an operation that will not fit raises
MemoryError naming both figures, N and the remedies, before any N x N
allocation and any kernel pass; a user can proceed anyway; the available
figure is read from /proc/meminfo and cgroup limits (v2 and v1, every ancestor
level)."""

import math
import threading
import tracemalloc

import numpy as np
import pytest
from sklearn.gaussian_process.kernels import RBF, WhiteKernel
from sklearn.gaussian_process.kernels import ConstantKernel as C

import fastgp.memory as memory
from conftest import assert_peaks_within_checked_estimates
from fastgp import GaussianProcessRegressor
from fastgp.memory import MemoryReading, skip_memory_check
from fastgp.exceptions import InsufficientMemoryError
from fastgp._solvers.workspace import Workspace

#: A request for N = 200,000 (320 GB for the buffer alone).
N_HUGE = 200_000


def _huge_n():
    """N = 200,000, or more on a machine where 8 N^2 bytes would fit."""
    reading = memory.available_memory()
    if reading is None:
        return N_HUGE
    return max(N_HUGE, 2 * math.isqrt(reading.available // 8 + 1))


def _kernel():
    return C(1.0) * RBF(1.0) + WhiteKernel(0.1)


def _small_fit(n=20, n_targets=None):
    rng = np.random.default_rng(0)
    X = rng.uniform(0, 5, size=(n, 1))
    y = np.sin(X[:, 0]) if n_targets is None else np.sin(X + np.arange(n_targets))
    return GaussianProcessRegressor(_kernel(), optimizer=None).fit(X, y), X


#: The backend's kernel passes: a refusal must come before any of them runs.
_KERNEL_PASSES = ("fill_lower", "grad_trace", "cross", "prior_cov")


def _assert_refused_before_any_work(call, match, max_bytes=64 * 2**20):
    """``call`` raises MemoryError matching ``match`` before any kernel pass
    runs (a spy on the backend's passes) and before anything of N x N size is
    allocated (tracemalloc's peak; NumPy reports its buffers to it). What a
    refusal costs in time is measured by bench/bench_memory_refusal.py, not
    asserted here (a busy machine makes any wall-clock bound flaky or loose)."""
    from fastgp._backend.covariance import FastCovariance, KernelObjectCovariance

    ran = []
    originals = {(cls, name): getattr(cls, name)
                 for cls in (FastCovariance, KernelObjectCovariance) for name in _KERNEL_PASSES}
    for (cls, name), original in originals.items():
        def spy(*args, _name=f"{cls.__name__}.{name}", _original=original, **kwargs):
            ran.append(_name)
            return _original(*args, **kwargs)
        setattr(cls, name, spy)
    tracemalloc.start()
    try:
        with pytest.raises(MemoryError, match=match) as info:
            call()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
        for (cls, name), original in originals.items():
            setattr(cls, name, original)
    assert ran == [], f"{ran} ran before the refusal"
    # the inputs themselves are a few MB; the refused buffer would be >= 320 GB
    assert peak < max_bytes, f"allocated {peak / 2**20:.0f} MB before refusing"
    return info.value


def test_memory_fit_of_huge_n_fails_fast_with_both_figures_and_no_allocation():
    n = _huge_n()
    X = np.linspace(0.0, 1.0, n).reshape(-1, 1)
    y = np.zeros(n)
    # the Cholesky path's refusal ("auto" would take the matrix-free path here)
    gpr = GaussianProcessRegressor(_kernel(), solver="cholesky")
    error = _assert_refused_before_any_work(lambda: gpr.fit(X, y), "Fitting")
    assert isinstance(error, InsufficientMemoryError)
    message = str(error)
    needed = memory.fit_bytes(n, 1, 1, _kernel().n_dims)
    assert error.needed == needed >= 8 * n * n
    assert needed < 1.001 * 8 * n * n
    assert error.n_samples == n
    assert error.available < needed
    assert memory.format_bytes(needed) in message
    assert memory.format_bytes(error.available) in message
    assert f"N = {n:,}" in message
    assert "fewer samples" in message and "more memory" in message
    assert "skip_memory_check" in message and memory.SKIP_ENV in message
    # a refused fit leaves the estimator unfitted
    assert not hasattr(gpr, "L_") and not hasattr(gpr, "X_train_")


def test_memory_predict_cov_and_sample_y_on_huge_m_fail_fast():
    gpr, _ = _small_fit()
    m = _huge_n()
    Xq = np.linspace(0.0, 5.0, m).reshape(-1, 1)
    error = _assert_refused_before_any_work(
        lambda: gpr.predict(Xq, return_cov=True), "return_cov")
    # the message names the query points, not "N samples", and the model's size
    assert error.needed >= 8 * m * m and f"{m:,} query points" in str(error)
    assert "the model has 20 training samples" in str(error)
    assert f"N = {m:,}" not in str(error)
    assert "predict(X, return_std=True)" in str(error)
    error = _assert_refused_before_any_work(lambda: gpr.sample_y(Xq, 3), "sample_y")
    assert error.needed > memory.predict_cov_bytes(20, m, 1)
    assert f"{m:,} query points" in str(error) and str(error).startswith("sample_y")
    # sample_y has no return_std: its message must not suggest it
    assert "return_std" not in str(error)
    # the prior (unfitted) path is checked too
    prior = GaussianProcessRegressor(_kernel())
    error = _assert_refused_before_any_work(lambda: prior.predict(Xq, return_cov=True),
                                             "return_cov")
    assert "the unfitted prior" in str(error)


def test_memory_gplvm_fit_of_huge_n_fails_fast():
    from fastgp import GPLVM

    n = _huge_n()
    Y = np.random.default_rng(0).standard_normal((n, 3))
    # the GPLVM builds its PCA start and O(N) per-block gradient partials
    # (about 200 MB at this N) before it checks: still nothing N x N
    error = _assert_refused_before_any_work(
        lambda: GPLVM(n_components=2, random_state=0).fit(Y), "GPLVM", max_bytes=2**30)
    assert error.needed >= 8 * n * n and f"N = {n:,}" in str(error)


def test_memory_predict_std_on_many_points_is_not_refused(monkeypatch):
    # mean and std work in chunks: their memory does not grow as m^2
    gpr, X = _small_fit()
    monkeypatch.setattr(memory.reading, "available_memory",
                        lambda *a, **k: MemoryReading(10_000, "test"))
    mean, std = gpr.predict(X, return_std=True)
    assert np.all(np.isfinite(mean)) and np.all(std >= 0)


def _tiny_machine(monkeypatch, available=1_000):
    monkeypatch.setattr(memory.reading, "available_memory",
                        lambda *a, **k: MemoryReading(available, "a test's tiny machine"))


def test_memory_log_marginal_likelihood_and_workspace_are_checked(monkeypatch):
    gpr, _ = _small_fit()
    _tiny_machine(monkeypatch)
    with pytest.raises(InsufficientMemoryError, match="log_marginal_likelihood"):
        gpr.log_marginal_likelihood(gpr.kernel_.theta)
    # the backstop every Workspace user (the GPLVM too) goes through
    with pytest.raises(InsufficientMemoryError, match="workspace"):
        Workspace(100).buffer()


def test_memory_skip_memory_check_lets_a_user_proceed(monkeypatch):
    rng = np.random.default_rng(1)
    X, y = rng.uniform(size=(15, 1)), rng.standard_normal(15)
    _tiny_machine(monkeypatch)
    with pytest.raises(InsufficientMemoryError):
        GaussianProcessRegressor(_kernel()).fit(X, y)
    with skip_memory_check():
        assert not memory.memory_check_enabled()
        gpr = GaussianProcessRegressor(_kernel()).fit(X, y)
        gpr.predict(X, return_cov=True)
        gpr.sample_y(X, 2)
    assert memory.memory_check_enabled()  # the block restored the check
    with pytest.raises(InsufficientMemoryError):
        gpr.predict(X, return_cov=True)


def test_memory_skip_memory_check_is_per_thread(monkeypatch):
    _tiny_machine(monkeypatch)
    seen = []
    with skip_memory_check():
        worker = threading.Thread(target=lambda: seen.append(memory.memory_check_enabled()))
        worker.start()
        worker.join()
        assert not memory.memory_check_enabled()
    assert seen == [True]


@pytest.mark.parametrize("value, enabled", [("1", False), ("true", False), ("ON", False),
                                            ("0", True), ("", True)])
def test_memory_environment_variable_switches_the_check_off(monkeypatch, value, enabled):
    monkeypatch.setenv(memory.SKIP_ENV, value)
    assert memory.memory_check_enabled() is enabled
    _tiny_machine(monkeypatch)
    if enabled:
        with pytest.raises(InsufficientMemoryError):
            Workspace(100).buffer()
    else:
        assert Workspace(100).buffer().shape == (100, 100)


def test_memory_no_reading_means_no_check(monkeypatch):
    monkeypatch.setattr(memory.reading, "available_memory", lambda *a, **k: None)
    assert memory.check_memory(10**30, n_samples=1, operation="x", remedies=[]) is None


def test_memory_fit_estimate_bounds_what_a_fit_allocates():
    # tracemalloc sees NumPy's allocations (the workspace and every temporary);
    # the estimate must cover them, and not by orders of magnitude
    rng = np.random.default_rng(2)
    n = 250
    X, y = rng.uniform(0, 5, size=(n, 2)), rng.standard_normal(n)
    tracemalloc.start()
    try:
        GaussianProcessRegressor(_kernel()).fit(X, y)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    estimate = memory.fit_bytes(n, 2, 1, _kernel().n_dims)
    assert 8 * n * n <= peak <= estimate
    assert estimate < 8 * n * n + 2**21  # the N x N buffer is all that grows as N^2


def test_memory_iterative_estimate_grows_by_whole_vectors_in_each_size():
    # O(N (k + t + d)) beside a fixed part: one more preconditioner column,
    # target, probe or input dimension costs the same float64 N-vectors
    # whatever the other sizes, and the part that is not fixed is
    # proportional to N
    sizes = dict(n_samples=1000, n_features=2, n_targets=1, n_probes=8, rank=50)
    for name in ("n_features", "n_targets", "n_probes", "rank"):
        steps = np.diff([memory.iterative_fit_bytes(**{**sizes, name: v}) for v in range(10)])
        assert np.all(steps == steps[0]) and steps[0] > 0, (name, steps)
        assert steps[0] % (8 * 1000) == 0, name
    fixed = memory.iterative_fit_bytes(**{**sizes, "n_samples": 0})
    assert (memory.iterative_fit_bytes(**{**sizes, "n_samples": 2000}) - fixed
            == 2 * (memory.iterative_fit_bytes(**sizes) - fixed))


def test_memory_laplace_estimate_keeps_every_factor_and_the_largest_models_work():
    # every binary model's N x N factor stays alive; the working memory of
    # the model in flight (column blocks of N x 256 floats among it) is that
    # of the largest model and proportional to its N
    fixed = memory.laplace_fit_bytes([], 2, 3)

    def working(n):
        return memory.laplace_fit_bytes([n], 2, 3) - fixed - 8 * n * n

    assert working(1000) >= 8 * 1000 * 256
    assert working(2000) == 2 * working(1000)
    assert memory.laplace_fit_bytes([1000, 100, 100], 2, 3) \
        == memory.laplace_fit_bytes([1000], 2, 3) + 2 * 8 * 100 * 100


def test_memory_vecchia_estimate_bounds_what_a_fit_allocates():
    # past the exact ordering (N > 20,000: the approximate maxmin's pairs),
    # two targets: NumPy's traced peak (cKDTree's own C++ buffers are not
    # traced) below the estimate, and the estimate's per-sample part within
    # 2.5 x of it (measured 1.6 x here; the resident peaks of larger fits
    # are in docs/benchmarks.md, "Memory estimates against measured
    # peaks")
    n, m = 30_000, 10
    rng = np.random.default_rng(3)
    X = rng.uniform(0, 1, size=(n, 2))
    Y = np.column_stack([np.sin(6 * X[:, 0]), np.cos(6 * X[:, 1])])
    Y += 0.1 * rng.standard_normal(Y.shape)
    gpr = GaussianProcessRegressor(C(1.0) * RBF([0.2, 0.2]) + WhiteKernel(0.01),
                                   solver="vecchia", n_neighbors=m, optimizer=None)
    gpr.fit(X[:300], Y[:300])  # compiled before the measurement
    tracemalloc.start()
    try:
        gpr.fit(X, Y)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    estimate = memory.vecchia_fit_bytes(n, 2, 2, m)
    assert peak <= estimate
    assert estimate - memory.estimates._VECCHIA_FIXED <= 2.5 * peak, (peak, estimate)


def test_memory_predict_cov_estimate_bounds_what_predict_allocates():
    gpr, _ = _small_fit(n=30, n_targets=2)
    m = 300
    Xq = np.linspace(0, 5, m).reshape(-1, 1)
    tracemalloc.start()
    try:
        gpr.predict(Xq, return_cov=True)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak <= memory.predict_cov_bytes(30, m, 2)


@pytest.mark.parametrize("n_targets", [None, 2])
def test_memory_the_priors_joint_prediction_and_draws_stay_below_their_estimates(
        n_targets, monkeypatch):
    # the unfitted prior's predict(return_cov=True) and sample_y (scikit-learn's
    # code on k(X*, X*)) stay below the estimates the regressor checks first;
    # the draws' SVD is most of it
    prior = GaussianProcessRegressor(_kernel(), n_targets=n_targets)
    Xq = np.random.default_rng(0).uniform(0.0, 5.0, (400, 2))
    assert_peaks_within_checked_estimates(
        monkeypatch, [lambda: prior.predict(Xq, return_cov=True),
                      lambda: prior.sample_y(Xq, 3)], 0.3)


# --------------------------------------------------------- reading the machine
def test_memory_reading_of_this_machine_is_plausible():
    reading = memory.available_memory()
    assert reading is not None  # Linux CI: /proc/meminfo is there
    assert 0 < reading.available
    total = None
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemTotal:"):
                total = int(line.split()[1]) * 1024
    assert reading.available <= total


def _write(path, text):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def test_memory_meminfo_parsing(tmp_path):
    _write(tmp_path / "new", "MemTotal: 1000 kB\nMemFree: 100 kB\nMemAvailable: 600 kB\n")
    assert memory.reading.meminfo_available(str(tmp_path / "new")) == 600 * 1024
    _write(tmp_path / "old", "MemTotal: 1000 kB\nMemFree: 100 kB\nBuffers: 20 kB\n"
                             "Cached: 300 kB\n")
    assert memory.reading.meminfo_available(str(tmp_path / "old")) == 420 * 1024
    assert memory.reading.meminfo_available(str(tmp_path / "missing")) is None


def _fake_v2(tmp_path, levels):
    """A cgroup v2 tree at tmp/cg with the process in /a/b; ``levels`` maps
    the relative directory to (memory.max, memory.current, inactive_file)."""
    proc = tmp_path / "proc"
    _write(proc / "cgroup", "0::/a/b\n")
    mount = tmp_path / "cg"
    _write(proc / "mountinfo",
           f"30 20 0:26 / {mount} rw,nosuid - cgroup2 cgroup2 rw,nsdelegate\n"
           "31 20 0:27 / /proc rw - proc proc rw\n")
    for rel, (limit, current, inactive) in levels.items():
        d = mount / rel if rel else mount
        _write(d / "memory.max", f"{limit}\n")
        _write(d / "memory.current", f"{current}\n")
        _write(d / "memory.stat", f"anon 5\ninactive_file {inactive}\nactive_file 7\n")
    return str(proc)


def test_memory_cgroup_v2_limit_minus_usage_plus_reclaimable(tmp_path):
    proc = _fake_v2(tmp_path, {"a/b": (1_000_000_000, 400_000_000, 100_000_000),
                               "a": ("max", 500_000_000, 0), "": ("max", 0, 0)})
    reading = memory.reading.cgroup_available(proc)
    assert reading.available == 1_000_000_000 - (400_000_000 - 100_000_000)
    assert "cgroup v2" in reading.source and reading.source.endswith("a/b")


def test_memory_cgroup_v2_tightest_ancestor_wins(tmp_path):
    proc = _fake_v2(tmp_path, {"a/b": ("max", 100, 0),
                               "a": (2_000_000, 1_500_000, 0), "": ("max", 0, 0)})
    reading = memory.reading.cgroup_available(proc)
    assert reading.available == 500_000
    assert reading.source.endswith(str(tmp_path / "cg" / "a"))


def test_memory_cgroup_v2_without_limits_gives_none(tmp_path):
    proc = _fake_v2(tmp_path, {"a/b": ("max", 100, 0), "a": ("max", 1, 0),
                               "": ("max", 0, 0)})
    assert memory.reading.cgroup_available(proc) is None


def test_memory_cgroup_without_an_inactive_file_figure_counts_none_reclaimable(tmp_path):
    # a memory.stat that does not list the key (or lists it unreadably):
    # nothing is counted reclaimable, the figure is limit - usage exactly
    proc = _fake_v2(tmp_path, {"a/b": (1_000_000, 400_000, 0), "a": ("max", 0, 0),
                               "": ("max", 0, 0)})
    stat = tmp_path / "cg" / "a" / "b" / "memory.stat"
    for text in ("anon 5\nactive_file 7\n", "inactive_file n/a\n", ""):
        _write(stat, text)
        assert memory.reading.cgroup_available(proc).available == 1_000_000 - 400_000, text


@pytest.mark.parametrize("malformed", [
    "29 20 0:25 / - cgroup2 cgroup2 rw\n",  # the mount point missing
    "29 20 0:25 / /sys/fs/cgroup rw - cgroup2\n",  # the source and options missing
    "29 20 0:25 / /sys/fs/cgroup rw cgroup2 cgroup2 rw\n",  # no separator
], ids=["no-mount-point", "no-source-or-options", "no-separator"])
def test_memory_cgroup_mountinfo_skips_malformed_lines(tmp_path, malformed):
    proc = _fake_v2(tmp_path, {"a/b": (1_000_000, 400_000, 0), "a": ("max", 0, 0),
                               "": ("max", 0, 0)})
    mountinfo = tmp_path / "proc" / "mountinfo"
    _write(mountinfo, malformed + mountinfo.read_text())
    reading = memory.reading.cgroup_available(proc)
    assert reading.available == 1_000_000 - 400_000
    assert reading.source.endswith(str(tmp_path / "cg" / "a" / "b"))


def test_memory_cgroup_v1_limit_with_namespaced_path(tmp_path):
    proc = tmp_path / "proc"
    # a container: /proc/self/cgroup names a host path the mount does not show
    _write(proc / "cgroup", "5:cpu,cpuacct:/docker/abc\n4:memory:/docker/abc\n")
    mount = tmp_path / "memcg"
    _write(proc / "mountinfo",
           f"40 31 0:32 /docker/abc {mount} rw,relatime - cgroup cgroup rw,memory\n")
    _write(mount / "memory.limit_in_bytes", "2000000000\n")
    _write(mount / "memory.usage_in_bytes", "1500000000\n")
    _write(mount / "memory.stat", "cache 10\ntotal_inactive_file 250000000\n")
    reading = memory.reading.cgroup_available(str(proc))
    assert reading.available == 2_000_000_000 - 1_250_000_000
    assert "cgroup v1" in reading.source
    # v1's "unlimited" is a huge number, not a limit
    _write(mount / "memory.limit_in_bytes", "9223372036854771712\n")
    assert memory.reading.cgroup_available(str(proc)) is None


def test_memory_available_is_the_smallest_reading(tmp_path):
    proc = _fake_v2(tmp_path, {"a/b": (1_000_000, 0, 0), "a": ("max", 0, 0),
                               "": ("max", 0, 0)})
    _write(tmp_path / "meminfo", "MemAvailable: 1000000 kB\n")
    reading = memory.available_memory(str(tmp_path / "meminfo"), proc)
    assert reading.available == 1_000_000 and "cgroup" in reading.source
    _write(tmp_path / "meminfo", "MemAvailable: 100 kB\n")
    reading = memory.available_memory(str(tmp_path / "meminfo"), proc)
    assert reading.available == 102_400 and "MemAvailable" in reading.source


def test_memory_format_bytes():
    assert memory.format_bytes(999) == "999 bytes"
    assert memory.format_bytes(320e9) == "320.0 GB"
    assert memory.format_bytes(1.5e6) == "1.5 MB"


def test_memory_platform_fallbacks_where_there_is_no_proc_meminfo(tmp_path, monkeypatch):
    missing = str(tmp_path / "no-meminfo")
    no_proc = str(tmp_path / "no-proc")
    reading = memory.available_memory(missing, no_proc)
    assert reading is not None and reading.available > 0
    assert "psutil" in reading.source or "sysconf" in reading.source
    # without psutil: the free physical pages from sysconf (POSIX)
    monkeypatch.setitem(__import__("sys").modules, "psutil", None)
    reading = memory.available_memory(missing, no_proc)
    assert reading is not None and "sysconf" in reading.source
    assert 0 < reading.available


def test_memory_exactly_the_available_bytes_fit():
    """The refusal is for more than is available: exactly as much fits."""
    from fastgp.memory.refuse import refuse_if_short

    reading = MemoryReading(10_000, "a test's reading")
    kwargs = dict(n_samples=10, operation="x", remedies=["y"])
    refuse_if_short(10_000, reading, **kwargs)
    with pytest.raises(InsufficientMemoryError):
        refuse_if_short(10_001, reading, **kwargs)
