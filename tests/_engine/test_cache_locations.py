"""fastgp runs where Numba cannot write its cache, and a shared install can be
compiled once for everyone.

- Where no cache location is writable (a shared read-only install, no
  writable home, NUMBA_CACHE_DIR unusable), a fit compiles in memory, gives
  the numbers of a cached run and warns once (NumbaCacheWarning); Numba itself
  raised "RuntimeError: cannot cache function ...: no locator available".
- ``python -m fastgp.precompile`` compiles every routine of fastgp._engine
  into the in-tree cache; afterwards a new process compiles nothing, also when
  that cache is read-only and the user's own cache is writable, or unusable.

Each case runs in a child process on a private copy of the package
(tests/_cache_sandbox.py).
"""

import textwrap

import numpy as np
import pytest
from _cache_sandbox import Sandbox, read_only

#: every test here compiles a private copy of the package in new processes
pytestmark = pytest.mark.slow

#: A small fit, predictions, samples and the likelihood with its gradient;
#: prints what it computed, the NumbaCacheWarnings it saw (every one: the
#: filter is "always") and how many specialisations were compiled or loaded.
FIT = textwrap.dedent("""
    import json, warnings
    import numpy as np
    warnings.simplefilter("always")
    with warnings.catch_warnings(record=True) as seen:
        import fastgp
        from fastgp import GaussianProcessRegressor, NumbaCacheWarning
        from fastgp.precompile import engine_routines
        from sklearn.exceptions import ConvergenceWarning
        from sklearn.gaussian_process.kernels import RBF, WhiteKernel
        from sklearn.gaussian_process.kernels import ConstantKernel as C
        warnings.simplefilter("ignore", ConvergenceWarning)
        rng = np.random.default_rng(3)
        X = rng.uniform(-2, 2, size=(30, 2))
        y = np.sin(X[:, 0]) + 0.05 * rng.standard_normal(30)
        gpr = GaussianProcessRegressor(C() * RBF([1.0, 1.0]) + WhiteKernel(0.1),
                                       random_state=0).fit(X, y)
        Xq = rng.uniform(-2, 2, size=(6, 2))
        mean, std = gpr.predict(Xq, return_std=True)
        lml, grad = gpr.log_marginal_likelihood(gpr.kernel_.theta, eval_gradient=True)
        sample = gpr.sample_y(Xq, 2, random_state=1)
    routines = engine_routines().values()
    print(json.dumps({
        "fastgp": fastgp.__file__,
        "numbers": {"theta": gpr.kernel_.theta.tolist(), "mean": mean.tolist(),
                    "std": std.tolist(), "lml": lml, "grad": grad.tolist(),
                    "sample": sample.ravel().tolist()},
        "cache_warnings": [str(w.message) for w in seen
                           if issubclass(w.category, NumbaCacheWarning)],
        "compiled": sum(sum(d.stats.cache_misses.values()) for d in routines),
        "loaded": sum(sum(d.stats.cache_hits.values()) for d in routines),
    }))
""")

#: Other uses than the precompile command's own: other kernels (one program
#: interpreter serves them all), normalize_y, two targets, per-sample alpha,
#: one- and two-row queries, Fortran-ordered queries, a GPLVM with another
#: number of components. Prints how many specialisations were compiled/loaded.
OTHER_USES = textwrap.dedent("""
    import json, warnings
    import numpy as np
    import fastgp
    from fastgp import GPLVM, GaussianProcessRegressor
    from fastgp.precompile import engine_routines
    from sklearn.gaussian_process.kernels import (DotProduct, Matern,
                                                  RationalQuadratic, WhiteKernel)
    warnings.simplefilter("ignore")
    rng = np.random.default_rng(1)
    X = rng.uniform(-3, 3, size=(33, 3))
    y = np.sin(X[:, 0])
    kernels = [Matern(nu=1.5) * RationalQuadratic() + WhiteKernel(),
               RationalQuadratic() * DotProduct() + WhiteKernel(),
               Matern([1.0, 1.0, 1.0], nu=2.5)]
    queries = [X[:1], X[:2], np.asfortranarray(rng.uniform(-3, 3, size=(9, 3)))]
    for kernel in kernels:
        for target in (y, np.column_stack([y, X[:, 1]])):
            gpr = GaussianProcessRegressor(kernel, normalize_y=True, optimizer=None,
                                           alpha=np.full(33, 1e-3)).fit(X, target)
            gpr.log_marginal_likelihood(kernel.theta, eval_gradient=True)
            for Xq in queries:
                gpr.predict(Xq, return_std=True)
                gpr.predict(Xq, return_cov=True)
                gpr.sample_y(Xq, 2, random_state=0)
    Y = rng.standard_normal((25, 6))
    gplvm = GPLVM(n_components=3, max_iter=4, random_state=0).fit(Y)
    for rows in (Y[:5] + 0.3, Y[:1] + 0.3):
        gplvm.inverse_transform(gplvm.transform(rows), return_std=True)
    routines = engine_routines().values()
    print(json.dumps({
        "fastgp": fastgp.__file__,
        "compiled": sum(sum(d.stats.cache_misses.values()) for d in routines),
        "loaded": sum(sum(d.stats.cache_hits.values()) for d in routines),
    }))
""")


@pytest.fixture(scope="module")
def precompiled(tmp_path_factory):
    """A package copy whose in-tree cache ``python -m fastgp.precompile``
    filled, and the command's output."""
    sandbox = Sandbox(tmp_path_factory.mktemp("precompiled"))
    proc = sandbox.run(["-m", "fastgp.precompile"], check=False)
    return sandbox, proc


def test_cache_precompile_fills_the_in_tree_cache_and_says_where(precompiled):
    sandbox, proc = precompiled
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert f"cache: {sandbox.in_tree}\n" in proc.stdout
    assert "fastgp.precompile:" in proc.stdout and " s\n" in proc.stdout
    written = sandbox.cache_files(sandbox.in_tree)
    entry_points = ("passes.covariance_pass-", "latent_passes.grad_latent_lower-",
                    "latent_passes.grad_cross_weighted-", "latent_passes.diag_with_dx-")
    for prefix in entry_points:
        assert any(name.startswith(prefix) and name.endswith(".nbi") for name in written), prefix
    assert len(sandbox.cache_files()) == len(written)  # nothing elsewhere


def test_cache_precompile_run_again_loads_everything(precompiled):
    sandbox, _ = precompiled
    before = sandbox.cache_files()
    proc = sandbox.run(["-m", "fastgp.precompile"])
    assert "; 0 specialisations compiled, " in proc.stdout, proc.stdout
    assert sandbox.cache_files() == before


def test_cache_precompiled_install_compiles_nothing_in_a_new_process(precompiled):
    sandbox, _ = precompiled
    before = sandbox.cache_files()
    report = sandbox.run_script(OTHER_USES)
    assert report["compiled"] == 0 and report["loaded"] > 0, report
    assert sandbox.cache_files() == before


@pytest.mark.parametrize("user_wide", ["writable", "unusable"])
def test_cache_read_only_precompiled_install_compiles_nothing(precompiled, user_wide):
    sandbox, _ = precompiled
    before = sandbox.cache_files()
    with read_only(sandbox.in_tree):
        report = sandbox.run_script(FIT, user_wide=user_wide)
    assert report["compiled"] == 0 and report["loaded"] > 0, report
    assert report["cache_warnings"] == []
    assert sandbox.cache_files() == before  # nothing copied to the user's cache


def test_cache_nothing_writable_fits_in_memory_and_warns_once(tmp_path, precompiled):
    sandbox = Sandbox(tmp_path)
    sandbox.block_in_tree()
    report = sandbox.run_script(FIT, numba_cache_dir="unusable", user_wide="unusable")
    assert report["compiled"] > 0 and report["loaded"] == 0
    assert sandbox.cache_files() == []
    assert len(report["cache_warnings"]) == 1, report["cache_warnings"]
    message = report["cache_warnings"][0]
    for remedy in ("NUMBA_CACHE_DIR", "python -m fastgp.precompile", str(sandbox.in_tree)):
        assert remedy in message

    cached = precompiled[0].run_script(FIT)
    assert cached["compiled"] == 0 and cached["cache_warnings"] == []
    for key, value in cached["numbers"].items():
        np.testing.assert_array_equal(report["numbers"][key], value, err_msg=key)
