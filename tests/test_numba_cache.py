"""fastgp's Numba cache stamp covers every module of fastgp._engine, so a
change to a callee (say interpreter.eval_tile) invalidates the cached callers
(passes)."""

import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import fastgp


def test_cache_stamp_is_shared_by_all_routines():
    from fastgp._engine import config, interpreter, passes

    stamp = config.jitted_sources_digest()
    for dispatcher in (passes.fill_cov_lower, passes.grad_trace_lower,
                       interpreter.eval_tile):
        assert dispatcher._cache._impl.locator.get_source_stamp() == stamp


@pytest.mark.slow  # compiles a private copy of the package from nothing, twice
def test_editing_a_callee_module_invalidates_cached_callers(tmp_path):
    # a private copy of the package, so the shared cache is not touched
    package = tmp_path / "fastgp"
    shutil.copytree(Path(fastgp.__file__).parent, package,
                    ignore=shutil.ignore_patterns("__pycache__"))
    script = textwrap.dedent("""
        import sys
        import numpy as np
        sys.path.insert(0, sys.argv[1])
        from fastgp.covariance import make_covariance
        from sklearn.gaussian_process.kernels import RBF
        X = np.array([[0.0], [0.25], [0.5], [0.75], [1.0]])
        cov = make_covariance(RBF(1.0), X)
        K = np.zeros((5, 5), order="F")
        cov.fill_lower(np.zeros(1), np.zeros(5), K)
        print(repr(float(K[4, 0])))
    """)
    run = lambda: subprocess.run([sys.executable, "-c", script, str(tmp_path)],
                                 capture_output=True, text=True, check=True).stdout
    assert float(run()) == pytest.approx(np.exp(-0.5), rel=1e-15)  # compiles, caches
    vexp = package / "_engine" / "vector_math.py"
    # make exp return 2 exp(x): a cached fill_cov_lower would still give exp(x)
    source = vexp.read_text()
    assert "    return x\n" in source
    vexp.write_text(source.replace("    return x\n",
                                    "    for t in range(n):\n        x[t] *= 2.0\n    return x\n"))
    assert float(run()) == pytest.approx(2 * np.exp(-0.5), rel=1e-15)

