"""Concurrency, global state, persistence and determinism.

- Two estimators fitted at the same time in two threads give the same bits
  as fitted one after the other (fastgp._engine.config.PARALLEL_LOCK serialises the
  Numba parallel regions, whose workqueue layer is not thread-safe).
- The Numba thread count and the BLAS thread limit a user set are the same
  after fit returns or raises.
- Importing fastgp changes no global state and compiles nothing.
- Fitted estimators survive pickle and joblib round trips, in this process
  and in a fresh one, and predict the same bits afterwards.
- The same random_state gives bitwise-identical hyperparameters, embeddings
  and predictions across runs and across 1 and 2 Numba threads.

fastgp runs problems below fastgp._engine.threads.SERIAL_BELOW samples on one thread
(Numba and BLAS) whatever the user set, so a test of thread counts uses a
problem above it, or, to see the user's settings restored, settings other than
that one thread. tests/conftest.py keeps BLAS on one thread for the session;
the tests of results across Python threads lift that pin
(``machine_blas_threads``) and run with the machine's own BLAS threads, as a
user's program does. They need NUMBA_NUM_THREADS >= 2 at start-up and a BLAS
that runs two threads, and say so where they skip.

Why a fit in a worker thread could differ from the same fit on the main thread
(docs/reliability.md, "Python threads and BLAS"): threadpoolctl >= 3.8 lets one
"controlling" Python thread change a pthreads OpenBLAS's process-wide limit and
silently ignores the others. Once the main thread had set a limit, a worker's
serial fit could not lower BLAS to one thread, so its dpotrf/dpotri ran on the
machine's threads and rounded differently (1e-13 in theta). fastgp now hands
control back after each change; the spy test below sees the BLAS count every
factorisation ran on.
"""

import json
import os
import pickle
import subprocess
import sys
import textwrap
import threading
import warnings
from contextlib import contextmanager

import joblib
import numba
import numpy as np
import pytest
from sklearn.exceptions import ConvergenceWarning
from sklearn.gaussian_process.kernels import RBF, WhiteKernel
from sklearn.gaussian_process.kernels import ConstantKernel as C
from threadpoolctl import threadpool_info, threadpool_limits

import fastgp._solvers.cholesky.objective
from fastgp import GPLVM, GaussianProcessRegressor
from fastgp._engine.threads import ADAPTIVE_ENV, SERIAL_BELOW
from fastgp._backend.covariance import make_covariance

#: Numba thread counts compared (set_num_threads is capped by NUMBA_NUM_THREADS).
THREAD_COUNTS = (1, 2)

#: Samples of a problem that runs on the user's threads (not serial).
N_PARALLEL = 300

#: Samples of a problem that fastgp runs on one thread.
N_SERIAL = 40


def _kernel():
    return C(1.0) * RBF([1.0, 1.0]) + WhiteKernel(0.1)


def _problem(seed, n=160):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-3, 3, size=(n, 2))
    return X, np.sin(X[:, 0]) * np.cos(X[:, 1]) + 0.1 * rng.standard_normal(n)


def _fit(seed, n=160, **params):
    X, y = _problem(seed, n)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        return GaussianProcessRegressor(_kernel(), random_state=0, **params).fit(X, y)


def _fingerprint(gpr):
    """Everything a fitted regressor computes, as arrays to compare bitwise."""
    Xq = np.linspace(-3, 3, 14).reshape(7, 2)
    mean, std = gpr.predict(Xq, return_std=True)
    _, cov = gpr.predict(Xq, return_cov=True)
    return {"theta": gpr.kernel_.theta, "alpha": gpr.alpha_, "L": gpr.L_,
            "lml": np.array(gpr.log_marginal_likelihood_value_), "mean": mean,
            "std": std, "cov": cov, "sample": gpr.sample_y(Xq, 2, random_state=3)}


def _assert_same_bits(a, b):
    assert a.keys() == b.keys()
    for key in a:
        np.testing.assert_array_equal(a[key], b[key], err_msg=key)


def test_state_problem_sizes_are_on_either_side_of_the_serial_threshold():
    # the tests below mean something only if N_PARALLEL runs threaded and
    # N_SERIAL runs serial (fastgp._engine.threads)
    assert N_SERIAL < SERIAL_BELOW <= N_PARALLEL


@pytest.fixture
def numba_threads():
    """Set the Numba thread count for a test; restore the user's afterwards.
    Skips where NUMBA_NUM_THREADS, fixed at start-up, is below 2."""
    if numba.config.NUMBA_NUM_THREADS < max(THREAD_COUNTS):
        pytest.skip(f"NUMBA_NUM_THREADS={numba.config.NUMBA_NUM_THREADS} at start-up; "
                    f"comparing {THREAD_COUNTS} Numba threads needs at least "
                    f"{max(THREAD_COUNTS)}")
    original = numba.get_num_threads()
    yield numba.set_num_threads
    numba.set_num_threads(original)


def _blas_threads():
    """The thread counts of the loaded BLAS libraries, sorted and distinct."""
    return sorted({pool["num_threads"] for pool in threadpool_info()
                   if pool["user_api"] == "blas"})


@contextmanager
def _user_blas_limit(count):
    """BLAS limited to ``count`` threads, as a user would (restored on exit);
    skips the test where BLAS cannot run ``count`` threads."""
    with threadpool_limits(limits=count, user_api="blas"):
        if _blas_threads() != [count]:
            pytest.skip(f"BLAS cannot be limited to {count} threads here "
                        f"(it reports {_blas_threads()})")
        yield


def _in_two_threads(jobs):
    """Run two callables at the same moment; their results, in order."""
    barrier = threading.Barrier(len(jobs))
    results, errors = [None] * len(jobs), []

    def work(i):
        try:
            barrier.wait()
            results[i] = jobs[i]()
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(len(jobs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    return results


# ----------------------------------------------------------- concurrency
def test_state_two_threads_give_the_sequential_results(numba_threads, monkeypatch):
    # problems that run Numba's parallel regions, on two Numba threads each
    # (the per-evaluation policy off: on a busy machine it would run one)
    monkeypatch.setenv(ADAPTIVE_ENV, "0")
    numba_threads(2)

    def fit(seed):
        numba.set_num_threads(2)  # per Python thread
        return _fingerprint(_fit(seed, N_PARALLEL))

    jobs = [lambda seed=seed: fit(seed) for seed in (1, 2)]
    sequential = [job() for job in jobs]
    for _ in range(3):
        for got, expected in zip(_in_two_threads(jobs), sequential):
            _assert_same_bits(got, expected)


def test_state_two_gplvm_fits_in_threads_match_the_sequential_results():
    # small GPLVM fits run serial (fastgp._engine.threads), under one process-wide
    # BLAS limit shared by overlapping blocks; at the session's fixed BLAS
    # thread count the bits are those of one fit after the other (the user's
    # limit restored after overlapping blocks: see the test in a fresh process
    # below)
    Y = _latent_data()

    def fit(max_iter):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            model = GPLVM(n_components=2, max_iter=max_iter, random_state=0).fit(Y)
        return model.embedding_

    sequential = [fit(8), fit(15)]
    for _ in range(4):
        results = _in_two_threads([lambda: fit(8), lambda: fit(15)])
        for got, expected in zip(results, sequential):
            np.testing.assert_array_equal(got, expected)


# ------------------------------------------- Python threads and the BLAS
def _skip_unless_two_blas_threads(counts):
    if counts != [2] and (not counts or min(counts) < 2):
        pytest.skip(f"BLAS runs {counts} threads here: a worker thread's fit "
                    f"differs from the main thread's only where it can run more than one")


@pytest.fixture
def blas_counts_seen(monkeypatch):
    """(Python thread name, BLAS thread counts) at every Cholesky factorisation
    of the regression objective during a test."""
    seen = []
    original = fastgp._solvers.cholesky.objective.cholesky_in_place

    def spy(*args, **kwargs):
        seen.append((threading.current_thread().name, _blas_threads()))
        return original(*args, **kwargs)

    monkeypatch.setattr(fastgp._solvers.cholesky.objective, "cholesky_in_place", spy)
    return seen


def _in_a_worker(job):
    return _in_two_threads([job])[0]


def test_state_serial_fit_factors_on_one_blas_thread_in_any_python_thread(
        machine_blas_threads, blas_counts_seen):
    # the cause of a worker's fit differing from the main thread's: its
    # serial block could not limit BLAS (threadpoolctl's controlling thread)
    _skip_unless_two_blas_threads(machine_blas_threads)
    _fit(1)
    _in_a_worker(lambda: _fit(1))
    _fit(1)  # and the main thread again after the worker changed the limit
    names = {name for name, _ in blas_counts_seen}
    assert len(names) == 2, names
    assert {tuple(counts) for _, counts in blas_counts_seen} == {(1,)}
    assert _blas_threads() == machine_blas_threads  # restored after every fit


def test_state_fit_in_a_worker_thread_gives_the_main_threads_bits(machine_blas_threads):
    _skip_unless_two_blas_threads(machine_blas_threads)
    on_main = _fingerprint(_fit(1))
    _assert_same_bits(_in_a_worker(lambda: _fingerprint(_fit(1))), on_main)
    Y = _latent_data()

    def gplvm():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            return GPLVM(n_components=2, max_iter=15, random_state=0).fit(Y).embedding_

    np.testing.assert_array_equal(_in_a_worker(gplvm), gplvm())


def test_state_serial_fits_in_two_threads_give_the_sequential_bits(machine_blas_threads):
    # two overlapping serial blocks share one process-wide BLAS limit of one
    # thread: each fit's bits are those of the fit alone
    _skip_unless_two_blas_threads(machine_blas_threads)
    jobs = [lambda seed=seed: _fingerprint(_fit(seed)) for seed in (1, 2)]
    sequential = [job() for job in jobs]
    for _ in range(2):
        for got, expected in zip(_in_two_threads(jobs), sequential):
            _assert_same_bits(got, expected)
    assert _blas_threads() == machine_blas_threads


def _evaluations(gpr):
    """The likelihood and gradient of a fitted regressor at two points, and
    its predictions: arrays to compare bitwise."""
    theta = gpr.kernel_.theta
    out = _fingerprint(gpr)
    for shift in (0.3, -0.2):
        value, grad = gpr.log_marginal_likelihood(theta + shift, eval_gradient=True)
        out[f"lml{shift}"], out[f"grad{shift}"] = np.array(value), grad
    return out


def test_state_concurrent_threaded_evaluations_at_fixed_blas_give_the_sequential_bits(
        machine_blas_threads, numba_threads, monkeypatch):
    # above the serial threshold, with the per-evaluation policy off, BLAS
    # keeps the machine's count throughout, and OpenBLAS's threaded dpotrf and
    # dpotri, called from two Python threads at once, round as when called
    # one after the other
    _skip_unless_two_blas_threads(machine_blas_threads)
    monkeypatch.setenv(ADAPTIVE_ENV, "0")
    numba_threads(2)

    def job(seed):
        numba.set_num_threads(2)  # per Python thread
        return _evaluations(_fit(seed, N_PARALLEL, optimizer=None))

    jobs = [lambda seed=seed: job(seed) for seed in (1, 2)]
    sequential = [j() for j in jobs]
    for got, expected in zip(_in_two_threads(jobs), sequential):
        _assert_same_bits(got, expected)


#: Relative agreement of one evaluation (likelihood, gradient) where BLAS
#: itself runs on more than one thread inside a fit (another Python thread
#: holds threadpoolctl's control: below): OpenBLAS's threaded routines split
#: their work by the thread count, a few units of rounding of cond(K).
BLAS_COUNT_RTOL = 1e-11


def test_state_results_on_one_and_two_blas_threads_are_the_same_bits(
        machine_blas_threads, monkeypatch):
    # the user's BLAS count sets only how many threads run the LAPACK steps'
    # fixed tiles (fastgp._linalg.tiles), each on single-threaded BLAS
    _skip_unless_two_blas_threads(machine_blas_threads)
    monkeypatch.setenv(ADAPTIVE_ENV, "0")
    X, y = _problem(3, n=2 * SERIAL_BELOW + 100)
    gpr = GaussianProcessRegressor(_kernel(), optimizer=None).fit(X, y)
    theta = gpr.kernel_.theta + 0.3
    results = {}
    for count in (1, 2):
        with threadpool_limits(limits=count, user_api="blas"):
            assert _blas_threads() == [count]
            results[count] = gpr.log_marginal_likelihood(theta, eval_gradient=True)
            assert _blas_threads() == [count]
    (v1, g1), (v2, g2) = results[1], results[2]
    assert v2 == v1
    np.testing.assert_array_equal(g2, g1)


def test_state_a_users_blas_block_in_another_thread_keeps_its_limit(
        machine_blas_threads, blas_counts_seen):
    # threadpoolctl >= 3.8 gives the limit to the Python thread inside its own
    # threadpool_limits block: a worker's serial evaluation then runs at that
    # limit (fastgp's change is ignored) and agrees with the main thread's to
    # the tolerance above, not bitwise (docs/reliability.md). Earlier
    # threadpoolctl has no controlling thread: the worker's evaluation takes
    # BLAS to one thread, and the user's limit is back once it ends
    _skip_unless_two_blas_threads(machine_blas_threads)
    from threadpoolctl import ThreadpoolController

    one_controlling_thread = any(
        hasattr(type(lib), "clear_controlling_thread")
        for lib in ThreadpoolController().select(user_api="blas").lib_controllers)
    gpr = _fit(1, optimizer=None)
    theta = gpr.kernel_.theta + 0.3
    on_main = gpr.log_marginal_likelihood(theta, eval_gradient=True)
    with threadpool_limits(limits=2, user_api="blas"):
        in_worker = _in_a_worker(lambda: gpr.log_marginal_likelihood(theta, eval_gradient=True))
        assert _blas_threads() == [2]
    by_thread = {}
    for name, counts in blas_counts_seen:
        by_thread.setdefault(name == threading.main_thread().name, set()).add(tuple(counts))
    assert by_thread == {True: {(1,)}, False: {(2,) if one_controlling_thread else (1,)}}
    np.testing.assert_allclose(in_worker[0], on_main[0], rtol=BLAS_COUNT_RTOL)
    np.testing.assert_allclose(in_worker[1], on_main[1], rtol=BLAS_COUNT_RTOL,
                               atol=BLAS_COUNT_RTOL * np.max(np.abs(on_main[1])))


def _parallel_dispatchers():
    """(module, name) of every ``parallel=True`` Numba dispatcher that fastgp
    defines, found by walking the package (so a new one cannot be missed)."""
    import importlib
    import pkgutil

    import fastgp

    found = []
    for info in pkgutil.walk_packages(fastgp.__path__, "fastgp."):
        if info.name in ("fastgp.__main__", "fastgp.cli"):  # __main__ runs the CLI
            continue
        module = importlib.import_module(info.name)
        for name, obj in vars(module).items():
            if (isinstance(obj, numba.core.registry.CPUDispatcher)
                    and obj.__module__ == module.__name__
                    and obj.targetoptions.get("parallel")):
                found.append((module, name))
    return found


def test_state_parallel_lock_is_held_around_every_parallel_region(monkeypatch):
    # every parallel kernel runs under PARALLEL_LOCK: record whether it is held
    from fastgp._engine.config import PARALLEL_LOCK

    dispatchers = _parallel_dispatchers()
    assert len(dispatchers) >= 4
    held = []
    for module, name in dispatchers:
        def spy(*args, _original=getattr(module, name), _name=name):
            held.append((_name, PARALLEL_LOCK._is_owned()))
            return _original(*args)

        monkeypatch.setattr(module, name, spy)
    gpr = _fit(1)
    gpr.predict(np.zeros((3, 2)), return_std=True)
    Y = _latent_data()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        model = GPLVM(n_components=2, max_iter=5, random_state=0).fit(Y)
    model.transform(Y[:3] + 0.05)
    # the product passes (the matrix-free path's and the classifier's), through the backend
    X, _ = _problem(1, n=N_SERIAL)
    backend = make_covariance(_kernel(), X)
    block = np.ones((len(X), 2))
    backend.matmat(backend.kernel.theta, block)
    backend.symmetric_rows_product(backend.kernel.theta, 0, 1, block)
    backend.dmatmat(backend.kernel.theta, block)
    backend.grad_bilinear(backend.kernel.theta, block, block)
    # Vecchia's passes: its loss+gradient, its weights (alpha_), its prediction
    _fit(1, solver="vecchia", n_neighbors=5).predict(np.zeros((3, 2)), return_std=True)
    called = {name for name, _ in held}
    assert called == {name for _, name in dispatchers}, "a parallel pass was not exercised"
    assert all(is_held for _, is_held in held), [name for name, ok in held if not ok]


# ------------------------------------------------- thread settings restored
@pytest.mark.parametrize("numba_count, blas_count", [(1, 2), (2, 1)])
def test_state_thread_settings_survive_fits_that_return_or_raise(numba_threads, numba_count,
                                                                 blas_count):
    # a small problem runs on one thread (fastgp._engine.threads), then the user's
    # Numba count (per Python thread) and BLAS limit (process-wide) must be
    # back; 1 and 2 each way round, so that neither a missing restore nor a
    # restore to the default passes
    X, y = _problem(1, n=N_SERIAL)
    numba_threads(numba_count)
    with _user_blas_limit(blas_count):
        expected = (numba_count, [blas_count])
        gpr = GaussianProcessRegressor(_kernel()).fit(X, y)
        assert (numba.get_num_threads(), _blas_threads()) == expected
        gpr.predict(X[:5], return_std=True)
        assert (numba.get_num_threads(), _blas_threads()) == expected
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            with pytest.raises(ValueError, match="overflow"):  # after Numba ran
                GaussianProcessRegressor(_kernel()).fit(X, y * 1e300)
        assert (numba.get_num_threads(), _blas_threads()) == expected
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            GPLVM(n_components=1, max_iter=3, random_state=0).fit(np.column_stack([y, X]))
        assert (numba.get_num_threads(), _blas_threads()) == expected


def test_state_numba_thread_count_in_a_worker_thread_is_kept(numba_threads):
    # Numba's count is per Python thread: a worker's own setting survives its
    # fit, and the main thread's is not touched
    X, y = _problem(1, n=N_SERIAL)
    numba_threads(1)
    seen = []

    def work():
        numba.set_num_threads(2)
        GaussianProcessRegressor(_kernel()).fit(X, y)
        seen.append(numba.get_num_threads())

    worker = threading.Thread(target=work)
    worker.start()
    worker.join()
    assert seen == [2]
    assert numba.get_num_threads() == 1


_OVERLAP_PROBE = textwrap.dedent("""
    import json, sys, threading
    from threadpoolctl import threadpool_info
    from fastgp._engine.threads import threads_for

    def blas():
        return sorted({p["num_threads"] for p in threadpool_info()
                       if p["user_api"] == "blas"})

    entered = [threading.Event(), threading.Event()]
    left = [threading.Event(), threading.Event()]
    done = threading.Event()
    seen = {"before": blas()}

    def block(me, leaves_first):
        other = 1 - me
        if me == 1:
            entered[0].wait()  # the first thread enters first
        with threads_for(10):  # a problem small enough to run serial
            entered[me].set()
            entered[other].wait()
            seen[f"inside_{me}"] = blas()
            if me != leaves_first:
                left[other].wait()
        left[me].set()
        done.wait()  # the thread stays alive until both blocks ended

    leaves_first = int(sys.argv[1])
    threads = [threading.Thread(target=block, args=(me, leaves_first)) for me in (0, 1)]
    for t in threads:
        t.start()
    for event in left:
        event.wait()
    seen["after_blocks"] = blas()
    done.set()
    for t in threads:
        t.join()
    seen["after_threads"] = blas()
    print(json.dumps(seen))
""")


@pytest.mark.parametrize("leaves_first", [
    # threadpoolctl >= 3.8 lets one "controlling" thread change a pthreads
    # OpenBLAS's limit and ignores the others: the restore by the thread that
    # leaves last must still take effect
    pytest.param(0, id="first-in-leaves-first"),
    pytest.param(1, id="first-in-leaves-last"),
])
def test_state_overlapping_serial_blocks_in_two_threads_restore_the_users_blas_limit(
        leaves_first):
    # two small fits in two threads whose serial blocks (fastgp._engine.threads)
    # overlap in a fixed order: BLAS is on one thread while either is inside,
    # and on the user's limit (2, from the environment) once both left,
    # whichever left first. In a fresh process: this session's BLAS pin
    # (tests/conftest.py) is held by the main thread, which threadpoolctl >= 3.8
    # lets no other thread override
    env = dict(os.environ, OPENBLAS_NUM_THREADS="2")
    out = subprocess.run([sys.executable, "-c", _OVERLAP_PROBE, str(leaves_first)],
                         capture_output=True, text=True, env=env, timeout=300)
    assert out.returncode == 0, out.stderr
    seen = json.loads(out.stdout.strip().splitlines()[-1])
    if seen["before"] != [2]:
        pytest.skip(f"BLAS does not run 2 threads here (it reports {seen['before']})")
    assert seen["inside_0"] == seen["inside_1"] == [1]
    assert seen["after_blocks"] == [2]
    assert seen["after_threads"] == [2]


# ---------------------------------------------------------- import state
_IMPORT_PROBE = textwrap.dedent("""
    import json, logging, os, signal, sys, warnings
    import numpy as np, numba, scipy, sklearn, sklearn.gaussian_process

    def state():
        return {
            "warnings": [repr(f) for f in warnings.filters],
            "np_err": np.geterr(),
            "np_print": repr(np.get_printoptions()),
            "numba_threads_config": numba.config.NUMBA_NUM_THREADS,
            "numba_layer": numba.config.THREADING_LAYER,
            "numba_parallel_launched": bool(numba.np.ufunc.parallel._is_initialized),
            "environ": sorted(os.environ.items()),
            "sigint": repr(signal.getsignal(signal.SIGINT)),
            "recursion": sys.getrecursionlimit(),
            "logging": (logging.getLogger().level, len(logging.getLogger().handlers)),
            "sklearn_config": repr(sorted(sklearn.get_config().items())),
            "cwd": os.getcwd(),
        }

    HEAVY = ("matplotlib", "pandas", "psutil", "hypothesis", "pytest", "torch", "joblib")
    already = {m for m in HEAVY if m in sys.modules}
    before = state()
    import fastgp
    after = state()
    import importlib, pkgutil
    modules = [importlib.import_module(info.name)
               for info in pkgutil.walk_packages(fastgp.__path__, "fastgp.")
               if info.name not in ("fastgp.__main__", "fastgp.cli")]  # __main__ runs the CLI
    compiled = [
        f"{module.__name__}.{name}"
        for module in modules
        for name, obj in vars(module).items()
        if isinstance(obj, numba.core.registry.CPUDispatcher) and obj.signatures
    ]
    n_dispatchers = sum(isinstance(obj, numba.core.registry.CPUDispatcher)
                        for module in modules for obj in vars(module).values())
    heavy = [m for m in HEAVY if m in sys.modules and m not in already]
    print(json.dumps({"before": before, "after": after, "compiled": compiled,
                      "heavy": heavy, "n_dispatchers": n_dispatchers}))
""")


def test_state_importing_fastgp_changes_no_global_state_and_compiles_nothing():
    env = {k: v for k, v in os.environ.items() if not k.startswith("NUMBA_")}
    out = subprocess.run([sys.executable, "-c", _IMPORT_PROBE], capture_output=True,
                         text=True, env=env, timeout=300, check=True)
    report = json.loads(out.stdout.strip().splitlines()[-1])
    before, after = report["before"], report["after"]
    for key in before:
        assert after[key] == before[key], key
    assert not after["numba_parallel_launched"]  # no threading layer started
    assert report["n_dispatchers"] > 10  # the probe did look at the jitted code
    assert report["compiled"] == []
    assert report["heavy"] == []


# ------------------------------------------------------------ persistence
def test_state_pickle_and_joblib_round_trips_predict_the_same_bits(tmp_path):
    gpr = _fit(1)
    expected = _fingerprint(gpr)
    _assert_same_bits(_fingerprint(pickle.loads(pickle.dumps(gpr))), expected)
    joblib.dump(gpr, tmp_path / "gpr.joblib")
    _assert_same_bits(_fingerprint(joblib.load(tmp_path / "gpr.joblib")), expected)
    # an unfitted estimator too, and it fits the same afterwards
    fresh = pickle.loads(pickle.dumps(GaussianProcessRegressor(_kernel(), random_state=0)))
    X, y = _problem(1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        _assert_same_bits(_fingerprint(fresh.fit(X, y)), expected)


def test_state_pickle_loads_and_predicts_in_a_fresh_process(tmp_path):
    gpr = _fit(2)
    Xq = np.linspace(-3, 3, 14).reshape(7, 2)
    mean, std = gpr.predict(Xq, return_std=True)
    joblib.dump(gpr, tmp_path / "gpr.joblib")
    np.save(tmp_path / "Xq.npy", Xq)
    script = textwrap.dedent(f"""
        import joblib, numpy as np
        gpr = joblib.load({str(tmp_path / "gpr.joblib")!r})
        mean, std = gpr.predict(np.load({str(tmp_path / "Xq.npy")!r}), return_std=True)
        np.save({str(tmp_path / "out.npy")!r}, np.column_stack([mean, std]))
    """)
    subprocess.run([sys.executable, "-c", script], check=True, timeout=300)
    out = np.load(tmp_path / "out.npy")
    np.testing.assert_array_equal(out[:, 0], mean)
    np.testing.assert_array_equal(out[:, 1], std)


def test_state_gplvm_round_trips_transform_the_same_bits(tmp_path):
    Y = _latent_data()
    model = GPLVM(n_components=2, max_iter=15, random_state=0).fit(Y)
    for loaded in (pickle.loads(pickle.dumps(model)),
                   joblib.load(joblib.dump(model, tmp_path / "m.joblib")[0])):
        np.testing.assert_array_equal(loaded.embedding_, model.embedding_)
        np.testing.assert_array_equal(loaded.inverse_transform(model.embedding_[:5]),
                                      model.inverse_transform(model.embedding_[:5]))
        np.testing.assert_array_equal(loaded.transform(Y[:3] + 0.01),
                                      model.transform(Y[:3] + 0.01))


# ------------------------------------------------------------ determinism
def test_state_same_random_state_gives_the_same_bits_across_runs():
    _assert_same_bits(_fingerprint(_fit(1, n_restarts_optimizer=2)),
                      _fingerprint(_fit(1, n_restarts_optimizer=2)))


def test_state_results_do_not_depend_on_the_numba_thread_count(numba_threads, monkeypatch):
    monkeypatch.setenv(ADAPTIVE_ENV, "0")  # the count set is the count run
    results = []
    for count in THREAD_COUNTS:
        numba_threads(count)
        results.append(_fingerprint(_fit(1, N_PARALLEL, n_restarts_optimizer=1)))
    for other in results[1:]:
        _assert_same_bits(other, results[0])


def _latent_data(n=40):
    rng = np.random.default_rng(5)
    t = rng.uniform(0, 3, n)
    return np.column_stack([np.sin(t), np.cos(t), t, t**2 / 3]) + 0.05 * rng.standard_normal((n, 4))


def test_state_gplvm_embedding_is_bitwise_reproducible_across_runs_and_threads(numba_threads,
                                                                              monkeypatch):
    monkeypatch.setenv(ADAPTIVE_ENV, "0")  # the count set is the count run
    Y = _latent_data(N_PARALLEL)
    embeddings = []
    for count in THREAD_COUNTS + THREAD_COUNTS:
        numba_threads(count)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            model = GPLVM(n_components=2, init="random", max_iter=25, random_state=7).fit(Y)
        embeddings.append((model.embedding_, model.kernel_.theta,
                           model.inverse_transform(model.embedding_[:4])))
    for other in embeddings[1:]:
        for a, b in zip(other, embeddings[0]):
            np.testing.assert_array_equal(a, b)
