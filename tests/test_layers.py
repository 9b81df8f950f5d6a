"""The engine's layers hold: the jitted passes are reached only through the
backend (fastgp/covariance.py; fastgp/lowering.py reads the opcodes it lowers
to), LAPACK only through fastgp/linalg.py, and numba only inside fastgp/_engine
(and fastgp/_threads.py, which sets Numba's thread count for a fit)."""

import ast
import pathlib

import pytest

PACKAGE = pathlib.Path(__file__).resolve().parent.parent / "fastgp"
MODULES = sorted(p for p in PACKAGE.glob("*.py"))

#: module file -> the only files outside fastgp/_engine allowed to import it
DOORS = {
    "fastgp._engine": {"covariance.py", "lowering.py"},
    "scipy.linalg.lapack": {"linalg.py"},
    "numba": {"_threads.py"},
}


def _imported_names(path):
    """Fully qualified names of every module (and from-imported name) that
    ``path`` imports, relative imports resolved against the fastgp package."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = ("fastgp." if node.level else "") + (node.module or "")
            base = base.rstrip(".")
            names.add(base)
            names.update(f"{base}.{alias.name}" for alias in node.names)
    return names


@pytest.mark.parametrize("path", MODULES, ids=lambda p: p.name)
def test_layers_engine_and_lapack_only_through_their_doors(path):
    imported = _imported_names(path)
    for door, allowed in DOORS.items():
        through = sorted(n for n in imported if n == door or n.startswith(door + "."))
        if path.name not in allowed:
            assert not through, f"{path.name} imports {through}; go through {allowed or 'nothing'}"


def test_layers_modules_exist():
    # the scan above must see the package, not an empty directory
    names = {p.name for p in MODULES}
    assert {"covariance.py", "linalg.py", "fitting.py", "optimize.py", "regressor.py",
            "gplvm.py", "objective.py", "latent_objective.py"} <= names
