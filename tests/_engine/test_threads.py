"""The thread policy of a fit (fastgp._engine.threads): every evaluation uses
only the cores that are idle when it starts (Numba and BLAS), never more than
the user's settings, and the user's settings come back afterwards."""

import os

import numba
import numpy as np
import pytest
from sklearn.gaussian_process.kernels import RBF, WhiteKernel
from sklearn.gaussian_process.kernels import ConstantKernel as C
from threadpoolctl import threadpool_info, threadpool_limits

import fastgp._engine.threads as threads
import fastgp._linalg.tiles as tiles
import fastgp._solvers.cholesky.objective as objective_module
from fastgp import GaussianProcessRegressor


def _fake_proc(tmp_path, runnable, own_states, name="proc"):
    tmp_path = tmp_path / name
    tmp_path.mkdir()
    loadavg = tmp_path / "loadavg"
    loadavg.write_text(f"0.50 0.40 0.30 {runnable}/321 4242\n")
    tasks = tmp_path / "task"
    tasks.mkdir()
    for tid, state in enumerate(own_states, start=100):
        (tasks / str(tid)).mkdir()
        # a name with a space and a parenthesis, as a thread may have
        (tasks / str(tid) / "stat").write_text(f"{tid} (py worker) x) {state} 1 2 3\n")
    return str(loadavg), str(tasks)


@pytest.fixture
def all_cores(monkeypatch):
    """A machine whose affinity mask is all of it, with 4 cores."""
    monkeypatch.setattr(threads, "usable_cpus", lambda: 4)
    monkeypatch.setattr(os, "cpu_count", lambda: 4)


def test_threads_quiet_machine_gives_every_core(tmp_path, all_cores):
    loadavg, tasks = _fake_proc(tmp_path, 1, ["R", "S", "S"])
    assert threads.idle_cores(loadavg, tasks) == 4


def test_threads_other_runnable_tasks_take_cores(tmp_path, all_cores):
    # 3 runnable: this thread and two of another process's OpenBLAS threads
    loadavg, tasks = _fake_proc(tmp_path, 3, ["R", "S", "S"])
    assert threads.idle_cores(loadavg, tasks) == 2
    # a saturated machine still leaves one thread
    loadavg, tasks = _fake_proc(tmp_path, 9, ["R"], name="busy")
    assert threads.idle_cores(loadavg, tasks) == 1


def test_threads_own_spinning_threads_are_not_load(tmp_path, all_cores):
    # OpenBLAS's workers spin after a call: this process's runnable threads
    # are not other tasks
    loadavg, tasks = _fake_proc(tmp_path, 3, ["R", "R", "R", "S"])
    assert threads.idle_cores(loadavg, tasks) == 4


def test_threads_more_own_runnable_threads_than_the_run_count_gives_every_core_no_more(
        tmp_path, all_cores):
    # the run count and the threads' states are read at different moments:
    # more of this process's threads may be seen runnable than the count has
    loadavg, tasks = _fake_proc(tmp_path, 2, ["R", "R", "R", "R", "S"])
    assert threads.idle_cores(loadavg, tasks) == 4


def test_threads_affinity_mask_gets_its_share_of_the_load(tmp_path, monkeypatch):
    monkeypatch.setattr(threads, "usable_cpus", lambda: 2)
    monkeypatch.setattr(os, "cpu_count", lambda: 8)
    loadavg, tasks = _fake_proc(tmp_path, 5, ["R"])  # 4 others over 8 cores
    assert threads.idle_cores(loadavg, tasks) == 1
    loadavg, tasks = _fake_proc(tmp_path, 2, ["R"], name="quiet")
    assert threads.idle_cores(loadavg, tasks) == 2  # 1 other over 8 cores: 0.25


def test_threads_unreadable_proc_gives_every_core(tmp_path, all_cores):
    assert threads.idle_cores(str(tmp_path / "missing"), str(tmp_path)) == 4


def test_threads_idle_cores_is_cheap(monkeypatch):
    # decided before every evaluation: it must read the run queue (about
    # 25 us on a loaded 2-core machine), never scan the loaded libraries as
    # threadpoolctl does (milliseconds); counted, not timed
    import threadpoolctl

    def scan(*args, **kwargs):
        raise AssertionError("idle_cores scanned the loaded libraries")

    monkeypatch.setattr(threadpoolctl, "ThreadpoolController", scan)
    monkeypatch.setattr(threadpoolctl, "threadpool_info", scan)
    opened = []
    real_open = open

    def counting_open(path, *args, **kwargs):
        opened.append(str(path))
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr("builtins.open", counting_open)
    for _ in range(20):
        assert 1 <= threads.idle_cores() <= threads.usable_cpus()
    # the load average, and this process's own threads only when it matters
    assert all(path.startswith("/proc/") for path in opened), set(opened)
    assert len(opened) <= 20 * (1 + len(os.listdir("/proc/self/task"))), len(opened)


class _FakeClock:
    """perf_counter and sleep for the thread policy, without waiting."""

    def __init__(self):
        self.now = 0.0

    def perf_counter(self):
        return self.now

    def sleep(self, seconds):
        self.now += seconds


def _blas_counts():
    return sorted({pool["num_threads"] for pool in threadpool_info()
                   if pool["user_api"] == "blas"})


def _problem(n):
    rng = np.random.default_rng(0)
    X = rng.uniform(0, 5, size=(n, 1))
    return X, np.sin(X[:, 0]) + 0.1 * rng.standard_normal(n)


@pytest.mark.parametrize("idle", [1, 64])
def test_threads_each_evaluation_uses_the_idle_cores_and_settings_come_back(
        monkeypatch, idle):
    if numba.config.NUMBA_NUM_THREADS < 2 or (os.cpu_count() or 1) < 2:
        pytest.fail("this test needs 2 cores and NUMBA_NUM_THREADS >= 2")
    monkeypatch.setenv(threads.ADAPTIVE_ENV, "1")
    monkeypatch.setattr(threads, "idle_cores", lambda: idle)
    seen = []
    original = objective_module.NegLogMarginalLikelihood.__call__

    def recording(objective, theta):
        seen.append((numba.get_num_threads(), _blas_counts(), tiles.width()))
        return original(objective, theta)

    monkeypatch.setattr(objective_module.NegLogMarginalLikelihood, "__call__", recording)
    X, y = _problem(threads.SERIAL_BELOW + 20)
    before = numba.get_num_threads()
    numba.set_num_threads(2)
    try:
        with threadpool_limits(limits=2, user_api="blas"):
            GaussianProcessRegressor(C(1.0) * RBF(1.0) + WhiteKernel(0.1)).fit(X, y)
            assert _blas_counts() == [2]  # the user's BLAS limit is back
        assert numba.get_num_threads() == 2  # and this thread's Numba count
    finally:
        numba.set_num_threads(before)
    # BLAS itself on one thread inside the fit; the LAPACK tiles on the
    # idle cores (fastgp._linalg.tiles)
    expected = (1, [1], 1) if idle == 1 else (2, [1], 2)
    assert seen and all(s == expected for s in seen), seen
    assert tiles.width() is None  # outside the fit


@pytest.mark.parametrize("setting", [None, "0", ""])
def test_threads_policy_is_off_unless_asked_for(monkeypatch, setting):
    # off by default (whole fits beside a competitor ran 1.5 x slower with
    # it: fastgp._engine.threads); "0" or anything but "1" keeps it off
    if setting is None:
        monkeypatch.delenv(threads.ADAPTIVE_ENV, raising=False)
    else:
        monkeypatch.setenv(threads.ADAPTIVE_ENV, setting)
    monkeypatch.setattr(threads, "idle_cores", lambda: pytest.fail("consulted"))
    X, y = _problem(threads.SERIAL_BELOW + 20)
    GaussianProcessRegressor(C(1.0) * RBF(1.0) + WhiteKernel(0.1)).fit(X, y)


def test_threads_a_blip_of_busy_cores_keeps_the_threads(monkeypatch):
    # The run queue reads busy once, then idle: the evaluation keeps both
    # threads (a blip of a few milliseconds is not a competitor).
    readings = iter([1] + [2] * 100)
    monkeypatch.setattr(threads, "idle_cores", lambda: next(readings))
    governor = threads.Governor(2, 2, adaptive=True)
    assert governor.threads_now() == 2


def test_threads_lasting_load_takes_the_threads_within_the_window(monkeypatch):
    looks = []
    clock = _FakeClock()
    monkeypatch.setattr(threads, "time", clock)
    monkeypatch.setattr(threads, "idle_cores", lambda: looks.append(1) or 1)
    governor = threads.Governor(2, 2, adaptive=True)
    assert governor.threads_now() == 1
    assert len(looks) > 1
    assert clock.now <= threads.CONFIRM_WINDOW_S + threads.CONFIRM_STEP_S
    # after a short evaluation the window shrinks to a share of its time
    governor.last_seconds = 1e-5
    looks.clear()
    start = clock.now
    assert governor.threads_now() == 1
    assert len(looks) <= 2
    assert clock.now - start <= threads.CONFIRM_SHARE * 1e-5 + threads.CONFIRM_STEP_S


_POLICY_PROBE = """
import os, sys
import numpy as np
from numba.np.ufunc import parallel
seen = []
original = parallel._launch_threads
def spy():
    if not parallel._is_initialized:
        seen.append(os.environ.get("OMP_WAIT_POLICY"))
    return original()
parallel._launch_threads = spy
from fastgp import GaussianProcessRegressor
from sklearn.gaussian_process.kernels import RBF, WhiteKernel
X = np.linspace(0, 5, 300)[:, None]
GaussianProcessRegressor(RBF(1.0) + WhiteKernel(0.1), optimizer=None).fit(X, np.sin(X[:, 0]))
print(seen[0] if seen else "started", os.environ.get("OMP_WAIT_POLICY"))
"""


@pytest.mark.parametrize("env, expected", [
    ({}, "PASSIVE None"),  # the pool starts passive; the environment comes back
    ({"OMP_WAIT_POLICY": "ACTIVE"}, "ACTIVE ACTIVE"),  # the program's choice stands
    ({"GOMP_SPINCOUNT": "1000"}, "None None"),
    ({"FASTGP_OMP_PASSIVE": "0"}, "None None"),
])
def test_threads_numba_pool_starts_with_openmp_passive_wait_unless_chosen(env, expected):
    # GNU OpenMP's spinning workers halve a dpotrf that follows a Numba pass
    # (fastgp._engine.config): fastgp starts Numba's pool with the passive
    # policy, in the environment only while the pool loads
    import subprocess
    import sys

    child_env = {k: v for k, v in os.environ.items()
                 if k not in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT", "FASTGP_OMP_PASSIVE")}
    child_env.update(env)
    out = subprocess.run([sys.executable, "-c", _POLICY_PROBE], env=child_env,
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().splitlines()[-1] == expected
