"""The machine's memory budget (fastgp.memory.ledger): FASTGP_MEMORY_LIMIT's
parsing, the ledger's arithmetic, waiting (one message with the holders'
process ids), the timeout, refusing at once what could never fit, reclaiming
the reservations of dead processes, a kept L_ holding its reservation, and
two processes that each need 60 % of the limit running one after the other
(docs/reliability.md, "One memory budget per machine")."""

import gc
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
import warnings

import numpy as np
import pytest
from sklearn.gaussian_process.kernels import RBF, WhiteKernel

from fastgp import GaussianProcessRegressor
from fastgp import memory
from fastgp.memory import ledger as mb
from fastgp.memory import fit_bytes
from fastgp.exceptions import InsufficientMemoryError

MB = 10**6


def _live_entries(ledger):
    """The ledger's live reservations, read as fastgp reads them."""
    from fastgp.memory.ledger_files import read_entries

    return read_entries(str(ledger), 2**62)
REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), os.pardir, os.pardir))


def _files(path):
    """The ledger's reservation files (none where it was never created)."""
    if not os.path.isdir(path):
        return []
    return sorted(name for name in os.listdir(path) if name.endswith(".json"))


BUDGET = dict(n_samples=1000, operation="Testing the budget", remedies=["wait"])


# ------------------------------------------------------------------ parsing
@pytest.mark.parametrize("text, expected", [
    ("500000000", 500_000_000), ("12GiB", 12 * 2**30), ("1.5 GB", 1_500_000_000),
    ("10kb", 10_000), ("64 MiB", 64 * 2**20), ("2tib", 2 * 2**40), ("7 B", 7),
    (" 3MB ", 3_000_000), (".5GB", 500_000_000),
])
def test_budget_parses_sizes_with_and_without_units(text, expected):
    assert mb.parse_memory_size(text) == expected


@pytest.mark.parametrize("text", ["12 GX", "-1GB", "GB", "1e9", "one GB", "1.2.3MB", ""])
def test_budget_rejects_what_is_not_a_size_with_the_accepted_forms(text):
    with pytest.raises(ValueError, match="FASTGP_MEMORY_LIMIT.*GiB"):
        mb.parse_memory_size(text)


def test_budget_limit_and_timeout_come_from_the_environment(ledger, monkeypatch):
    assert mb.memory_limit() is None
    assert mb.wait_timeout() == mb.DEFAULT_TIMEOUT
    monkeypatch.setenv(mb.LIMIT_ENV, "2GiB")
    monkeypatch.setenv(mb.TIMEOUT_ENV, "2.5")
    assert mb.memory_limit() == 2 * 2**30
    assert mb.wait_timeout() == 2.5
    monkeypatch.setenv(mb.LIMIT_ENV, "lots")
    with pytest.raises(ValueError, match="not a memory size"):
        GaussianProcessRegressor(RBF()).fit(np.zeros((3, 1)), np.zeros(3))
    monkeypatch.setenv(mb.TIMEOUT_ENV, "-3")
    with pytest.raises(ValueError, match="FASTGP_MEMORY_TIMEOUT"):
        mb.wait_timeout()


# ------------------------------------------------------------------- ledger
def _fake_available_memory(monkeypatch, nbytes):
    """The machine's available memory reads ``nbytes`` (source "fake")."""
    monkeypatch.setattr(memory.reading, "available_memory",
                        lambda *a, **k: memory.MemoryReading(nbytes, "fake"))


def _assert_200_mb_count_until_resident():
    """With 2000 MB available and a fresh 200 MB reservation: the budget
    lacks all 200 MB until this process touches 200 MB, then (about) none
    of them."""
    assert 1800 * MB <= mb.budget_reading().available <= 1810 * MB  # all 200 MB still to come
    spent = np.ones(200 * MB // 8)  # touched: resident
    assert mb.budget_reading().available >= 1990 * MB
    del spent


def test_budget_limit_is_a_ledger_of_live_reservations(ledger, monkeypatch):
    monkeypatch.setenv(mb.LIMIT_ENV, "10MB")
    assert mb.budget_reading().available == 10 * MB
    held = mb.reserve(6 * MB, **BUDGET)
    assert mb.budget_reading().available == 4 * MB
    assert len(_files(ledger)) == 1
    with pytest.raises(InsufficientMemoryError, match="pid"):
        memory.check_memory(5 * MB, **BUDGET)
    with held.covering():  # the reservation's own work is not refused
        assert memory.check_memory(5 * MB, **BUDGET) is None
    held.release()
    held.release()  # idempotent
    assert _files(ledger) == []
    assert mb.budget_reading().available == 10 * MB


def test_budget_without_a_limit_counts_only_the_unspent_part_of_reservations(
        ledger, monkeypatch):
    # A reservation's memory counts once: unspent, against the available
    # figure, until the reserving process's resident memory has grown by it
    # (then the operating system's figure already lacks it).
    _fake_available_memory(monkeypatch, 2000 * MB)
    held = mb.reserve(200 * MB, **BUDGET)
    _assert_200_mb_count_until_resident()
    held.release()
    assert mb.budget_reading().available == 2000 * MB


def test_budget_growth_counts_towards_the_reservations_made_before_it(
        ledger, monkeypatch):
    # growth of the process before a reservation was made does not spend it:
    # a small early reservation absorbs only its own bytes of that growth
    _fake_available_memory(monkeypatch, 2000 * MB)
    early = mb.reserve(1 * MB, **BUDGET)
    unrelated = np.ones(150 * MB // 8)  # resident, but no reservation's
    late = mb.reserve(200 * MB, **BUDGET)
    _assert_200_mb_count_until_resident()
    del unrelated
    late.release()
    early.release()


def test_budget_skip_memory_check_reserves_nothing(ledger, monkeypatch):
    monkeypatch.setenv(mb.LIMIT_ENV, "1kB")
    with memory.skip_memory_check():
        held = mb.reserve(10 * MB, **BUDGET)
    assert _files(ledger) == []
    held.release()


# ------------------------------------------------------------ wait, timeout
def test_budget_what_could_never_fit_is_refused_at_once(ledger, monkeypatch):
    monkeypatch.setenv(mb.LIMIT_ENV, "10MB")
    started = time.monotonic()
    with warnings.catch_warnings():
        warnings.simplefilter("error", mb.MemoryWaitWarning)  # no waiting
        with pytest.raises(InsufficientMemoryError,
                           match="could not fit even if every other") as info:
            mb.reserve(11 * MB, timeout=30, **BUDGET)
    assert time.monotonic() - started < 5
    assert info.value.needed == 11 * MB and info.value.available == 10 * MB
    assert _files(ledger) == []


def test_budget_own_kept_models_count_as_permanent(ledger, monkeypatch):
    # waiting for this process's own kept factor would wait for ever
    monkeypatch.setenv(mb.LIMIT_ENV, "10MB")
    kept = mb.reserve(6 * MB, **BUDGET)
    L = np.zeros(6 * MB // 8)
    kept.keep(L)
    with pytest.raises(InsufficientMemoryError, match="could not fit"):
        mb.reserve(6 * MB, timeout=30, **BUDGET)
    del L
    gc.collect()
    assert _files(ledger) == []


def test_budget_waits_with_one_message_naming_the_holders_then_times_out(
        ledger, monkeypatch):
    monkeypatch.setenv(mb.LIMIT_ENV, "10MB")
    monkeypatch.setenv(mb.TIMEOUT_ENV, "0.4")
    held = mb.reserve(6 * MB, **BUDGET)
    started = time.monotonic()
    with pytest.warns(mb.MemoryWaitWarning) as record:
        with pytest.raises(InsufficientMemoryError, match="waited") as info:
            mb.reserve(6 * MB, poll=0.01, **BUDGET)
    waited = time.monotonic() - started
    assert 0.4 <= waited < 5
    waits = [w for w in record if issubclass(w.category, mb.MemoryWaitWarning)]
    assert len(waits) == 1  # said once, though the ledger was read many times
    assert f"pid {os.getpid()} (6.0 MB)" in str(waits[0].message)
    assert f"pid {os.getpid()}" in str(info.value)
    held.release()
    assert _files(ledger) == []


def test_budget_waiting_fit_proceeds_when_the_holder_releases(ledger, monkeypatch):
    monkeypatch.setenv(mb.LIMIT_ENV, "10MB")
    held = mb.reserve(6 * MB, **BUDGET)
    timer = threading.Timer(0.3, held.release)
    timer.start()
    with pytest.warns(mb.MemoryWaitWarning, match=f"pid {os.getpid()}"):
        second = mb.reserve(6 * MB, timeout=30, poll=0.01, **BUDGET)
    timer.join()
    assert held.released and not second.released
    assert len(_files(ledger)) == 1
    second.release()


_HOLDER = textwrap.dedent("""
    import sys, time
    from fastgp.memory import ledger as mb
    held = mb.reserve(int(sys.argv[1]), n_samples=1, operation="holding", remedies=[])
    print("held", flush=True)
    time.sleep(600)
""")


def test_budget_reclaims_the_reservation_of_a_killed_process(ledger, monkeypatch):
    monkeypatch.setenv(mb.LIMIT_ENV, "10MB")
    env = dict(os.environ, PYTHONPATH=REPO + os.pathsep + os.environ.get("PYTHONPATH", ""))
    holder = subprocess.Popen([sys.executable, "-c", _HOLDER, str(6 * MB)], env=env,
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        assert len(_files(ledger)) == 1
        assert mb.budget_reading().available == 4 * MB  # alive: counted
        with pytest.raises(InsufficientMemoryError, match=f"pid {holder.pid}"):
            mb.reserve(6 * MB, timeout=0, **BUDGET)
    finally:
        holder.send_signal(signal.SIGKILL)  # no cleanup runs: as if OOM-killed
        holder.wait()
    second = mb.reserve(6 * MB, timeout=0, **BUDGET)  # the dead one is reclaimed
    names = _files(ledger)
    assert len(names) == 1 and names[0].startswith(f"{os.getpid()}-")
    second.release()


# ------------------------------------------------------- estimators and L_
def _data(n, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.uniform(0, 5, (n, 1))
    return X, np.sin(X[:, 0]) + 0.1 * rng.standard_normal(n)


def test_budget_kept_factor_holds_its_reservation_until_freed_or_refitted(ledger):
    X, y = _data(40)
    gpr = GaussianProcessRegressor(RBF() + WhiteKernel(), random_state=0).fit(X, y)
    (name,) = _files(ledger)
    record = _live_entries(ledger)[0]
    assert record["kept"] and record["bytes"] == gpr.L_.nbytes
    assert record["pid"] == os.getpid()
    gpr.fit(X[:30], y[:30])  # refitted: the old L_ is dropped with its reservation
    gc.collect()
    (refitted,) = _files(ledger)
    assert refitted != name and _live_entries(ledger)[0]["bytes"] == gpr.L_.nbytes
    del gpr
    gc.collect()
    assert _files(ledger) == []


@pytest.mark.filterwarnings("ignore:invalid value:RuntimeWarning")
def test_budget_failed_fit_releases_its_reservation(ledger):
    X, y = _data(20)
    with pytest.raises(ValueError, match="Input y contains infinity"):
        GaussianProcessRegressor(RBF(), optimizer=None).fit(X, y * np.inf)
    assert _files(ledger) == []


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_budget_gplvm_reserves_and_keeps(ledger):
    from fastgp import GPLVM

    Y = np.random.default_rng(0).standard_normal((30, 3))
    model = GPLVM(n_components=1, max_iter=5, random_state=0).fit(Y)
    (record,) = _live_entries(ledger)
    assert record["kept"] and record["bytes"] == model.L_.nbytes
    del model
    gc.collect()
    assert _files(ledger) == []


# ------------------------------------------------- two processes, one budget
_FITTER = textwrap.dedent("""
    import gc, sys, time
    import numpy as np
    from sklearn.gaussian_process.kernels import RBF
    from fastgp import GaussianProcessRegressor
    n, hold = int(sys.argv[1]), float(sys.argv[2])
    rng = np.random.default_rng(0)
    X = rng.uniform(0, 50, (n, 1)); y = np.sin(X[:, 0])
    GaussianProcessRegressor(RBF(), alpha=1e-2, optimizer=None).fit(X[:300], y[:300])
    gc.collect()
    print("ready", flush=True)
    sys.stdin.readline()
    gpr = GaussianProcessRegressor(RBF(), alpha=1e-2, optimizer=None).fit(X, y)
    print("fitted", flush=True)
    time.sleep(hold)
    del gpr
    gc.collect()
    print("done", flush=True)
""")


def _resident(pid):
    try:
        with open(f"/proc/{pid}/statm", "rb") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except OSError:
        return None


@pytest.mark.slow
@pytest.mark.skipif(not os.path.exists("/proc/self/statm"), reason="samples /proc")
def test_budget_two_processes_needing_60_percent_each_run_one_after_the_other(
        ledger, monkeypatch):
    n = 2500  # the N x N buffer: 50 MB, far above a process's resident noise
    buffer = 8 * n * n
    monkeypatch.setenv(mb.LIMIT_ENV, str(int(fit_bytes(n, 1, 1, 1) / 0.6)))
    env = dict(os.environ, PYTHONPATH=REPO + os.pathsep + os.environ.get("PYTHONPATH", ""))
    procs = [subprocess.Popen([sys.executable, "-c", _FITTER, str(n), "0.5"], env=env,
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for _ in range(2)]
    first, second = procs
    try:
        for proc in procs:
            assert proc.stdout.readline().strip() == "ready", proc.stderr.read()
        base = [_resident(proc.pid) for proc in procs]
        samples, stop = [], threading.Event()

        def sampler():  # which processes hold their buffer, every 2 ms
            while not stop.is_set():
                grown = [(_resident(p.pid) or 0) - b for p, b in zip(procs, base)]
                samples.append(tuple(g > buffer // 2 for g in grown))
                time.sleep(0.002)

        watcher = threading.Thread(target=sampler)
        watcher.start()
        first.stdin.write("go\n")
        first.stdin.flush()
        assert first.stdout.readline().strip() == "fitted"
        second.stdin.write("go\n")  # while the first still holds its L_
        second.stdin.flush()
        outputs = [proc.communicate(timeout=120) for proc in procs]
        stop.set()
        watcher.join()
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
    for proc, (out, err) in zip(procs, outputs):
        assert proc.returncode == 0, err
        assert out.split()[-1] == "done", out
    # both finished; the sampler saw each hold its buffer, and never both
    assert any(a for a, _ in samples) and any(b for _, b in samples)
    assert not any(a and b for a, b in samples)
    waits = [line for line in outputs[1][1].splitlines() if "MemoryWaitWarning" in line]
    assert len(waits) == 1 and f"pid {first.pid}" in waits[0]
    assert "MemoryWaitWarning" not in outputs[0][1]
    assert _files(ledger) == []


def test_budget_without_a_usable_ledger_falls_back_to_the_plain_check(
        ledger, tmp_path, monkeypatch):
    # a ledger directory that cannot be created (a file is in the way)
    blocked = tmp_path / "a-file"
    blocked.write_text("")
    monkeypatch.setenv(mb.LEDGER_ENV, str(blocked / "ledger"))
    monkeypatch.setenv(mb.LIMIT_ENV, "10MB")
    assert mb.budget_reading().available == 10 * MB
    held = mb.reserve(6 * MB, **BUDGET)  # recorded nowhere, checked all the same
    assert held.released
    with pytest.raises(InsufficientMemoryError, match="FASTGP_MEMORY_LIMIT"):
        mb.reserve(11 * MB, **BUDGET)
    X, y = _data(20)
    GaussianProcessRegressor(RBF(), optimizer=None).fit(X, y)
