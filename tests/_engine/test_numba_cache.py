"""fastgp's Numba cache stamp covers every module of fastgp._engine that
shapes compiled code (and no other), so a change to a callee (say
vector_math.exp_inplace) invalidates the cached callers (passes), in each
location Numba may cache to: NUMBA_CACHE_DIR, the in-tree __pycache__ and the
user-wide directory."""

import ast
import textwrap
from pathlib import Path

import numpy as np
import pytest

from _cache_sandbox import Sandbox


def test_cache_stamp_is_shared_by_all_routines():
    from fastgp._engine import config, interpreter, passes

    stamp = config.jitted_sources_digest()
    for dispatcher in (passes.covariance_pass, interpreter.eval_tile):
        assert dispatcher._cache.writable._impl.locator.get_source_stamp() == stamp


def _engine_imports(module_file):
    """The fastgp._engine modules (short names) that a module of the engine
    imports."""
    names = set()
    for node in ast.walk(ast.parse(module_file.read_text())):
        if isinstance(node, ast.ImportFrom) and node.level == 1:
            names.update([node.module] if node.module else
                         [alias.name for alias in node.names])
    return names


def test_cache_stamp_covers_exactly_the_modules_of_compiled_code():
    from fastgp._engine import config
    from fastgp.precompile import engine_routines

    engine_dir = Path(config.__file__).parent
    stamped = set(config.STAMPED_MODULES)
    with_routines = {name.split(".")[2] for name in engine_routines()}
    # every module with a routine is stamped ...
    assert with_routines <= stamped
    # ... and each other stamped module is read by one that compiles
    read = set().union(*(_engine_imports(engine_dir / f"{m}.py") for m in with_routines))
    assert stamped - with_routines <= read | {"config"}
    assert stamped - with_routines == {"address_call", "config", "lanes", "opcodes",
                                       "signatures"}
    # what is left out holds no code compiled for the CPU's disk cache (the
    # GPU's passes compile for the device in each process), and no stamped
    # module reads it
    unstamped = {p.stem for p in engine_dir.glob("*.py")} - stamped
    assert unstamped == {"__init__", "threads", "compile_time", "cuda_passes",
                         "cuda_retarget"}
    assert not unstamped & set().union(*(_engine_imports(engine_dir / f"{m}.py")
                                         for m in stamped))


def test_cache_stamp_ignores_the_thread_policy(monkeypatch, tmp_path):
    # the digest reads the stamped files alone: threads.py may change freely
    from fastgp._engine import config

    copied = tmp_path / "_engine"
    copied.mkdir()
    for path in Path(config.__file__).parent.glob("*.py"):
        (copied / path.name).write_bytes(path.read_bytes())
    monkeypatch.setattr(config, "_ENGINE_DIR", copied)
    config.jitted_sources_digest.cache_clear()
    try:
        before = config.jitted_sources_digest()
        (copied / "threads.py").write_text("# edited\n")
        config.jitted_sources_digest.cache_clear()
        assert config.jitted_sources_digest() == before
        (copied / "leaves.py").write_text((copied / "leaves.py").read_text() + "\n# edited\n")
        config.jitted_sources_digest.cache_clear()
        assert config.jitted_sources_digest() != before
    finally:
        config.jitted_sources_digest.cache_clear()


FILL_ONE_COVARIANCE = textwrap.dedent("""
    import json
    import numpy as np
    import fastgp
    from fastgp._backend.covariance import make_covariance
    from sklearn.gaussian_process.kernels import RBF
    X = np.array([[0.0], [0.25], [0.5], [0.75], [1.0]])
    cov = make_covariance(RBF(1.0), X)
    K = np.zeros((5, 5), order="F")
    cov.fill_lower(np.zeros(1), np.zeros(5), K)
    print(json.dumps({"fastgp": fastgp.__file__, "K40": float(K[4, 0])}))
""")

#: location -> (child environment, how the sandbox is prepared)
LOCATIONS = {
    "NUMBA_CACHE_DIR": dict(numba_cache_dir="writable"),
    "in-tree": dict(),
    "user-wide": dict(block_in_tree=True),
}


def _cached_where(sandbox, location):
    return {"NUMBA_CACHE_DIR": sandbox.numba_cache_dir, "in-tree": sandbox.in_tree,
            "user-wide": sandbox.user_wide}[location]


WHERE_IT_CACHES = textwrap.dedent("""
    import json
    import fastgp
    from fastgp._engine import passes
    print(json.dumps({"fastgp": fastgp.__file__,
                      "path": str(passes.covariance_pass._cache.cache_path)}))
""")


@pytest.mark.parametrize("location", LOCATIONS)
def test_each_location_is_where_the_routines_would_cache(tmp_path, location):
    """Which of the three places a child chooses, read from its routines'
    cache without compiling anything; the full compile, load, edit and
    recompile cycle runs once, in the in-tree cache (below), as the three
    places share the code that reads and writes them."""
    sandbox = Sandbox(tmp_path)
    options = dict(LOCATIONS[location])
    if options.pop("block_in_tree", False):
        sandbox.block_in_tree()
    path = Path(sandbox.run_script(WHERE_IT_CACHES, **options)["path"])
    where = Path(_cached_where(sandbox, location))
    assert path == where or where in path.parents, (path, where)
    assert sandbox.cache_files() == []  # nothing compiled, nothing written


@pytest.mark.slow  # compiles a private copy of the package from nothing
def test_editing_a_callee_module_invalidates_cached_callers(tmp_path, location="in-tree"):
    sandbox = Sandbox(tmp_path)
    options = dict(LOCATIONS[location])
    if options.pop("block_in_tree", False):
        sandbox.block_in_tree()
    run = lambda: sandbox.run_script(FILL_ONE_COVARIANCE, **options)["K40"]

    assert run() == pytest.approx(np.exp(-0.5), rel=1e-15)  # compiles, caches
    where = _cached_where(sandbox, location)
    written = sandbox.cache_files(where)
    assert any(name.endswith(".nbi") for name in written), written
    assert any(Path(name).name.startswith("passes.covariance_pass-") for name in written)
    assert len(sandbox.cache_files()) == len(written)  # nowhere else
    assert run() == pytest.approx(np.exp(-0.5), rel=1e-15)  # loads
    assert sandbox.cache_files(where) == written

    vexp = sandbox.engine / "vector_math.py"
    # make exp return 2 exp(x): a cached covariance_pass would still give exp(x)
    source = vexp.read_text()
    assert "    return x\n" in source
    vexp.write_text(source.replace("    return x\n",
                                    "    for t in range(n):\n        x[t] *= 2.0\n    return x\n"))
    assert run() == pytest.approx(2 * np.exp(-0.5), rel=1e-15)


COMPILE_EVENTS_OF_A_FIRST_FILL = textwrap.dedent("""
    import json
    import numpy as np
    from numba.core import event
    import fastgp
    from fastgp._backend.covariance import make_covariance
    from sklearn.gaussian_process.kernels import RBF, WhiteKernel
    open_events, compiled = [], []
    class Recorder(event.Listener):
        def on_start(self, ev):
            open_events.append(ev.data["dispatcher"].py_func.__name__)
        def on_end(self, ev):
            name = open_events.pop()
            compiled.append(dict(name=name, inside=list(open_events)))
    event.register("numba:compile", Recorder())
    X = np.linspace(0.0, 1.0, 5)[:, None]
    cov = make_covariance(RBF(1.0) + WhiteKernel(0.1), X)
    K = np.zeros((5, 5), order="F")
    cov.fill_lower(cov.kernel.theta, np.zeros(5), K)
    print(json.dumps({"fastgp": fastgp.__file__, "compiled": compiled}))
""")


@pytest.mark.slow  # compiles a private copy of the package from nothing
def test_a_first_fill_compiles_its_kernels_leaves_once_and_nothing_into_the_pass(tmp_path):
    """The passes call the interpreter, and it the leaves, through the engine
    table (docs/design.md, "Numba's cache"): a fresh install compiles each
    once, on its own, and only the leaves of the kernel it meets."""
    compiled = Sandbox(tmp_path).run_script(COMPILE_EVENTS_OF_A_FIRST_FILL)["compiled"]
    names = [event["name"] for event in compiled]
    for routine in ("covariance_pass", "eval_tile", "radial_entry", "white_entry"):
        assert names.count(routine) == 1, (routine, names)
    for other_leaf in ("constant_entry", "rational_quadratic_entry", "exp_sine_entry",
                       "exp_sine_ard_entry", "dot_product_entry"):
        assert other_leaf not in names
    for event in compiled:  # (linked into a caller, a callee compiles inside it)
        if event["name"] in ("eval_tile", "radial_entry", "white_entry"):
            assert event["inside"] == [], event  # on its own, not inside a pass


def test_precompile_workloads_run_and_reach_every_routine():
    """``python -m fastgp.precompile``'s workloads, in this process (from the
    cache the suite's other tests fill: seconds): each runs, and together
    they compile or load every routine of fastgp._engine. The command itself,
    in a fresh copy of the package, is test_cache_locations.py's (slow)."""
    from fastgp import precompile
    from fastgp._engine import config

    routines = precompile.precompile()
    assert set(routines) == set(precompile.engine_routines())
    missing = sorted(name for name, d in routines.items()
                     if not d.signatures and not config.cached_signatures(d))
    assert missing == []
