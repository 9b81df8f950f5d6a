"""The engine's layers hold: the jitted passes are reached only through the
backend (fastgp/covariance.py; fastgp/lowering.py reads the opcodes it lowers
to; fastgp/precompile.py walks the engine to compile every routine), the
thread settings of a fit (fastgp._engine.threads) only by the fit
core, the estimators and the joblib tasks that run a fit's work in workers
(restarts, the matrix-free products), LAPACK only through fastgp/linalg.py, and numba only
inside fastgp/_engine. LAPACK and BLAS are reached only through
fastgp/linalg.py (and its blocked routines for large N, fastgp/blocked_lapack.py)."""

import ast
import pathlib

import pytest

PACKAGE = pathlib.Path(__file__).resolve().parent.parent / "fastgp"
MODULES = sorted(p for p in PACKAGE.rglob("*.py") if "_engine" not in p.parts)

#: module -> the only files outside fastgp/_engine allowed to import it; a
#: name is judged by the most specific door it lies behind
DOORS = {
    "fastgp._engine": {"covariance.py", "lowering.py", "precompile.py"},
    "fastgp._engine.threads": {"session.py", "regressor.py", "gplvm.py", "workers.py",
                               "distributed.py"},
    # parallel_region for the backend; NumbaCacheWarning for the package namespace
    "fastgp._engine.config": {"covariance.py", "__init__.py", "precompile.py"},
    "scipy.linalg.lapack": {"lapack.py"},
    # the blocked factor and inverse that lapack.py takes for large N
    "scipy.linalg.cython_blas": {"blocked.py"},
    "scipy.linalg.cython_lapack": {"blocked.py"},
    "fastgp._linalg.blocked": {"lapack.py"},
    "numba": set(),
}


def _door_of(name):
    behind = [door for door in DOORS if name == door or name.startswith(door + ".")]
    return max(behind, key=len) if behind else None


def _imported_names(path):
    """Fully qualified names of every module (and from-imported name) that
    ``path`` imports, relative imports resolved against the fastgp package."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                package = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
                package = package[:-node.level]
                base = ".".join(package + ([node.module] if node.module else []))
            else:
                base = node.module or ""
            base = base.rstrip(".")
            names.add(base)
            names.update(f"{base}.{alias.name}" for alias in node.names)
    return names


@pytest.mark.parametrize("path", MODULES, ids=lambda p: p.name)
def test_layers_engine_and_lapack_only_through_their_doors(path):
    for name in sorted(_imported_names(path)):
        door = _door_of(name)
        if door is not None:
            allowed = DOORS[door]
            assert path.name in allowed, (
                f"{path.name} imports {name}; only {sorted(allowed) or 'fastgp._engine'} may")


def test_layers_modules_exist():
    # the scan above must see the package, not an empty directory
    names = {p.name for p in MODULES}
    assert {"covariance.py", "lapack.py", "session.py", "minimize.py", "regressor.py",
            "gplvm.py", "objective.py", "latent.py"} <= names
