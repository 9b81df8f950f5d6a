"""The memory ledger cannot be used against its users (docs/reliability.md,
"Who can affect whose fits"): a lock held by another process makes a fit
wait at most the lock timeout, never for ever; a garbage or huge entry is
ignored; no symbolic link is followed; a directory that is not the user's
own is not trusted. Each time the fit falls back to its own view of the
memory with one MemoryLedgerWarning, and nothing raises into the fit."""

import fcntl
import json
import os
import pathlib
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest
from sklearn.gaussian_process.kernels import RBF, WhiteKernel

from fastgp import GaussianProcessRegressor
from fastgp.exceptions import MemoryLedgerWarning
from fastgp.memory import ledger, ledger_files

BUDGET = dict(n_samples=100, operation="a test", remedies=["none"])


@pytest.fixture(autouse=True)
def _fresh_warnings(monkeypatch):
    # every test sees its own first warnings (they are once per process)
    monkeypatch.setattr(ledger_files, "_warned", set())


@pytest.fixture
def shared(tmp_path, monkeypatch):
    """A shared ledger directory (FASTGP_MEMORY_LEDGER), lock timeout 0.3 s."""
    path = tmp_path / "ledger"
    path.mkdir()
    monkeypatch.setenv(ledger.LEDGER_ENV, str(path))
    monkeypatch.setenv(ledger.LOCK_TIMEOUT_ENV, "0.3")
    monkeypatch.delenv(ledger.LIMIT_ENV, raising=False)
    return path


@pytest.fixture
def private(tmp_path, monkeypatch):
    """The default, private ledger, under a temporary directory of the test's."""
    monkeypatch.delenv(ledger.LEDGER_ENV, raising=False)
    monkeypatch.setenv(ledger.LOCK_TIMEOUT_ENV, "0.3")
    monkeypatch.setattr(ledger_files.tempfile, "gettempdir", lambda: str(tmp_path))
    return tmp_path / f"fastgp-memory-ledger-{os.getuid()}"


def _holder(code, ready):
    """A process that runs ``code`` (with os, fcntl, json imported), then
    prints "ready" and sleeps; the test kills it."""
    script = textwrap.dedent("""
        import fcntl, json, os, sys, time
        {code}
        print("ready", flush=True)
        time.sleep(60)
    """).format(code=textwrap.indent(textwrap.dedent(code), "").strip())
    process = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE,
                               text=True)
    assert process.stdout.readline().strip() == ready
    return process


def test_ledger_lock_held_by_another_process_waits_at_most_the_timeout(shared):
    holder = _holder(f"""
        fd = os.open({str(shared / ".lock")!r}, os.O_RDONLY | os.O_CREAT, 0o666)
        fcntl.flock(fd, fcntl.LOCK_EX)
    """, "ready")
    try:
        start = time.monotonic()
        with pytest.warns(MemoryLedgerWarning, match=r"locked by another process.*0\.3 s"):
            reservation = ledger.reserve(10**6, **BUDGET)
        assert time.monotonic() - start < 5.0
        assert reservation.nbytes == 0  # no ledger: the process's own view
        start = time.monotonic()
        assert ledger.budget_reading() is not None  # the own view, not a hang
        assert time.monotonic() - start < 5.0
    finally:
        holder.kill()
        holder.wait()


def test_ledger_fit_beside_a_held_lock_finishes_with_one_warning(shared):
    holder = _holder(f"""
        fd = os.open({str(shared / ".lock")!r}, os.O_RDONLY | os.O_CREAT, 0o666)
        fcntl.flock(fd, fcntl.LOCK_EX)
    """, "ready")
    rng = np.random.default_rng(0)
    X = rng.uniform(-2, 2, size=(30, 1))
    y = np.sin(X[:, 0])
    try:
        with pytest.warns(MemoryLedgerWarning) as record:
            GaussianProcessRegressor(RBF() + WhiteKernel(), random_state=0).fit(X, y)
        assert len([w for w in record if w.category is MemoryLedgerWarning]) == 1
    finally:
        holder.kill()
        holder.wait()


@pytest.mark.parametrize("content, why", [
    (b"\x00garbage{", "not a reservation"),
    (json.dumps({"pid": 1, "bytes": 10**30, "operation": "x", "resident": None,
                 "created": 0.0, "kept": False}).encode(), "more than the machine"),
    (json.dumps({"pid": 1, "bytes": "lots", "operation": "x", "resident": None,
                 "created": 0.0, "kept": False}).encode(), "not a reservation"),
    (b" " * (ledger_files.MAX_ENTRY_BYTES + 10), "longer than"),
])
def test_ledger_garbage_or_huge_entry_is_ignored_with_a_warning(shared, content, why):
    # a live entry (its file locked by another process) that fastgp did not write
    entry = shared / "1-planted.json"
    entry.write_bytes(content)
    holder = _holder(f"""
        fd = os.open({str(entry)!r}, os.O_RDONLY)
        fcntl.flock(fd, fcntl.LOCK_EX)
    """, "ready")
    try:
        with pytest.warns(MemoryLedgerWarning, match=why):
            reservation = ledger.reserve(10**6, **BUDGET)
        try:
            assert reservation.nbytes == 10**6  # the ledger works, the entry is ignored
            assert "pid 1 " not in ledger.budget_reading().source
        finally:
            reservation.release()
    finally:
        holder.kill()
        holder.wait()


def test_ledger_symlinked_lock_file_is_not_followed(shared, tmp_path):
    target = tmp_path / "someone-elses-file"
    target.write_text("untouched")
    os.symlink(target, shared / ".lock")
    with pytest.warns(MemoryLedgerWarning, match="lock file"):
        reservation = ledger.reserve(10**6, **BUDGET)
    assert reservation.nbytes == 0
    assert target.read_text() == "untouched"


class _FakeTime:
    """Stands in for the ledger's ``time`` module: ``monotonic`` reads a
    clock that only ``sleep`` moves, so a wait's length is counted in the
    seconds the code asked to sleep, whatever the machine's speed."""

    def __init__(self):
        self.now = 1000.0
        self.slept = 0.0

    def monotonic(self):
        return self.now

    def sleep(self, seconds):
        self.now += seconds
        self.slept += seconds


@pytest.mark.parametrize("setting, seconds", [("2", 2.0), ("0.25", 0.25),
                                              (None, ledger_files.DEFAULT_LOCK_TIMEOUT)])
def test_ledger_lock_timeout_is_the_setting_in_seconds_on_a_fake_clock(
        shared, monkeypatch, setting, seconds):
    # the ledger's lock held through another open file of this process (flock
    # locks belong to the open file, so this one's attempts fail as another
    # process's would); the reservation gives up after the timeout, read in
    # seconds, and not much later: its retries pause at most 50 ms each
    if setting is None:
        monkeypatch.delenv(ledger.LOCK_TIMEOUT_ENV)
    else:
        monkeypatch.setenv(ledger.LOCK_TIMEOUT_ENV, setting)
    clock = _FakeTime()
    monkeypatch.setattr(ledger_files, "time", clock)
    fd = os.open(shared / ".lock", os.O_RDONLY | os.O_CREAT, 0o666)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        with pytest.warns(MemoryLedgerWarning, match=f"more than {seconds:g} s"):
            reservation = ledger.reserve(10**6, **BUDGET)
    finally:
        os.close(fd)
    assert reservation.nbytes == 0  # no ledger: the process's own view
    assert seconds <= clock.slept <= seconds + 0.05


def _stat_of_another_user(monkeypatch, path, uid=65534):
    """``os.stat``, ``os.lstat`` and ``os.fstat`` report ``path``'s file as
    owned by ``uid``: another user's file, without root to chown it (the
    ledger reads an owner only through these)."""
    inode = os.lstat(path).st_ino
    real_fstat, real_stat, real_lstat = os.fstat, os.stat, os.lstat

    def owned(info):
        if info.st_ino != inode:
            return info
        fields = list(info[:10])
        fields[4] = uid  # st_uid
        return os.stat_result(fields)

    monkeypatch.setattr(os, "fstat", lambda fd: owned(real_fstat(fd)))
    monkeypatch.setattr(os, "stat", lambda *a, **k: owned(real_stat(*a, **k)))
    monkeypatch.setattr(os, "lstat", lambda *a, **k: owned(real_lstat(*a, **k)))


def _live_entry(path, nbytes, pid=1):
    """A well-formed reservation of ``nbytes`` at ``path``, kept alive by an
    exclusive lock on another open file of this process; returns that
    file's descriptor (closing it ends the reservation)."""
    path.write_text(json.dumps({"pid": pid, "bytes": nbytes, "operation": "x",
                                "resident": None, "created": 0.0, "kept": False}))
    fd = os.open(path, os.O_RDONLY)
    fcntl.flock(fd, fcntl.LOCK_EX)
    return fd


@pytest.mark.parametrize("kind", ["shared", "private"])
def test_ledger_another_users_live_entry_counts_in_a_shared_ledger_only(
        kind, tmp_path, monkeypatch):
    # a team's shared ledger is trusted: a member's reservation counts; in
    # the private ledger another user's entry is ignored, with a warning
    limit = 100 * 2**20
    monkeypatch.setenv(ledger.LIMIT_ENV, str(limit))
    monkeypatch.setenv(ledger.LOCK_TIMEOUT_ENV, "0.3")
    if kind == "shared":
        directory = tmp_path / "ledger"
        directory.mkdir()
        monkeypatch.setenv(ledger.LEDGER_ENV, str(directory))
    else:
        monkeypatch.delenv(ledger.LEDGER_ENV, raising=False)
        monkeypatch.setattr(ledger_files.tempfile, "gettempdir", lambda: str(tmp_path))
        directory = pathlib.Path(ledger.ledger_dir())
    entry = directory / "1-other.json"
    fd = _live_entry(entry, 30 * 2**20)
    try:
        _stat_of_another_user(monkeypatch, entry)
        if kind == "shared":
            assert ledger.budget_reading().available == limit - 30 * 2**20
            assert "pid 1 " in ledger.budget_reading().source
        else:
            with pytest.warns(MemoryLedgerWarning, match="belongs to uid 65534"):
                assert ledger.budget_reading().available == limit
    finally:
        os.close(fd)


def test_ledger_live_symlinked_entry_is_not_followed(shared, tmp_path, monkeypatch):
    # the link's target is a live reservation (locked), so a reader that
    # followed the link would count its 90 MB and refuse a 20 MB one
    monkeypatch.setenv(ledger.LIMIT_ENV, str(100 * 2**20))
    target = tmp_path / "elsewhere.json"
    fd = _live_entry(target, 90 * 2**20)
    try:
        os.symlink(target, shared / "1-link.json")
        assert ledger.budget_reading().available == 100 * 2**20
        reservation = ledger.reserve(20 * 2**20, timeout=0, **BUDGET)
        try:
            assert reservation.nbytes == 20 * 2**20
        finally:
            reservation.release()
    finally:
        os.close(fd)
    assert target.exists()


def test_ledger_private_by_default(private):
    reservation = ledger.reserve(10**6, **BUDGET)
    try:
        info = os.stat(private)
        assert info.st_uid == os.getuid() and info.st_mode & 0o777 == 0o700
        (entry,) = private.glob("*.json")
        assert os.stat(entry).st_mode & 0o077 == 0
    finally:
        reservation.release()


def test_ledger_default_directory_planted_as_a_symlink_is_refused(private, tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir(mode=0o700)
    os.symlink(elsewhere, private)
    with pytest.warns(MemoryLedgerWarning, match="symbolic link"):
        reservation = ledger.reserve(10**6, **BUDGET)
    assert reservation.nbytes == 0 and list(elsewhere.iterdir()) == []


def test_ledger_default_directory_open_to_others_is_refused(private):
    private.mkdir(mode=0o700)
    os.chmod(private, 0o777)  # as another user could leave it, pre-made in /tmp
    with pytest.warns(MemoryLedgerWarning, match="should be this user's alone"):
        reservation = ledger.reserve(10**6, **BUDGET)
    assert reservation.nbytes == 0 and list(private.iterdir()) == []


def test_ledger_default_directory_owned_by_another_user_is_refused(private, monkeypatch):
    private.mkdir(mode=0o700)
    _stat_of_another_user(monkeypatch, private)
    with pytest.warns(MemoryLedgerWarning, match="owned by uid 65534"):
        reservation = ledger.reserve(10**6, **BUDGET)
    assert reservation.nbytes == 0


def test_ledger_shared_directory_writable_by_all_without_sticky_bit_is_refused(shared):
    os.chmod(shared, 0o777)
    with pytest.warns(MemoryLedgerWarning, match="sticky bit"):
        reservation = ledger.reserve(10**6, **BUDGET)
    assert reservation.nbytes == 0
    os.chmod(shared, 0o1777)  # with the sticky bit it is a shared ledger again
    reservation = ledger.reserve(10**6, **BUDGET)
    try:
        assert reservation.nbytes == 10**6
    finally:
        reservation.release()


def test_ledger_lock_timeout_must_be_a_number(monkeypatch):
    monkeypatch.setenv(ledger.LOCK_TIMEOUT_ENV, "soon")
    with pytest.raises(ValueError, match="FASTGP_MEMORY_LOCK_TIMEOUT"):
        ledger_files.lock_timeout()


def test_ledger_a_processs_growth_counts_once_latest_reservation_first(monkeypatch):
    """Two reservations of one process: its resident growth since they were
    made spends the later one first, and only what is left of the growth
    spends the earlier one (the growth is not counted twice, nor lost)."""
    from fastgp.memory import ledger

    earlier, later, growth, start = 100_000, 50_000, 60_000, 10**9
    monkeypatch.setattr(ledger, "_resident_bytes", lambda pid: start + growth)
    entries = [{"pid": 7, "bytes": earlier, "resident": start, "created": 1.0},
               {"pid": 7, "bytes": later, "resident": start, "created": 2.0}]
    spent_later = min(growth, later)
    spent_earlier = growth - spent_later
    assert ledger._unspent(entries) == (later - spent_later) + (earlier - spent_earlier)
    assert ledger._unspent(entries) == earlier + later - growth


@pytest.mark.parametrize("shared", [False, True])
def test_ledger_reads_this_users_own_entry_in_a_private_and_a_shared_ledger(
        monkeypatch, tmp_path, shared):
    """The owner check refuses another user's entry in a private ledger only;
    this user's own well-formed entry is read in either kind."""
    from fastgp.memory import ledger_files

    monkeypatch.setattr(ledger_files, "_shared", lambda: shared)
    path = tmp_path / "entry"
    path.write_text(json.dumps({"pid": os.getpid(), "bytes": 1000, "operation": "x",
                                "resident": None, "created": 0.0, "kept": False}))
    fd = os.open(path, os.O_RDONLY)
    try:
        record = ledger_files._record(fd, "entry", str(path), physical=10**12)
    finally:
        os.close(fd)
    assert record is not None and record["bytes"] == 1000 and record["name"] == "entry"
